"""An OpenEnv-compatible server in front of ``kforge serve``.

OpenEnv (github.com/meta-pytorch/OpenEnv; read at commit 685de41, May 2026,
``src/openenv/core/env_server/http_server.py``, ``types.py``,
``mcp_types.py``, ``serialization.py``, ``env_client.py``, ``mcp_client.py``
and ``cli/_validation.py``) is the environment interface that
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
server's ``--envs``). Sessions do not time out by default: a trainer may be
silent for a training step of hours. At capacity, a new session takes the
slot of the session quiet longest, if quiet for ``--reclaim-after`` seconds;
WebSocket pings find dead peers sooner. Every message is answered within
``--reply-deadline`` seconds, and a reply the client stopped waiting for is
never sent (ws.py). OpenEnv's MCP tool interface: mcp.py; the
sessions' slots, reclaiming and idle timeout: registry.py.

Run: ``python3 -m kforge.openenv.server --kforge-endpoint tcp://127.0.0.1:5555
--port 8000`` (or ``--kforge-bin build/default/cli/kforge --kforge-args
"--backend cpu --envs 16 --tasks examples"`` to start the env server too).
Needs Debian's python3-fastapi, python3-uvicorn and python3-websockets.
docs/trainers/openenv.md.
"""


import argparse
import asyncio
import json
import os
import shlex
import socket
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..client import Client
from ..errors import KForgeError
from .registry import SessionRegistry
# The wire format and the session moved to their own modules; every name is
# still importable from kforge.openenv.server.
from .session import Session
from .wire import (  # noqa: F401
    ACTION_SCHEMA,
    CAPACITY_REACHED,
    DEFAULT_MAX_MESSAGE_BYTES,
    ENV_NAME,
    EXECUTION_ERROR,
    INVALID_JSON,
    MAX_JSON_DEPTH,
    OBSERVATION_SCHEMA,
    RESET_KEYS,
    SESSION_ERROR,
    STATE_SCHEMA,
    STEP_KEYS,
    UNKNOWN_TYPE,
    VALIDATION_ERROR,
    RequestError,
    _depth,
    _kforge_error_data,
    _only_keys,
    parse_message,
    reset_observation,
    step_observation,
    tool_call_of,
)
from .mcp import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    SERVER_ERROR,
    answer_tools_method,
    jsonrpc_error,
    jsonrpc_result,
    mcp_tools,
    read_jsonrpc,
)
from .ws import SessionContext, serve_session
from .ws import mcp as ws_mcp_request

# The OpenEnv HTTP API version this server follows (OpenEnv's own servers
# say 1.0.0; `openenv validate` reads it as the openenv-http/1.x profile).
API_VERSION = "1.0.0"
# Under OpenEnv clients' default message_timeout_s (60 s): see ws.py.
DEFAULT_REPLY_DEADLINE_S = 55.0
DEFAULT_RECLAIM_AFTER_S = 300.0


