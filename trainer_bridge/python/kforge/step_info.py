"""A step's ``info``, typed: the Python twin of the C++ ``StepInfo``
(env/include/kforge/env/step_info.h), which the env server sends as the
``info`` of every step reply and the rollout workers record as each turn's
``info.env`` (docs/environment.md, "Info").

    info = StepInfo.from_dict(reply_info)          # or from a recorded turn's info["env"]
    info.scored_measurement().outcome, info.budget.turns_used, info.reward_components["total"]
    info.to_dict() == reply_info                   # for every info the server writes

Reading follows the C++ reader: a missing key reads as its default, a key this
version does not know is ignored, and a value of the wrong type raises
``StepInfoError`` naming the field ("info/budget/turns_used: expected an
integer, got 'one'"). ``to_dict`` writes what the C++ ``to_json`` writes, key
for key, so an info read and written again is the same JSON.

The dataclasses' field types drive both the reader and ``json_schema``, which
generates the JSON Schema the OpenEnv server publishes (kforge.openenv.wire):
one source for the fields, their types and their descriptions
(``field(metadata={"doc": ...})``). Standard library only.
"""

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple


class StepInfoError(ValueError):
    """A step info (or a part of one) whose value has the wrong type; names the field."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.field = where


def doc(text: str, **kwargs: Any) -> Any:
    """A dataclass field with its description, for json_schema."""
    return field(metadata={"doc": text}, **kwargs)


@dataclass
class Violation:
    check: str = ""
    detail: str = ""


@dataclass
class Measurement:
    """What a step measured (core/include/kforge/core/measurement.h)."""

    action: str = doc("compile | verify | profile | submit | analyze | invalid", default="")
    compiled: bool = False
    outcome: str = doc("correct | wrong | compile_error | crash | timeout | ... | not_run", default="not_run")
    correct: bool = False
    timed: bool = doc("timing ran and produced numbers", default=False)
    turn: int = 0
    compile_errors_so_far: int = 0
    candidate_ms: Optional[float] = doc("median time of the candidate", default=None)
    eager_ms: Optional[float] = doc("eager PyTorch, measured in the same run", default=None)
    compile_ms: Optional[float] = doc("the torch.compile baseline, scaled to this run", default=None)
    speedup_eager: Optional[float] = doc("eager_ms / candidate_ms", default=None)
    speedup_compile: Optional[float] = None
    speedup_eager_lo: Optional[float] = doc("the eager speedup's confidence interval", default=None)
    speedup_eager_hi: Optional[float] = None
    speedup_confidence: Optional[float] = None
    own_kernel_fraction: Optional[float] = None
    energy_j: Optional[float] = None
    violations: List[Violation] = field(default_factory=list)

    @classmethod
    def from_dict(cls, measurement: Mapping[str, Any], where: str = "measurement") -> "Measurement":
        return _read(cls, measurement, where)

    def to_dict(self) -> Dict[str, Any]:
        return _write(self)


@dataclass
class StepError:
    """Why the step could not do what was asked."""

    kind: str = doc("invalid_action | no_solution | episode_finished | system", default="system")
    message: str = ""


@dataclass
class StepTimings:
    """Where the step's time went, in milliseconds."""

    queue_ms: float = 0.0
    compile_ms: float = 0.0
    compile_wait_ms: float = 0.0
    eval_ms: float = 0.0
    eval_phases: Dict[str, float] = field(default_factory=dict)
    analysis_ms: float = 0.0
    step_ms: float = 0.0
    env_ms: float = 0.0
    charged_ms: float = 0.0


@dataclass
class StepBudget:
    """The episode's budgets after the step."""

    turns_used: int = 0
    max_turns: int = 0
    time_used_s: float = 0.0
    time_budget_s: float = 0.0
    compile_errors: int = 0


@dataclass
class FinalEvaluation:
    """A truncated episode's final evaluation: its latest solution scored as
    the submission (auto_submitted), or a failed submission."""

    auto_submitted: bool = False
    measurement: Measurement = field(default_factory=Measurement)
    eval_ms: Optional[float] = None
    eval_report: Optional[Dict[str, Any]] = None
    system_error: Optional[str] = None


