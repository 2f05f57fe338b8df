"""OpenEnv's wire format as kforge.openenv.server speaks it: bounded JSON
parsing, error codes, OpenEnv actions turned into kforge step params, kforge
results turned into OpenEnv's typed observations, and the /schema answer.
"""

import json
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..env import END_REASONS
from ..errors import KForgeError
from ..step_info import Measurement, ResetInfo, StepInfo, doc, json_schema

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


STOP_REASONS = (None, "submitted", "max_turns", "time_budget", *END_REASONS)


@dataclass
class OpenEnvObservation:
    """The observation of a reset or a step as the OpenEnv server sends it:
    typed fields, since OpenEnv's ``metadata`` does not survive the wire.
    OBSERVATION_SCHEMA is generated from it."""

    text: str = ""
    data: Dict[str, Any] = doc("docs/environment.md, 'Observation data'", default_factory=dict)
    episode_id: str = ""
    task_id: Optional[str] = None
    turn: Optional[int] = doc("turns used so far (0 at reset)", default=None)
    turns_left: Optional[int] = None
    reward_components: Dict[str, float] = doc("what the step paid: total (= reward) and each term",
                                              default_factory=dict)
    measurement: Optional[Measurement] = doc("the scored evaluation: the step's, or an ended episode's final one",
                                             default=None)
    outcome: Optional[str] = None
    correct: Optional[bool] = None
    speedup_eager: Optional[float] = None
    terminated: bool = False
    truncated: bool = False
    stop_reason: Optional[str] = field(default=None, metadata={"enum": STOP_REASONS})
    error_kind: Optional[str] = None
    error_message: Optional[str] = None
    # Reset only: absent from a step's observation.
    messages: Optional[List[Any]] = field(default=None, metadata={"doc": "reset only: the chat prompt",
                                                                  "absent_when_none": True})
    tools: Optional[List[Any]] = field(default=None, metadata={"doc": "reset only: OpenAI tool definitions",
                                                               "absent_when_none": True})
    seed: Optional[int] = field(default=None, metadata={"absent_when_none": True})
    ignored_keys: Optional[List[str]] = field(default=None, metadata={
        "doc": "reset only: reset keys this environment does not take", "absent_when_none": True})

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("absent_when_none"):
                continue
            out[f.name] = value.to_dict() if isinstance(value, Measurement) else value
        return out


def step_observation(obs: Mapping[str, Any], reward: float, terminated: bool, truncated: bool,
                     info: StepInfo, episode_id: str) -> Dict[str, Any]:
    """OpenEnv's serialized observation of a kforge step."""
    data = obs.get("data") if isinstance(obs.get("data"), Mapping) else {}
    measurement = info.scored_measurement()
    stop_reason = "submitted" if terminated else (info.truncation_reason or "truncated") if truncated else None
    observation = OpenEnvObservation(
        text=obs.get("text", ""),
        data=dict(data),
        episode_id=episode_id,
        task_id=info.task_id,
        turn=info.budget.turns_used,
        turns_left=data.get("turns_left"),
        reward_components=dict(info.reward_components),
        measurement=measurement,
        outcome=measurement.outcome,
        correct=measurement.outcome == "correct",
        speedup_eager=measurement.speedup_eager,
        terminated=terminated,
        truncated=truncated,
        stop_reason=stop_reason,
        error_kind=info.error.kind if info.error else None,
        error_message=info.error.message if info.error else None,
    )
    return {"observation": observation.to_dict(), "reward": float(reward), "done": bool(terminated or truncated)}


def reset_observation(obs: Mapping[str, Any], info: ResetInfo, episode_id: str,
                      ignored_keys: Optional[List[str]] = None) -> Dict[str, Any]:
    data = obs.get("data") if isinstance(obs.get("data"), Mapping) else {}
    observation = OpenEnvObservation(
        text=obs.get("text", ""),
        data=dict(data),
        messages=list(data.get("messages", [])),
        tools=list(data.get("tools", [])),
        episode_id=episode_id,
        task_id=info.task_id,
        seed=info.seed,
        turn=0,
        turns_left=(data.get("budgets") or {}).get("max_turns"),
        ignored_keys=list(ignored_keys or []),
    )
    return {"observation": observation.to_dict(), "reward": None, "done": False}


def _kforge_error_data(e: KForgeError) -> Dict[str, Any]:
    d: Dict[str, Any] = {"message": f"{e.code}: {e.message}", "code": EXECUTION_ERROR, "kforge_code": e.code}
    if e.field:
        d["field"] = e.field
    return d


TOOL_NAMES = ("compile", "verify", "profile", "submit", "analyze")


def _absent(doc_text: str, **more: Any) -> Any:
    """An action field: absent unless given, so never null on the wire."""
    return field(default=None, metadata={"absent_when_none": True, "doc": doc_text, **more})


@dataclass
class OpenEnvAction:
    """POST /step's action and the WebSocket step's data. Exactly one of
    tool_call, tool (or name) with arguments, action and end; or an MCP action
    (type list_tools, or call_tool with tool_name and arguments). tool_call_of
    and the MCP reader check that rule; ACTION_SCHEMA is generated from the
    fields, so the keys published and the keys read cannot drift apart."""

    tool_call: Optional[Dict[str, Any]] = _absent("an OpenAI tool call")
    tool: Optional[str] = _absent("a tool's name, with arguments", enum=TOOL_NAMES)
    name: Optional[str] = _absent("the same as tool", enum=TOOL_NAMES)
    arguments: Optional[Union[Dict[str, Any], str]] = _absent("the tool's arguments: an object or a JSON string")
    id: Optional[Any] = _absent("the tool call's id; ignored")
    action: Optional[Dict[str, Any]] = _absent("a typed kforge action (trainer code)")
    end: Optional[str] = _absent("end the episode by the environment's truncation rule", enum=END_REASONS)
    type: Optional[str] = _absent("OpenEnv MCP actions", enum=("list_tools", "call_tool"))
    tool_name: Optional[str] = _absent("call_tool: the tool's name")
    metadata: Optional[Dict[str, Any]] = _absent("OpenEnv's Action base field; ignored")


ACTION_SCHEMA = {
    **json_schema(OpenEnvAction, "KForgeAction"),
    "description": "One of: tool_call (an OpenAI tool call), tool (or name) + arguments, action (a typed kforge "
                   "action), end (a reason), or an MCP action (type list_tools, or call_tool with tool_name and "
                   "arguments).",
    "additionalProperties": False,
}


@dataclass
class OpenEnvState:
    """GET /state and the session's state: the episode so far. STATE_SCHEMA
    is generated from it."""

    episode_id: Optional[str] = None
    step_count: int = field(default=0, metadata={"minimum": 0})
    task_id: Optional[str] = None
    seed: Optional[int] = None
    total_reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    stop_reason: Optional[str] = None
    env_id: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# /schema: generated from the dataclasses above, so what is published and
# what is sent cannot drift apart.
OBSERVATION_SCHEMA = json_schema(OpenEnvObservation, "KForgeObservation")
STATE_SCHEMA = json_schema(OpenEnvState, "KForgeState")
