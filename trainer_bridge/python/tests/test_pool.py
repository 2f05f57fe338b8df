"""Several episodes at once through RemoteEnvPool and the async Client."""

from __future__ import annotations

import pytest
from conftest import GYM_DATA, HANG, medium_task, small_task, source, tool_call

from kforge import Client, KForgeError, RemoteEnvPool, StepResult


def test_episodes_run_concurrently_and_each_result_comes_once(server):
    candidates = ["correct", "wrong", "compile_error"]
    with RemoteEnvPool(server.endpoint, num_envs=3, timeout_s=300) as pool:
        assert len(pool) == 3 and len(set(pool.server_env_ids)) == 3
        firsts = pool.reset(tasks=medium_task(), seeds=[0, 1, 2])
        assert [info["seed"] for _, info in firsts] == [0, 1, 2]
        assert "kf_forward" in firsts[0][0]["text"]

        pool.send([tool_call("submit", source=source(GYM_DATA / f"{c}.cpp")) for c in candidates], env_ids=[0, 1, 2])
        assert pool.pending == 3
        results = []
        while pool.pending:
            results += pool.recv(min_count=1)
        assert sorted(r.env_id for r in results) == [0, 1, 2]
        by_env = {r.env_id: r for r in results}
        assert all(isinstance(r, StepResult) and r.terminated for r in results)
        assert by_env[0].reward > 0, by_env[0].observation["text"]
        assert by_env[1].reward < 0 and by_env[1].info["measurement"]["outcome"] == "wrong"
        assert by_env[2].reward < 0 and by_env[2].info["measurement"]["outcome"] == "compile_error"
        env_id, obs, reward, terminated, truncated, info = by_env[0]  # unpacks like Gymnasium's tuple
        assert info["env_id"] == pool.server_env_ids[0]


def test_step_returns_results_in_env_order(server):
    with RemoteEnvPool(server.endpoint, num_envs=2, timeout_s=300) as pool:
        pool.reset(tasks=[small_task(), small_task()])
        results = pool.step([tool_call("compile", source=source(GYM_DATA / "correct.cpp")), {"name": "nope"}], [1, 0])
        assert [r.env_id for r in results] == [1, 0]
        assert results[0].info["measurement"]["compiled"]
        assert results[1].observation["data"]["error"]["kind"] == "invalid_action"


def test_a_second_step_on_a_busy_env_is_refused(server):
    with RemoteEnvPool(server.endpoint, num_envs=2, timeout_s=300) as pool:
        pool.reset(tasks=small_task())
        pool.send([tool_call("verify", source=source(HANG))], [0])
        with pytest.raises(KForgeError) as e:
            pool.send([tool_call("verify")], [0])
        assert e.value.code == "env_busy" and e.value.env_id == 0
        with pytest.raises(KForgeError):
            pool.reset(env_ids=[0], tasks=small_task())
        # The other env is unaffected and its result is not held up by env 0's.
        pool.send([{"name": "nope"}], [1])
        first = pool.recv(1)
        assert [r.env_id for r in first] == [1]
        last = pool.recv(1)
        assert [r.env_id for r in last] == [0]
        assert last[0].info["measurement"]["outcome"] == "timeout"


def test_the_client_receives_replies_as_they_complete(server):
    with Client(server.endpoint, timeout_s=300) as client:
        envs = [client.call("make")["env_id"] for _ in range(2)]
        for env_id in envs:
            client.call("reset", {"env_id": env_id, "task": small_task()})
        slow = client.send("step", {"env_id": envs[0], "tool_call": tool_call("verify", source=source(HANG))})
        fast = client.send("step", {"env_id": envs[1], "tool_call": {"name": "nope"}})
        assert client.pending == 2
        assert client.recv().id == fast  # out of order: the later request finished first
        assert client.recv().id == slow
        for env_id in envs:
            client.call("close", {"env_id": env_id})