# Keys to_dict leaves out when they hold the given value, as the C++ writer
# does (its optional keys); every other key is always written, null included.
_OMITTED_WHEN = {
    "StepInfo": {"tool_call": None, "tool_call_preview": None, "eval_report": None, "final_evaluation": None,
                 "truncation_reason": ""},
    "FinalEvaluation": {"eval_ms": None, "eval_report": None, "system_error": None},
    "ResetInfo": {"resumed": None},
    "ReferenceCheck": {"problem": None},
    "Measurement": {name: None for name in (
        "candidate_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile", "speedup_eager_lo",
        "speedup_eager_hi", "speedup_confidence", "own_kernel_fraction", "energy_j")},
}


@dataclass
class StepInfo:
    """Everything a step established besides its observation."""

    env_id: int = -1
    episode: int = doc("episode number on this env", default=0)
    task_id: str = ""
    seed: int = doc("the reset seed", default=0)
    turn: int = doc("0-based index of the step in the episode", default=0)
    action: str = doc("compile | verify | profile | submit | analyze | invalid | end", default="")
    counted_turn: bool = doc("system errors and steps after the end are not turns", default=False)
    final: bool = doc("the episode ended with this step", default=False)
    reward_components: Dict[str, float] = doc("what the step paid: total and each term",
                                              default_factory=lambda: {"total": 0.0})
    step_reward: Dict[str, float] = doc("the step's own measurement scored in full, paid or not ({} when not a turn)",
                                        default_factory=dict)
    measurement: Measurement = field(default_factory=Measurement)
    timings: StepTimings = field(default_factory=StepTimings)
    cache_hit: bool = False
    solution_hash: str = ""
    episode_return: float = 0.0
    budget: StepBudget = field(default_factory=StepBudget)
    error: Optional[StepError] = None
    tool_call: Any = doc("the tool call as received, when its JSON text is at most 4 KiB", default=None)
    tool_call_preview: Any = None
    eval_report: Optional[Dict[str, Any]] = doc("the judge's report, when it ran", default=None)
    final_evaluation: Optional[FinalEvaluation] = None
    truncation_reason: str = doc("max_turns | time_budget | an end reason, when this step truncated", default="")

    @classmethod
    def from_dict(cls, info: Mapping[str, Any], where: str = "info") -> "StepInfo":
        return _read(cls, info, where)

    def to_dict(self) -> Dict[str, Any]:
        return _write(self)

    @property
    def system_error(self) -> bool:
        return self.error is not None and self.error.kind == "system"

    def scored_measurement(self) -> Measurement:
        """The measurement the episode's verdict is about: a truncated or
        ended episode's final evaluation, else the step's own."""
        return self.final_evaluation.measurement if self.final_evaluation else self.measurement


@dataclass
class ResetBudgets:
    max_turns: int = 0
    time_budget_s: float = 0.0


@dataclass
class ResetReward:
    function: str = ""
    source: str = ""


@dataclass
class Resumed:
    """What a reset with ``resume`` restored."""

    turns_used: int = 0
    time_used_s: float = 0.0
    compile_errors: int = 0
    episode_return: float = 0.0
    has_solution: bool = False


@dataclass
class ReferenceCheck:
    status: str = doc("ok, or error when the check could not run (the episode starts anyway)", default="ok")
    problem: Optional[str] = None


@dataclass
class ResetInfo:
    """A reset's info: the Python twin of the C++ ``ResetInfo``
    (env/include/kforge/env/step_result.h), the ``info`` of the server's reset
    reply. Read and written like StepInfo."""

    env_id: int = -1
    episode: int = 0
    task_id: str = ""
    seed: int = 0
    backend: str = ""
    solution_mode: str = ""
    budgets: ResetBudgets = field(default_factory=ResetBudgets)
    tools: List[Any] = field(default_factory=list)
    reward: ResetReward = field(default_factory=ResetReward)
    reward_components: Dict[str, float] = field(default_factory=lambda: {"total": 0.0})
    resumed: Optional[Resumed] = None
    reference_check: ReferenceCheck = field(default_factory=ReferenceCheck)

    @classmethod
    def from_dict(cls, info: Mapping[str, Any], where: str = "info") -> "ResetInfo":
        return _read(cls, info, where)

    def to_dict(self) -> Dict[str, Any]:
        return _write(self)


# --- reading and writing, driven by the field types ---------------------------------------------

_NONE = type(None)


