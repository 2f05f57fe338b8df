#!/usr/bin/python3
"""A policy that learns through the whole system, in plain PyTorch (no LLM).

The policy maps a task's features to a choice of the kernel template's knobs
(the template policy's variants: fusion, unrolling, accumulators, tiling,
naive or tiled matmul, and on CUDA block size and vector width). It is served
to `kforge rollout` through `kforge.PolicyServer`: each episode asks it once,
and it answers with a `submit` of the template source for the knobs it drew
(`kforge task template`). The rollout worker runs the episodes on the
environment (compile, verify, time, reward) and streams the trajectories back
through `kforge.TrajectoryStream`. The trainer groups them by task (GRPO: the
group's rewards minus their mean are the advantages), takes a clipped
policy-gradient step, and publishes the next policy version; the worker
drops episodes more than one version stale (`max_policy_lag: 1`) and the
update reweights the rest by the probability ratio of the knobs under the
current and the sampling policy (their logprobs travel in the trajectory as
the reply's `logprobs`, the knob indices as its `token_ids`).

Before training, the same tasks are played with knobs drawn uniformly at
random (the random-choice baseline, through the same system). The result:
OUT/curve.json (per iteration: mean reward, mean speedup vs eager, episodes,
stale drops; the baseline's mean and spread) and OUT/learning_curve.png.

    /usr/bin/python3 examples/learning/train.py --kforge build/default/cli/kforge --out runs/learning
    # GPU: examples/learning/run_gpu.sh OUTDIR

Needs Debian's python3-torch, python3-matplotlib, python3-zmq, python3-msgpack.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "trainer_bridge" / "python"))

import torch  # noqa: E402

from kforge import PolicyServer, TrajectoryStream  # noqa: E402

# The template's knobs that matter per mode (rollout/src/policy/template_policy/variant.cpp)
# and the values a variant text needs for the others.
KNOBS = {
    "cpp": {"fuse": [0, 1], "unroll": [1, 2, 4, 8], "acc": [1, 4, 8], "tile": [1, 4], "naive_matmul": [0, 1]},
    "cuda": {"fuse": [0, 1], "block": [128, 256, 512], "vec": [1, 4], "unroll": [1, 2, 4, 8], "tile": [16, 32],
             "naive_matmul": [0, 1]},
}
DEFAULTS = {"fuse": 1, "block": 256, "vec": 4, "unroll": 1, "acc": 4, "tile": 16, "naive_matmul": 0}
ORDER = ["fuse", "block", "vec", "unroll", "acc", "tile", "naive_matmul"]
OP_KINDS = {
    "matmul": {"matmul", "bmm", "linear", "addmm"},
    "reduction": {"sum", "mean", "max", "min", "amax", "var", "std", "norm", "logsumexp", "prod"},
    "norm": {"layer_norm", "rms_norm", "instance_norm", "softmax", "log_softmax", "group_norm", "batch_norm"},
}


def variant_text(choice: Dict[str, int]) -> str:
    v = {**DEFAULTS, **choice}
    return " ".join(f"{k}={v[k]}" for k in ORDER)


def task_features(task: Dict[str, Any], index: int, n_tasks: int) -> List[float]:
    """What the policy sees: op kinds, size, and the task's index."""
    ops = [n.get("op", "") for n in task.get("graph", task.get("nodes", []))]
    numel = 1
    for x in task.get("inputs", []):
        numel = max(numel, math.prod(x.get("shape", [1])))
    pointwise = sum(1 for o in ops if not any(o in s for s in OP_KINDS.values()))
    f = [1.0, math.log10(numel) / 8.0, pointwise / 4.0]
    f += [float(any(o in OP_KINDS[k] for o in ops)) for k in ("matmul", "reduction", "norm")]
    f += [1.0 if i == index else 0.0 for i in range(n_tasks)]
    return f


