"""One OpenEnv WebSocket session of kforge.openenv.server: its messages in,
its replies out, with the rule that keeps a client without request ids in
step with its replies.

OpenEnv's client (meta-pytorch/OpenEnv at 685de41, ``env_client.py``) sends
one message and takes the next message on the socket as its answer, waiting
at most ``message_timeout_s`` (60 s by default); after a timeout it sends its
next request on the same socket. A reply sent after that timeout would be
read as the answer to the next request. So:

- every request is answered within ``reply_deadline_s`` (default 55 s, under
  the client's default): a reset or step still running then is answered with
  an error (``EXECUTION_ERROR``, ``kforge_code`` ``still_running``) and keeps
  running; its effects stay in the episode (``state`` shows them) and the
  session's next reset or step waits for it. A client that gives steps
  longer (``message_timeout_s=960``) raises the server's
  ``--reply-deadline`` with it (or sets it to 0: no deadline);
- a request whose client sent another message before its answer was ready
  is never answered: its reply is dropped (the client stopped waiting).

Messages are read while a request runs, so both rules hold whatever the
order of events.
"""

import asyncio
import json
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional

from ..errors import KForgeError
from .mcp import (
    INVALID_REQUEST,
    answer_tools_method,
    call_tool_reply,
    jsonrpc_error,
    jsonrpc_result,
    list_tools_reply,
    read_jsonrpc,
    tool_error,
)
from .session import Session
from .wire import (
    EXECUTION_ERROR,
    MCP_STEP_KEYS,
    UNKNOWN_TYPE,
    VALIDATION_ERROR,
    RequestError,
    _kforge_error_data,
    _only_keys,
    parse_message,
)

Blocking = Callable[..., Awaitable[Any]]


class SessionContext:
    """What a session's loop needs from its server."""

    def __init__(self, blocking: Blocking, task_ids: List[str], tools: List[Dict[str, Any]],
                 max_message_bytes: int, reply_deadline_s: Optional[float]) -> None:
        self.blocking = blocking
        self.task_ids = task_ids
        self.tools = tools
        self.max_message_bytes = max_message_bytes
        self.reply_deadline_s = reply_deadline_s


def error_reply(e: Exception) -> Dict[str, Any]:
    if isinstance(e, RequestError):
        return {"type": "error", "data": e.data()}
    if isinstance(e, KForgeError):
        return {"type": "error", "data": _kforge_error_data(e)}
    return {"type": "error", "data": {"message": str(e), "code": VALIDATION_ERROR}}


async def handle(m: Dict[str, Any], session: Session, ctx: SessionContext) -> Dict[str, Any]:
    """The reply to one parsed message (not ``close``)."""
    kind = m.get("type")
    try:
        if kind == "reset":
            _only_keys(m, ("type", "data"), "message")
            return {"type": "observation", "data": await ctx.blocking(session.reset, m.get("data") or {}, ctx.task_ids)}
        if kind == "step":
            _only_keys(m, ("type", "data"), "message")
            if "data" not in m:
                raise RequestError(VALIDATION_ERROR, "message/data: required (the action)", "message/data")
            return {"type": "observation", "data": await step(m["data"], session, ctx)}
        if kind == "state":
            _only_keys(m, ("type",), "message")
            return {"type": "state", "data": session.state()}
        if kind == "mcp":
            _only_keys(m, ("type", "data"), "message")
            return {"type": "mcp", "data": await mcp(m.get("data"), session, ctx)}
        raise RequestError(UNKNOWN_TYPE, f"Unknown message type: {kind}; the types are reset, step, state, mcp, close",
                           "message/type")
    except (RequestError, KForgeError, ValueError, TypeError) as e:
        return error_reply(e)


async def step(data: Any, session: Session, ctx: SessionContext) -> Dict[str, Any]:
    """A step: OpenEnv's MCP actions, or an action of the environment."""
    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "list_tools":
        _only_keys(data, MCP_STEP_KEYS, "data")
        return list_tools_reply(ctx.tools)
    if kind == "call_tool":
        _only_keys(data, MCP_STEP_KEYS, "data")
        name, arguments = data.get("tool_name"), data.get("arguments", {})
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise RequestError(VALIDATION_ERROR, "data: call_tool needs tool_name (a string) and arguments (an object)",
                               "data/tool_name")
        try:
            return call_tool_reply(name, await ctx.blocking(session.call_tool, name, arguments, ctx.task_ids), None)
        except (RequestError, KForgeError, ValueError, TypeError) as e:
            return call_tool_reply(name, None, tool_error(e))
    if kind is not None:
        raise RequestError(VALIDATION_ERROR, f"data/type: {kind!r}; the MCP actions are list_tools and call_tool",
                           "data/type")
    return await ctx.blocking(session.step, data)


