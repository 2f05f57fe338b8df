"""Client: the low-level, asynchronous connection to a ``kforge serve``."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Dict, Iterable, List, Optional, Set

import zmq

from .errors import KForgeError, KForgeTimeout
from .protocol import Reply, decode_reply, encode_request

_log = logging.getLogger("kforge")

DEFAULT_TIMEOUT_S = 600.0
# How long the first request (hello) may wait for a server. ZeroMQ connects in
# the background and queues requests until a peer appears, so a wrong
# endpoint would otherwise look like a slow step and wait DEFAULT_TIMEOUT_S.
# A live server answers hello in milliseconds, even while it runs steps.
DEFAULT_CONNECT_TIMEOUT_S = 10.0


class Client:
    """One DEALER connection to the env server, with asynchronous request ids.

    ``send`` returns a request id at once; replies are received in the order
    they complete (``recv``), or for one id (``wait``); ``call`` does both.
    Replies that arrive while waiting for another id are kept. Nothing is ever
    retried: a timeout raises ``KForgeTimeout`` and leaves the request to the
    server.

    Not thread-safe: use one Client per thread (ZeroMQ sockets are not shared
    between threads).

    Args:
        endpoint: the server's endpoint, e.g. ``"tcp://127.0.0.1:5555"``.
        timeout_s: default time to wait for a reply; ``None`` waits forever.
        context: a ``zmq.Context``; default: the process-wide instance.
    """

    def __init__(
        self,
        endpoint: str,
        timeout_s: Optional[float] = DEFAULT_TIMEOUT_S,
        context: Optional[zmq.Context] = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._socket = (context or zmq.Context.instance()).socket(zmq.DEALER)
        # A routing id of our own: the server ties envs to it, and it survives
        # a reconnect (ZeroMQ would otherwise pick a new one).
        self.routing_id = b"kforge-py-" + uuid.uuid4().hex.encode()
        self._socket.setsockopt(zmq.ROUTING_ID, self.routing_id)
        self._socket.setsockopt(zmq.LINGER, 0)
        try:
            self._socket.connect(endpoint)
        except zmq.ZMQError as e:
            self._socket.close(linger=0)
            raise KForgeError(
                "bad_endpoint",
                f"cannot connect to {endpoint!r}: {e} (expected an endpoint such as tcp://127.0.0.1:5555)",
            ) from e
        self._next_id = 1
        self._pending: Dict[int, str] = {}  # request id -> method
        self._ready: Dict[int, Reply] = {}  # replies not yet taken, in arrival order
        self._abandoned: Set[int] = set()
        self._closed = False

    # -- sending -----------------------------------------------------------

    def send(self, method: str, params: Optional[Dict[str, Any]] = None) -> int:
        """Sends one request and returns its id at once."""
        self._check_open()
        request_id = self._next_id
        self._next_id += 1
        self._socket.send(encode_request(request_id, method, params))
        self._pending[request_id] = method
        return request_id

    # -- receiving ---------------------------------------------------------

    def recv(self, timeout_s: Optional[float] = -1.0, among: Optional[Iterable[int]] = None) -> Reply:
        """The next completed reply (error replies included), whatever its id,
        or only among the ids given (others stay for their own waiters).

        ``timeout_s=-1`` uses the client's default. Raises KForgeTimeout.
        """
        wanted = None if among is None else set(among)
        effective = self._effective_timeout(timeout_s)
        deadline = None if effective is None else time.monotonic() + effective
        while True:
            for request_id in self._ready:
                if wanted is None or request_id in wanted:
                    return self._ready.pop(request_id)
            if not self._read_one(deadline):
                raise KForgeTimeout(
                    f"no reply from {self.endpoint} within {effective:g} s ({len(self._pending)} request(s) pending)"
                )

    def poll(self, among: Optional[Iterable[int]] = None) -> List[Reply]:
        """The replies that have arrived (only among the ids given, if any),
        without waiting."""
        while self._read_one(time.monotonic()):
            pass
        wanted = None if among is None else set(among)
        taken = [i for i in self._ready if wanted is None or i in wanted]
        return [self._ready.pop(i) for i in taken]

    def wait(self, request_id: int, timeout_s: Optional[float] = -1.0) -> Dict[str, Any]:
        """The result of one request; raises KForgeError for an error reply.

        On timeout the request stays pending (wait again, or ``abandon`` it).
        """
        if request_id not in self._pending and request_id not in self._ready:
            raise KeyError(f"request {request_id} is not pending on this client")
        effective = self._effective_timeout(timeout_s)
        deadline = None if effective is None else time.monotonic() + effective
        while request_id not in self._ready:
            if not self._read_one(deadline):
                method = self._pending.get(request_id, "?")
                raise KForgeTimeout(
                    f"no reply to {method} (request {request_id}) from {self.endpoint} within {effective:g} s; "
                    "it was not retried and may still be running on the server",
                    request_id=request_id,
                )
        reply = self._ready.pop(request_id)
        if not reply.ok:
            raise reply.to_error()
        return reply.result

    def call(
        self, method: str, params: Optional[Dict[str, Any]] = None, timeout_s: Optional[float] = -1.0
    ) -> Dict[str, Any]:
        """Sends a request and waits for its result.

        On timeout the request is abandoned (its late reply is dropped) and
        KForgeTimeout is raised.
        """
        request_id = self.send(method, params)
        try:
            return self.wait(request_id, timeout_s)
        except KForgeTimeout:
            self.abandon(request_id)
            raise

    def hello(
        self, client_name: str, connect_timeout_s: Optional[float] = DEFAULT_CONNECT_TIMEOUT_S
    ) -> Dict[str, Any]:
        """The server's ``hello``, waiting at most ``connect_timeout_s``
        (None: the client's default timeout) for a server to answer.

        Raises KForgeTimeout naming the endpoint when none does: the endpoint
        is wrong, or no ``kforge serve`` runs there.
        """
        timeout = self.timeout_s if connect_timeout_s is None else connect_timeout_s
        try:
            return self.call("hello", {"client": client_name}, timeout)
        except KForgeTimeout as e:
            raise KForgeTimeout(
                f"no kforge server answered at {self.endpoint} within {timeout:g} s (connect_timeout_s); "
                "check the endpoint and that `kforge serve` is running there",
                request_id=e.request_id,
            ) from None

    def abandon(self, request_id: int) -> None:
        """Forgets a pending request; its reply, if it ever comes, is dropped."""
        if self._pending.pop(request_id, None) is not None:
            self._abandoned.add(request_id)
        self._ready.pop(request_id, None)

    @property
    def pending(self) -> int:
        """Requests sent whose replies have not been taken yet."""
        return len(self._pending) + len(self._ready)

    # -- lifetime ----------------------------------------------------------

    def close(self) -> None:
        """Closes the socket. Envs are not closed (see RemoteEnv.close)."""
        if not self._closed:
            self._closed = True
            self._socket.close(linger=0)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------

    def _effective_timeout(self, timeout_s: Optional[float]) -> Optional[float]:
        if timeout_s is not None and timeout_s < 0:
            return self.timeout_s
        return timeout_s

    def _check_open(self) -> None:
        if self._closed:
            raise KForgeError("closed", "this client is closed")

    def _read_one(self, deadline: Optional[float]) -> bool:
        """Reads one message into ``_ready`` (or drops it); False on timeout."""
        self._check_open()
        remaining_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
        if not self._socket.poll(remaining_ms, zmq.POLLIN):
            return False
        reply = decode_reply(self._socket.recv())
        if reply.id is None:
            # The server could not read a request's id: not one of ours, as
            # this client only sends well-formed messages.
            _log.warning("kforge: unroutable error from the server: %s", reply.error)
            return True
        if reply.id in self._abandoned:
            self._abandoned.discard(reply.id)
            return True
        if self._pending.pop(reply.id, None) is None:
            _log.warning("kforge: reply to unknown request %s dropped", reply.id)
            return True
        self._ready[reply.id] = reply
        return True
