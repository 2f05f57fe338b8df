"""Audits a synthesized set for shortcuts, independently of the C++ filters:
each task's rendered KernelBench module (kernelbench/*.py) is run under
PyTorch and probed as a skeptical reviewer would (docs/data-synthesis.md#measuring):

- constant: one constant (the output's mean, median or 0) is within the task's
  tolerance of every element ("passable") or of >= 90 % of them ("mostly");
- activations: redrawing the inputs with the parameters held leaves the
  outputs within the tolerance (all inputs at once, then each alone);
- small: an output's RMS is below atol.

Usage: audit_shortcuts.py OUT_DIR [--device cpu|cuda] [--limit N] [--shard K/N]
                           [--jobs N] [--deadline-s S] [--write]
Prints one JSON line of counts and the task ids behind each. --shard K/N
audits every N-th task from the K-th (0-based), so that N processes share a
set; --jobs N starts the N shards as processes of their own and merges their
lines into one (on a GPU they share the device: a 1,000-task set in one
device call); --deadline-s stops after S seconds and reports the tasks
audited so far ("audited" < "tasks": a partial audit, never read as a whole
one); --write also writes the line to OUT_DIR/audit_shortcuts.json, which
the dataset card reads.
"""

import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import time

import torch

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


def run_shards(a):
    """Starts --jobs processes, one shard each, and merges their lines."""
    base = [sys.executable, os.path.abspath(__file__), a.out, "--device", a.device, "--limit", str(a.limit)]
    if a.deadline_s:
        base += ["--deadline-s", str(a.deadline_s)]
    procs = [subprocess.Popen(base + ["--shard", "%d/%d" % (k, a.jobs)], stdout=subprocess.PIPE, text=True)
             for k in range(a.jobs)]
    merged = {"tasks": 0, "audited": 0, "shards": a.jobs, "device": a.device, "ids": {}, "failed_shards": []}
    merged.update({k: 0 for k in KINDS})
    for k, p in enumerate(procs):
        out, _ = p.communicate()
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            merged["failed_shards"].append("%d/%d: exit %s" % (k, a.jobs, p.returncode))
            continue
        part = json.loads(lines[-1])
        for key in ("tasks", "audited") + KINDS:
            merged[key] += part.get(key, 0)
        for key, ids in part.get("ids", {}).items():
            merged["ids"].setdefault(key, []).extend(ids)
    merged["ids"] = {k: v[:20] for k, v in merged["ids"].items()}
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--shard", default="0/1", help="K/N: audit tasks K, K+N, K+2N, ...")
    ap.add_argument("--deadline-s", type=float, default=0, help="stop after this many seconds (0: never)")
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
    audited = 0
    found = {"passable_by_constant": [], "mostly_constant": [], "ignores_activations": [], "ignores_an_input": [],
             "rms_below_atol": [], "errors": []}
    for i in mine:
        if a.deadline_s and time.monotonic() - start > a.deadline_s:
            break
        t = tasks[i]
        audited += 1
        name = t["id"].replace("/", "_") + ".py"
        tol = t.get("tolerance") or {"rtol": 1e-2, "atol": 1e-2}
        rtol, atol = tol["rtol"], tol["atol"]
        try:
            module = load(os.path.join(a.out, "kernelbench", name), str(i))
            torch.manual_seed(1000 + i)
            model = module.Model(*module.get_init_inputs()).to(a.device)
            torch.manual_seed(0)
            in0 = [x.to(a.device) for x in module.get_inputs()]
            torch.manual_seed(1)
            in1 = [x.to(a.device) for x in module.get_inputs()]
            out0 = run(model, in0)
            if close(run(model, in1), out0, rtol, atol):
                found["ignores_activations"].append(t["id"])
            for j in range(len(in0)):
                if len(in0) > 1 and not torch.equal(in0[j], in1[j]):
                    mixed = list(in0)
                    mixed[j] = in1[j]
                    if close(run(model, mixed), out0, rtol, atol):
                        found["ignores_an_input"].append(t["id"])
                        break
            for o in out0:
                if not o.is_floating_point():
                    continue
                share = constant_share(o, rtol, atol)
                if share >= 1.0:
                    found["passable_by_constant"].append(t["id"])
                if share >= 0.9:
                    found["mostly_constant"].append(t["id"])
                if float(o.double().pow(2).mean().sqrt()) < atol:
                    found["rms_below_atol"].append(t["id"])
        except Exception as e:  # reported, not fatal: the audit goes on
            found["errors"].append("%s: %s" % (t["id"], str(e).splitlines()[0][:160]))
    summary = {"tasks": len(mine), "audited": audited, "shard": a.shard, "shards": shards, "device": a.device}
    summary.update({k: len(v) for k, v in found.items()})
    summary["ids"] = {k: v[:20] for k, v in found.items() if v}
    summary["seconds"] = round(time.monotonic() - start, 1)
    emit(summary, a)
    return 0


def emit(summary, a):
    print(json.dumps(summary))
    if a.write:
        path = os.path.join(a.out, "audit_shortcuts.json")
        with open(path + ".tmp", "w") as f:
            json.dump(summary, f, indent=1)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
