"""The env server's wire protocol, version 1 (trainer_bridge/PROTOCOL.md).

One MessagePack map per ZeroMQ message, client DEALER -> server ROUTER:

    request  {"v": 1, "id": <uint>, "method": str, "params": {...}}
    reply    {"v": 1, "id": <uint>, "ok": True, "result": {...}}
             {"v": 1, "id": <uint> | None, "ok": False,
              "error": {"code": str, "message": str, "field": str?}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import msgpack

from .errors import KForgeError

PROTOCOL_VERSION = 1

METHODS = ("hello", "ping", "make", "reset", "step", "close", "tasks")

# Error codes the server sends (the same list as PROTOCOL.md).
BAD_REQUEST = "bad_request"
UNSUPPORTED_VERSION = "unsupported_version"
UNKNOWN_METHOD = "unknown_method"
INVALID_TASK = "invalid_task"
UNKNOWN_TASK = "unknown_task"
INVALID_ACTION = "invalid_action"
UNKNOWN_ENV = "unknown_env"
ENV_BUSY = "env_busy"
NO_EPISODE = "no_episode"
EPISODE_FINISHED = "episode_finished"
POOL_FULL = "pool_full"
TOO_MANY_REQUESTS = "too_many_requests"
SHUTTING_DOWN = "shutting_down"
INTERNAL = "internal"

ERROR_CODES = (
    BAD_REQUEST,
    UNSUPPORTED_VERSION,
    UNKNOWN_METHOD,
    INVALID_TASK,
    UNKNOWN_TASK,
    INVALID_ACTION,
    UNKNOWN_ENV,
    ENV_BUSY,
    NO_EPISODE,
    EPISODE_FINISHED,
    POOL_FULL,
    TOO_MANY_REQUESTS,
    SHUTTING_DOWN,
    INTERNAL,
)


@dataclass
class Reply:
    """One decoded reply."""

    id: Optional[int]
    ok: bool
    result: Dict[str, Any] = field(default_factory=dict)
    error: Dict[str, Any] = field(default_factory=dict)

    def to_error(self, env_id: Optional[Any] = None) -> KForgeError:
        """The error reply as an exception."""
        return KForgeError(
            str(self.error.get("code", "internal")),
            str(self.error.get("message", "")),
            self.error.get("field"),
            request_id=self.id,
            env_id=env_id,
        )


def encode_request(request_id: int, method: str, params: Optional[Dict[str, Any]] = None) -> bytes:
    """The MessagePack bytes of one request."""
    message = {"v": PROTOCOL_VERSION, "id": request_id, "method": method, "params": params or {}}
    return msgpack.packb(message, use_bin_type=True)


def decode_reply(payload: bytes) -> Reply:
    """Decodes one reply; KForgeError("bad_reply") if it is not one."""
    try:
        # Compiler output in observations may hold bytes that are not UTF-8;
        # they must not make a whole step unreadable.
        message = msgpack.unpackb(payload, raw=False, unicode_errors="replace", strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as e:
        raise KForgeError("bad_reply", f"the server sent bytes that are not MessagePack: {e}") from e
    if not isinstance(message, dict) or not isinstance(message.get("ok"), bool) or "id" not in message:
        raise KForgeError("bad_reply", f"malformed reply: {message!r:.200}")
    if message.get("v") != PROTOCOL_VERSION:
        raise KForgeError(
            "bad_reply", f"the server speaks protocol version {message.get('v')!r}, this client {PROTOCOL_VERSION}"
        )
    if message["ok"]:
        result = message.get("result")
        return Reply(message["id"], True, result=result if isinstance(result, dict) else {})
    error = message.get("error")
    return Reply(message["id"], False, error=error if isinstance(error, dict) else {})
