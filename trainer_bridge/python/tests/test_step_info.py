"""kforge.StepInfo against what the C++ side writes: the recorded trajectory
files tests/rollout/trajectory_info_test.cpp reads (tests/rollout/replay/data),
a live step of ``kforge serve``, and the OpenEnv schema generated from the
dataclasses."""

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from conftest import REPO, small_task
from kforge import Measurement, RemoteEnv, ResetInfo, StepInfo, StepInfoError
from kforge.openenv.wire import (ACTION_SCHEMA, MCP_STEP_KEYS, OBSERVATION_SCHEMA, STATE_SCHEMA, STEP_KEYS, OpenEnvAction,
                                 OpenEnvObservation, OpenEnvState, step_observation, tool_call_of)
from kforge.step_info import FinalEvaluation, StepBudget, json_schema

RECORDED = REPO / "tests" / "rollout" / "replay" / "data"
# The same files as the C++ test: worker-written ones (schema 1 and later) and
# the replay recorder's (schema 1 and 2).
FILES = [
    "schema_v1/rollout-turn-budget.jsonl",
    "baseline_policy/rollout-baseline-policy.jsonl",
    "schema_v1/replay-episodes.jsonl",
    "schema_v2/replay-episodes.jsonl",
]


def recorded_step_infos() -> Iterator[Dict[str, Any]]:
    for name in FILES:
        with open(RECORDED / name, encoding="utf-8") as f:
            for line in f:
                trajectory = json.loads(line)
                for turn in trajectory["turns"]:
                    env = (turn.get("info") or {}).get("env")
                    if env is not None:
                        yield env


def test_every_recorded_step_info_reads_and_writes_back_the_same_json() -> None:
    infos = list(recorded_step_infos())
    assert len(infos) >= 10
    outcomes = set()
    for env in infos:
        info = StepInfo.from_dict(env)
        assert info.to_dict() == env
        # The same JSON text, as the C++ writer's sorted keys give it.
        assert json.dumps(info.to_dict(), sort_keys=True) == json.dumps(env, sort_keys=True)
        assert info.reward_components["total"] == env["reward_components"]["total"]
        assert info.budget.turns_used == env["budget"]["turns_used"]
        outcomes.add(info.scored_measurement().outcome)
    # The files hold passing and failing steps, so the test reads both.
    assert "correct" in outcomes and len(outcomes) >= 2


def test_every_key_the_cpp_side_writes_is_a_field() -> None:
    names = {f.name for f in dataclasses.fields(StepInfo)}
    measurement_names = {f.name for f in dataclasses.fields(Measurement)}
    for env in recorded_step_infos():
        assert set(env) <= names, set(env) - names
        assert set(env["measurement"]) <= measurement_names, set(env["measurement"]) - measurement_names


def test_wrong_types_raise_naming_the_field() -> None:
    with pytest.raises(StepInfoError, match=r"info/budget/turns_used: expected an integer, got 'one'"):
        StepInfo.from_dict({"budget": {"turns_used": "one"}})
    with pytest.raises(StepInfoError, match=r"info/final_evaluation/measurement/speedup_eager: expected a number"):
        StepInfo.from_dict({"final_evaluation": {"measurement": {"speedup_eager": "fast"}}})
    with pytest.raises(StepInfoError, match=r"turn 3/error: expected an object"):
        StepInfo.from_dict({"error": "bad"}, where="turn 3")
    with pytest.raises(StepInfoError, match=r"info/reward_components/tiered: expected a number"):
        StepInfo.from_dict({"reward_components": {"total": 1.0, "tiered": True}})
    with pytest.raises(StepInfoError, match=r"info: expected an object"):
        StepInfo.from_dict([])  # type: ignore[arg-type]


def test_a_reset_info_names_its_wrong_fields_too() -> None:
    with pytest.raises(StepInfoError, match=r"info/budgets/max_turns: expected an integer"):
        ResetInfo.from_dict({"budgets": {"max_turns": 2.5}})
    resumed = {"turns_used": 2, "time_used_s": 1.5, "compile_errors": 0, "episode_return": 0.5, "has_solution": True}
    info = ResetInfo.from_dict({"task_id": "t", "resumed": resumed, "reference_check": {"status": "ok"}})
    assert info.resumed is not None and info.resumed.turns_used == 2
    assert info.to_dict()["resumed"] == resumed and info.to_dict()["reference_check"] == {"status": "ok"}


