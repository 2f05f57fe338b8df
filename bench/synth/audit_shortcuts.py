"""Audits a synthesized set for shortcuts, independently of the C++ filters:
each task's rendered KernelBench module (kernelbench/*.py) is run under
PyTorch and probed as a skeptical reviewer would (docs/data-synthesis.md#measuring):

- constant: one constant (the output's mean, median or 0) is within the task's
  tolerance of every element ("passable") or of >= 90 % of them ("mostly");
- activations: redrawing the inputs with the parameters held leaves the
  outputs within the tolerance (all inputs at once, then each alone);
- small: an output's RMS is below atol.

Usage: audit_shortcuts.py OUT_DIR [--device cpu|cuda] [--limit N] [--shard K/N]
                           [--only IDS] [--jobs N] [--deadline-s S] [--write]
Prints one JSON line of counts and the task ids behind each. --shard K/N
audits every N-th task from the K-th (0-based), so that N processes share a
set; --jobs N starts the N shards as processes of their own and merges their
lines into one (on a GPU they share the device: a 1,000-task set in one
device call); --deadline-s stops after S seconds and reports the tasks
audited so far ("audited" < "tasks": a partial audit, never read as a whole
one); --write also writes the line to OUT_DIR/audit_shortcuts.json, which
the dataset card reads.

Shards share one GPU (or the host's memory), so a task can find the device
full of its neighbours' tensors: each process frees its cache after every
task, and a task that runs out of device memory is not an error of the task
but deferred. Once every shard has finished, the deferred tasks are audited
again by one process alone on the device (--only, a file of task ids, one per
line; "deferred_alone" counts them); what fails there is an error like any
other.
"""

import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

import audit_line

sys.dont_write_bytecode = True


