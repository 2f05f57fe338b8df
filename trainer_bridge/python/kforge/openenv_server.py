"""An OpenEnv-compatible server in front of ``kforge serve``.

OpenEnv (github.com/huggingface/OpenEnv; read at commit 385de5e, June 2026,
``src/openenv/core/env_server/http_server.py``, ``types.py``,
``serialization.py`` and ``env_client.py``) is the environment interface that
TRL, SkyRL, ART, Unsloth, Oumi, torchforge and verifiers' OpenEnv taskset
speak. This module serves its wire protocol, so their clients drive
KernelForge episodes without knowing our ZeroMQ protocol:

- ``WS /ws``: one session per connection, many sessions at once. Messages
  are JSON text: ``{"type": "reset", "data": {...}}``, ``{"type": "step",
  "data": action}``, ``{"type": "state"}``, ``{"type": "close"}``; replies
  ``{"type": "observation", "data": {"observation", "reward", "done"}}``,
  ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data":
  {"message", "code", "field"?}}`` (OpenEnv's WSErrorCode values). A
  multi-step episode runs here.
- ``POST /reset``, ``POST /step``: OpenEnv builds a fresh environment per HTTP
  request, so these cannot continue an episode. ``/reset`` returns a first
  observation; ``/step`` plays a one-step episode (reset with the body's
  ``task_id``/``task``/``seed``, then the action): a single ``submit`` is
  scored that way.
- ``GET /state`` (a fresh env's state, as OpenEnv's), ``/health``,
  ``/metadata``, ``/schema``.

OpenEnv drops an observation's ``metadata`` on the wire
(``serialize_observation`` excludes it), so everything a trainer needs is a
typed observation field: ``reward_components``, ``measurement``,
``speedup_eager``, ``outcome``, ``terminated``, ``truncated``,
``stop_reason``, ``error_kind``, and the reset's ``messages`` and ``tools``.

Each session holds one env of ``kforge serve`` (its own ZeroMQ connection
through ``kforge.RemoteEnv``); at most ``max_sessions`` at once (default: the
server's ``--envs``). A session silent for ``session_timeout_s`` (no message,
nothing running) is closed and its env released, so half-open sockets do not
hold slots; WebSocket pings find dead peers sooner.

Run: ``python3 -m kforge.openenv_server --kforge-endpoint tcp://127.0.0.1:5555
--port 8000`` (or ``--kforge-bin build/default/cli/kforge --kforge-args
"--backend cpu --envs 16 --tasks examples"`` to start the env server too).
Needs Debian's python3-fastapi, python3-uvicorn and python3-websockets.
docs/trainers/openenv.md.
"""


import argparse
import asyncio
import concurrent.futures
import json
import os
import secrets
import shlex
import socket
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .client import Client
from .env import RemoteEnv
from .errors import KForgeError

ENV_NAME = "kforge"
# A message or request body larger than this is refused before it is parsed
# (a kernel source is tens of KB; a task a few KB).
DEFAULT_MAX_MESSAGE_BYTES = 4 << 20
MAX_JSON_DEPTH = 64

# OpenEnv's WSErrorCode values (types.py).
INVALID_JSON = "INVALID_JSON"
UNKNOWN_TYPE = "UNKNOWN_TYPE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
CAPACITY_REACHED = "CAPACITY_REACHED"
SESSION_ERROR = "SESSION_ERROR"

RESET_KEYS = ("task_id", "task", "seed", "episode_id", "exemplars")
STEP_KEYS = ("tool_call", "tool", "name", "arguments", "id", "action", "metadata")


