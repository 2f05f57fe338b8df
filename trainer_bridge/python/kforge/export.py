"""Trajectories as training data: JSONL records of chat messages with rewards,
in the shapes that RL and fine-tuning libraries load.

Formats (``FORMATS``):

``chat``
    ``{"messages": [...], "reward": r, "rewards": [per turn], "id", "group_id",
    "task_id", ...}``: the whole conversation, each message once. TRL reads
    ``messages`` as a conversational language-modeling dataset; OpenRLHF with
    ``--input_key messages --apply_chat_template`` (and ``--label_key
    reward``); verl's multi-turn SFT dataset with ``messages`` as its messages
    key.
``prompt_completion``
    ``{"prompt": [...], "completion": [...], "reward": r, "label": bool, ...}``:
    the messages up to the policy's first answer, and the rest. TRL's
    conversational prompt-completion type, and with ``label`` (reward above
    ``label_threshold``) its unpaired-preference type (KTO); OpenRLHF with
    ``--input_key prompt --output_key completion``.
``verl``
    ``{"data_source", "prompt", "ability", "reward_model": {"style": "rule",
    "ground_truth": task_id}, "extra_info": {"index", "trajectory_id", "reward",
    "completion", ...}}``: the row shape of verl's RL datasets (they are
    parquet files: ``pandas.read_json(path, lines=True).to_parquet(...)``).
``raw``
    the trajectory object unchanged.

Every format keeps the trajectory's id (``record_id``), so a writer can tell
which trajectories a file already holds. Message fields kept: role, content,
name, tool_calls, tool_call_id (tool call arguments stay as the policy wrote
them); others are dropped. Trajectories are read as recorded
(core/include/kforge/core/trajectory.h): each turn's ``messages`` is either
what the turn added or the whole history so far; both give one conversation.

    python3 -m kforge.export trajectories.jsonl chat.jsonl --format chat
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Iterable, List, Optional, TextIO, Tuple

FORMATS = ("chat", "prompt_completion", "verl", "raw")
MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def _message(m: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        return None
    out = {k: m[k] for k in MESSAGE_KEYS if k in m}
    if out.get("content") is None:
        out["content"] = ""  # chat templates expect a string
    return out


def conversation(trajectory: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The episode's chat in order, each message once."""
    conv: List[Dict[str, Any]] = []
    for turn in trajectory.get("turns") or []:
        msgs = [m for m in (_message(x) for x in (turn.get("messages") or [])) if m is not None]
        if conv and len(msgs) >= len(conv) and msgs[: len(conv)] == conv:
            conv = msgs  # this turn recorded the whole history
        else:
            conv.extend(msgs)
    return conv


def split_prompt(messages: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(prompt, completion): everything before the first assistant message,
    and the rest."""
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            return messages[:i], messages[i:]
    return messages, []


def _reward(trajectory: Dict[str, Any]) -> float:
    r = trajectory.get("total_reward")
    if isinstance(r, (int, float)) and not isinstance(r, bool):
        return float(r)
    return float(sum(t.get("reward", 0.0) or 0.0 for t in trajectory.get("turns") or []))


def _meta(trajectory: Dict[str, Any]) -> Dict[str, Any]:
    turns = trajectory.get("turns") or []
    return {
        "id": trajectory.get("id"),
        "group_id": trajectory.get("group_id", ""),
        "task_id": trajectory.get("task_id", ""),
        "policy_version": trajectory.get("policy_version_end", ""),
        "num_turns": len(turns),
        "terminated": bool(trajectory.get("terminated", False)),
        "truncated": bool(trajectory.get("truncated", False)),
    }


def to_record(
    trajectory: Dict[str, Any],
    format: str = "chat",
    *,
    index: int = 0,
    label_threshold: float = 0.0,
    data_source: str = "kernelforge",
) -> Dict[str, Any]:
    """One trajectory as one record of ``format``."""
    if format == "raw":
        return trajectory
    messages = conversation(trajectory)
    reward = _reward(trajectory)
    if format == "chat":
        record = {"messages": messages, "reward": reward}
        record["rewards"] = [float(t.get("reward", 0.0) or 0.0) for t in trajectory.get("turns") or []]
        record.update(_meta(trajectory))
        return record
    prompt, completion = split_prompt(messages)
    if format == "prompt_completion":
        record = {"prompt": prompt, "completion": completion, "reward": reward, "label": reward > label_threshold}
        record.update(_meta(trajectory))
        return record
    if format == "verl":
        extra = _meta(trajectory)
        extra["trajectory_id"] = extra.pop("id")
        extra.update({"index": index, "reward": reward, "completion": completion})
        return {
            "data_source": data_source,
            "prompt": prompt,
            "ability": "cuda_kernel_optimization",
            "reward_model": {"style": "rule", "ground_truth": trajectory.get("task_id", "")},
            "extra_info": extra,
        }
    raise ValueError(f"format must be one of {FORMATS}, got {format!r}")


def record_id(record: Dict[str, Any], format: str) -> Optional[str]:
    """The trajectory id a record of ``format`` came from."""
    if format == "verl":
        return (record.get("extra_info") or {}).get("trajectory_id")
    return record.get("id")


def record_line(record: Dict[str, Any]) -> str:
    """One JSONL line (with its newline)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def export_jsonl(
    trajectories: Iterable[Dict[str, Any]], out: TextIO, format: str = "chat", **options: Any
) -> int:
    """Writes one record per trajectory to ``out``; returns how many."""
    n = 0
    for i, t in enumerate(trajectories):
        out.write(record_line(to_record(t, format, index=i, **options)))
        n += 1
    return n


def read_trajectories(path: str) -> Iterable[Dict[str, Any]]:
    """Trajectories from a JSONL file (``kforge receive --out``, a rollout's
    file sink); a torn last line (a killed writer) is skipped."""
    with open(path, "r", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                break
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not JSON: {e}") from None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m kforge.export", description="Trajectories (JSONL) to training records (JSONL)."
    )
    ap.add_argument("input", help="JSONL file of trajectories")
    ap.add_argument("output", help="JSONL file to write ('-': stdout)")
    ap.add_argument("--format", choices=FORMATS, default="chat")
    ap.add_argument("--label-threshold", type=float, default=0.0, help="label = reward > this (prompt_completion)")
    ap.add_argument("--data-source", default="kernelforge", help="data_source of verl records")
    a = ap.parse_args(argv)
    options: Dict[str, Any] = {"label_threshold": a.label_threshold, "data_source": a.data_source}
    try:
        if a.output == "-":
            n = export_jsonl(read_trajectories(a.input), sys.stdout, a.format, **options)
        else:
            with open(a.output, "w", encoding="utf-8") as out:
                n = export_jsonl(read_trajectories(a.input), out, a.format, **options)
    except (OSError, ValueError) as e:
        print(f"kforge.export: {e}", file=sys.stderr)
        return 2
    print(f"kforge.export: {n} records ({a.format}) -> {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
