"""Audits a synthesized set for shortcuts, independently of the C++ filters:
each task's rendered KernelBench module (kernelbench/*.py) is run under
PyTorch and probed as a skeptical reviewer would (issue 23):

- constant: one constant (the output's mean, median or 0) is within the task's
  tolerance of every element ("passable") or of >= 90 % of them ("mostly");
- activations: redrawing the inputs with the parameters held leaves the
  outputs within the tolerance (all inputs at once, then each alone);
- small: an output's RMS is below atol.

Usage: audit_shortcuts.py OUT_DIR [--device cpu|cuda] [--limit N] [--shard K/N]
                           [--deadline-s S]
Prints one JSON line of counts and the task ids behind each. --shard K/N
audits every N-th task from the K-th (0-based), so that N processes share a
set; --deadline-s stops after S seconds and reports the tasks audited so far
("audited" < "tasks": a partial audit, never read as a whole one).
"""

import argparse
import copy
import importlib.util
import json
import os
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--shard", default="0/1", help="K/N: audit tasks K, K+N, K+2N, ...")
    ap.add_argument("--deadline-s", type=float, default=0, help="stop after this many seconds (0: never)")
    a = ap.parse_args(argv)
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
    summary = {"tasks": len(mine), "audited": audited, "shard": a.shard, "device": a.device}
    summary.update({k: len(v) for k, v in found.items()})
    summary["ids"] = {k: v[:20] for k, v in found.items() if v}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