def _optional_of(tp: Any) -> Tuple[Any, bool]:
    """(T, True) for Optional[T], (tp, False) otherwise."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not _NONE]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _read_value(tp: Any, value: Any, where: str) -> Any:
    inner, optional = _optional_of(tp)
    if value is None:
        if optional or tp is Any:
            return None
        if inner is float:  # JSON has no NaN: a non-finite number was written null
            return math.nan
        raise StepInfoError(where, "expected a value, got null")
    tp = inner
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _read(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise StepInfoError(where, f"expected true or false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise StepInfoError(where, f"expected an integer, got {_describe(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise StepInfoError(where, f"expected a number, got {_describe(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise StepInfoError(where, f"expected a string, got {_describe(value)}")
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, Dict):
        if not isinstance(value, Mapping):
            raise StepInfoError(where, f"expected an object, got {_describe(value)}")
        return {str(k): _read_value(args[1], v, f"{where}/{k}") for k, v in value.items()}
    if origin in (list, List):
        if not isinstance(value, list):
            raise StepInfoError(where, f"expected an array, got {_describe(value)}")
        return [_read_value(args[0], v, f"{where}/{i}") for i, v in enumerate(value)]
    raise TypeError(f"{where}: no reader for {tp!r}")


def _read(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise StepInfoError(where, f"expected an object, got {_describe(data)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        values[f.name] = _read_value(hints[f.name], data[f.name], f"{where}/{f.name}")
    return cls(**values)


def _write_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return _write(value)
    if isinstance(value, dict):
        return {k: _write_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_write_value(v) for v in value]
    return value


def _is_absent(value: Any, absent: Any) -> bool:
    return value is None if absent is None else isinstance(value, str) and value == absent


def _write(obj: Any) -> Dict[str, Any]:
    omitted = _OMITTED_WHEN.get(type(obj).__name__, {})
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in omitted and _is_absent(value, omitted[f.name]):
            continue
        out[f.name] = _write_value(value)
    return out


# --- JSON Schema ----------------------------------------------------------------------------------

def _without_none(tp: Any) -> Any:
    """tp without None among its alternatives (a field left out when None)."""
    if typing.get_origin(tp) is typing.Union:
        args = tuple(a for a in typing.get_args(tp) if a is not _NONE)
        return args[0] if len(args) == 1 else typing.Union[args]
    return tp


def _schema_of(tp: Any) -> Dict[str, Any]:
    inner, optional = _optional_of(tp)
    if inner is Any:
        return {}
    if typing.get_origin(inner) is typing.Union:  # several alternatives
        args = typing.get_args(inner)
        schema = {"anyOf": [_schema_of(a) for a in args if a is not _NONE]}
        if _NONE in args:
            schema["anyOf"].append({"type": "null"})
        return schema
    if dataclasses.is_dataclass(inner):
        schema = json_schema(inner)
    elif inner is bool:
        schema = {"type": "boolean"}
    elif inner is int:
        schema = {"type": "integer"}
    elif inner is float:
        schema = {"type": "number"}
    elif inner is str:
        schema = {"type": "string"}
    elif typing.get_origin(inner) in (dict, Dict):
        schema = {"type": "object"}
        value_schema = _schema_of(typing.get_args(inner)[1])
        if value_schema:
            schema["additionalProperties"] = value_schema
    elif typing.get_origin(inner) in (list, List):
        schema = {"type": "array"}
        item_schema = _schema_of(typing.get_args(inner)[0])
        if item_schema:
            schema["items"] = item_schema
    else:
        raise TypeError(f"no JSON Schema for {inner!r}")
    if optional and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    return schema


def json_schema(cls: Any, title: Optional[str] = None) -> Dict[str, Any]:
    """The JSON Schema of a dataclass: an object with a property per field,
    typed from its annotation, described from its ``doc`` metadata, with its
    ``enum`` and ``minimum`` metadata when it has them; a field with
    ``absent_when_none`` (left out rather than sent null) is not nullable."""
    hints = typing.get_type_hints(cls)
    properties: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        # A field left out when None (rather than sent null) is never null on the wire.
        schema = _schema_of(_without_none(tp) if f.metadata.get("absent_when_none") else tp)
        for key in ("enum", "minimum"):
            if key in f.metadata:
                schema[key] = list(f.metadata[key]) if key == "enum" else f.metadata[key]
        if "doc" in f.metadata:
            schema["description"] = f.metadata["doc"]
        properties[f.name] = schema
    out: Dict[str, Any] = {"type": "object", "properties": properties}
    if title:
        out = {"title": title, **out}
    return out
