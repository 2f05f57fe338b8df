"""kforge.trainers.trl.KForgeToolEnv driven the way TRL's GRPOTrainer drives an
``environment_factory`` (huggingface/trl at f2cd577, 1.10.0.dev0,
trl/trainer/grpo_trainer.py): probe an instance for ``reset``, ``get_reward``
and its public methods as tools; pool and reuse instances; ``reset(**row)``
whose string is appended to the row's last user message; tools called with
the model's arguments as keywords, ``str(result)`` as the tool message, an
exception as ``{"error": ...}``; ``get_reward()`` once per rollout. Against a
real ``kforge serve``."""

from __future__ import annotations

import asyncio
import inspect
import time
from functools import partial
from typing import Any, Callable, Dict, List

import pytest

from conftest import EXAMPLES, SMALL_AFFINE_ID, source, start_server

from kforge import KForgeError, RemoteEnv
from kforge.trainers.trl import KForgeToolEnv

AFFINE = EXAMPLES / "affine_relu6"
FAST, WRONG = source(AFFINE / "cpu" / "fast.cpp"), source(AFFINE / "cpu" / "wrong.cpp")


def probe(instance: Any) -> Dict[str, Callable[..., Any]]:
    """GRPOTrainer.__init__'s probe: reset required; public methods but reset
    and get_reward are tools, each with what transformers' get_json_schema
    needs (annotated arguments, an Args: section naming each); a coroutine
    get_reward is awaited (both trainers accept one)."""
    methods = dict(inspect.getmembers(instance, predicate=inspect.ismethod))
    assert "reset" in methods and "get_reward" in methods
    assert inspect.iscoroutinefunction(methods["get_reward"])
    tools = {n: m for n, m in methods.items() if n not in ("reset", "get_reward") and not n.startswith("_")}
    for name, method in tools.items():
        doc = inspect.getdoc(method) or ""
        assert doc.splitlines()[0], f"{name} needs a description"
        for p in inspect.signature(method).parameters.values():
            assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name}) needs a type"
            assert f"{p.name}:" in doc.split("Args:")[1], f"{name}'s docstring must describe {p.name}"
    return tools