def http_error_detail(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A 422/503 body's ``detail`` as FastAPI writes validation errors (a
    list of ``{"loc", "msg", "type"}``, what OpenEnv's HTTP routes answer),
    with our ``code``, ``field`` and ``kforge_code`` in the item."""
    field = data.get("field")
    loc = ["body", *str(field).split("/")[1:]] if field else ["body"]
    return [{"loc": loc, "msg": data.get("message", ""), "type": str(data.get("code", "")).lower(), **data}]


def probe_kforge(kforge_endpoint: str) -> Tuple[Dict[str, Any], List[str]]:
    """The ``kforge serve`` at ``kforge_endpoint``'s hello and every task id
    (read a page at a time)."""
    with Client(kforge_endpoint, timeout_s=30.0) as probe:
        hello = probe.hello("kforge.openenv.server", 10.0)
        task_ids: List[str] = []
        offset = 0
        while True:
            page = probe.call("tasks", {"offset": offset, "limit": 1000})
            task_ids.extend(page["task_ids"])
            offset += len(page["task_ids"])
            if not page["task_ids"] or offset >= page["count"]:
                break
    return hello, task_ids


async def read_body(request: Any, max_message_bytes: int) -> Dict[str, Any]:
    """An HTTP request's JSON body, read no further than ``max_message_bytes``."""
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
    """An HTTP route's failure as OpenEnv's HTTP routes answer one."""
    from fastapi.responses import JSONResponse

    if isinstance(e, RequestError):
        return JSONResponse(status_code=422, content={"detail": http_error_detail(e.data())})
    if isinstance(e, KForgeError):
        status = 503 if e.code in ("pool_full", "shutting_down", "timeout") else 422
        return JSONResponse(status_code=status, content={"detail": http_error_detail(_kforge_error_data(e))})
    return JSONResponse(status_code=500, content={"detail": http_error_detail(
        {"message": str(e), "code": EXECUTION_ERROR})})


def add_lifecycle(app: Any, reg: SessionRegistry, on_ready: Optional[Any]) -> None:
    """Startup starts the idle reaper (if sessions time out); shutdown closes
    every session."""
    @app.on_event("startup")
    async def _startup() -> None:
        if reg.session_timeout_s is not None:
            app.state.reaper = asyncio.get_running_loop().create_task(reg.reap())
        if on_ready is not None:
            on_ready()

    @app.on_event("shutdown")
    async def _shutdown() -> None:
        reaper = getattr(app.state, "reaper", None)
        if reaper is not None:
            reaper.cancel()
        for session in list(reg.sessions.values()):
            await reg.release(session)
        reg.executor.shutdown(wait=False)


def add_episode_routes(app: Any, reg: SessionRegistry, ctx: SessionContext) -> None:
    """POST /reset, POST /step and GET /state: HTTP has no session."""
    from fastapi import Request

    @app.post("/reset")
    async def http_reset(request: Request) -> Any:
        try:
            body = await read_body(request, ctx.max_message_bytes)
            return await reg.blocking(reg.one_shot, body, False, ctx.task_ids)
        except Exception as e:  # noqa: BLE001 (every failure is answered)
            return error_response(e)

    @app.post("/step")
    async def http_step(request: Request) -> Any:
        try:
            body = await read_body(request, ctx.max_message_bytes)
            _only_keys(body, ("action", "timeout_s", "request_id") + RESET_KEYS, "body")
            if "action" not in body:
                raise RequestError(VALIDATION_ERROR, "body/action: required", "body/action")
            if "task_id" not in body and "task" not in body:
                # HTTP has no session: a step scores its action on the task
                # the body names, never on one picked for it.
                raise RequestError(VALIDATION_ERROR, "body/task_id: required (or body/task): the task the action is "
                                   "for; multi-step episodes use the WebSocket /ws", "body/task_id")
            return await reg.blocking(reg.one_shot, body, True, ctx.task_ids)
        except Exception as e:  # noqa: BLE001
            return error_response(e)

    @app.get("/state")
    async def http_state() -> Any:
        # As OpenEnv's: the state of a fresh environment (HTTP has no session).
        return {"episode_id": None, "step_count": 0}


def add_description_routes(app: Any, reg: SessionRegistry, ctx: SessionContext, hello: Mapping[str, Any]) -> None:
    """GET /health (pings kforge serve), /metadata and /schema."""
    from fastapi.responses import JSONResponse

    @app.get("/health")
    async def http_health() -> Any:
        try:
            await reg.blocking(reg.ping)
        except Exception as e:  # noqa: BLE001
            return JSONResponse(status_code=503, content={"status": "unhealthy", "message": str(e)})
        return {"status": "healthy"}

    @app.get("/metadata")
    async def http_metadata() -> Any:
        return {
            "name": ENV_NAME,
            "description": "KernelForge: write kernels; compiled, verified and timed in a sandbox, rewarded by speedup",
            "version": API_VERSION,
            "documentation_url": "docs/trainers/openenv.md",
            "backend": hello.get("backend"),
            "tasks": len(ctx.task_ids),
            "active_sessions": len(reg.sessions),
            "max_sessions": reg.limit,
            "session_timeout_s": reg.session_timeout_s,
            "reply_deadline_s": ctx.reply_deadline_s,
            "reclaim_after_s": reg.reclaim_after_s,
        }

    @app.get("/schema")
    async def http_schema() -> Any:
        return {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}


def add_http_mcp(app: Any, reg: SessionRegistry, ctx: SessionContext) -> None:
    """POST /mcp: JSON-RPC, always answered with status 200, as OpenEnv's."""
    from fastapi import Request

    @app.post("/mcp")
    async def http_mcp(request: Request) -> Any:
        try:
            body = await read_body(request, ctx.max_message_bytes)
        except RequestError as e:
            return jsonrpc_error(None, PARSE_ERROR, f"Parse error: {e}")
        try:
            r = read_jsonrpc(body)
        except RequestError as e:
            code = INVALID_PARAMS if e.code == "INVALID_PARAMS" else INVALID_REQUEST
            return jsonrpc_error(body.get("id") if isinstance(body.get("id"), (str, int)) else None, code, str(e))
        method, params, request_id = r["method"], r["params"], r["id"]
        if method == "openenv/session/create":
            if not await reg.admit():
                return jsonrpc_error(request_id, SERVER_ERROR, f"the server holds {reg.limit} sessions, its limit",
                                     {"active_sessions": reg.limit, "max_sessions": reg.limit})
            try:
                session = await reg.open_session()
            except Exception as e:  # noqa: BLE001
                return jsonrpc_error(request_id, SERVER_ERROR, str(e))
            return jsonrpc_result(request_id, {"session_id": session.id})
        target = reg.sessions.get(params.get("session_id")) if isinstance(params.get("session_id"), str) else None
        if "session_id" in params and target is None:
            return jsonrpc_error(request_id, INVALID_PARAMS, f"Unknown session_id: {params.get('session_id')}")
        if method == "openenv/session/close":
            if target is None:
                return jsonrpc_error(request_id, INVALID_PARAMS, "Invalid params - 'session_id' is required")
            if target.id in reg.sockets:
                return jsonrpc_error(request_id, INVALID_REQUEST, "this session is a WebSocket's: close the WebSocket")
            await reg.release(target)
            return jsonrpc_result(request_id, {"session_id": target.id, "closed": True})

        async def call(name: str, arguments: Dict[str, Any]) -> Dict[str, Any]:
            assert target is not None
            target.running += 1
            try:
                return await reg.blocking(target.call_tool, name, arguments, ctx.task_ids)
            finally:
                target.running -= 1
                target.last_activity = time.monotonic()

        return await answer_tools_method(method, params, request_id, ctx.tools, call if target is not None else None)


def add_ws_mcp(app: Any, reg: SessionRegistry, ctx: SessionContext) -> None:
    """OpenEnv's WebSocket /mcp: raw JSON-RPC requests and responses, one
    session per connection."""
    from fastapi import WebSocket
    from starlette.websockets import WebSocketDisconnect

    @app.websocket("/mcp")
    async def ws_mcp(websocket: WebSocket) -> None:
        await websocket.accept()
        if not await reg.admit():
            await websocket.send_text(json.dumps(jsonrpc_error(None, SERVER_ERROR, f"the server holds {reg.limit} "
                                                               "sessions, its limit", {"max_sessions": reg.limit})))
            await websocket.close(code=1013)
            return
        session: Optional[Session] = None
        try:
            session = await reg.open_session()
            await reg.attach(session, websocket)
            while not session.closed:
                raw = await websocket.receive_text()
                session.last_activity = time.monotonic()
                try:
                    body: Any = parse_message(raw, ctx.max_message_bytes)
                except RequestError as e:
                    await websocket.send_text(json.dumps(jsonrpc_error(None, PARSE_ERROR, f"Parse error: {e}")))
                    continue
                session.running += 1
                try:
                    reply = await ws_mcp_request(body, session, ctx)
                finally:
                    session.running -= 1
                    session.last_activity = time.monotonic()
                await websocket.send_text(json.dumps(reply))
        except WebSocketDisconnect:
            pass
        finally:
            if session is not None:
                await reg.release(session)


def add_ws_session(app: Any, reg: SessionRegistry, ctx: SessionContext) -> None:
    """WebSocket /ws: one OpenEnv session per connection (ws.py)."""
    from fastapi import WebSocket
    from starlette.websockets import WebSocketDisconnect, WebSocketState

    @app.websocket("/ws")
    async def ws_session(websocket: WebSocket) -> None:
        await websocket.accept()
        if not await reg.admit():
            await websocket.send_text(json.dumps({"type": "error", "data": {
                "message": f"the server holds {reg.limit} sessions, its limit; retry later",
                "code": CAPACITY_REACHED, "active_sessions": reg.limit, "max_sessions": reg.limit}}))
            await websocket.close(code=1013)
            return
        session: Optional[Session] = None
        try:
            session = await reg.open_session()
            await reg.attach(session, websocket)
            await serve_session(websocket, session, ctx)
        except WebSocketDisconnect:
            pass
        except Exception as e:  # noqa: BLE001 (a session's failure is told to its client only)
            try:
                await websocket.send_text(json.dumps({"type": "error", "data": {"message": str(e), "code": SESSION_ERROR}}))
            except Exception:  # noqa: BLE001
                pass
        finally:
            if session is not None:
                await reg.release(session)
            if websocket.client_state == WebSocketState.CONNECTED:
                try:
                    await websocket.close()
                except Exception:  # noqa: BLE001
                    pass


def create_app(
    kforge_endpoint: str,
    max_sessions: Optional[int] = None,
    session_timeout_s: Optional[float] = None,
    step_timeout_s: float = 900.0,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    on_ready: Optional[Any] = None,
    reply_deadline_s: Optional[float] = DEFAULT_REPLY_DEADLINE_S,
    reclaim_after_s: Optional[float] = DEFAULT_RECLAIM_AFTER_S,
) -> Any:
    """The FastAPI app serving OpenEnv's protocol for the ``kforge serve`` at
    ``kforge_endpoint``. ``max_sessions`` None: the server's env count.
    ``session_timeout_s`` None: sessions never time out (they are bounded by
    ``max_sessions``: at capacity, a new session takes the slot of the one
    quiet longest, if quiet ``reclaim_after_s`` or more). ``reply_deadline_s``
    None: answers wait for their steps however long (ws.py)."""
    from fastapi import FastAPI

    for name, value in (("session_timeout_s", session_timeout_s), ("reply_deadline_s", reply_deadline_s),
                        ("reclaim_after_s", reclaim_after_s)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0 (or None: none)")
    hello, task_ids = probe_kforge(kforge_endpoint)
    limit = int(max_sessions if max_sessions is not None else hello["limits"]["num_envs"])
    if limit < 1:
        raise ValueError("max_sessions must be >= 1")

    app = FastAPI(title="KernelForge (OpenEnv)", version=API_VERSION)
    reg = SessionRegistry(kforge_endpoint, limit, step_timeout_s, session_timeout_s, reclaim_after_s)
    app.state.sessions = reg.sessions
    app.state.task_ids = task_ids
    app.state.max_sessions = limit
    ctx = SessionContext(reg.blocking, task_ids, mcp_tools(hello.get("tools", [])), max_message_bytes,
                         reply_deadline_s)
    add_lifecycle(app, reg, on_ready)
    add_episode_routes(app, reg, ctx)
    add_description_routes(app, reg, ctx, hello)
    add_http_mcp(app, reg, ctx)
    add_ws_mcp(app, reg, ctx)
    add_ws_session(app, reg, ctx)
    return app


def __getattr__(name: str) -> Any:
    """``kforge.openenv.server:app`` for OpenEnv's tooling and uvicorn
    (openenv.yaml): built on first access from $KFORGE_ENDPOINT,
    $KFORGE_OPENENV_MAX_SESSIONS, $KFORGE_OPENENV_SESSION_TIMEOUT_S,
    $KFORGE_OPENENV_REPLY_DEADLINE_S and $KFORGE_OPENENV_RECLAIM_AFTER_S."""
    if name != "app":
        raise AttributeError(name)
    endpoint = os.environ.get("KFORGE_ENDPOINT")
    if not endpoint:
        raise RuntimeError("kforge.openenv.server:app needs KFORGE_ENDPOINT (the kforge serve endpoint)")
    sessions = os.environ.get("KFORGE_OPENENV_MAX_SESSIONS")
    timeout = float(os.environ.get("KFORGE_OPENENV_SESSION_TIMEOUT_S", "0"))
    deadline = float(os.environ.get("KFORGE_OPENENV_REPLY_DEADLINE_S", str(DEFAULT_REPLY_DEADLINE_S)))
    reclaim = float(os.environ.get("KFORGE_OPENENV_RECLAIM_AFTER_S", str(DEFAULT_RECLAIM_AFTER_S)))
    app = create_app(endpoint, int(sessions) if sessions else None, timeout or None,
                     reply_deadline_s=deadline or None, reclaim_after_s=reclaim or None)
    globals()["app"] = app
    return app


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m kforge.openenv.server",
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
    p.add_argument("--session-timeout", type=float, default=0.0,
                   help="close sessions idle this many seconds (default 0: never; sessions are bounded by "
                   "--max-sessions and --reclaim-after instead)")
    p.add_argument("--reclaim-after", type=float, default=DEFAULT_RECLAIM_AFTER_S,
                   help="at --max-sessions, a new session takes the slot of the session quiet longest if it has "
                   "been quiet this many seconds (0: never)")
    p.add_argument("--reply-deadline", type=float, default=DEFAULT_REPLY_DEADLINE_S,
                   help="answer every message within this many seconds (a step still running gets a still_running "
                   "error and goes on); keep it under the clients' message_timeout_s (OpenEnv: 60). 0: wait")
    p.add_argument("--step-timeout", type=float, default=900.0, help="seconds a reset or step may take")
    p.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES)
    args = p.parse_args(argv)
    if (args.kforge_endpoint is None) == (args.kforge_bin is None):
        p.error("give one of --kforge-endpoint and --kforge-bin")

    import uvicorn

    local = None
    endpoint = args.kforge_endpoint
    if args.kforge_bin is not None:
        from ..server import LocalServer

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
                         args.max_message_bytes, on_ready=ready, reply_deadline_s=args.reply_deadline or None,
                         reclaim_after_s=args.reclaim_after or None)
        config = uvicorn.Config(app, log_level="warning", ws_max_size=args.max_message_bytes,
                                ws_ping_interval=20.0, ws_ping_timeout=20.0, lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if local is not None:
            local.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
