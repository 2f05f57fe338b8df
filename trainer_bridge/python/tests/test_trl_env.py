"""kforge.trl_env.KForgeToolEnv driven the way TRL's GRPOTrainer drives an
``environment_factory`` (huggingface/trl at f2cd577, 1.10.0.dev0,
trl/trainer/grpo_trainer.py): probe an instance for ``reset``, ``get_reward``
and its public methods as tools; pool and reuse instances; ``reset(**row)``
whose string is appended to the row's last user message; tools called with
the model's arguments as keywords, ``str(result)`` as the tool message, an
exception as ``{"error": ...}``; ``get_reward()`` once per rollout. Against a
real ``kforge serve``."""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any, Callable, Dict, List

import pytest

from conftest import EXAMPLES, SMALL_AFFINE_ID, source

from kforge.trl_env import KForgeToolEnv

AFFINE = EXAMPLES / "affine_relu6"
FAST, WRONG = source(AFFINE / "cpu" / "fast.cpp"), source(AFFINE / "cpu" / "wrong.cpp")


def probe(instance: Any) -> Dict[str, Callable[..., Any]]:
    """GRPOTrainer.__init__'s probe: reset required; public methods but reset
    and get_reward are tools, each with what transformers' get_json_schema
    needs (annotated arguments, an Args: section naming each)."""
    methods = dict(inspect.getmembers(instance, predicate=inspect.ismethod))
    assert "reset" in methods and "get_reward" in methods
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
    rewards = [env.get_reward() for env in pool]

    # The prompt: the environment's system and user text after the row's.
    assert "kf_forward" in transcripts[0][0]["content"]
    assert "Compiled" in transcripts[0][2]["content"] or "compile" in transcripts[0][2]["content"].lower()
    assert "over" in transcripts[0][-1]["content"]  # a call after the submit is not run
    assert pool[0].measurement["outcome"] == "correct" and rewards[0] > 0
    # Auto-submitted: the latest solution scored, as the environment's truncation would.
    assert pool[1].measurement["outcome"] == "correct" and rewards[1] > 0 and len(pool[1].rewards) == 2
    assert pool[2].measurement["outcome"] == "wrong" and rewards[2] < 0
    assert abs(sum(pool[0].rewards) - rewards[0]) < 1e-12
    assert "total" in pool[0].reward_components

    # Construct once, reset often: the pooled instance plays the next rollout.
    again = rollout(pool[2], tools[2], rows[0], [call("submit", source=FAST)])
    assert pool[2].get_reward() > 0 and again[-1]["role"] == "tool"
    # A model's bad arguments are TRL's {"error": ...}; a bad row is named.
    bad = rollout(pool[1], tools[1], rows[1], [call("submit", code=FAST)])
    assert "unexpected keyword" in bad[-1]["content"]
    with pytest.raises(ValueError, match="task_id"):
        pool[1].reset(prompt=[], task="x")
    for env in pool:
        env._close()


def test_an_episode_with_no_solution_still_gets_a_reward(small_task_server: Any) -> None:
    env = KForgeToolEnv(small_task_server.endpoint, timeout_s=600)
    try:
        env.reset(task_id=SMALL_AFFINE_ID)
        reward = env.get_reward()  # the model never called a tool
        assert isinstance(reward, float) and reward <= 0
        assert env.done and env.observations[-1]["data"]["error"]["kind"] == "no_solution"
    finally:
        env._close()
