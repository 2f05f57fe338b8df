"""Cross-checks a synthesized set for KernelBench contamination by meaning,
independently of the C++ rule (data_synth/src/contamination*.cpp): its own
table of what each KernelBench level-1 problem computes, by op name, and no
cost model. A task is flagged when

- its work is one level-1 problem plus pointwise or layout ops: exactly one
  op outside the pointwise and layout ops, and that op is a level-1 problem's
  (a GEMM, a convolution, a pooling of either kind, adaptive or not, a
  reduction, a norm, a softmax), whatever surrounds it;
- it is pointwise only and one of its ops is a level-1 activation problem
  (level1/19-32).

The C++ rule rejects both before a task is accepted, so a flagged task is a
place where the two disagree: a miss of the rule, or a table entry here that
is wrong. Either way it is worth a look before a set ships.

Usage: audit_contamination.py OUT_DIR [--write]
Prints one JSON line: tasks, flagged, counts by reason and up to 20 ids and
op lists per reason; --write also writes OUT_DIR/audit_contamination.json,
which the dataset card reads.
"""

import argparse
import json
import os
import sys

import audit_line

# Ops a fused kernel does in the pass it already makes: elementwise math,
# activations, comparisons and selects, and layout.
CHEAP = set("""
add sub mul div neg abs pow square sqrt rsqrt reciprocal exp log log1p sin cos erf sign
relu relu6 gelu sigmoid tanh silu mish softsign softplus hardsigmoid hardswish hardtanh elu selu leaky_relu
clamp maximum minimum where ge gt le lt eq ne
flatten transpose contiguous reshape view permute squeeze unsqueeze expand narrow slice repeat dropout identity
""".split())

# What each op alone is among KernelBench's level-1 problems.
LEVEL1 = {}
for _op in ("matmul", "mm", "bmm", "linear"):
    LEVEL1[_op] = "level1/1-18 matrix multiplication"
for _op in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
    LEVEL1[_op] = "level1/54-87 convolution"
for _d in ("1d", "2d", "3d"):
    LEVEL1["max_pool" + _d] = LEVEL1["adaptive_max_pool" + _d] = "level1/41-43 max pooling"
    LEVEL1["avg_pool" + _d] = LEVEL1["adaptive_avg_pool" + _d] = "level1/44-46 average pooling"
LEVEL1.update({
    "sum": "level1/47 sum reduction", "mean": "level1/48 mean reduction", "max": "level1/49 max reduction",
    "amax": "level1/49 max reduction", "argmax": "level1/51 argmax", "argmin": "level1/52 argmin",
    "min": "level1/53 min reduction", "amin": "level1/53 min reduction", "cumsum": "level1/89 cumsum",
    "cumprod": "level1/90 cumprod", "batch_norm": "level1/33 BatchNorm", "instance_norm": "level1/34 InstanceNorm",
    "group_norm": "level1/35 GroupNorm", "rms_norm": "level1/36 RMSNorm", "norm": "level1/37-39 norms",
    "layer_norm": "level1/40 LayerNorm", "softmax": "level1/23 Softmax", "log_softmax": "level1/24 LogSoftmax",
})
ACTIVATIONS = {
    "relu": "level1/19 ReLU", "leaky_relu": "level1/20 LeakyReLU", "sigmoid": "level1/21 Sigmoid",
    "tanh": "level1/22 Tanh", "silu": "level1/25 Swish", "gelu": "level1/26 GELU", "selu": "level1/27 SELU",
    "hardsigmoid": "level1/28 HardSigmoid", "softplus": "level1/29 Softplus", "softsign": "level1/30 Softsign",
    "elu": "level1/31 ELU", "hardtanh": "level1/32 HardTanh",
}

# A task file line larger than this is not one this tool reads.
MAX_LINE_BYTES = 1 << 20
MAX_NODES = 4096


def flag(ops):
    """The reason `ops` (a task's op names) is a level-1 problem by meaning, or None."""
    heavy = [op for op in ops if op not in CHEAP]
    if len(heavy) == 1 and heavy[0] in LEVEL1:
        return "one level-1 problem plus pointwise work: " + LEVEL1[heavy[0]]
    if not heavy:
        for op in ops:
            if op in ACTIVATIONS:
                return "pointwise only, with a level-1 activation: " + ACTIVATIONS[op]
    return None


def task_ops(line, number):
    if len(line) > MAX_LINE_BYTES:
        raise ValueError("tasks.jsonl line %d: %d bytes, over %d" % (number, len(line), MAX_LINE_BYTES))
    task = json.loads(line)
    nodes = task.get("nodes")
    if not isinstance(nodes, list) or len(nodes) > MAX_NODES:
        raise ValueError("tasks.jsonl line %d: `nodes` must be a list of at most %d nodes" % (number, MAX_NODES))
    return str(task.get("id", "line %d" % number)), [str(n.get("op", "")) for n in nodes if isinstance(n, dict)]


def audit(out):
    summary = {"tasks": 0, "flagged": 0, "by_reason": {}, "examples": {}}
    with open(os.path.join(out, "tasks.jsonl"), "rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            task_id, ops = task_ops(line, number)
            summary["tasks"] += 1
            reason = flag(ops)
            if reason is None:
                continue
            summary["flagged"] += 1
            summary["by_reason"][reason] = summary["by_reason"].get(reason, 0) + 1
            examples = summary["examples"].setdefault(reason, [])
            if len(examples) < 20:
                examples.append("%s: %s" % (task_id, ", ".join(ops)))
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--write", action="store_true", help="also write OUT/audit_contamination.json (the card reads it)")
    a = ap.parse_args(argv)
    try:
        summary = audit(a.out)
    except (OSError, ValueError, RecursionError) as e:
        print("audit_contamination: %s" % e, file=sys.stderr)
        return 2
    audit_line.emit(summary, a.out, "audit_contamination.json", a.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
