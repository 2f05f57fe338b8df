"""Imports KernelBench-format problem files as KernelForge tasks.

A problem file defines `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`. The model is built and traced with torch.fx; every node
must map onto an op of KernelForge's vocabulary (docs/ops.md), otherwise the
problem is reported as not importable with the reason (the first node that
does not map, a trace failure, randomness such as dropout, ...).

Nothing is computed at the problem's real sizes: the model, its inputs and
the shape propagation run on PyTorch's "meta" device, so a problem with
gigabyte inputs imports in milliseconds. Factory calls (torch.rand, randn,
zeros, ...) made while building the inputs and the model are recorded to give
each input and parameter its init (uniform [0, 1) for torch.rand, normal for
torch.randn, ...).

Usage:
  kernelbench_import.py DIR_OR_FILE... --out TASKS.jsonl [--report REPORT.json]

Works with PyTorch 1.13 (Debian) and 2.x.
"""

import argparse
import json
import os
import re
import sys
import traceback

# Before the importer's own modules load: their bytecode would land in the
# source tree.
sys.dont_write_bytecode = True

# The importer's parts, each in its own module; every name stays importable
# from here (make_signatures.py and the tests use kernelbench_import.X).
from kernelbench_importer import Importer  # noqa: E402
from kernelbench_task import (  # noqa: E402,F401
    DTYPES,
    TaskBuilder,
    Unsupported,
    as_list,
    dtype_name,
    fan_in_bound,
    init_fields,
    scalar,
)
from kernelbench_trace import MAX_FILE_BYTES, FactoryRecorder, load_module, recorder_init, trace  # noqa: E402,F401
from kernelbench_vocab import (  # noqa: E402,F401
    ACTIVATION_MODULES,
    BINARY,
    OPERATORS,
    REDUCTIONS,
    UNARY_FUNCTIONS,
    function_name,
)


def problem_id(path):
    parts = os.path.normpath(path).split(os.sep)
    stem = os.path.splitext(parts[-1])[0]
    level = parts[-2] if len(parts) >= 2 and parts[-2].startswith("level") else None
    return "kernelbench/" + (level + "/" if level else "") + stem


def import_problem(path):
    """Returns (task dict or None, report entry)."""
    task_id = problem_id(path)
    entry = {"file": path, "task_id": task_id}
    ops = []
    try:
        module_obj = load_module(path)
        gm, inputs, inits, recorder = trace(module_obj)
        imp = Importer(gm, task_id)
        try:
            task = imp.run(gm, inputs, inits, recorder)
        finally:
            ops = imp.ops_seen
        task.setdefault("meta", {})["kernelbench"] = {"file": os.path.basename(path)}
        entry.update({"imported": True, "ops": [n["op"] for n in task["nodes"]]})
        return task, entry
    except Unsupported as e:
        entry.update({"imported": False, "reason": str(e), "traced_calls": ops})
    except Exception as e:  # the problem file itself fails: a report line, never a crash
        entry.update({"imported": False, "reason": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200]
                                                               if str(e) else ""),
                      "traceback": traceback.format_exc(limit=2)[-600:]})
    return None, entry


def problem_files(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in files:
                    if f.endswith(".py"):
                        out.append(os.path.join(root, f))
        else:
            out.append(p)

    def key(f):
        m = re.match(r"(\d+)_", os.path.basename(f))
        return (os.path.dirname(f), int(m.group(1)) if m else 1 << 30, os.path.basename(f))

    return sorted(out, key=key)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Import KernelBench-format problem files as KernelForge tasks")
    ap.add_argument("paths", nargs="+", help="problem files or directories of them")
    ap.add_argument("--out", required=True, help="tasks JSONL to write")
    ap.add_argument("--report", help="JSON report of what was (not) imported (default: OUT + .report.json)")
    a = ap.parse_args(argv)
    files = problem_files(a.paths)
    if not files:
        print("kernelbench_import: no .py files under %s" % ", ".join(a.paths), file=sys.stderr)
        return 2
    entries = []
    imported = 0
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        for path in files:
            task, entry = import_problem(path)
            entries.append(entry)
            if task is not None:
                f.write(json.dumps(task) + "\n")
                imported += 1
    os.replace(tmp, a.out)
    reasons = {}
    for e in entries:
        if not e["imported"]:
            key = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", e["reason"])[:80]
            reasons[key] = reasons.get(key, 0) + 1
    report = {"files": len(files), "imported": imported, "not_imported": len(files) - imported,
              "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])), "problems": entries}
    with open(a.report or a.out + ".report.json", "w") as f:
        json.dump(report, f, indent=1)
    print("imported %d of %d problem files into %s (report: %s)" % (imported, len(files), a.out,
                                                                     a.report or a.out + ".report.json"))
    for e in entries:
        if not e["imported"]:
            print("  not imported: %s: %s" % (e["task_id"], e["reason"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