class RequestError(ValueError):
    """A message the client got wrong: answered with an error naming the field."""

    def __init__(self, code: str, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field

    def data(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"message": str(self), "code": self.code}
        if self.field is not None:
            d["field"] = self.field
        return d


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, stopping past ``limit``."""
    stack: List[Tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def parse_message(raw: "str | bytes", max_bytes: int) -> Dict[str, Any]:
    """A JSON object from the wire, bounded in size and depth."""
    if len(raw) > max_bytes:
        raise RequestError(INVALID_JSON, f"message of {len(raw)} bytes; the limit is {max_bytes} (--max-message-bytes)")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise RequestError(INVALID_JSON, f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:
        raise RequestError(INVALID_JSON, f"Invalid JSON: {e}") from None
    if _depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise RequestError(INVALID_JSON, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(value, dict):
        raise RequestError(INVALID_JSON, "a message is a JSON object")
    return value


def _only_keys(data: Mapping[str, Any], allowed: Tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise RequestError(
                VALIDATION_ERROR, f"{where}: unknown key {key!r}; the keys are {', '.join(allowed)}", f"{where}/{key}"
            )


def tool_call_of(action: Mapping[str, Any], where: str = "data") -> Dict[str, Any]:
    """The kforge step params of an OpenEnv action.

    Accepted: ``{"tool_call": <OpenAI tool call>}``, ``{"tool": name,
    "arguments": {...} | "<JSON text>", "id"?}`` (``name`` for ``tool``), or
    ``{"action": <typed kforge action>}`` from trainer code. ``metadata`` (the
    OpenEnv Action base field) is ignored."""
    if not isinstance(action, Mapping):
        raise RequestError(VALIDATION_ERROR, f"{where}: an action is a JSON object", where)
    _only_keys(action, STEP_KEYS, where)
    given = [k for k in ("tool_call", "tool", "name", "action") if k in action]
    if len(given) != 1:
        raise RequestError(
            VALIDATION_ERROR,
            f"{where}: give exactly one of tool_call, tool (or name) and action; got {given or 'none'}",
            where,
        )
    if "tool_call" in action:
        if not isinstance(action["tool_call"], Mapping):
            raise RequestError(VALIDATION_ERROR, f"{where}/tool_call: an OpenAI tool call object", f"{where}/tool_call")
        return {"tool_call": dict(action["tool_call"])}
    if "action" in action:
        if not isinstance(action["action"], Mapping):
            raise RequestError(VALIDATION_ERROR, f"{where}/action: a typed action object", f"{where}/action")
        return {"action": dict(action["action"])}
    name_key = "tool" if "tool" in action else "name"
    name = action[name_key]
    if not isinstance(name, str):
        raise RequestError(VALIDATION_ERROR, f"{where}/{name_key}: a tool name (string)", f"{where}/{name_key}")
    arguments = action.get("arguments", {})
    if not isinstance(arguments, (str, Mapping)):
        raise RequestError(
            VALIDATION_ERROR, f"{where}/arguments: an object or a JSON string", f"{where}/arguments"
        )
    call: Dict[str, Any] = {"name": name, "arguments": arguments if isinstance(arguments, str) else dict(arguments)}
    return {"tool_call": call}


def _stop_reason(terminated: bool, truncated: bool, data: Mapping[str, Any]) -> Optional[str]:
    if terminated:
        return "submitted"
    if truncated:
        episode = data.get("episode") if isinstance(data.get("episode"), Mapping) else {}
        return str(episode.get("reason") or "truncated")
    return None


def step_observation(obs: Mapping[str, Any], reward: float, terminated: bool, truncated: bool,
                     info: Mapping[str, Any], episode_id: str) -> Dict[str, Any]:
    """OpenEnv's serialized observation of a kforge step: typed fields, since
    ``metadata`` does not survive the wire."""
    data = obs.get("data") if isinstance(obs.get("data"), Mapping) else {}
    measurement = info.get("measurement") if isinstance(info.get("measurement"), Mapping) else None
    error = data.get("error") if isinstance(data.get("error"), Mapping) else None
    observation = {
        "text": obs.get("text", ""),
        "data": dict(data),
        "episode_id": episode_id,
        "task_id": info.get("task_id"),
        "turn": data.get("turn"),
        "turns_left": data.get("turns_left"),
        "reward_components": dict(info.get("reward_components") or {}),
        "measurement": dict(measurement) if measurement is not None else None,
        "outcome": (measurement or {}).get("outcome", data.get("outcome")),
        "correct": (measurement or {}).get("correct"),
        "speedup_eager": (measurement or {}).get("speedup_eager"),
        "terminated": terminated,
        "truncated": truncated,
        "stop_reason": _stop_reason(terminated, truncated, data),
        "error_kind": error.get("kind") if error else None,
        "error_message": error.get("message") if error else None,
    }
    return {"observation": observation, "reward": float(reward), "done": bool(terminated or truncated)}


def reset_observation(obs: Mapping[str, Any], info: Mapping[str, Any], episode_id: str) -> Dict[str, Any]:
    data = obs.get("data") if isinstance(obs.get("data"), Mapping) else {}
    observation = {
        "text": obs.get("text", ""),
        "data": dict(data),
        "messages": list(data.get("messages", [])),
        "tools": list(data.get("tools", [])),
        "episode_id": episode_id,
        "task_id": info.get("task_id"),
        "seed": info.get("seed"),
        "turn": 0,
        "turns_left": (data.get("budgets") or {}).get("max_turns"),
        "reward_components": {},
        "measurement": None,
        "outcome": None,
        "correct": None,
        "speedup_eager": None,
        "terminated": False,
        "truncated": False,
        "stop_reason": None,
        "error_kind": None,
        "error_message": None,
    }
    return {"observation": observation, "reward": None, "done": False}


class Session:
    """One OpenEnv session: one env of ``kforge serve``, one episode at a time."""

    def __init__(self, endpoint: str, timeout_s: float) -> None:
        self.id = str(uuid.uuid4())
        self.created_at = time.time()
        self.last_activity = time.monotonic()
        self.busy = False
        self.closed = False
        self.env = RemoteEnv(endpoint, timeout_s=timeout_s)
        self.episode_id: Optional[str] = None
        self.task_id: Optional[str] = None
        self.seed: Optional[int] = None
        self.step_count = 0
        self.total_reward = 0.0
        self.terminated = False
        self.truncated = False
        self.stop_reason: Optional[str] = None
        self._lock = threading.Lock()

    def reset(self, data: Mapping[str, Any], task_ids: List[str]) -> Dict[str, Any]:
        if not isinstance(data, Mapping):
            raise RequestError(VALIDATION_ERROR, "data: reset parameters are a JSON object", "data")
        _only_keys(data, RESET_KEYS, "data")
        seed = data.get("seed")
        if seed is None:
            seed = secrets.randbits(63)
        elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
            raise RequestError(VALIDATION_ERROR, "data/seed: an integer in [0, 2^64-1]", "data/seed")
        task, task_id = data.get("task"), data.get("task_id")
        if task is not None and task_id is not None:
            raise RequestError(VALIDATION_ERROR, "data: give task or task_id, not both", "data/task_id")
        if task is not None and not isinstance(task, Mapping):
            raise RequestError(VALIDATION_ERROR, "data/task: a task object (DESIGN.md §3)", "data/task")
        if task_id is not None and not isinstance(task_id, str):
            raise RequestError(VALIDATION_ERROR, "data/task_id: a string", "data/task_id")
        if task is None and task_id is None:
            if not task_ids:
                raise RequestError(
                    VALIDATION_ERROR,
                    "data/task_id: required: the kforge server has no task set (start it with --tasks)",
                    "data/task_id",
                )
            task_id = task_ids[seed % len(task_ids)]  # the seed picks the task, reproducibly
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or not 0 < len(episode_id) <= 255):
            raise RequestError(VALIDATION_ERROR, "data/episode_id: a string of 1..255 characters", "data/episode_id")
        options = {"exemplars": data["exemplars"]} if "exemplars" in data else None
        with self._lock:
            obs, info = self.env.reset(task=task, task_id=task_id, seed=seed, options=options)
            self.episode_id = episode_id or str(uuid.uuid4())
            self.task_id = info.get("task_id")
            self.seed = seed
            self.step_count = 0
            self.total_reward = 0.0
            self.terminated = self.truncated = False
            self.stop_reason = None
            return reset_observation(obs, info, self.episode_id)

    def step(self, action: Mapping[str, Any]) -> Dict[str, Any]:
        params = tool_call_of(action)
        with self._lock:
            if self.episode_id is None:
                raise RequestError(EXECUTION_ERROR, "no episode: send a reset first")
            call = params.get("tool_call", params.get("action"))
            obs, reward, terminated, truncated, info = self.env.step(call)
            self.step_count += 1
            self.total_reward += reward
            self.terminated, self.truncated = terminated, truncated
            out = step_observation(obs, reward, terminated, truncated, info, self.episode_id)
            self.stop_reason = out["observation"]["stop_reason"]
            return out

    def state(self) -> Dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "task_id": self.task_id,
            "seed": self.seed,
            "total_reward": self.total_reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "stop_reason": self.stop_reason,
            "env_id": self.env.env_id,
        }

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self.env.close()


def _kforge_error_data(e: KForgeError) -> Dict[str, Any]:
    d: Dict[str, Any] = {"message": f"{e.code}: {e.message}", "code": EXECUTION_ERROR, "kforge_code": e.code}
    if e.field:
        d["field"] = e.field
    return d


ACTION_SCHEMA = {
    "title": "KForgeAction",
    "type": "object",
    "description": "One of: tool_call (an OpenAI tool call), tool + arguments, or action (a typed kforge action).",
    "properties": {
        "tool_call": {"type": "object"},
        "tool": {"type": "string", "enum": ["compile", "verify", "profile", "submit", "analyze"]},
        "arguments": {"anyOf": [{"type": "object"}, {"type": "string"}]},
        "action": {"type": "object"},
        "metadata": {"type": "object"},
    },
    "additionalProperties": False,
}
OBSERVATION_SCHEMA = {
    "title": "KForgeObservation",
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "data": {"type": "object", "description": "docs/environment.md, 'Observation data'"},
        "messages": {"type": "array", "description": "reset only: the chat prompt"},
        "tools": {"type": "array", "description": "reset only: OpenAI tool definitions"},
        "episode_id": {"type": "string"},
        "task_id": {"type": ["string", "null"]},
        "seed": {"type": ["integer", "null"]},
        "turn": {"type": ["integer", "null"]},
        "turns_left": {"type": ["integer", "null"]},
        "reward_components": {"type": "object", "additionalProperties": {"type": "number"}},
        "measurement": {"type": ["object", "null"]},
        "outcome": {"type": ["string", "null"]},
        "correct": {"type": ["boolean", "null"]},
        "speedup_eager": {"type": ["number", "null"]},
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "stop_reason": {"type": ["string", "null"], "enum": [None, "submitted", "max_turns", "time_budget"]},
        "error_kind": {"type": ["string", "null"]},
        "error_message": {"type": ["string", "null"]},
    },
}
STATE_SCHEMA = {
    "title": "KForgeState",
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer", "minimum": 0},
        "task_id": {"type": ["string", "null"]},
        "seed": {"type": ["integer", "null"]},
        "total_reward": {"type": "number"},
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "stop_reason": {"type": ["string", "null"]},
        "env_id": {"type": ["integer", "null"]},
    },
}


def create_app(
    kforge_endpoint: str,
    max_sessions: Optional[int] = None,
    session_timeout_s: Optional[float] = 300.0,
    step_timeout_s: float = 900.0,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    on_ready: Optional[Any] = None,
) -> Any:
    """The FastAPI app serving OpenEnv's protocol for the ``kforge serve`` at
    ``kforge_endpoint``. ``max_sessions`` None: the server's env count."""
    from fastapi import FastAPI, Request, WebSocket
    from fastapi.responses import JSONResponse
    from starlette.websockets import WebSocketDisconnect, WebSocketState

    if session_timeout_s is not None and session_timeout_s <= 0:
        raise ValueError("session_timeout_s must be > 0 (or None: no timeout)")
    with Client(kforge_endpoint, timeout_s=30.0) as probe:
        hello = probe.hello("kforge.openenv_server", 10.0)
        task_ids: List[str] = []
        offset = 0
        while True:
            page = probe.call("tasks", {"offset": offset, "limit": 1000})
            task_ids.extend(page["task_ids"])
            offset += len(page["task_ids"])
            if not page["task_ids"] or offset >= page["count"]:
                break
    limit = int(max_sessions if max_sessions is not None else hello["limits"]["num_envs"])
    if limit < 1:
        raise ValueError("max_sessions must be >= 1")

    app = FastAPI(title="KernelForge (OpenEnv)", version="0.1.0")
    sessions: Dict[str, Session] = {}
    sockets: Dict[str, Any] = {}
    reserved = [0]  # sessions being opened
    lock = asyncio.Lock()
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=limit + 4, thread_name_prefix="kforge-openenv")
    app.state.sessions = sessions
    app.state.task_ids = task_ids
    app.state.max_sessions = limit

    async def blocking(fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def release(session: Session) -> None:
        # The slot counts until its env is released on the server: a new
        # session admitted earlier could find every env still held.
        await blocking(session.close)
        async with lock:
            sessions.pop(session.id, None)
            sockets.pop(session.id, None)

    async def reap() -> None:
        assert session_timeout_s is not None
        interval = min(max(session_timeout_s / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            async with lock:
                stale = [s for s in sessions.values() if not s.busy and now - s.last_activity > session_timeout_s]
                stale_sockets = [sockets.get(s.id) for s in stale]
            for session, ws in zip(stale, stale_sockets):
                # The slot first: telling a half-open peer may wait for its
                # close handshake until the WebSocket close timeout.
                await release(session)
                if ws is not None:
                    asyncio.get_running_loop().create_task(tell_and_close(ws))

    async def tell_and_close(ws: Any) -> None:
        try:
            if ws.client_state == WebSocketState.CONNECTED:
                await ws.send_text(json.dumps({"type": "error", "data": {
                    "message": f"session idle for more than {session_timeout_s} s; closed", "code": SESSION_ERROR}}))
                await ws.close(code=1001)
        except Exception:  # noqa: BLE001 (the peer is gone; its slot is free already)
            pass

    @app.on_event("startup")
    async def _startup() -> None:
        if session_timeout_s is not None:
            app.state.reaper = asyncio.get_running_loop().create_task(reap())
        if on_ready is not None:
            on_ready()

    @app.on_event("shutdown")
    async def _shutdown() -> None:
        reaper = getattr(app.state, "reaper", None)
        if reaper is not None:
            reaper.cancel()
        for session in list(sessions.values()):
            await release(session)
        executor.shutdown(wait=False)

    async def read_body(request: Request) -> Dict[str, Any]:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_message_bytes:
            raise RequestError(INVALID_JSON, f"body of {declared} bytes; the limit is {max_message_bytes}")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_message_bytes:
                raise RequestError(INVALID_JSON, f"body over {max_message_bytes} bytes")
        return parse_message(body or b"{}", max_message_bytes)

    def error_response(e: Exception) -> Any:
        if isinstance(e, RequestError):
            return JSONResponse(status_code=422, content={"detail": e.data()})
        if isinstance(e, KForgeError):
            status = 503 if e.code in ("pool_full", "shutting_down", "timeout") else 422
            return JSONResponse(status_code=status, content={"detail": _kforge_error_data(e)})
        return JSONResponse(status_code=500, content={"detail": {"message": str(e), "code": EXECUTION_ERROR}})

    def one_shot(body: Mapping[str, Any], with_step: bool) -> Dict[str, Any]:
        session = Session(kforge_endpoint, step_timeout_s)
        try:
            reset_data = {k: v for k, v in body.items() if k in RESET_KEYS}
            first = session.reset(reset_data, task_ids)
            if not with_step:
                return first
            return session.step(body["action"])
        finally:
            session.close()

    @app.post("/reset")
    async def http_reset(request: Request) -> Any:
        try:
            body = await read_body(request)
            _only_keys(body, RESET_KEYS, "body")
            return await blocking(one_shot, body, False)
        except Exception as e:  # noqa: BLE001 (every failure is answered)
            return error_response(e)

    @app.post("/step")
    async def http_step(request: Request) -> Any:
        try:
            body = await read_body(request)
            _only_keys(body, ("action", "timeout_s", "request_id") + RESET_KEYS, "body")
            if "action" not in body:
                raise RequestError(VALIDATION_ERROR, "body/action: required", "body/action")
            return await blocking(one_shot, body, True)
        except Exception as e:  # noqa: BLE001
            return error_response(e)

    @app.get("/state")
    async def http_state() -> Any:
        # As OpenEnv's: the state of a fresh environment (HTTP has no session).
        return {"episode_id": None, "step_count": 0}

    @app.get("/health")
    async def http_health() -> Any:
        def ping() -> None:
            with Client(kforge_endpoint, timeout_s=10.0) as c:
                c.call("ping", {})

        try:
            await blocking(ping)
        except Exception as e:  # noqa: BLE001
            return JSONResponse(status_code=503, content={"status": "unhealthy", "message": str(e)})
        return {"status": "healthy"}

    @app.get("/metadata")
    async def http_metadata() -> Any:
        return {
            "name": ENV_NAME,
            "description": "KernelForge: write kernels; compiled, verified and timed in a sandbox, rewarded by speedup",
            "version": "0.1.0",
            "documentation_url": "docs/trainers/openenv.md",
            "backend": hello.get("backend"),
            "tasks": len(task_ids),
            "active_sessions": len(sessions),
            "max_sessions": limit,
            "session_timeout_s": session_timeout_s,
        }

    @app.get("/schema")
    async def http_schema() -> Any:
        return {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}

    @app.websocket("/ws")
    async def ws_session(websocket: WebSocket) -> None:
        await websocket.accept()
        async with lock:
            full = len(sessions) + reserved[0] >= limit
            if not full:
                reserved[0] += 1  # a slot while its env is made (off the event loop)
        if full:
            await websocket.send_text(json.dumps({"type": "error", "data": {
                "message": f"the server holds {limit} sessions, its limit; retry later",
                "code": CAPACITY_REACHED, "active_sessions": limit, "max_sessions": limit}}))
            await websocket.close(code=1013)
            return
        session: Optional[Session] = None
        try:
            try:
                session = await blocking(Session, kforge_endpoint, step_timeout_s)
            finally:
                async with lock:
                    reserved[0] -= 1
                    if session is not None:
                        sessions[session.id] = session
                        sockets[session.id] = websocket
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                session.last_activity = time.monotonic()
                if session.closed:
                    break
                try:
                    m = parse_message(raw, max_message_bytes)
                    kind = m.get("type")
                    if kind == "close":
                        break
                    if kind == "reset":
                        _only_keys(m, ("type", "data"), "message")
                        session.busy = True
                        reply = {"type": "observation", "data": await blocking(session.reset, m.get("data") or {}, task_ids)}
                    elif kind == "step":
                        _only_keys(m, ("type", "data"), "message")
                        if "data" not in m:
                            raise RequestError(VALIDATION_ERROR, "message/data: required (the action)", "message/data")
                        session.busy = True
                        reply = {"type": "observation", "data": await blocking(session.step, m["data"])}
                    elif kind == "state":
                        _only_keys(m, ("type",), "message")
                        reply = {"type": "state", "data": session.state()}
                    else:
                        raise RequestError(UNKNOWN_TYPE, f"Unknown message type: {kind}; the types are reset, step, state, close", "message/type")
                except RequestError as e:
                    reply = {"type": "error", "data": e.data()}
                except KForgeError as e:
                    reply = {"type": "error", "data": _kforge_error_data(e)}
                except (ValueError, TypeError) as e:  # arguments the client library refused
                    reply = {"type": "error", "data": {"message": str(e), "code": VALIDATION_ERROR}}
                finally:
                    session.busy = False
                    session.last_activity = time.monotonic()
                if session.closed:
                    break
                await websocket.send_text(json.dumps(reply))
        except WebSocketDisconnect:
            pass
        except Exception as e:  # noqa: BLE001 (a session's failure is told to its client only)
            try:
                await websocket.send_text(json.dumps({"type": "error", "data": {"message": str(e), "code": SESSION_ERROR}}))
            except Exception:  # noqa: BLE001
                pass
        finally:
            if session is not None:
                await release(session)
            if websocket.client_state == WebSocketState.CONNECTED:
                try:
                    await websocket.close()
                except Exception:  # noqa: BLE001
                    pass

    return app


def __getattr__(name: str) -> Any:
    """``kforge.openenv_server:app`` for OpenEnv's tooling and uvicorn
    (openenv.yaml): built on first access from $KFORGE_ENDPOINT,
    $KFORGE_OPENENV_MAX_SESSIONS and $KFORGE_OPENENV_SESSION_TIMEOUT_S."""
    if name != "app":
        raise AttributeError(name)
    endpoint = os.environ.get("KFORGE_ENDPOINT")
    if not endpoint:
        raise RuntimeError("kforge.openenv_server:app needs KFORGE_ENDPOINT (the kforge serve endpoint)")
    sessions = os.environ.get("KFORGE_OPENENV_MAX_SESSIONS")
    timeout = float(os.environ.get("KFORGE_OPENENV_SESSION_TIMEOUT_S", "300"))
    app = create_app(endpoint, int(sessions) if sessions else None, timeout or None)
    globals()["app"] = app
    return app


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m kforge.openenv_server",
        description="Serve kforge episodes over OpenEnv's protocol (WebSocket /ws, HTTP /reset /step /state "
        "/health). docs/trainers/openenv.md",
    )
    p.add_argument("--kforge-endpoint", help="a running kforge serve, e.g. tcp://127.0.0.1:5555")
    p.add_argument("--kforge-bin", help="start kforge serve from this binary instead (with --kforge-args)")
    p.add_argument("--kforge-args", default="--backend cpu --envs 8 --tasks examples",
                   help="arguments of the kforge serve it starts (default: %(default)s)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--max-sessions", type=int, default=None, help="default: the kforge server's --envs")
    p.add_argument("--session-timeout", type=float, default=300.0,
                   help="close sessions idle this many seconds (0: never)")
    p.add_argument("--step-timeout", type=float, default=900.0, help="seconds a reset or step may take")
    p.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES)
    args = p.parse_args(argv)
    if (args.kforge_endpoint is None) == (args.kforge_bin is None):
        p.error("give one of --kforge-endpoint and --kforge-bin")

    import uvicorn

    local = None
    endpoint = args.kforge_endpoint
    if args.kforge_bin is not None:
        from .server import LocalServer

        local = LocalServer(args.kforge_bin, args=shlex.split(args.kforge_args)).start()
        endpoint = local.endpoint
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    # Listening before the ready line: a client that connects at once waits
    # in the backlog until uvicorn serves the socket.
    sock.listen(128)
    port = sock.getsockname()[1]

    def ready() -> None:
        print(json.dumps({"url": f"http://{args.host}:{port}", "ws": f"ws://{args.host}:{port}/ws",
                          "kforge_endpoint": endpoint}), flush=True)

    try:
        app = create_app(endpoint, args.max_sessions, args.session_timeout or None, args.step_timeout,
                         args.max_message_bytes, on_ready=ready)
        config = uvicorn.Config(app, log_level="warning", ws_max_size=args.max_message_bytes,
                                ws_ping_interval=20.0, ws_ping_timeout=20.0, lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if local is not None:
            local.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
