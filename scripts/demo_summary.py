"""Summary of a trajectories JSONL file (docs/rollout.md): per task, how its
rollouts ended, their rewards and group advantages, and the best speedup a
correct submission reached. Used by scripts/demo.sh; standard library only."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any, Dict, List


def final_measurement(t: Dict[str, Any]) -> Dict[str, Any]:
    if not t["turns"]:
        return {}
    env = t["turns"][-1]["info"].get("env", {})
    fin = env.get("final_evaluation") or {}
    return fin.get("measurement") or env.get("measurement") or {}


def main(path: str) -> int:
    by_task: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                t = json.loads(line)
                by_task[t["task_id"]].append(t)
    if not by_task:
        print(f"{path}: no trajectories")
        return 1
    print(f"{'task':32} {'rollouts':>8} {'correct':>8} {'best speedup':>13} {'rewards':>18} {'advantages':>20}")
    total = correct_total = 0
    for task, ts in sorted(by_task.items()):
        outcomes = [final_measurement(t) for t in ts]
        correct = [m for m in outcomes if m.get("outcome") == "correct"]
        speedups = [m["speedup_eager"] for m in correct if isinstance(m.get("speedup_eager"), (int, float))]
        best = f"{max(speedups):.2f}x" if speedups else "-"
        rewards = " ".join(f"{t['total_reward']:.2f}" for t in ts)
        adv = " ".join("-" if t["info"]["group"]["advantage"] is None else f"{t['info']['group']['advantage']:+.2f}"
                       for t in ts)
        print(f"{task:32} {len(ts):>8} {len(correct):>8} {best:>13} {rewards:>18} {adv:>20}")
        total += len(ts)
        correct_total += len(correct)
    turns = sum(len(t["turns"]) for ts in by_task.values() for t in ts)
    print(f"\n{total} trajectories, {correct_total} ending with a correct kernel, {turns} turns")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
