"""OpenEnv's MCP tool interface as kforge.openenv.server speaks it.

Read from OpenEnv's source (meta-pytorch/OpenEnv at 685de41:
``src/openenv/core/mcp_client.py``, ``env_server/mcp_types.py``,
``env_server/http_server.py``'s ``mcp_handler``): tools are listed as
``{"name", "description", "input_schema"}`` and called by name with keyword
arguments, three ways:

- a ``step`` whose data is ``{"type": "list_tools"}`` or ``{"type":
  "call_tool", "tool_name", "arguments"}`` (``MCPToolClient``'s default):
  the observation has ``tools`` (a list) or ``tool_name``, ``result`` and
  ``error`` (``{"error_type", "message"}``, which the client raises);
- a WebSocket message ``{"type": "mcp", "data": <JSON-RPC request>}``,
  answered ``{"type": "mcp", "data": <JSON-RPC response>}``;
- ``POST /mcp`` with a JSON-RPC request (production mode), with OpenEnv's
  ``openenv/session/create`` and ``openenv/session/close`` to hold a session
  across requests (``session_id`` in the params).

Methods: ``tools/list`` (no episode needed), ``tools/call``. The tools are the
environment's (``compile``, ``verify``, ``profile``, ``submit``, analysis
tools), each one environment step of the session's episode, plus
``start_episode`` (``task_id``, ``seed``: a reset, for MCP-only clients that
never send one; ``reset`` itself is a name OpenEnv reserves) and
``end_episode`` (``reason``: the environment's truncation rule). A tool
call's result is ``{"content": [{"type": "text", "text"}], "data":
{"observation", "reward", "done"}, "isError"}``: ``data`` is the step reply
(``MCPToolClient.call_tool`` returns it), ``text`` what the policy reads.
"""

from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional

from ..env import END_REASONS
from ..errors import KForgeError
from .wire import RequestError, _kforge_error_data

# JSON-RPC 2.0 error codes (mcp_types.py, JsonRpcErrorCode).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000

START_EPISODE = {
    "name": "start_episode",
    "description": "Starts a new episode (a kernel task) and returns its prompt: the task, the kernel ABI and the "
                   "tools. Without task_id, the seed picks a task of the server's set.",
    "input_schema": {"type": "object", "properties": {
        "task_id": {"type": "string", "description": "an id of the server's task set"},
        "seed": {"type": "integer", "minimum": 0, "description": "selects the verification inputs"}},
        "additionalProperties": False},
}
END_EPISODE = {
    "name": "end_episode",
    "description": "Ends the episode without a submit: the most recent solution is scored as the submission "
                   "(none: a failed submission), as when the turns run out.",
    "input_schema": {"type": "object", "properties": {
        "reason": {"type": "string", "enum": list(END_REASONS)}}, "additionalProperties": False},
}
SESSION_TOOLS = ("start_episode", "end_episode")


def mcp_tools(openai_tools: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """OpenEnv's Tool list from the environment's OpenAI tool definitions."""
    out = []
    for t in openai_tools:
        f = t.get("function", t) if isinstance(t, Mapping) else {}
        out.append({"name": str(f.get("name", "")), "description": str(f.get("description", "")),
                    "input_schema": dict(f.get("parameters") or {"type": "object"})})
    return out + [dict(START_EPISODE), dict(END_EPISODE)]


def list_tools_reply(tools: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A step reply holding ListToolsObservation's fields."""
    return {"observation": {"tools": tools}, "reward": None, "done": False}


def tool_result(reply: Mapping[str, Any]) -> Dict[str, Any]:
    """An MCP tool result from a step (or reset) reply."""
    text = str(reply.get("observation", {}).get("text", ""))
    return {"content": [{"type": "text", "text": text}], "data": dict(reply), "isError": False}


def call_tool_reply(name: str, reply: Optional[Mapping[str, Any]], error: Optional[Dict[str, str]]) -> Dict[str, Any]:
    """A step reply holding CallToolObservation's fields (``tool_name``,
    ``result``, ``error``) next to the typed observation."""
    observation: Dict[str, Any] = dict((reply or {}).get("observation") or {})
    observation.pop("tools", None)  # "tools" would make OpenEnv's client read a tool list
    observation.update({"tool_name": name, "result": tool_result(reply) if reply is not None else None,
                        "error": error})
    return {"observation": observation, "reward": (reply or {}).get("reward"), "done": bool((reply or {}).get("done"))}


def tool_error(e: Exception) -> Dict[str, str]:
    """OpenEnv's ToolError of a failed call."""
    if isinstance(e, RequestError):
        return {"error_type": "invalid_args", "message": str(e)}
    if isinstance(e, KForgeError):
        return {"error_type": "execution_error", "message": _kforge_error_data(e)["message"]}
    return {"error_type": "execution_error", "message": str(e)}


def jsonrpc_result(request_id: Any, result: Any) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def jsonrpc_error(request_id: Any, code: int, message: str, data: Any = None) -> Dict[str, Any]:
    error: Dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def read_jsonrpc(body: Any) -> Dict[str, Any]:
    """The request's method, params and id; RequestError (an Invalid Request
    answer) when it is not a JSON-RPC 2.0 request."""
    if not isinstance(body, Mapping) or body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        raise RequestError("INVALID_REQUEST", "Invalid Request: a JSON-RPC 2.0 request has jsonrpc \"2.0\" and a method")
    params = body.get("params", {})
    if not isinstance(params, Mapping):
        raise RequestError("INVALID_PARAMS", "Params must be an object")
    request_id = body.get("id")
    if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        raise RequestError("INVALID_REQUEST", "Invalid Request: id is a string or an integer")
    return {"method": body["method"], "params": dict(params), "id": request_id}


# A tool call on a session: (name, arguments) -> step reply; raises RequestError
# or KForgeError.
CallTool = Callable[[str, Dict[str, Any]], Awaitable[Dict[str, Any]]]


async def answer_tools_method(method: str, params: Mapping[str, Any], request_id: Any,
                              tools: List[Dict[str, Any]], call: Optional[CallTool]) -> Dict[str, Any]:
    """tools/list and tools/call for one session (``call`` None: no session)."""
    if method == "tools/list":
        return jsonrpc_result(request_id, {"tools": tools})
    if method != "tools/call":
        return jsonrpc_error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}; the methods are "
                             "tools/list, tools/call, openenv/session/create, openenv/session/close")
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not name:
        return jsonrpc_error(request_id, INVALID_PARAMS, "Missing 'name' in params")
    if not isinstance(arguments, Mapping):
        return jsonrpc_error(request_id, INVALID_PARAMS, "params/arguments: an object")
    if call is None:
        return jsonrpc_error(request_id, INVALID_PARAMS, "tools/call needs a session: give params.session_id "
                             "(openenv/session/create), or call over the WebSocket /ws")
    try:
        return jsonrpc_result(request_id, tool_result(await call(name, dict(arguments))))
    except (RequestError, KForgeError, ValueError, TypeError) as e:
        return jsonrpc_error(request_id, SERVER_ERROR, tool_error(e)["message"])