def rollout(env: Any, tools: Dict[str, Callable[..., Any]], row: Dict[str, Any], calls: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """_generate_and_score_completions + _tool_call_loop for one rollout whose
    model emits `calls` (one per turn), then get_reward."""
    prompt = [dict(m) for m in row["prompt"]]
    observation = env.reset(**row)
    if observation is not None:
        prompt[-1] = {**prompt[-1], "content": prompt[-1]["content"] + observation}
    messages = list(prompt)
    for call in calls:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        function = call["function"]
        try:
            result = tools[function["name"]](**function["arguments"])
        except Exception as e:  # noqa: BLE001 (TRL's own handling)
            result = {"error": str(e)}
        messages.append({"role": "tool", "name": function["name"], "content": str(result)})
    return messages


def call(name: str, **arguments: Any) -> Dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def reward(env: Any) -> float:
    """_calculate_rewards' wrapper of an async get_reward, run on an event loop."""
    return asyncio.run(env.get_reward())


def test_grpo_rollouts_through_the_environment_factory(small_task_server: Any) -> None:
    factory = partial(KForgeToolEnv, small_task_server.endpoint, timeout_s=600)
    rows = [{"prompt": [{"role": "user", "content": ""}], "task_id": SMALL_AFFINE_ID, "seed": i} for i in range(3)]
    pool = [factory() for _ in rows]
    tools = [probe(env) for env in pool]
    assert set(tools[0]) == {"compile", "verify", "profile", "submit"}
    scripts = [
        [call("compile", source=FAST), call("submit", source=FAST), call("verify", source=FAST)],
        [call("compile", source=FAST)],  # the model stops without submitting
        [call("submit", source=WRONG)],
    ]
    transcripts = [rollout(env, t, row, s) for env, t, row, s in zip(pool, tools, rows, scripts)]
    rewards = [reward(env) for env in pool]

    # The prompt: the environment's system and user text after the row's.
    assert "kf_forward" in transcripts[0][0]["content"]
    assert "Compiled" in transcripts[0][2]["content"] or "compile" in transcripts[0][2]["content"].lower()
    assert "over" in transcripts[0][-1]["content"]  # a call after the submit is not run
    assert pool[0].measurement.outcome == "correct" and rewards[0] > 0
    # Ended by the environment's rule: the latest solution scored as the
    # submission; the typed fields describe that evaluation.
    assert pool[1].measurement.outcome == "correct" and rewards[1] > 0 and len(pool[1].rewards) == 2
    assert pool[1].correct and pool[1].stop_reason == "policy_stopped" and pool[1].measurement.action == "submit"
    assert pool[2].measurement.outcome == "wrong" and rewards[2] < 0
    assert abs(sum(pool[0].rewards) - rewards[0]) < 1e-12
    assert "total" in pool[0].reward_components

    # Construct once, reset often: the pooled instance plays the next rollout.
    again = rollout(pool[2], tools[2], rows[0], [call("submit", source=FAST)])
    assert reward(pool[2]) > 0 and again[-1]["role"] == "tool"
    # A model's bad arguments are TRL's {"error": ...}; a bad row is named.
    bad = rollout(pool[1], tools[1], rows[1], [call("submit", code=FAST)])
    assert "unexpected keyword" in bad[-1]["content"]
    with pytest.raises(ValueError, match="task_id"):
        pool[1].reset(prompt=[], task="x")
    for env in pool:
        env._close()


def test_abstaining_never_beats_a_failed_attempt(small_task_server: Any) -> None:
    env = KForgeToolEnv(small_task_server.endpoint, timeout_s=600)
    tools = probe(env)
    row = {"prompt": [{"role": "user", "content": ""}], "task_id": SMALL_AFFINE_ID, "seed": 9}
    try:
        returns = {}
        for name, calls in {"abstain": [], "wrong_submit": [call("submit", source=WRONG)],
                            "compile_error": [call("compile", source="not C++")],
                            "wrong_verify": [call("verify", source=WRONG)]}.items():
            rollout(env, tools, row, calls)
            returns[name] = reward(env)
            if name == "abstain":
                assert env.outcome == "not_run" and not env.correct and env.stop_reason == "policy_stopped"
                assert env.observations[-1]["data"]["final_evaluation"]["auto_submitted"] is False
        assert all(returns["abstain"] <= r for r in returns.values()), returns
    finally:
        env._close()


def test_envs_are_held_per_episode_so_the_pool_can_outgrow_the_server(tmp_path: Any) -> None:
    server = start_server("--tasks", str(EXAMPLES), envs=2)
    try:
        factory = partial(KForgeToolEnv, server.endpoint, timeout_s=600)
        pool = [factory() for _ in range(5)]  # TRL's pool, grown past --envs
        probe_env = RemoteEnv(server.endpoint, acquire=False)
        row = {"prompt": [{"role": "user", "content": ""}], "task_id": "example/affine_relu6"}
        for batch in ([0, 1], [2, 3], [4, 0]):  # GRPOTrainer: reset the batch, generate, score
            envs = [pool[i] for i in batch]
            for env in envs:
                env.reset(**row)
            assert probe_env.client.call("hello", {})["envs"]["held"] == 2
            assert all(isinstance(reward(env), float) for env in envs)
            assert probe_env.client.call("hello", {})["envs"]["held"] == 0
        # A batch larger than --envs: a clear error naming it, not a hang.
        for env in pool[:2]:
            env.reset(**row)
        with pytest.raises(KForgeError, match="--envs"):
            pool[2].reset(**row)
        for env in pool[:2]:
            reward(env)
        probe_env.close()
        for env in pool:
            env._close()
    finally:
        assert server.stop() == 0


def test_idle_past_every_timeout_and_a_released_env_is_replaced(tmp_path: Any) -> None:
    server = start_server("--tasks", str(EXAMPLES), "--reclaim-after", "1", envs=1)
    try:
        row = {"prompt": [{"role": "user", "content": ""}], "task_id": "example/affine_relu6"}
        trl = KForgeToolEnv(server.endpoint, timeout_s=600)
        trl.reset(**row)
        reward(trl)
        other = RemoteEnv(server.endpoint, timeout_s=600)  # holds the only env
        other.reset(task_id="example/affine_relu6")
        time.sleep(2.5)  # a training step: past --reclaim-after; no idle timeout by default
        # The quiet client's env goes to the one that needs it.
        trl.reset(**row)
        assert trl.task_id == "example/affine_relu6"
        reward(trl)
        # The released env is replaced at the next reset, transparently.
        other.reset(task_id="example/affine_relu6")
        obs, r, terminated, truncated, info = other.end_episode("turn_limit")
        assert truncated and info["truncation_reason"] == "turn_limit"
        other.close()
        trl._close()
    finally:
        assert server.stop() == 0
