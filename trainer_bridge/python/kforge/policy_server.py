"""PolicyServer: serve a model's actions to KernelForge's rollout workers.

The workers (``kforge rollout`` with ``policy: {kind: zmq, endpoint: ...}``)
connect ZeroMQ DEALER sockets to this server's ROUTER socket and send batches
of policy requests; the trainer answers them with its model. The schema is
trainer_bridge/POLICY.md; this module depends on pyzmq and msgpack only.

    def act(requests):                 # a list of request dicts
        prompts = [tokenizer.apply_chat_template(r["messages"], tools=r["tools"]) for r in requests]
        outputs = model.generate(prompts, ...)
        return [{"content": o.text, "tool_calls": parse_tool_calls(o.text),
                 "token_ids": o.token_ids, "logprobs": o.logprobs} for o in outputs]

    with PolicyServer(act, bind="tcp://127.0.0.1:5556", policy_version=step) as server:
        server.start()                 # serves on a background thread
        ...                            # train; after each update:
        server.policy_version = step   # replies carry the weights' version

Requests that arrive together (from one worker or several) are answered by one
call of ``act``, up to ``max_batch`` requests, so a GPU sees full batches. A
reply may be a dict (the fields of POLICY.md) or a plain string (the content).
When ``act`` raises, or returns something malformed, every request of the call
is answered with ``error`` set: the workers truncate those episodes without
scoring them as the policy's failures, and the server keeps serving.
"""

from __future__ import annotations

import logging
import math
import threading
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import msgpack
import zmq

from .protocol import PROTOCOL_VERSION

POLICY_PROTOCOL = 1

ActFn = Callable[[List[Dict[str, Any]]], Sequence[Any]]

log = logging.getLogger("kforge.policy_server")

_REPLY_KEYS = ("content", "tool_calls", "token_ids", "logprobs", "policy_version", "finish_reason", "error",
               "latency_ms", "usage")
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class _BadRequest(Exception):
    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _encode(message: Dict[str, Any]) -> bytes:
    return msgpack.packb(message, use_bin_type=True)


def _error(request_id: Optional[int], code: str, message: str, field: str = "") -> bytes:
    error: Dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return _encode({"v": PROTOCOL_VERSION, "id": request_id, "ok": False, "error": error})


def _result(request_id: int, result: Dict[str, Any]) -> bytes:
    return _encode({"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": result})


def normalize_reply(reply: Any, policy_version: str) -> Dict[str, Any]:
    """One reply as the wire wants it (POLICY.md); ValueError naming the field
    when it cannot be one."""
    if isinstance(reply, str):
        reply = {"content": reply}
    if not isinstance(reply, dict):
        raise ValueError(f"a reply must be a dict or a string, got {type(reply).__name__}")
    unknown = sorted(set(reply) - set(_REPLY_KEYS))
    if unknown:
        raise ValueError(f"unknown reply key(s) {unknown}; the keys are {list(_REPLY_KEYS)}")
    out: Dict[str, Any] = {}
    content = reply.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError("content must be a string")
    out["content"] = content or ""
    calls = reply.get("tool_calls") or []
    if not isinstance(calls, (list, tuple)) or not all(isinstance(c, dict) for c in calls):
        raise ValueError("tool_calls must be a list of OpenAI tool-call dicts")
    out["tool_calls"] = [_plain(c) for c in calls]
    if reply.get("token_ids") is not None:
        out["token_ids"] = [int(t) for t in reply["token_ids"]]
        if any(t < 0 for t in out["token_ids"]):
            raise ValueError("token_ids must be non-negative")
    if reply.get("logprobs") is not None:
        out["logprobs"] = [float(x) for x in reply["logprobs"]]
        if any(math.isnan(x) or x > 0 for x in out["logprobs"]):
            raise ValueError("logprobs must be <= 0 and not NaN")
    if "token_ids" in out and "logprobs" in out and len(out["token_ids"]) != len(out["logprobs"]):
        raise ValueError("token_ids and logprobs differ in length")
    version = reply.get("policy_version")
    out["policy_version"] = str(version) if version is not None else policy_version
    out["finish_reason"] = str(reply.get("finish_reason") or ("tool_calls" if out["tool_calls"] else "stop"))
    if reply.get("error"):
        out["error"] = str(reply["error"])
    if reply.get("latency_ms") is not None:
        out["latency_ms"] = max(0.0, float(reply["latency_ms"]))
    if reply.get("usage") is not None:
        usage = reply["usage"]
        if not isinstance(usage, dict) or set(usage) - set(_USAGE_KEYS):
            raise ValueError(f"usage must be a dict with keys among {list(_USAGE_KEYS)}")
        out["usage"] = {k: int(v) for k, v in usage.items() if v is not None}
        if any(v < 0 for v in out["usage"].values()):
            raise ValueError("usage counts must be non-negative")
    return out