def test_missing_keys_read_as_defaults_and_unknown_keys_are_ignored() -> None:
    info = StepInfo.from_dict({"turn": 2, "a_key_of_a_later_version": {"x": 1}})
    assert info.turn == 2 and info.budget == StepBudget() and info.error is None
    assert info.scored_measurement().outcome == "not_run"
    # JSON has no NaN: a non-finite timing was written null and reads as NaN.
    assert math.isnan(StepInfo.from_dict({"timings": {"step_ms": None}}).timings.step_ms)


def test_a_truncated_episode_is_judged_on_its_final_evaluation() -> None:
    info = StepInfo(measurement=Measurement(outcome="wrong"),
                    final_evaluation=FinalEvaluation(auto_submitted=True,
                                                     measurement=Measurement(outcome="correct", speedup_eager=1.5)))
    assert info.scored_measurement().outcome == "correct"
    back = StepInfo.from_dict(json.loads(json.dumps(info.to_dict())))
    assert back == info


def test_the_openenv_schema_is_generated_from_the_dataclasses() -> None:
    observation = OBSERVATION_SCHEMA["properties"]
    assert set(observation) == {f.name for f in dataclasses.fields(OpenEnvObservation)}
    assert set(STATE_SCHEMA["properties"]) == {f.name for f in dataclasses.fields(OpenEnvState)}
    # The measurement's schema is the Measurement dataclass's.
    assert observation["measurement"]["type"] == ["object", "null"]
    assert observation["measurement"]["properties"] == json_schema(Measurement)["properties"]
    assert observation["measurement"]["properties"]["speedup_eager"]["type"] == ["number", "null"]
    assert observation["stop_reason"]["enum"][:2] == [None, "submitted"]
    assert observation["messages"]["type"] == "array", "reset only: left out of a step, never null"
    assert observation["turn"]["description"] == "turns used so far (0 at reset)"
    assert STATE_SCHEMA["properties"]["step_count"] == {"type": "integer", "minimum": 0}


def test_the_action_schema_publishes_exactly_the_keys_an_action_may_have() -> None:
    # Generated from OpenEnvAction: every key the readers accept is published,
    # and nothing else (additionalProperties false), so a client that
    # validates against /schema accepts what the server does.
    published = set(ACTION_SCHEMA["properties"])
    assert published == {f.name for f in dataclasses.fields(OpenEnvAction)}
    assert published == set(STEP_KEYS) | set(MCP_STEP_KEYS)
    assert ACTION_SCHEMA["additionalProperties"] is False
    arguments = ACTION_SCHEMA["properties"]["arguments"]
    assert arguments["anyOf"] == [{"type": "object"}, {"type": "string"}], "never null: left out when not given"
    assert ACTION_SCHEMA["properties"]["name"]["enum"] == ACTION_SCHEMA["properties"]["tool"]["enum"]
    assert tool_call_of({"name": "verify", "arguments": "{}", "id": "c1"}) == {
        "tool_call": {"name": "verify", "arguments": "{}"}}


def test_a_step_observation_carries_exactly_the_schemas_keys() -> None:
    env = next(e for e in recorded_step_infos() if e["measurement"]["outcome"] == "correct")
    obs = {"text": "t", "data": {"turns_left": 1}}
    out = step_observation(obs, 1.0, True, False, StepInfo.from_dict(env), "ep")["observation"]
    reset_only = {"messages", "tools", "seed", "ignored_keys"}
    assert set(out) == set(OBSERVATION_SCHEMA["properties"]) - reset_only
    assert out["measurement"] == env["measurement"] and out["outcome"] == "correct" and out["correct"] is True
    assert out["turn"] == env["budget"]["turns_used"] and out["stop_reason"] == "submitted"


def test_a_live_step_reads_as_a_step_info(server: Any) -> None:
    with RemoteEnv(server.endpoint) as env:
        _, raw_reset = env.reset(task=small_task(), seed=3)
        reset = ResetInfo.from_dict(raw_reset)
        assert reset.to_dict() == raw_reset
        assert reset.seed == 3 and reset.task_id == small_task()["id"] and reset.budgets.max_turns > 0
        assert reset.reference_check.status == "ok" and reset.resumed is None
        _, reward, _, _, raw = env.step({"name": "verify", "arguments": {"source": "this is not C++"}})
        info = StepInfo.from_dict(raw)
        assert info.to_dict() == raw
        assert info.seed == 3 and info.action == "verify" and info.turn == 0
        assert info.reward_components["total"] == reward
        assert info.scored_measurement().outcome == "compile_error"
