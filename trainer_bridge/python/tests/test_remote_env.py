"""Whole episodes through RemoteEnv against a real server (CPU backend)."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, GYM_DATA, affine_task, small_task, source, tool_call, tool_names

from kforge import KForgeError, RemoteEnv, tool_message

AFFINE = EXAMPLES / "affine_relu6"


def test_hello_tools_and_server_info(server):
    with RemoteEnv(server.endpoint, timeout_s=120) as env:
        assert env.server_info["protocol_version"] == 1
        assert env.server_info["backend"] == "cpu"
        assert {"compile", "verify", "profile", "submit"} <= set(tool_names(env.tools))
        assert env.server_info["tasks"]["count"] >= 5
        assert isinstance(env.env_id, int)


def test_full_episode_with_a_correct_solution(server):
    with RemoteEnv(server.endpoint, timeout_s=300) as env:
        obs, info = env.reset(task=affine_task(), seed=3)
        assert "kf_forward" in obs["text"]
        assert info["task_id"] == "example/affine_relu6" and info["seed"] == 3
        messages = env.messages
        assert [m["role"] for m in messages] == ["system", "user"]
        assert messages[1]["content"] == obs["text"]

        call = tool_call("compile", source=source(AFFINE / "cpu" / "fast.cpp"))
        obs, reward, terminated, truncated, info = env.step(call)
        assert not terminated and not truncated
        assert info["measurement"]["compiled"], obs["text"]
        messages.append(tool_message(call, obs))
        assert messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": obs["text"]}

        obs, reward, terminated, truncated, info = env.step(tool_call("verify", call_id="call_1"))
        assert info["measurement"]["outcome"] == "correct", obs["text"]
        assert not terminated

        obs, reward, terminated, truncated, info = env.step(tool_call("submit", call_id="call_2"))
        assert terminated and not truncated
        assert reward > 0, obs["text"]
        assert info["reward_components"]["total"] == pytest.approx(reward)
        assert "The episode is over" in obs["text"]

        with pytest.raises(KForgeError) as e:
            env.step(tool_call("submit"))
        assert e.value.code == "episode_finished"


def test_a_wrong_solution_gets_a_negative_reward(server, tmp_path):
    with RemoteEnv(server.endpoint, timeout_s=300) as env:
        path = tmp_path / "task.json"
        path.write_text(json.dumps(affine_task()))
        env.reset(task=path)  # a path works as well as a dict
        obs, reward, terminated, _, info = env.step(tool_call("submit", source=source(AFFINE / "cpu" / "wrong.cpp")))
        assert terminated
        assert reward < 0
        assert info["measurement"]["outcome"] == "wrong"
        assert "wrong" in obs["text"]


def test_reset_by_task_id(server):
    with RemoteEnv(server.endpoint, timeout_s=300) as env:
        obs, info = env.reset(task_id="example/affine_relu6", seed=1)
        assert info["task_id"] == "example/affine_relu6"
        assert "8192" in obs["text"]  # the task set's own shapes
        obs, _, terminated, _, info = env.step(tool_call("compile", source=source(AFFINE / "cpu" / "naive.cpp")))
        assert info["measurement"]["compiled"] and not terminated


def test_typed_actions(server):
    with RemoteEnv(server.endpoint, timeout_s=300) as env:
        env.reset(task=affine_task())
        action = {"type": "submit", "solution": {"source": source(AFFINE / "cpu" / "naive.cpp")}}
        obs, reward, terminated, _, _ = env.step(action)
        assert terminated and reward > 0, obs["text"]


def test_exemplars_reach_the_prompt(server):
    with RemoteEnv(server.endpoint, timeout_s=120) as env:
        exemplar = {"solution": {"source": source(GYM_DATA / "correct.cpp")}, "speedup_eager": 1.7, "note": "v1"}
        obs, info = env.reset(task=small_task(), options={"exemplars": [exemplar]})
        assert "1.7" in obs["text"]
        with pytest.raises(ValueError):
            env.reset(task=small_task(), options={"render_mode": "human"})
