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
import shlex
import socket
import sys
import time
from typing import Any, Dict, List, Mapping, Optional

from .client import Client
from .errors import KForgeError
# The wire format and the session moved to their own modules; every name is
# still importable from kforge.openenv_server.
from .openenv_session import Session
from .openenv_wire import (  # noqa: F401
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
    _stop_reason,
    parse_message,
    reset_observation,
    step_observation,
    tool_call_of,
)


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
