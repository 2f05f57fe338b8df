"""The trajectory stream's wire messages, version 1 (trainer_bridge/STREAM.md).

One ZeroMQ frame per message, one MessagePack map per frame. Senders
(rollout workers, DEALER) send ``hello``, ``traj``, ``heartbeat``, ``bye``;
receivers (ROUTER) send ``welcome``, ``ack``, ``credit``, ``heartbeat``,
``error``. Unknown keys are ignored; missing or mistyped ones are errors that
name the key. The C++ codec (rollout/src/stream/stream_protocol.cpp) is the
other implementation; both are tested against each other.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import msgpack

VERSION = 1
SUPPORTED_VERSIONS = (1,)

MAX_WORKER_ID_BYTES = 128
MAX_INSTANCE_BYTES = 64
MAX_TRAJECTORY_ID_BYTES = 1024
MAX_ACK_RANGES = 65536
MAX_VERSIONS = 16
MAX_ERROR_MESSAGE_BYTES = 4096

# Error codes a receiver sends.
BAD_MESSAGE = "bad_message"
UNSUPPORTED_VERSION = "unsupported_version"
NO_SESSION = "no_session"
WORKER_CONFLICT = "worker_conflict"
REJECTED = "rejected"
CREDIT_EXCEEDED = "credit_exceeded"
TOO_MANY_WORKERS = "too_many_workers"
SHUTTING_DOWN = "shutting_down"
ERROR_CODES = (
    BAD_MESSAGE,
    UNSUPPORTED_VERSION,
    NO_SESSION,
    WORKER_CONFLICT,
    REJECTED,
    CREDIT_EXCEEDED,
    TOO_MANY_WORKERS,
    SHUTTING_DOWN,
)

_WORKER_RE = re.compile(r"[A-Za-z0-9._:@+\-]{1,128}\Z")
_INSTANCE_RE = re.compile(r"[A-Za-z0-9._\-]{1,64}\Z")


class DecodeError(ValueError):
    """A frame that is not one well-formed message. ``field`` names the key
    at fault (None: the frame as a whole); ``traj_seq`` is the seq of a traj
    whose seq could be read but whose id or data could not, so that the
    receiver can answer ``rejected`` with it."""

    def __init__(self, message: str, field: Optional[str] = None, traj_seq: Optional[int] = None) -> None:
        super().__init__(message)
        self.field = field
        self.traj_seq = traj_seq


def valid_worker_id(worker: str) -> bool:
    return isinstance(worker, str) and bool(_WORKER_RE.match(worker))


def valid_instance(instance: str) -> bool:
    return isinstance(instance, str) and bool(_INSTANCE_RE.match(instance))


def _uint(m: Dict[Any, Any], key: str, default: Optional[int] = None) -> int:
    if key not in m:
        if default is not None:
            return default
        raise DecodeError(f'missing key "{key}"', key)
    v = m[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise DecodeError(f'"{key}" must be an unsigned integer', key)
    return v


def _str(m: Dict[Any, Any], key: str, max_bytes: int, default: Optional[str] = None) -> str:
    if key not in m:
        if default is not None:
            return default
        raise DecodeError(f'missing key "{key}"', key)
    v = m[key]
    if not isinstance(v, str):
        raise DecodeError(f'"{key}" must be a string', key)
    if len(v.encode("utf-8", "surrogatepass")) > max_bytes:
        raise DecodeError(f'"{key}" is longer than {max_bytes} bytes', key)
    return v


def _versions(m: Dict[Any, Any]) -> List[int]:
    v = m.get("versions")
    if not isinstance(v, list) or not 1 <= len(v) <= MAX_VERSIONS:
        raise DecodeError(f'"versions" must be an array of 1..{MAX_VERSIONS} protocol versions', "versions")
    out = []
    for x in v:
        if not isinstance(x, int) or isinstance(x, bool) or x < 0:
            raise DecodeError('"versions" must hold unsigned integers', "versions")
        out.append(x)
    return out


def _decode_hello(m: Dict[Any, Any]) -> Dict[str, Any]:
    worker = _str(m, "worker", MAX_WORKER_ID_BYTES)
    if not valid_worker_id(worker):
        raise DecodeError('"worker": a worker id may hold only letters, digits and "._:@+-"', "worker")
    instance = _str(m, "instance", MAX_INSTANCE_BYTES)
    if not valid_instance(instance):
        raise DecodeError('"instance": a spool instance id may hold only letters, digits and "._-"', "instance")
    return {
        "type": "hello",
        "versions": _versions(m),
        "worker": worker,
        "instance": instance,
        "heartbeat_ms": min(_uint(m, "heartbeat_ms", 1000), 3600000),
        "next_seq": _uint(m, "next_seq", 0),
        "unacked": _uint(m, "unacked", 0),
        "software": _str(m, "software", 256, ""),
    }


def _decode_traj(m: Dict[Any, Any], v: int, decode_data: bool) -> Dict[str, Any]:
    """A traj; once its seq is read, a DecodeError carries it (traj_seq)."""
    seq = _uint(m, "seq")
    if seq == 0:
        raise DecodeError('"seq" must be at least 1', "seq")
    try:
        tid = _str(m, "id", MAX_TRAJECTORY_ID_BYTES)
        if not tid:
            raise DecodeError('"id" must not be empty', "id")
        data = m.get("data")
        if not isinstance(data, bytes):
            raise DecodeError('"data" must be bin (the MessagePack bytes of the trajectory)', "data")
        out: Dict[str, Any] = {"type": "traj", "v": v, "seq": seq, "id": tid, "data": data}
        if decode_data:
            out["trajectory"] = _decode_trajectory(data)
        return out
    except DecodeError as e:
        e.traj_seq = seq
        raise


def _decode_trajectory(data: bytes) -> Dict[Any, Any]:
    try:
        trajectory = msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="replace")
    except Exception as e:
        raise DecodeError(f'"data" is not one well-formed MessagePack value: {e}', "data") from None
    if not isinstance(trajectory, dict):
        raise DecodeError('"data" must hold a MessagePack map (the trajectory object)', "data")
    return trajectory


def _decode_welcome(m: Dict[Any, Any], v: int) -> Dict[str, Any]:
    return {
        "type": "welcome",
        "v": v,
        "receiver": _str(m, "receiver", 256, ""),
        "credit": _uint(m, "credit"),
        "heartbeat_ms": _uint(m, "heartbeat_ms", 1000),
        "max_message_bytes": _uint(m, "max_message_bytes", 0),
        "acked_through": _uint(m, "acked_through", 0),
    }


def _decode_ack(m: Dict[Any, Any], v: int) -> Dict[str, Any]:
    ranges = m.get("ranges")
    if not isinstance(ranges, list) or len(ranges) > MAX_ACK_RANGES:
        raise DecodeError(f'"ranges" must be an array of at most {MAX_ACK_RANGES} [first, last] pairs', "ranges")
    out_ranges = []
    for r in ranges:
        if not isinstance(r, list) or len(r) != 2:
            raise DecodeError('each of "ranges" must be [first, last]', "ranges")
        first, last = r
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in r) or not 1 <= first <= last:
            raise DecodeError("a range must have 1 <= first <= last", "ranges")
        out_ranges.append((first, last))
    return {"type": "ack", "v": v, "ranges": out_ranges}


def _decode_error(m: Dict[Any, Any], v: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        "type": "error",
        "v": v,
        "code": _str(m, "code", 64),
        "message": _str(m, "message", 65536, ""),
    }
    if "seq" in m:
        out["seq"] = _uint(m, "seq")
    if "versions" in m:
        out["versions"] = _versions(m)
    return out


def decode(frame: bytes, decode_data: bool = True) -> Dict[str, Any]:
    """Decodes one frame into a dict with at least ``type``; a traj's data is
    decoded into ``trajectory`` (a dict) when ``decode_data``. Raises
    DecodeError."""
    try:
        # Strings are UTF-8 by contract; a trajectory may still carry compiler
        # output that is not, which must not make it undeliverable.
        m = msgpack.unpackb(frame, raw=False, strict_map_key=False, unicode_errors="replace")
    except Exception as e:  # msgpack raises several types (ExtraData, StackError, ValueError...)
        raise DecodeError(f"not one well-formed MessagePack value: {e}") from None
    if not isinstance(m, dict):
        raise DecodeError("a message must be a MessagePack map")
    kind = _str(m, "type", 32)
    if kind == "hello":
        return _decode_hello(m)
    v = _uint(m, "v")
    if v not in SUPPORTED_VERSIONS:
        raise DecodeError(f"protocol version {v} is not one this build speaks ({VERSION})", "v")
    if kind == "traj":
        return _decode_traj(m, v, decode_data)
    if kind in ("heartbeat", "bye"):
        return {"type": kind, "v": v}
    if kind == "welcome":
        return _decode_welcome(m, v)
    if kind == "ack":
        return _decode_ack(m, v)
    if kind == "credit":
        return {"type": "credit", "v": v, "credit": _uint(m, "credit")}
    if kind == "error":
        return _decode_error(m, v)
    raise DecodeError(f'unknown message type "{kind}"', "type")


def _pack(m: Dict[str, Any]) -> bytes:
    return msgpack.packb(m, use_bin_type=True)


def encode_hello(worker: str, instance: str, versions: Sequence[int] = SUPPORTED_VERSIONS, **extra: Any) -> bytes:
    m = {"v": versions[0], "type": "hello", "versions": list(versions), "worker": worker, "instance": instance}
    m.update(extra)
    return _pack(m)


def encode_traj(seq: int, trajectory_id: str, data: bytes, version: int = VERSION) -> bytes:
    return _pack({"v": version, "type": "traj", "seq": seq, "id": trajectory_id, "data": data})


def encode_welcome(
    receiver: str, credit: int, heartbeat_ms: int, max_message_bytes: int, acked_through: int, version: int = VERSION
) -> bytes:
    return _pack(
        {
            "v": version,
            "type": "welcome",
            "receiver": receiver,
            "credit": credit,
            "heartbeat_ms": heartbeat_ms,
            "max_message_bytes": max_message_bytes,
            "acked_through": acked_through,
        }
    )


def encode_ack(ranges: Iterable[Tuple[int, int]], version: int = VERSION) -> bytes:
    return _pack({"v": version, "type": "ack", "ranges": [[a, b] for a, b in ranges]})


def encode_credit(credit: int, version: int = VERSION) -> bytes:
    return _pack({"v": version, "type": "credit", "credit": credit})


def encode_heartbeat(version: int = VERSION) -> bytes:
    return _pack({"v": version, "type": "heartbeat"})


def encode_bye(version: int = VERSION) -> bytes:
    return _pack({"v": version, "type": "bye"})


def encode_error(
    code: str,
    message: str,
    seq: Optional[int] = None,
    versions: Optional[Sequence[int]] = None,
    version: int = VERSION,
) -> bytes:
    text = message.encode("utf-8", "replace")[:MAX_ERROR_MESSAGE_BYTES].decode("utf-8", "ignore")
    m: Dict[str, Any] = {"v": version, "type": "error", "code": code, "message": text}
    if seq is not None:
        m["seq"] = seq
    if versions:
        m["versions"] = list(versions)
    return _pack(m)


def to_ranges(seqs: Iterable[int]) -> List[Tuple[int, int]]:
    """Merged inclusive ranges covering ``seqs``."""
    out: List[List[int]] = []
    for s in sorted(set(seqs)):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return [(a, b) for a, b in out]
