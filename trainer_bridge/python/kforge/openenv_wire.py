"""OpenEnv's wire format as kforge.openenv_server speaks it: bounded JSON
parsing, error codes, OpenEnv actions turned into kforge step params, kforge
results turned into OpenEnv's typed observations, and the /schema answer.
"""

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .env import END_REASONS, scored_measurement
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
STEP_KEYS = ("tool_call", "tool", "name", "arguments", "id", "action", "end", "metadata")
# OpenEnv's MCP actions as step data (mcp_types.py: ListToolsAction,
# CallToolAction), told apart by their "type".
MCP_STEP_KEYS = ("type", "tool_name", "arguments", "metadata")


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
    ``{"action": <typed kforge action>}`` from trainer code, or ``{"end":
    reason}``: the trainer ends the episode by the environment's truncation
    rule (RemoteEnv.end_episode). ``metadata`` (the OpenEnv Action base
    field) is ignored."""
    if not isinstance(action, Mapping):
        raise RequestError(VALIDATION_ERROR, f"{where}: an action is a JSON object", where)
    _only_keys(action, STEP_KEYS, where)
    given = [k for k in ("tool_call", "tool", "name", "action", "end") if k in action]
    if len(given) != 1:
        raise RequestError(
            VALIDATION_ERROR,
            f"{where}: give exactly one of tool_call, tool (or name), action and end; got {given or 'none'}",
            where,
        )
    if "end" in action:
        if action["end"] not in END_REASONS:
            raise RequestError(
                VALIDATION_ERROR, f"{where}/end: one of {', '.join(END_REASONS)}", f"{where}/end"
            )
        return {"end": action["end"]}
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


def turns_used(info: Mapping[str, Any], data: Mapping[str, Any]) -> Optional[int]:
    """Turns the episode has used after a step (0 at reset)."""
    budget = info.get("budget")
    if isinstance(budget, Mapping) and isinstance(budget.get("turns_used"), int):
        return int(budget["turns_used"])
    turn = data.get("turn")
    return turn + 1 if isinstance(turn, int) else None


def step_observation(obs: Mapping[str, Any], reward: float, terminated: bool, truncated: bool,
                     info: Mapping[str, Any], episode_id: str) -> Dict[str, Any]:
    """OpenEnv's serialized observation of a kforge step: typed fields, since
    ``metadata`` does not survive the wire."""
    data = obs.get("data") if isinstance(obs.get("data"), Mapping) else {}
    # The scored evaluation: a truncated or ended episode's final evaluation.
    measurement = scored_measurement(info)
    error = data.get("error") if isinstance(data.get("error"), Mapping) else None
    outcome = (measurement or {}).get("outcome", data.get("outcome"))
    observation = {
        "text": obs.get("text", ""),
        "data": dict(data),
        "episode_id": episode_id,
        "task_id": info.get("task_id"),
        "turn": turns_used(info, data),
        "turns_left": data.get("turns_left"),
        "reward_components": dict(info.get("reward_components") or {}),
        "measurement": measurement,
        "outcome": outcome,
        "correct": None if outcome is None else outcome == "correct",
        "speedup_eager": (measurement or {}).get("speedup_eager"),
        "terminated": terminated,
        "truncated": truncated,
        "stop_reason": _stop_reason(terminated, truncated, data),
        "error_kind": error.get("kind") if error else None,
        "error_message": error.get("message") if error else None,
    }
    return {"observation": observation, "reward": float(reward), "done": bool(terminated or truncated)}


def reset_observation(obs: Mapping[str, Any], info: Mapping[str, Any], episode_id: str,
                      ignored_keys: Optional[List[str]] = None) -> Dict[str, Any]:
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
        "ignored_keys": list(ignored_keys or []),
    }
    return {"observation": observation, "reward": None, "done": False}


def _kforge_error_data(e: KForgeError) -> Dict[str, Any]:
    d: Dict[str, Any] = {"message": f"{e.code}: {e.message}", "code": EXECUTION_ERROR, "kforge_code": e.code}
    if e.field:
        d["field"] = e.field
    return d


ACTION_SCHEMA = {
    "title": "KForgeAction",
    "type": "object",
    "description": "One of: tool_call (an OpenAI tool call), tool + arguments, action (a typed kforge action), "
                   "end (a reason), or an MCP action (type list_tools, or call_tool with tool_name and arguments).",
    "properties": {
        "tool_call": {"type": "object"},
        "tool": {"type": "string", "enum": ["compile", "verify", "profile", "submit", "analyze"]},
        "arguments": {"anyOf": [{"type": "object"}, {"type": "string"}]},
        "action": {"type": "object"},
        "end": {"type": "string", "enum": list(END_REASONS),
                "description": "end the episode by the environment's truncation rule"},
        "type": {"type": "string", "enum": ["list_tools", "call_tool"], "description": "OpenEnv MCP actions"},
        "tool_name": {"type": "string"},
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
        "turn": {"type": ["integer", "null"], "description": "turns used so far (0 at reset)"},
        "turns_left": {"type": ["integer", "null"]},
        "reward_components": {"type": "object", "additionalProperties": {"type": "number"}},
        "measurement": {"type": ["object", "null"]},
        "outcome": {"type": ["string", "null"]},
        "correct": {"type": ["boolean", "null"]},
        "speedup_eager": {"type": ["number", "null"]},
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "stop_reason": {"type": ["string", "null"],
                        "enum": [None, "submitted", "max_turns", "time_budget", *END_REASONS]},
        "ignored_keys": {"type": "array", "description": "reset only: reset keys this environment does not take"},
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