async def mcp(body: Any, session: Session, ctx: SessionContext) -> Dict[str, Any]:
    """A JSON-RPC request over the session's WebSocket."""
    try:
        r = read_jsonrpc(body)
    except RequestError as e:
        return jsonrpc_error(body.get("id") if isinstance(body, dict) else None, INVALID_REQUEST, str(e))
    if r["method"] == "openenv/session/create":
        return jsonrpc_result(r["id"], {"session_id": session.id})
    if r["method"] == "openenv/session/close":
        return jsonrpc_error(r["id"], INVALID_REQUEST, "this session is the WebSocket's: close the WebSocket")

    async def call(name: str, arguments: Dict[str, Any]) -> Dict[str, Any]:
        return await ctx.blocking(session.call_tool, name, arguments, ctx.task_ids)

    return await answer_tools_method(r["method"], r["params"], r["id"], ctx.tools, call)


async def read_loop(websocket: Any, inbox: "asyncio.Queue[Any]", arrived: asyncio.Event) -> None:
    """Every message of the socket into `inbox`; None when it closes."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text")
            await inbox.put(raw if raw is not None else (message.get("bytes") or b""))
            arrived.set()
    finally:
        await inbox.put(None)
        arrived.set()


async def answer_in_time(work: "asyncio.Task[Dict[str, Any]]", inbox: "asyncio.Queue[Any]", arrived: asyncio.Event,
                         deadline_s: Optional[float]) -> Optional[Dict[str, Any]]:
    """The reply to send for a running request: its own when it finishes in
    time, a ``still_running`` error at the deadline, or None (send nothing)
    when the client sent another message first."""
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    while not work.done():
        arrived.clear()  # before looking: a message put after the look sets it again
        if not inbox.empty():
            return None
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return {"type": "error", "data": {
                "code": EXECUTION_ERROR, "kforge_code": "still_running",
                "message": f"still running after {deadline_s:g} s (the server's --reply-deadline, set under OpenEnv "
                           "clients' message_timeout_s); it goes on: its effects stay in the episode (see state), and "
                           "this session's next reset or step waits for it. For longer steps raise both "
                           "message_timeout_s and --reply-deadline"}}
        waiter = asyncio.ensure_future(arrived.wait())
        await asyncio.wait({work, waiter}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    return work.result()


async def serve_session(websocket: Any, session: Session, ctx: SessionContext) -> None:
    """Reads and answers the session's messages until the socket closes or
    the client sends ``close``."""
    inbox: "asyncio.Queue[Any]" = asyncio.Queue()
    arrived = asyncio.Event()
    reader = asyncio.ensure_future(read_loop(websocket, inbox, arrived))
    try:
        while True:
            raw = await inbox.get()
            if raw is None or session.closed:
                break
            session.last_activity = time.monotonic()
            try:
                m = parse_message(raw, ctx.max_message_bytes)
            except RequestError as e:
                await websocket.send_text(json.dumps(error_reply(e)))
                continue
            if m.get("type") == "close":
                break
            reply = await run_one(m, session, ctx, inbox, arrived)
            if session.closed:
                break
            if reply is not None:
                await websocket.send_text(json.dumps(reply))
    finally:
        reader.cancel()


async def run_one(m: Dict[str, Any], session: Session, ctx: SessionContext, inbox: "asyncio.Queue[Any]",
                  arrived: asyncio.Event) -> Optional[Dict[str, Any]]:
    """Runs one request; it counts as activity until it finishes, answered
    or not."""
    session.running += 1

    def finished(done: "asyncio.Task[Dict[str, Any]]") -> None:
        session.running -= 1
        session.last_activity = time.monotonic()
        if not done.cancelled():
            done.exception()  # retrieved: a reply nobody waits for any more is not an error

    work = asyncio.ensure_future(handle(m, session, ctx))
    work.add_done_callback(finished)
    return await answer_in_time(work, inbox, arrived, ctx.reply_deadline_s)
