"""TrajectoryStream: the trainer's end of the reliable trajectory stream.

Rollout workers (C++ ``TrajectorySender``, or ``kforge send``) push every
finished trajectory to it over ZeroMQ; it hands each to the trainer once and
acknowledges it to its worker only when the trainer says it holds it, so
nothing is lost and nothing is delivered twice, even when either side is
killed. Protocol: trainer_bridge/STREAM.md. Needs only pyzmq and msgpack.

    from kforge import TrajectoryStream

    with TrajectoryStream("tcp://127.0.0.1:5557", state_dir="stream-state") as stream:
        for batch in stream.batches(size=64, timeout=5.0):
            train_on(batch.trajectories)      # dicts, as the workers recorded them
            stream.ack(batch)                 # the trainer holds them now

A background thread owns the socket: it admits workers, grants them credit,
answers heartbeats while the trainer is busy, deduplicates by (worker, seq)
and sends acks. The acknowledged set lives in ``state_dir`` (the same files
the C++ receiver writes), so a trainer restarted on the same directory is not
given again what it acknowledged before it died.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import uuid
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import zmq

from .curve import _ZAP_DOMAIN, _curve_key, _is_local
from .delivery import Batch, Delivery, Key, _key_of
from .io import StreamIO, _Session
from .state import ReceiverState

_log = logging.getLogger("kforge.stream")

ACK_MODES = ("manual", "on_next", "on_receive")


class TrajectoryStream(StreamIO):
    """Binds a ZeroMQ ROUTER and receives trajectories from rollout workers.

    Args:
        bind: endpoint to bind; port 0 or ``*`` picks a free one (see
            ``endpoint``). Another address than loopback without CurveZMQ
            logs a warning: anyone who can reach it can send trajectories.
        state_dir: where the acknowledged set is kept. None keeps it in
            memory: a restarted receiver may then deliver again what the
            trainer acknowledged before.
        credit: trajectories each worker may have in flight (sent, not
            acknowledged). Memory is bounded by credit x workers x message
            size. A batch larger than credit x workers only fills on timeout.
        ack: ``"manual"`` (call ``ack``), ``"on_next"`` (what was handed out
            is acknowledged when the next item or batch is asked for, and at
            ``close``: the trainer is done with a batch when it asks for
            another) or ``"on_receive"`` (acknowledged as it is handed out:
            a trainer that crashes loses what it held).
        heartbeat_s, heartbeat_timeout_s: heartbeats go to every worker each
            ``heartbeat_s``; a worker silent for ``heartbeat_timeout_s`` loses
            its session (it reconnects when alive).
        max_message_bytes: larger messages make ZeroMQ drop the connection;
            workers learn the limit at welcome and set larger ones aside.
        fsync: fdatasync the state after each ack (machine-crash safety).
        curve_secret_key: this receiver's secret key (Z85, or a
            ``.key_secret`` file from ``kforge keygen``); turns CurveZMQ on.
            Default: $KFORGE_CURVE_SECRET_KEY.
        curve_authorized_keys: the workers' public keys (a directory of
            ``.key`` files, one file, or a list of Z85 keys); without them any
            worker that knows the public key may connect. Default:
            $KFORGE_CURVE_CLIENTS.
    """

    def __init__(
        self,
        bind: str = "tcp://127.0.0.1:5557",
        state_dir: Optional[str] = None,
        *,
        credit: int = 128,
        ack: str = "manual",
        heartbeat_s: float = 1.0,
        heartbeat_timeout_s: float = 10.0,
        max_message_bytes: int = 64 << 20,
        max_workers: int = 4096,
        fsync: bool = False,
        curve_secret_key: Optional[Union[str, bytes]] = None,
        curve_authorized_keys: Optional[Union[str, Sequence[str]]] = None,
    ) -> None:
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {ACK_MODES}, got {ack!r}")
        if not 1 <= credit <= 1000000:
            raise ValueError(f"credit must be 1..1000000, got {credit}")
        if heartbeat_s < 0.01 or heartbeat_timeout_s < 2 * heartbeat_s:
            raise ValueError("heartbeat_s must be >= 0.01 and heartbeat_timeout_s at least twice it")
        if max_message_bytes < 1024:
            raise ValueError("max_message_bytes must be at least 1024")
        self.ack_mode = ack
        self.credit = credit
        self.heartbeat_s = heartbeat_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.max_message_bytes = max_message_bytes
        self.max_workers = max_workers
        self.receiver_id = uuid.uuid4().hex[:16]

        self._mu = threading.Lock()
        self._ready = threading.Condition(self._mu)
        self._state = ReceiverState(state_dir, fsync=fsync)
        self._queue: Deque[Delivery] = collections.deque()
        # Queued (False) or handed out (True), not acknowledged.
        self._pending: Dict[str, Dict[int, bool]] = {}
        self._outgoing: List[Tuple[str, List[int]]] = []
        self._new_credit: Optional[int] = None
        self._handed_out: List[Key] = []  # for ack="on_next"
        self._stats = collections.Counter()
        self._closed = False

        self._ctx = zmq.Context()
        self._auth = None
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        self._sock.setsockopt(zmq.LINGER, 1000)
        self._sock.setsockopt(zmq.SNDHWM, 0)
        secret = curve_secret_key or os.environ.get("KFORGE_CURVE_SECRET_KEY") or None
        clients = curve_authorized_keys or os.environ.get("KFORGE_CURVE_CLIENTS") or None
        self.curve = secret is not None
        try:
            if secret is not None:
                self._setup_curve(secret, clients)
            elif clients:
                raise ValueError("curve_authorized_keys given without curve_secret_key")
            try:
                self._sock.bind(bind)
            except zmq.ZMQError as e:
                raise ValueError(f"cannot bind {bind!r}: {e}") from None
        except Exception:
            self._teardown()
            raise
        self.endpoint: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        if not _is_local(bind) and not self.curve:
            _log.warning(
                "%s is reachable from other hosts and CurveZMQ is off: anyone who can reach it can send "
                "trajectories to the trainer (see trainer_bridge/STREAM.md)",
                self.endpoint,
            )
        # Wakes the I/O thread when the trainer acks (sockets are not shared
        # between threads: each end of the pair belongs to one side).
        wake_addr = f"inproc://kforge-stream-wake-{id(self)}"
        self._wake_rx = self._ctx.socket(zmq.PAIR)
        self._wake_rx.bind(wake_addr)
        self._wake_tx = self._ctx.socket(zmq.PAIR)
        self._wake_tx.connect(wake_addr)
        self._wake_lock = threading.Lock()
        self._stop = threading.Event()
        self._sessions: Dict[bytes, _Session] = {}
        self._session_of_worker: Dict[str, bytes] = {}
        self._thread = threading.Thread(target=self._run, name="kforge-stream", daemon=True)
        self._thread.start()

    def _setup_curve(self, secret: Union[str, bytes], clients: Optional[Union[str, Sequence[str]]]) -> None:
        secret_key = _curve_key(secret, True, "the secret key")
        public_key = zmq.curve_public(secret_key)
        if clients:
            from zmq.auth.thread import ThreadAuthenticator

            self._auth = ThreadAuthenticator(self._ctx)
            self._auth.start()
            if isinstance(clients, str) and os.path.isdir(clients):
                if not any(n.endswith(".key") for n in os.listdir(clients)):
                    raise ValueError(f"{clients} holds no *.key file; put the workers' public certificates there")
                self._auth.configure_curve(domain=_ZAP_DOMAIN, location=clients)
            else:
                paths = [clients] if isinstance(clients, str) else list(clients)
                allowed = {_curve_key(p, False, "an authorized key") for p in paths}

                class _Allowed:
                    def callback(self, domain: str, key: bytes) -> bool:
                        return key in allowed

                self._auth.configure_curve_callback(domain=_ZAP_DOMAIN, credentials_provider=_Allowed())
            self._sock.setsockopt(zmq.ZAP_DOMAIN, _ZAP_DOMAIN.encode())
        self._sock.curve_secretkey = secret_key
        self._sock.curve_publickey = public_key
        self._sock.curve_server = True
        self.curve_public_key = public_key.decode("ascii")

    # -- the trainer's side -------------------------------------------------

    def next(self, timeout: Optional[float] = None) -> Optional[Delivery]:
        """The next trajectory, or None after ``timeout`` seconds (None:
        wait forever)."""
        batch = self._take(1, timeout, fill=False)
        return batch[0] if batch else None

    def next_batch(self, size: int = 64, timeout: Optional[float] = 1.0) -> Batch:
        """Up to ``size`` trajectories: returns as soon as ``size`` are there,
        or when ``timeout`` seconds have passed with what there is (maybe
        none)."""
        return self._take(size, timeout, fill=True)

    def batches(self, size: int = 64, timeout: float = 1.0, idle_timeout: Optional[float] = None) -> Iterator[Batch]:
        """Batches of ``size``, or fewer once ``timeout`` seconds have passed
        since the batch's first trajectory; never empty. Ends after
        ``idle_timeout`` seconds with nothing received (None: never)."""
        if size < 1:
            raise ValueError("size must be at least 1")
        while not self._closed:
            first = self._take(size, idle_timeout, fill=False)
            if not first:
                return
            batch = Batch(first)
            deadline = time.monotonic() + timeout
            while len(batch) < size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                batch.extend(self._take(size - len(batch), left, fill=True, ack_previous=False))
            yield batch

    def __iter__(self) -> Iterator[Delivery]:
        while not self._closed:
            d = self.next(timeout=None)
            if d is not None:
                yield d

    def ack(self, items: Union[Delivery, Batch, Iterable[Union[Delivery, Key]]]) -> int:
        """The trainer holds these: recorded in the state (durably, before
        this returns), then acknowledged to their workers. Items never handed
        out, or acknowledged already, are ignored; returns how many were
        acknowledged."""
        if isinstance(items, Delivery):
            items = [items]
        keys = [_key_of(i) for i in items]
        return self._ack_keys(keys)

    def ack_stored(self, keys: Iterable[Key]) -> int:
        """Keys, (worker, seq), of trajectories the trainer stored in an
        earlier run without acknowledging them (it died in between): recorded
        as acknowledged now, so that their resends are acknowledged instead of
        delivered. A trainer that stores trajectories notes a batch's keys
        before storing it, and after a crash passes those it finds stored
        (examples/trainer_receiver.py does). Returns how many were new."""
        by_worker: Dict[str, List[int]] = {}
        with self._mu:
            for worker, seq in (_key_of(k) for k in keys):
                if seq >= 1 and not self._state.acknowledged(worker, seq):
                    by_worker.setdefault(worker, []).append(seq)
            if not by_worker:
                return 0
            self._state.acknowledge(by_worker)
            n = 0
            for worker, seqs in by_worker.items():
                stored = set(seqs)
                p = self._pending.get(worker)
                if p is not None:  # queued or handed out again in this run
                    for s in stored:
                        p.pop(s, None)
                    if not p:
                        del self._pending[worker]
                self._queue = collections.deque(
                    d for d in self._queue if not (d.worker == worker and d.seq in stored)
                )
                self._outgoing.append((worker, seqs))
                n += len(seqs)
            self._stats["acked"] += n
        self._wake()
        return n

    def set_credit(self, credit: int) -> None:
        """Changes every worker's credit (a ``credit`` message to each)."""
        if credit < 1:
            raise ValueError("credit must be at least 1")
        with self._mu:
            self._new_credit = credit
        self._wake()

    def stats(self) -> Dict[str, int]:
        """Counters: received, delivered, acked, duplicates, rejected, errors,
        sessions, sessions_live, queued, unacked."""
        with self._mu:
            s = dict(self._stats)
            s["queued"] = len(self._queue)
            s["unacked"] = sum(1 for p in self._pending.values() for out in p.values() if out)
            s["sessions_live"] = len(self._sessions)
        for k in ("received", "delivered", "acked", "duplicates", "rejected", "errors", "sessions"):
            s.setdefault(k, 0)
        return s

    def close(self) -> None:
        """Stops receiving. With ack="on_next", what was handed out last is
        acknowledged first. What was handed out but not acknowledged is sent
        again by the workers to the next receiver."""
        if self._closed:
            return
        if self.ack_mode == "on_next":
            with self._mu:
                previous, self._handed_out = self._handed_out, []
            self._ack_keys(previous)
        self._closed = True
        with self._mu:
            self._ready.notify_all()
        self._stop.set()
        self._wake()
        self._thread.join(timeout=10)
        self._teardown()

    def __enter__(self) -> "TrajectoryStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- internals: the trainer's side ----------------------------------------

    def _take(self, size: int, timeout: Optional[float], fill: bool, ack_previous: bool = True) -> Batch:
        if self.ack_mode == "on_next" and ack_previous:
            with self._mu:
                previous, self._handed_out = self._handed_out, []
            self._ack_keys(previous)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            while not self._closed:
                if self._queue and (not fill or len(self._queue) >= size):
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._ready.wait(left)
            out = Batch()
            while self._queue and len(out) < size:
                d = self._queue.popleft()
                self._pending[d.worker][d.seq] = True
                out.append(d)
            self._stats["delivered"] += len(out)
            if self.ack_mode == "on_next":
                self._handed_out.extend(d.key for d in out)
        if self.ack_mode == "on_receive" and out:
            self._ack_keys(out.keys)
        return out

    def _ack_keys(self, keys: Sequence[Key]) -> int:
        if not keys:
            return 0
        with self._mu:
            by_worker: Dict[str, List[int]] = {}
            for worker, seq in keys:
                p = self._pending.get(worker)
                if p is None or not p.get(seq):
                    continue
                p[seq] = False  # not twice in this call
                by_worker.setdefault(worker, []).append(seq)
            if not by_worker:
                return 0
            try:
                self._state.acknowledge(by_worker)  # durable first
            except Exception:
                for worker, seqs in by_worker.items():
                    for s in seqs:
                        self._pending[worker][s] = True
                raise
            n = 0
            for worker, seqs in by_worker.items():
                p = self._pending[worker]
                for s in seqs:
                    del p[s]
                if not p:
                    del self._pending[worker]
                self._outgoing.append((worker, seqs))
                n += len(seqs)
            self._stats["acked"] += n
        self._wake()
        return n

    def _wake(self) -> None:
        with self._wake_lock:
            try:
                self._wake_tx.send(b"", zmq.NOBLOCK)
            except zmq.ZMQError:
                pass  # a wake-up is already waiting

    def _teardown(self) -> None:
        for name in ("_sock", "_wake_rx", "_wake_tx"):
            s = getattr(self, name, None)
            if s is not None:
                s.close(linger=1000 if name == "_sock" else 0)
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        self._ctx.term()
        self._state.close()