def _plain(value: Any) -> Any:
    """Converts numpy scalars and tuples into what msgpack encodes."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def _requests_of(params: Dict[str, Any]) -> List[Dict[str, Any]]:
    requests = params.get("requests")
    if not isinstance(requests, list):
        raise _BadRequest("field /params/requests: expected a list of requests", "/params/requests")
    for i, r in enumerate(requests):
        if not isinstance(r, dict):
            raise _BadRequest(f"field /params/requests/{i}: expected a map", f"/params/requests/{i}")
        if not isinstance(r.get("episode_id"), str):
            raise _BadRequest(f"field /params/requests/{i}/episode_id: expected a string",
                              f"/params/requests/{i}/episode_id")
        if not isinstance(r.get("messages", []), list):
            raise _BadRequest(f"field /params/requests/{i}/messages: expected a list",
                              f"/params/requests/{i}/messages")
    return requests


class PolicyServer:
    """Serves ``act`` to rollout workers over ZeroMQ (POLICY.md).

    Args:
        act: maps a list of request dicts to a list of replies (same length
            and order); see the module docstring.
        bind: ZeroMQ endpoint to bind; port 0 picks a free one (see
            ``endpoint``). Loopback by default.
        policy_version: the version replies carry unless they set their own;
            update it as the weights change (``server.policy_version = step``).
        max_batch: the most requests passed to one ``act`` call.
        max_message_bytes: larger messages make ZeroMQ drop the connection.
    """

    def __init__(
        self,
        act: ActFn,
        bind: str = "tcp://127.0.0.1:5556",
        policy_version: Any = "0",
        max_batch: int = 256,
        max_message_bytes: int = 64 << 20,
        context: Optional[zmq.Context] = None,
    ) -> None:
        if not callable(act):
            raise TypeError("act must be callable: requests -> replies")
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.act = act
        self.policy_version = str(policy_version)
        self.max_batch = max_batch
        self.batches_served = 0
        self.requests_served = 0
        self._own_context = context is None
        self._context = context or zmq.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 1000)
        self._socket.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        self._socket.bind(bind)
        self.endpoint: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- serving -----------------------------------------------------------------

    def serve_once(self, timeout_ms: int = 100) -> int:
        """Waits up to ``timeout_ms`` for requests and answers what arrived.
        Returns how many messages were handled."""
        if not self._socket.poll(timeout_ms, zmq.POLLIN):
            return 0
        pending: List[Tuple[List[bytes], int, List[Dict[str, Any]]]] = []
        count = 0
        handled = 0
        while count < self.max_batch and self._socket.poll(0, zmq.POLLIN):
            frames = self._socket.recv_multipart(zmq.NOBLOCK)
            handled += 1
            envelope, payload = frames[:-1], frames[-1]
            if not envelope:
                continue
            answer = self._handle(payload)
            if isinstance(answer, bytes):
                self._send(envelope, answer)
            else:
                request_id, requests = answer
                pending.append((envelope, request_id, requests))
                count += len(requests)
        if pending:
            self._act(pending)
        return handled

    def serve_forever(self) -> None:
        """Serves until ``stop()``."""
        while not self._stop.is_set():
            self.serve_once(100)

    def start(self) -> "PolicyServer":
        """Serves on a daemon thread until ``stop()``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, name="kforge-policy-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self.stop()
        self._socket.close(linger=0)
        if self._own_context:
            self._context.term()

    def __enter__(self) -> "PolicyServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------

    def _send(self, envelope: List[bytes], payload: bytes) -> None:
        try:
            self._socket.send_multipart(envelope + [payload], zmq.NOBLOCK)
        except zmq.ZMQError as e:  # the worker is gone; its reply has nowhere to go
            log.warning("reply not sent: %s", e)

    def _handle(self, payload: bytes):
        """Either the reply bytes, or (request id, requests) for an act."""
        try:
            message = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001 - anything msgpack raises means "not a message"
            return _error(None, "bad_request", f"not a MessagePack message: {e}")
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, int) or isinstance(request_id, bool) or request_id < 0:
            return _error(None, "bad_request", "missing or invalid request id", "/id")
        if message.get("v") != PROTOCOL_VERSION:
            return _error(request_id, "unsupported_version",
                          f"this server speaks protocol version {PROTOCOL_VERSION}", "/v")
        method, params = message.get("method"), message.get("params", {})
        if not isinstance(params, dict):
            return _error(request_id, "bad_request", "field /params: expected a map", "/params")
        if method == "hello":
            return _result(request_id, {"server": "kforge.PolicyServer", "protocol": POLICY_PROTOCOL,
                                        "policy_version": self.policy_version, "max_batch": self.max_batch,
                                        "methods": ["hello", "ping", "act"]})
        if method == "ping":
            return _result(request_id, {})
        if method != "act":
            return _error(request_id, "unknown_method",
                          f"unknown method {method!r}; the methods are hello, ping, act", "/method")
        try:
            return request_id, _requests_of(params)
        except _BadRequest as e:
            return _error(request_id, "bad_request", str(e), e.field)

    def _act(self, pending: List[Tuple[List[bytes], int, List[Dict[str, Any]]]]) -> None:
        requests = [r for _, _, batch in pending for r in batch]
        version = self.policy_version
        try:
            raw = list(self.act(requests))
            if len(raw) != len(requests):
                raise ValueError(f"act returned {len(raw)} replies for {len(requests)} requests")
            replies = [normalize_reply(r, version) for r in raw]
        except Exception as e:  # noqa: BLE001 - the trainer's code failed; workers must hear about it
            log.error("act failed: %s", traceback.format_exc())
            replies = [{"content": "", "tool_calls": [], "policy_version": version, "finish_reason": "error",
                        "error": f"the policy failed: {type(e).__name__}: {e}"} for _ in requests]
        self.batches_served += 1
        self.requests_served += len(requests)
        start = 0
        for envelope, request_id, batch in pending:
            part = replies[start:start + len(batch)]
            start += len(batch)
            self._send(envelope, _result(request_id, {"replies": part, "policy_version": version}))