class KnobPolicy(torch.nn.Module):
    """Task features -> one categorical distribution per knob."""

    def __init__(self, n_features: int, knobs: Dict[str, List[int]], hidden: int = 32) -> None:
        super().__init__()
        self.names = list(knobs)
        self.body = torch.nn.Sequential(torch.nn.Linear(n_features, hidden), torch.nn.Tanh())
        self.heads = torch.nn.ModuleList(torch.nn.Linear(hidden, len(knobs[n])) for n in self.names)
        for head in self.heads:  # start uniform: the first iteration is the random policy
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)

    def dists(self, x: torch.Tensor) -> List[torch.distributions.Categorical]:
        h = self.body(x)
        return [torch.distributions.Categorical(logits=head(h)) for head in self.heads]

    def logp(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Per-knob log-probabilities of `idx` [batch, knobs] -> [batch, knobs]."""
        return torch.stack([d.log_prob(idx[:, k]) for k, d in enumerate(self.dists(x))], dim=1)


def shrink(task: Dict[str, Any], factor: int) -> Dict[str, Any]:
    """The task with its inputs' leading dimension divided by `factor` (CPU
    runs: the examples' shapes take seconds per verification)."""
    t = json.loads(json.dumps(task))
    for x in t.get("inputs", []):
        if x.get("shape") and x["shape"][0] >= 4 * factor:
            x["shape"][0] //= factor
    t["shape_variants"] = []
    return t


class Trainer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.mode = "cuda" if args.backend == "cuda" else "cpp"
        self.knobs = KNOBS[self.mode]
        torch.manual_seed(args.seed)
        self.rng = random.Random(args.seed)
        self.tasks = self._prepare_tasks()
        self.ids = sorted(self.tasks)
        self.features = {tid: torch.tensor(task_features(self.tasks[tid], i, len(self.ids)))
                         for i, tid in enumerate(self.ids)}
        self.sources = self._templates()
        self.policy = KnobPolicy(len(next(iter(self.features.values()))), self.knobs)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=args.lr)
        self.version = 0
        self.random_mode = False
        self.lock = threading.Lock()

    def _prepare_tasks(self) -> Dict[str, Dict[str, Any]]:
        src = Path(self.args.tasks)
        files = sorted(src.glob("*/task.json")) if src.is_dir() else [src]
        tasks = {}
        dst = self.out / "tasks"
        for f in files:
            task = json.loads(f.read_text())
            if self.args.only and task["id"] not in self.args.only:
                continue
            if self.args.shrink > 1:
                task = shrink(task, self.args.shrink)
            (dst / f.parent.name).mkdir(parents=True, exist_ok=True)
            (dst / f.parent.name / "task.json").write_text(json.dumps(task, indent=1))
            tasks[task["id"]] = task
        if not tasks:
            raise SystemExit(f"no tasks in {src} (--only {self.args.only})")
        return tasks

    def _templates(self) -> Dict[str, Dict[str, str]]:
        """Every variant's source per task, from `kforge task template`."""
        combos = [dict(zip(self.knobs, values)) for values in itertools.product(*self.knobs.values())]
        out = {}
        for tid in self.ids:
            path = next(p for p in (self.out / "tasks").glob("*/task.json") if json.loads(p.read_text())["id"] == tid)
            cmd = [self.args.kforge, "task", "template", str(path), "--mode", self.mode, "--json"]
            for c in combos:
                cmd += ["--variant", variant_text(c)]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SystemExit(f"kforge task template {path}: {r.stderr.strip()}")
            out[tid] = json.loads(r.stdout)["sources"]
        return out

    # --- the policy server's side -------------------------------------------------
    def act(self, requests: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        replies = []
        with self.lock:
            version = "random" if self.random_mode else str(self.version)
            for r in requests:
                tid = r["task_id"]
                with torch.no_grad():
                    dists = self.policy.dists(self.features[tid].unsqueeze(0))
                if self.random_mode:
                    idx = [self.rng.randrange(len(v)) for v in self.knobs.values()]
                    logps = [-math.log(len(v)) for v in self.knobs.values()]
                else:
                    idx = [int(d.sample().item()) for d in dists]
                    logps = [float(d.log_prob(torch.tensor([i])).item()) for d, i in zip(dists, idx)]
                choice = {n: self.knobs[n][i] for n, i in zip(self.knobs, idx)}
                text = variant_text(choice)
                replies.append({
                    "content": "variant: " + text,
                    "tool_calls": [{"id": "c0", "type": "function", "function": {
                        "name": "submit", "arguments": json.dumps({"source": self.sources[tid][text]})}}],
                    "token_ids": idx, "logprobs": logps, "policy_version": version,
                })
        return replies

    # --- one phase: a `kforge rollout` run streaming to this trainer ---------------
    def rollout_config(self, phase: str, groups: int, policy_endpoint: str, stream_endpoint: str) -> Path:
        n = len(self.ids)
        cfg = {
            "env": str(Path(self.args.env).resolve()),
            "tasks": str(self.out / "tasks"),
            "order": "sequential",
            "groups": groups,
            "group_size": self.args.group_size,
            "concurrency": self.args.group_size * n,
            "episode": {"max_turns": 1},
            "policy": {"kind": "zmq", "endpoint": policy_endpoint, "timeout_s": 600, "max_batch": 64},
            "max_policy_lag": 1,
            "group_normalization": "none",
            "output": {"jsonl": str(self.out / f"trajectories-{phase}.jsonl")},
            "stream": {"endpoint": stream_endpoint, "worker_id": f"learning-{phase}",
                       "spool_dir": str(self.out / f"spool-{phase}"), "flush_timeout_s": 120},
            "seed": self.args.seed,
        }
        path = self.out / f"rollout-{phase}.json"
        path.write_text(json.dumps(cfg, indent=1))
        return path

    def run_phase(self, phase: str, iterations: int, train: bool) -> List[Dict[str, Any]]:
        n = len(self.ids)
        groups = iterations * n
        rows: List[Dict[str, Any]] = []
        with PolicyServer(self.act, bind="tcp://127.0.0.1:0", policy_version=0) as server, \
                TrajectoryStream("tcp://127.0.0.1:0", state_dir=str(self.out / f"stream-{phase}"),
                                 credit=4 * self.args.group_size * n) as stream:
            server.start()
            self.server = server
            cfg = self.rollout_config(phase, groups, server.endpoint, stream.endpoint)
            log = open(self.out / f"rollout-{phase}.log", "w")
            worker = subprocess.Popen([self.args.kforge, "rollout", "--config", str(cfg)],
                                      stdout=log, stderr=subprocess.STDOUT)
            pending: Dict[str, List[Dict[str, Any]]] = {}
            done_groups = 0
            try:
                while done_groups < groups:
                    batch = stream.next_batch(size=self.args.group_size * n, timeout=2.0)
                    if not batch and worker.poll() is not None:
                        if done_groups < groups:
                            print(f"[{phase}] the rollout worker exited ({worker.returncode}) after "
                                  f"{done_groups} of {groups} groups; see {log.name}", file=sys.stderr)
                        break
                    for d in batch:
                        pending.setdefault(d.data["group_id"], []).append(d.data)
                    stream.ack(batch)
                    ready = [g for g, ts in pending.items() if len(ts) >= self.args.group_size]
                    # An iteration's worth of complete groups (or the rest at the end).
                    if len(ready) >= n or (ready and done_groups + len(ready) >= groups):
                        trajs = [t for g in ready for t in pending.pop(g)]
                        done_groups += len(ready)
                        rows.append(self.iteration(phase, len(rows), trajs, train))
            finally:
                worker.wait(timeout=600)
                log.close()
            stats = self._rollout_summary(phase)
            if rows:
                rows[-1]["rollout_summary"] = stats
        return rows

    def _rollout_summary(self, phase: str) -> Dict[str, Any]:
        text = (self.out / f"rollout-{phase}.log").read_text(errors="replace")
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
        return {}

    def iteration(self, phase: str, it: int, trajs: List[Dict[str, Any]], train: bool) -> Dict[str, Any]:
        rewards, speedups, stale = [], [], 0
        xs, idxs, old_logps, advs = [], [], [], []
        by_group: Dict[str, List[Dict[str, Any]]] = {}
        for t in trajs:
            by_group.setdefault(t["group_id"], []).append(t)
        for group in by_group.values():
            rs = [float(t["total_reward"]) for t in group]
            mean = sum(rs) / len(rs)
            for t, r in zip(group, rs):
                rewards.append(r)
                env = t["turns"][-1]["info"].get("env", {}) if t["turns"] else {}
                s = (env.get("measurement") or {}).get("speedup_eager")
                speedups.append(float(s) if s is not None else 0.0)
                pol = t["turns"][0]["info"]["policy"] if t["turns"] else {}
                version = pol.get("version")
                if train and version not in (None, "random") and int(version) < self.version - 1:
                    stale += 1  # beyond the lag the worker allows: not trained on
                    continue
                if pol.get("token_ids") is None:
                    continue  # a policy error (no choice recorded)
                xs.append(self.features[t["task_id"]])
                idxs.append(pol["token_ids"])
                old_logps.append(pol["logprobs"])
                # Group-relative, not divided by the group's spread (as Dr. GRPO):
                # a task whose knobs barely matter has a spread of timing noise
                # only, and dividing by it would give that noise the weight of
                # a real tenfold difference on another task.
                advs.append(r - mean)
        loss_value = None
        if train and xs:
            x = torch.stack(xs)
            idx = torch.tensor(idxs)
            old = torch.tensor(old_logps)  # [episodes, knobs]: the sampling policy's
            adv = torch.tensor(advs).unsqueeze(1)
            for _ in range(self.args.epochs):
                new = self.policy.logp(x, idx)
                # A ratio per knob, as an LLM trainer clips per token: 1 on fresh
                # data at the first step, the correction for one-version-stale
                # episodes, and no knob moves more than 20% per update.
                ratio = torch.exp(new - old)
                loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            loss_value = float(loss.item())
            with self.lock:
                self.version += 1
                self.server.policy_version = str(self.version)
        row = {
            "phase": phase, "iteration": it, "policy_version": self.version, "episodes": len(rewards),
            "mean_reward": sum(rewards) / max(1, len(rewards)),
            "mean_speedup": sum(speedups) / max(1, len(speedups)),
            "stale_skipped": stale, "loss": loss_value,
        }
        print(json.dumps(row), flush=True)
        return row

    def greedy_choices(self) -> Dict[str, str]:
        with torch.no_grad():
            return {tid: variant_text({n: self.knobs[n][int(d.probs.argmax())] for n, d in
                                       zip(self.knobs, self.policy.dists(self.features[tid].unsqueeze(0)))})
                    for tid in self.ids}


def plot(curve: Dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = curve["training"]
    its = [r["iteration"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in ((axes[0], "mean_reward", "mean reward"), (axes[1], "mean_speedup", "mean speedup vs eager")):
        ax.plot(its, [r[key] for r in rows], "o-", label="GRPO policy")
        b = curve["baseline"][key]
        ax.axhline(b["mean"], color="gray", linestyle="--", label="random choice (mean)")
        ax.axhspan(b["mean"] - b["stderr"], b["mean"] + b["stderr"], color="gray", alpha=0.2)
        ax.set_xlabel("iteration (policy version)")
        ax.set_ylabel(label)
        ax.legend()
    fig.suptitle(f"KernelForge learning example ({curve['backend']}, {len(curve['tasks'])} tasks, "
                 f"group size {curve['group_size']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def summarize(trajectories: Path) -> Dict[str, Any]:
    """The baseline's per-episode mean and standard error, from its JSONL."""
    out: Dict[str, Any] = {}
    episodes = [json.loads(l) for l in trajectories.read_text().splitlines() if l.strip()]
    for key in ("mean_reward", "mean_speedup"):
        if key == "mean_reward":
            xs = [float(t["total_reward"]) for t in episodes]
        else:
            xs = [float(((t["turns"][-1]["info"].get("env", {}).get("measurement") or {}).get("speedup_eager") or 0.0))
                  for t in episodes if t["turns"]]
        m = sum(xs) / max(1, len(xs))
        var = sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1)
        out[key] = {"mean": m, "stderr": (var / max(1, len(xs))) ** 0.5, "episodes": len(xs)}
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kforge", default=str(REPO / "build" / "default" / "cli" / "kforge"))
    p.add_argument("--out", required=True, help="output directory (curve.json, learning_curve.png, trajectories)")
    p.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--env", default=None, help="environment config (default: examples/learning/env-<backend>.yaml)")
    p.add_argument("--tasks", default=str(REPO / "examples"), help="a directory of <name>/task.json")
    p.add_argument("--only", nargs="*", default=[], help="task ids to use (default: all)")
    p.add_argument("--shrink", type=int, default=None, help="divide inputs' leading dim (default: 4 on cpu, 1 on cuda)")
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--baseline-iterations", type=int, default=3)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4, help="gradient steps per batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.env is None:
        args.env = str(Path(__file__).resolve().parent / f"env-{args.backend}.yaml")
    if args.shrink is None:
        args.shrink = 4 if args.backend == "cpu" else 1

    t0 = time.monotonic()
    trainer = Trainer(args)
    trainer.random_mode = True
    trainer.run_phase("random", args.baseline_iterations, train=False)
    baseline = summarize(trainer.out / "trajectories-random.jsonl")
    trainer.random_mode = False
    rows = trainer.run_phase("train", args.iterations, train=True)
    curve = {
        "backend": args.backend, "tasks": trainer.ids, "group_size": args.group_size,
        "knobs": trainer.knobs, "baseline": baseline, "training": rows,
        "final_greedy_choices": trainer.greedy_choices(), "seconds": time.monotonic() - t0,
    }
    (trainer.out / "curve.json").write_text(json.dumps(curve, indent=1))
    plot(curve, trainer.out / "learning_curve.png")
    k = max(1, len(rows) // 3)
    last = sum(r["mean_reward"] for r in rows[-k:]) / k if rows else float("nan")
    print(json.dumps({"baseline_mean_reward": baseline["mean_reward"]["mean"],
                      "baseline_mean_speedup": baseline["mean_speedup"]["mean"],
                      "first_iteration_mean_reward": rows[0]["mean_reward"] if rows else None,
                      f"last_{k}_iterations_mean_reward": last,
                      "last_iteration_mean_speedup": rows[-1]["mean_speedup"] if rows else None,
                      "iterations": len(rows), "policy_version": trainer.version,
                      "curve": str(trainer.out / "curve.json"), "plot": str(trainer.out / "learning_curve.png")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
