#!/usr/bin/env python3
"""Fault run of the trajectory stream: workers and the receiver killed with
SIGKILL at random points, over many runs; counts what was lost and what was
delivered twice (target: 0 and 0).

Each run starts W senders (`kforge send`: the C++ TrajectorySender with its
spool, as in the rollout workers), each streaming its own JSONL file, and one
receiver: `kforge receive` (C++) or the example trainer on
kforge.TrajectoryStream (Python), alternating between runs. While they
stream, a chaos loop kills a random one of them with SIGKILL at random
moments and starts it again on the same spool or state. At the end the
receiver's output must hold every trajectory exactly once.

    python3 bench/stream/stream_fault_run.py --kforge build/default/cli/kforge --runs 10

Prints one line per run and a TOTAL line; exits 1 if anything was lost or
duplicated. bench_stream runs it (10 runs); a short form is a ctest
(stream_fault_run_short).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_RECEIVER = ROOT / "trainer_bridge" / "python" / "examples" / "trainer_receiver.py"
HEARTBEATS = ["--heartbeat-ms", "100", "--heartbeat-timeout-ms", "1000"]


def trajectory(tid: str, filler: int) -> Dict:
    return {
        "schema_version": 1,
        "id": tid,
        "group_id": "g",
        "task_id": "fault-run",
        "turns": [
            {
                "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "k" * filler}],
                "observation": {"text": "ok", "data": {}},
                "reward": 1.0,
            }
        ],
        "total_reward": 1.0,
        "terminated": True,
        "truncated": False,
    }


class Receiver:
    def __init__(self, kind: str, kforge: str, out: Path, state: Path, bind: str, python: str) -> None:
        self.kind, self.kforge, self.out, self.state, self.python = kind, kforge, out, state, python
        self.endpoint = bind
        self.p: Optional[subprocess.Popen] = None
        self.start()

    def start(self) -> None:
        if self.kind == "cpp":
            args = [self.kforge, "receive", "--bind", self.endpoint, "--out", str(self.out), "--state", str(self.state)]
            args += HEARTBEATS
        else:
            args = [self.python, str(EXAMPLE_RECEIVER), "--bind", self.endpoint, "--out", str(self.out)]
            args += ["--state", str(self.state), "--format", "raw", "--timeout", "0.05"]
            args += ["--heartbeat", "0.1", "--heartbeat-timeout", "1.0"]
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.kind} receiver did not start")
        self.endpoint = json.loads(line)["endpoint"]

    def kill(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


class Sender:
    def __init__(self, kforge: str, path: Path, worker: str, spool: Path, endpoint: str) -> None:
        self.args = [kforge, "send", str(path), "--to", endpoint, "--worker", worker, "--spool", str(spool)]
        self.args += ["--flush-timeout", "30", *HEARTBEATS]
        self.p: Optional[subprocess.Popen] = None
        self.starts = 0
        self.start()

    def start(self) -> None:
        self.p = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.starts += 1

    def done(self) -> bool:
        return self.p.poll() == 0

    def kill(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def one_run(args: argparse.Namespace, run: int, rng: random.Random, work: Path) -> Dict:
    kind = args.receiver if args.receiver != "alternate" else ("cpp" if run % 2 == 0 else "python")
    d = work / f"run{run}"
    d.mkdir(parents=True)
    expected: List[str] = []
    inputs = []
    for w in range(args.workers):
        path = d / f"w{w}.jsonl"
        with open(path, "w") as f:
            for i in range(args.trajectories):
                tid = f"r{run}-w{w}-{i}"
                expected.append(tid)
                f.write(json.dumps(trajectory(tid, args.filler)) + "\n")
        inputs.append(path)
    out, state = d / "out.jsonl", d / "state"
    t0 = time.monotonic()
    receiver = Receiver(kind, args.kforge, out, state, "tcp://127.0.0.1:0", args.python)
    senders = [Sender(args.kforge, p, f"w{w}", d / f"spool{w}", receiver.endpoint) for w, p in enumerate(inputs)]
    kills = {"receiver": 0, "sender": 0}
    total = len(expected)
    for _ in range(args.kills):
        time.sleep(rng.uniform(0.05, args.max_gap))
        if count_lines(out) >= total:
            break
        alive = [s for s in senders if s.p.poll() is None]
        if rng.random() < 1 / 3 or not alive:
            receiver.kill()
            kills["receiver"] += 1
            time.sleep(rng.uniform(0.0, 0.2))
            receiver.start()
        else:
            victim = rng.choice(alive)
            victim.kill()
            kills["sender"] += 1
            time.sleep(rng.uniform(0.0, 0.2))
            victim.start()
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        for s in senders:
            # A sender that gave up waiting (the receiver was down too long)
            # is simply started again: its spool resumes.
            if s.p.poll() not in (None, 0):
                s.start()
        if all(s.done() for s in senders) and count_lines(out) >= total:
            break
        time.sleep(0.05)
    receiver.stop()
    for s in senders:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
    got = []
    with open(out) as f:
        for line in f:
            if line.endswith("\n") and line.strip():
                got.append(json.loads(line)["id"])
    missing = set(expected) - set(got)
    return {
        "run": run,
        "receiver": kind,
        "trajectories": total,
        "received_lines": len(got),
        "lost": len(missing),
        "duplicated": len(got) - len(set(got)),
        "unexpected": len(set(got) - set(expected)),
        "kills_receiver": kills["receiver"],
        "kills_sender": kills["sender"],
        "seconds": round(time.monotonic() - t0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kforge", default=os.environ.get("KFORGE_BIN", str(ROOT / "build/default/cli/kforge")))
    ap.add_argument("--python", default=sys.executable, help="interpreter of the Python receiver")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--trajectories", type=int, default=2500, help="per worker")
    ap.add_argument("--filler", type=int, default=2000, help="bytes of assistant text per trajectory")
    ap.add_argument("--kills", type=int, default=8, help="SIGKILLs per run")
    ap.add_argument("--max-gap", type=float, default=0.3, help="longest pause between kills, seconds")
    ap.add_argument("--receiver", choices=["cpp", "python", "alternate"], default="alternate")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a run may take to finish after the kills")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="kforge-fault-run-"))
    print(f"stream fault run: {a.runs} runs x {a.workers} workers x {a.trajectories} trajectories, "
          f"{a.kills} SIGKILLs per run, seed {seed}", flush=True)
    totals = {"trajectories": 0, "lost": 0, "duplicated": 0, "unexpected": 0, "kills_receiver": 0, "kills_sender": 0}
    try:
        for run in range(a.runs):
            r = one_run(a, run, rng, work)
            for k in totals:
                totals[k] += r[k]
            print(
                f"  run {r['run']:2d} ({r['receiver']:6s} receiver): {r['trajectories']} trajectories, "
                f"{r['kills_sender']} sender + {r['kills_receiver']} receiver kills: lost {r['lost']}, "
                f"duplicated {r['duplicated']}, {r['seconds']} s",
                flush=True,
            )
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"  kept in {work}")
    ok = totals["lost"] == 0 and totals["duplicated"] == 0 and totals["unexpected"] == 0
    print(
        f"TOTAL: {totals['trajectories']} trajectories, {totals['kills_sender']} sender and "
        f"{totals['kills_receiver']} receiver SIGKILLs: lost {totals['lost']}, duplicated {totals['duplicated']} "
        f"(target 0 and 0) {'OK' if ok else 'FAILED'}",
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