def load(path, label):
    spec = importlib.util.spec_from_file_location("audited_" + label, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(model, inputs):
    low = [x for x in inputs if x.dtype in (torch.float16, torch.bfloat16)]
    with torch.no_grad():
        if low and inputs[0].device.type == "cpu":
            # CPU PyTorch lacks or mangles some half kernels (batch_norm,
            # bfloat16 conv_transpose); the C++ reference holds half values
            # in float32 on the CPU, and so does the audit.
            out = copy.deepcopy(model).float()(*[x.float() if x.dtype == low[0].dtype else x for x in inputs])
            out = tuple(o.to(low[0].dtype) if o.is_floating_point() else o
                        for o in (out if isinstance(out, tuple) else (out,)))
        else:
            out = model(*inputs)
    return out if isinstance(out, tuple) else (out,)


def close(a, b, rtol, atol):
    for x, y in zip(a, b):
        if x.is_floating_point():
            if not torch.allclose(x.double(), y.double(), rtol=rtol, atol=atol):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def constant_share(ref, rtol, atol):
    x = ref.double().reshape(-1)
    bound = x.abs() * rtol + atol
    return max(float(((x - c).abs() <= bound).double().mean()) for c in (x.mean(), x.median(), torch.tensor(0.0)))


KINDS = ("passable_by_constant", "mostly_constant", "ignores_activations", "ignores_an_input", "rms_below_atol",
         "errors")
# Task ids a shard could not audit for lack of device memory (the module doc).
DEFERRED = "deferred_out_of_memory"
# The share of --deadline-s kept for them: 20 tasks of a 1,000-task H100 set
# ran out of memory beside three other shards, 2 % of the set, audited by one
# process where the rest had four.
DEFERRED_SHARE = 0.1


def shard_command(a, deadline_s):
    command = [sys.executable, os.path.abspath(__file__), a.out, "--device", a.device, "--limit", str(a.limit)]
    return command + (["--deadline-s", str(deadline_s)] if deadline_s else [])


def merge(merged, out, returncode, label):
    """Adds one process's line to `merged`, or `label` to its failed shards."""
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if returncode != 0 or not lines:
        merged["failed_shards"].append("%s: exit %s" % (label, returncode))
        return
    part = json.loads(lines[-1])
    for key in ("tasks", "audited") + KINDS:
        merged[key] += part.get(key, 0)
    for key, ids in part.get("ids", {}).items():
        merged["ids"].setdefault(key, []).extend(ids)


def run_shards(a):
    """Starts --jobs processes, one shard each, merges their lines, then
    audits the tasks they deferred for lack of device memory in one process."""
    started = time.monotonic()
    # The shards stop at 90 % of the deadline: the rest is the deferred tasks'.
    shard_deadline_s = a.deadline_s * (1 - DEFERRED_SHARE) if a.deadline_s else 0
    procs = [subprocess.Popen(shard_command(a, shard_deadline_s) + ["--shard", "%d/%d" % (k, a.jobs),
                                                                    "--defer-out-of-memory"],
                              stdout=subprocess.PIPE, text=True) for k in range(a.jobs)]
    merged = {"tasks": 0, "audited": 0, "shards": a.jobs, "device": a.device, "ids": {}, "failed_shards": []}
    merged.update({k: 0 for k in KINDS})
    for k, p in enumerate(procs):
        out, _ = p.communicate()
        merge(merged, out, p.returncode, "%d/%d" % (k, a.jobs))
    deferred = merged["ids"].pop(DEFERRED, [])
    merged["deferred_alone"] = len(deferred)
    if deferred:
        left = a.deadline_s - (time.monotonic() - started) if a.deadline_s else 0
        with tempfile.NamedTemporaryFile("w", prefix="audit_deferred_", suffix=".txt") as ids:
            ids.write("".join(i + "\n" for i in deferred))
            ids.flush()
            alone = subprocess.run(shard_command(a, max(left, 1.0) if a.deadline_s else 0) + ["--only", ids.name],
                                   stdout=subprocess.PIPE, text=True)
        # The tasks were counted by their shards; their verdicts are new. A
        # task short of memory even alone is an error there, like any other.
        tasks = merged["tasks"]
        merge(merged, alone.stdout, alone.returncode, "deferred tasks alone")
        merged["tasks"] = tasks
    merged["ids"] = {k: v[:20] for k, v in merged["ids"].items()}
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--shard", default="0/1", help="K/N: audit tasks K, K+N, K+2N, ...")
    ap.add_argument("--deadline-s", type=float, default=0, help="stop after this many seconds (0: never)")
    ap.add_argument("--only", default="", help="a file of task ids, one per line: audit only those")
    ap.add_argument("--defer-out-of-memory", action="store_true", help=argparse.SUPPRESS)  # set by --jobs
    ap.add_argument("--jobs", type=int, default=1, help="processes, one shard each, merged into one line")
    ap.add_argument("--write", action="store_true", help="also write OUT/audit_shortcuts.json (the card reads it)")
    a = ap.parse_args(argv)
    if a.jobs < 1 or a.jobs > 256:
        ap.error("--jobs: expected 1 to 256 processes; got %d" % a.jobs)
    if a.jobs > 1:
        if a.shard != "0/1":
            ap.error("--jobs starts every shard itself: give --jobs or --shard, not both")
        started = time.monotonic()
        summary = run_shards(a)
        summary["seconds"] = round(time.monotonic() - started, 1)
        emit(summary, a)
        return 0 if not summary["failed_shards"] else 1
    try:
        shard, shards = (int(v) for v in a.shard.split("/"))
        if not 0 <= shard < shards:
            raise ValueError
    except ValueError:
        ap.error("--shard: expected K/N with 0 <= K < N, e.g. 0/4; got %r" % a.shard)
    start = time.monotonic()
    tasks = [json.loads(line) for line in open(os.path.join(a.out, "tasks.jsonl")) if line.strip()]
    if a.limit:
        tasks = tasks[:a.limit]
    mine = list(range(shard, len(tasks), shards))
    if a.only:
        wanted = set(line.strip() for line in open(a.only) if line.strip())
        mine = [i for i in mine if tasks[i]["id"] in wanted]
    audited = 0
    found = {kind: [] for kind in KINDS}
    deferred = []
    for i in mine:
        if a.deadline_s and time.monotonic() - start > a.deadline_s:
            break
        task_id = tasks[i]["id"]
        try:
            kinds = audit_task(a, i, tasks[i])
            audited += 1
            for kind in kinds:
                found[kind].append(task_id)
        except Exception as e:  # reported, not fatal: the audit goes on
            if a.defer_out_of_memory and out_of_device_memory(e):
                deferred.append(task_id)
            else:
                audited += 1
                found["errors"].append("%s: %s" % (task_id, str(e).splitlines()[0][:160]))
        if a.device.startswith("cuda"):
            # What this task left cached is another shard's next task's room.
            torch.cuda.empty_cache()
    summary = {"tasks": len(mine), "audited": audited, "shard": a.shard, "shards": shards, "device": a.device}
    summary.update({k: len(v) for k, v in found.items()})
    summary["ids"] = {k: v[:20] for k, v in found.items() if v}
    if deferred:
        summary["ids"][DEFERRED] = deferred
    summary["seconds"] = round(time.monotonic() - start, 1)
    emit(summary, a)
    return 0


def out_of_device_memory(e):
    """The allocator of the device the audit runs on refused: CUDA's, or the
    host's when shards share the host's memory (--device cpu)."""
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    text = str(e)
    return (oom is not None and isinstance(e, oom)) or "CUDA out of memory" in text or \
        "DefaultCPUAllocator: can't allocate memory" in text


def audit_task(a, i, t):
    """The kinds of shortcut (KINDS) task `t`, the i-th of the set, offers:
    found all at once, so that a task retried after running out of device
    memory is never counted twice."""
    tol = t.get("tolerance") or {"rtol": 1e-2, "atol": 1e-2}
    rtol, atol = tol["rtol"], tol["atol"]
    kinds = []
    module = load(os.path.join(a.out, "kernelbench", t["id"].replace("/", "_") + ".py"), str(i))
    torch.manual_seed(1000 + i)
    model = module.Model(*module.get_init_inputs()).to(a.device)
    torch.manual_seed(0)
    in0 = [x.to(a.device) for x in module.get_inputs()]
    torch.manual_seed(1)
    in1 = [x.to(a.device) for x in module.get_inputs()]
    out0 = run(model, in0)
    if close(run(model, in1), out0, rtol, atol):
        kinds.append("ignores_activations")
    for j in range(len(in0)):
        if len(in0) > 1 and not torch.equal(in0[j], in1[j]):
            mixed = list(in0)
            mixed[j] = in1[j]
            if close(run(model, mixed), out0, rtol, atol):
                kinds.append("ignores_an_input")
                break
    for o in out0:
        if not o.is_floating_point():
            continue
        share = constant_share(o, rtol, atol)
        if share >= 1.0:
            kinds.append("passable_by_constant")
        if share >= 0.9:
            kinds.append("mostly_constant")
        if float(o.double().pow(2).mean().sqrt()) < atol:
            kinds.append("rms_below_atol")
    return kinds


def emit(summary, a):
    audit_line.emit(summary, a.out, "audit_shortcuts.json", a.write)


if __name__ == "__main__":
    sys.exit(main())
