"""kforge.export: trajectories as training records (chat, prompt_completion,
verl, raw), and the example trainer script end to end with a real C++
sender."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kforge import export
from stream_helpers import finish, start_python_receiver, start_send, trajectory, write_trajectories

PYTHON_DIR = Path(__file__).resolve().parents[1]


def two_turn(history_per_turn: bool) -> dict:
    """A two-turn episode; its turns record either only what each added or
    the whole history so far (both conventions give one conversation)."""
    system = {"role": "system", "content": "sys"}
    user = {"role": "user", "content": "task"}
    a1 = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "compile", "arguments": "{}"}}],
    }
    tool = {"role": "tool", "tool_call_id": "c1", "content": "compiled", "extra": "dropped"}
    a2 = {"role": "assistant", "content": "done"}
    turn1 = [system, user, a1]
    turn2 = [system, user, a1, tool, a2] if history_per_turn else [tool, a2]
    return {
        "schema_version": 1,
        "id": "t-1",
        "group_id": "g",
        "task_id": "task-7",
        "turns": [
            {"messages": turn1, "observation": {"text": "compiled"}, "reward": 0.0},
            {"messages": turn2, "observation": {"text": "ok"}, "reward": 1.5},
        ],
        "policy_version_end": "v3",
        "total_reward": 1.5,
        "terminated": True,
        "truncated": False,
    }


@pytest.mark.parametrize("history_per_turn", [False, True])
def test_chat_records_hold_the_conversation_once(history_per_turn: bool) -> None:
    r = export.to_record(two_turn(history_per_turn), "chat")
    assert [m["role"] for m in r["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert r["messages"][2]["content"] == ""  # None becomes "" for chat templates
    assert r["messages"][2]["tool_calls"][0]["function"]["name"] == "compile"
    assert "extra" not in r["messages"][3] and r["messages"][3]["tool_call_id"] == "c1"
    assert r["reward"] == 1.5 and r["rewards"] == [0.0, 1.5]
    assert (r["id"], r["group_id"], r["task_id"], r["policy_version"], r["num_turns"]) == ("t-1", "g", "task-7", "v3", 2)
    assert export.record_id(r, "chat") == "t-1"


def test_prompt_completion_splits_at_the_first_answer_and_labels() -> None:
    r = export.to_record(two_turn(False), "prompt_completion", label_threshold=1.0)
    assert [m["role"] for m in r["prompt"]] == ["system", "user"]
    assert [m["role"] for m in r["completion"]] == ["assistant", "tool", "assistant"]
    assert r["label"] is True and r["reward"] == 1.5
    assert export.to_record(two_turn(False), "prompt_completion", label_threshold=2.0)["label"] is False


def test_verl_rows_have_its_columns() -> None:
    r = export.to_record(two_turn(False), "verl", index=7)
    assert set(r) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert r["reward_model"] == {"style": "rule", "ground_truth": "task-7"}
    assert r["extra_info"]["index"] == 7 and r["extra_info"]["trajectory_id"] == "t-1"
    assert r["extra_info"]["reward"] == 1.5
    assert export.record_id(r, "verl") == "t-1"
    with pytest.raises(ValueError, match="format must be one of"):
        export.to_record(two_turn(False), "alpaca")


def test_reward_falls_back_to_the_sum_of_turns() -> None:
    t = two_turn(False)
    del t["total_reward"]
    assert export.to_record(t, "chat")["reward"] == 1.5


def test_the_module_converts_files_and_skips_a_torn_tail(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    with open(src, "w") as f:
        f.write(json.dumps(two_turn(False)) + "\n")
        f.write(json.dumps(trajectory("x-1")) + "\n")
        f.write('{"id": "torn"')  # a killed writer's last line
    out = tmp_path / "chat.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "kforge.export", str(src), str(out), "--format", "chat"],
        cwd=PYTHON_DIR, capture_output=True, text=True,
    )
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert [l["id"] for l in lines] == ["t-1", "x-1"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    p = subprocess.run(
        [sys.executable, "-m", "kforge.export", str(bad), str(out)], cwd=PYTHON_DIR, capture_output=True, text=True
    )
    assert p.returncode == 2 and "bad.jsonl:1" in p.stderr


def test_the_example_trainer_receives_batches_acks_and_exports(tmp_path: Path) -> None:
    out, state = tmp_path / "chat.jsonl", tmp_path / "state"
    receiver = start_python_receiver(out, state, "tcp://127.0.0.1:0", "--format", "chat", "--count", "150")
    path = tmp_path / "t.jsonl"
    ids = write_trajectories(path, "ex", 150)
    assert finish(start_send(path, receiver.endpoint, "ex", tmp_path / "spool"))["_exit"] == 0
    summary = finish(receiver.p)
    assert summary["_exit"] == 0 and summary["records"] == 150 and summary["acked"] == 150
    records = [json.loads(l) for l in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == sorted(ids)
    assert all([m["role"] for m in r["messages"]] == ["system", "user", "assistant"] for r in records)
    assert "mean reward 1.0000" in summary["_stderr"]
