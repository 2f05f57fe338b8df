"""kforge.PolicyServer against the C++ client: real `kforge rollout` runs
whose policy is served from Python over ZeroMQ (trainer_bridge/POLICY.md)."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import msgpack
import pytest
import zmq

from conftest import REPO, kforge_bin
from kforge import PolicyServer

CORRECT = (REPO / "tests" / "gym" / "data" / "correct.cpp").read_text()
TASK = REPO / "tests" / "gym" / "data" / "scale_bias_relu.json"
ENV = REPO / "tests" / "rollout" / "data" / "env.yaml"


def tool_reply(name: str, source: str = CORRECT, turn: int = 0) -> Dict[str, Any]:
    return {
        "content": f"calling {name}",
        "tool_calls": [{"id": f"c{turn}", "type": "function",
                        "function": {"name": name, "arguments": json.dumps({"source": source})}}],
        "token_ids": [5, 6, 7],
        "logprobs": [-0.1, -0.2, -0.3],
        "usage": {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43},
    }


def rollout(tmp: Path, endpoint: str, group_size: int = 2, **extra: Any) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    out = tmp / "trajectories.jsonl"
    config = {
        "env": str(ENV),
        "tasks": str(TASK),
        "groups": 1,
        "group_size": group_size,
        "concurrency": group_size,
        "policy": {"kind": "zmq", "endpoint": endpoint, "timeout_s": 60, "retries": 0},
        "output": {"jsonl": str(out)},
    }
    config.update(extra)
    path = tmp / "rollout.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([kforge_bin(), "rollout", "--config", str(path), "--json", "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    trajectories = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return stats, trajectories


def test_a_rollout_through_the_python_server_carries_tokens_and_versions(tmp_path: Path) -> None:
    seen: List[List[Dict[str, Any]]] = []

    def act(requests):
        seen.append(requests)
        return [tool_reply("submit", turn=r["turn"]) for r in requests]

    with PolicyServer(act, bind="tcp://127.0.0.1:0", policy_version=42) as server:
        server.start()
        stats, trajectories = rollout(tmp_path, server.endpoint, group_size=3)
    assert stats["episodes_written"] == 3 and stats["policy_errors"] == 0
    # One batch for the three episodes that waited together.
    assert max(len(batch) for batch in seen) == 3
    request = seen[0][0]
    assert request["messages"][0]["role"] == "system" and request["messages"][1]["role"] == "user"
    assert "submit" in {t["function"]["name"] for t in request["tools"]}
    assert request["task"]["id"] == "test/scale_bias_relu"
    assert isinstance(request["sampling"]["seed"], int)
    for t in trajectories:
        assert t["schema_version"] == 3
        assert t["policy_version_start"] == "42" and t["policy_version_end"] == "42"
        turn = t["turns"][0]
        assert turn["info"]["policy"]["token_ids"] == [5, 6, 7]
        assert turn["info"]["policy"]["logprobs"] == [-0.1, -0.2, -0.3]
        assert turn["info"]["policy"]["usage"] == {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
        assert t["info"]["usage"] == turn["info"]["policy"]["usage"]
        assert turn["info"]["env"]["measurement"]["outcome"] == "correct"
        assert turn["messages"][1] == {"role": "tool", "tool_call_id": "c0", "content": turn["observation"]["text"]}
        assert t["info"]["group"]["size"] == 3


def test_a_policy_that_raises_truncates_the_episodes_without_penalty(tmp_path: Path) -> None:
    def act(requests):
        raise RuntimeError("CUDA out of memory")

    with PolicyServer(act, bind="tcp://127.0.0.1:0") as server:
        server.start()
        stats, trajectories = rollout(tmp_path, server.endpoint)
    assert stats["policy_errors"] == 2
    for t in trajectories:
        assert t["truncated"] and t["info"]["truncation_reason"] == "policy_error"
        assert "CUDA out of memory" in t["info"]["policy_error"]
        assert t["total_reward"] == 0.0 and t["turns"] == []
        assert t["info"]["group"]["advantage"] is None


def test_a_reply_count_mismatch_fails_the_batch_not_the_run(tmp_path: Path) -> None:
    with PolicyServer(lambda requests: [], bind="tcp://127.0.0.1:0") as server:
        server.start()
        stats, trajectories = rollout(tmp_path, server.endpoint)
    assert stats["policy_errors"] == 2
    assert all("0 replies for" in t["info"]["policy_error"] for t in trajectories)


def test_text_without_a_tool_call_costs_a_turn(tmp_path: Path) -> None:
    def act(requests):
        return ["I would write a kernel here." if r["turn"] == 0 else tool_reply("submit", turn=r["turn"])
                for r in requests]

    with PolicyServer(act, bind="tcp://127.0.0.1:0") as server:
        server.start()
        stats, trajectories = rollout(tmp_path, server.endpoint, group_size=1)
    (t,) = trajectories
    assert len(t["turns"]) == 2
    first = t["turns"][0]
    assert first["info"]["env"]["error"]["kind"] == "invalid_action"
    assert first["messages"][1]["role"] == "user"  # no tool call to answer
    assert t["terminated"]


class RawClient:
    """A DEALER that speaks bytes, for what well-behaved workers never send."""

    def __init__(self, endpoint: str) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)

    def ask(self, payload: bytes) -> Dict[str, Any]:
        self.socket.send(payload)
        assert self.socket.poll(10000), "no reply"
        return msgpack.unpackb(self.socket.recv(), raw=False)

    def close(self) -> None:
        self.socket.close()
        self.context.term()


def request(method: str, params: Any, request_id: int = 1) -> bytes:
    return msgpack.packb({"v": 1, "id": request_id, "method": method, "params": params}, use_bin_type=True)


def test_malformed_requests_get_errors_that_name_the_field() -> None:
    calls = []
    with PolicyServer(lambda r: calls.append(r) or ["ok"] * len(r), bind="tcp://127.0.0.1:0") as server:
        server.start()
        client = RawClient(server.endpoint)
        try:
            garbage = client.ask(b"\xc1\xc1 not msgpack")
            assert garbage["ok"] is False and garbage["id"] is None
            assert garbage["error"]["code"] == "bad_request"
            bad = client.ask(request("act", {"requests": "all of them"}, 7))
            assert bad["id"] == 7 and bad["error"]["field"] == "/params/requests"
            bad = client.ask(request("act", {"requests": [{"messages": []}]}, 8))
            assert bad["error"]["field"] == "/params/requests/0/episode_id"
            unknown = client.ask(request("sample", {}, 9))
            assert unknown["error"]["code"] == "unknown_method"
            version = client.ask(msgpack.packb({"v": 2, "id": 10, "method": "hello"}))
            assert version["error"]["code"] == "unsupported_version"
            hello = client.ask(request("hello", {}, 11))
            assert hello["ok"] and hello["result"]["protocol"] == 1
            good = client.ask(request("act", {"requests": [{"episode_id": "e", "messages": []}]}, 12))
            assert good["ok"] and good["result"]["replies"][0]["content"] == "ok"
            assert good["result"]["replies"][0]["finish_reason"] == "stop"
        finally:
            client.close()
    assert len(calls) == 1  # only the well-formed act reached the policy


@pytest.mark.parametrize("flag", ["--template", "--baseline"])
def test_the_cpp_template_server_answers_a_python_client(tmp_path: Path, flag: str) -> None:
    """The other direction: `kforge policy-server --template` serves the
    schema a Python client writes by hand; `--baseline`, its old name, serves
    the same policy and warns."""
    proc = subprocess.Popen([kforge_bin(), "policy-server", flag, "--bind", "tcp://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        client = RawClient(ready["endpoint"])
        try:
            task = json.loads(TASK.read_text())
            reply = client.ask(request("act", {"requests": [
                {"episode_id": "e0", "turn": 0, "task_id": task["id"], "messages": [], "tools": [],
                 "sampling": {"seed": 3}, "task": task}]}))
            assert reply["ok"], reply
            (answer,) = reply["result"]["replies"]
            call = answer["tool_calls"][0]["function"]
            assert call["name"] == "profile"
            assert "kf_forward" in json.loads(call["arguments"])["source"]
            assert answer["policy_version"] == "template"
            bad = client.ask(request("act", {"requests": [{"episode_id": 5}]}, 2))
            assert bad["error"]["code"] == "bad_request" and bad["error"]["field"] == "/params/requests/0/episode_id"
        finally:
            client.close()
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    warned = "--baseline is deprecated; write --template" in proc.stderr.read()
    assert warned == (flag == "--baseline")
