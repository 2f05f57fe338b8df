"""Regenerates the KernelBench signature file that data synthesis checks
contamination against (data_synth/signatures/kernelbench_signatures.json).

For every level 1-3 problem named in the names file, the problem is traced
with torch.fx on the meta device (kernelbench_import.py) and its canonical op
sequence recorded in KernelForge's op names, with its input shapes. Calls
outside the vocabulary keep their PyTorch name prefixed with "torch:"; a model
torch.fx cannot trace falls back to its leaf modules in definition order
("traced": false), and the few level-2 problems whose forward() torch.fx
cannot trace take their sequence from UNTRACEABLE (read off forward() by
hand). Arithmetic and min/max with a scalar or a parameter are marked
"op@scalar" / "op@bias": contamination compares cores with those epilogues
stripped (data_synth/contamination.h). Only names, op sequences and shapes
are written: no code or text of the problems.

Usage:
  make_signatures.py KERNELBENCH_DIR --names kernelbench_problem_names.txt --out FILE
"""

import argparse
import json
import os
import sys

import torch
import torch.fx
import torch.nn as nn

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernelbench_import as kbi  # noqa: E402

MODULE_OPS = {
    nn.Linear: "linear", nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d",
    nn.ConvTranspose1d: "conv_transpose1d", nn.ConvTranspose2d: "conv_transpose2d",
    nn.ConvTranspose3d: "conv_transpose3d", nn.BatchNorm1d: "batch_norm", nn.BatchNorm2d: "batch_norm",
    nn.BatchNorm3d: "batch_norm", nn.InstanceNorm1d: "instance_norm", nn.InstanceNorm2d: "instance_norm",
    nn.InstanceNorm3d: "instance_norm", nn.GroupNorm: "group_norm", nn.LayerNorm: "layer_norm",
    nn.MaxPool1d: "max_pool1d", nn.MaxPool2d: "max_pool2d", nn.MaxPool3d: "max_pool3d",
    nn.AvgPool1d: "avg_pool1d", nn.AvgPool2d: "avg_pool2d", nn.AvgPool3d: "avg_pool3d",
    nn.AdaptiveAvgPool1d: "adaptive_avg_pool1d", nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d",
    nn.AdaptiveAvgPool3d: "adaptive_avg_pool3d", nn.AdaptiveMaxPool2d: "adaptive_max_pool2d",
    nn.Flatten: "flatten",
}
SKIP = {"size", "dim", "getitem", "getattr", "contiguous", "detach", "clone", "Identity", "Dropout"}

# Ops whose second operand may be a scalar or a parameter (an epilogue) rather
# than another activation.
EPILOGUE_OPS = {"add", "sub", "mul", "div", "minimum", "maximum", "min", "max", "pow"}

# Problems torch.fx cannot trace (shape unpacking, torch.tensor on x.device,
# x.size() unpacking), their op sequences read off forward() in the
# vocabulary's names.
UNTRACEABLE = {
    "level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply":
        ["avg_pool3d", "conv_transpose3d", "clamp", "reshape", "softmax", "reshape", "mul@scalar"],
    "level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout": ["conv3d", "group_norm", "min@scalar", "clamp"],
    "level2/93_ConvTranspose2d_Add_Min_GELU_Multiply":
        ["conv_transpose2d", "add@scalar", "min@scalar", "gelu", "mul@scalar"],
    # Their leaf modules alone ([linear, linear]) would match any two GEMMs in
    # a row; the attention between the projections is what forward() does.
    "level3/43_MinGPTCausalAttention":
        ["linear", "reshape", "transpose", "matmul", "mul@scalar", "torch:masked_fill", "softmax", "matmul",
         "transpose", "linear"],
    # One step of the recurrence: cat(x[t], h), i2h, tanh, h2o; stacked.
    "level3/34_VanillaRNNHidden": ["cat", "linear", "tanh", "linear", "stack"],
    "level3/50_ReLUSelfAttention":
        ["linear", "reshape", "transpose", "matmul", "mul@scalar", "torch:masked_fill", "relu", "matmul",
         "transpose"],
}


def module_op(mod):
    t = type(mod)
    if t in kbi.ACTIVATION_MODULES:
        return kbi.ACTIVATION_MODULES[t][0]
    if t in MODULE_OPS:
        return MODULE_OPS[t]
    return "torch:" + t.__name__


def call_op(name):
    if name in SKIP:
        return None
    if name in kbi.UNARY_FUNCTIONS:
        return kbi.UNARY_FUNCTIONS[name]
    if name in kbi.BINARY:
        return kbi.BINARY[name]
    if name in kbi.REDUCTIONS:
        return name
    known = {"view": "reshape", "reshape": "reshape", "flatten": "flatten", "transpose": "transpose",
             "permute": "permute", "squeeze": "squeeze", "unsqueeze": "unsqueeze", "matmul": "matmul", "mm": "matmul",
             "bmm": "bmm", "linear": "linear", "softmax": "softmax", "log_softmax": "log_softmax", "gelu": "gelu",
             "leaky_relu": "leaky_relu", "elu": "elu", "hardtanh": "hardtanh", "softplus": "softplus",
             "clamp": "clamp", "clip": "clamp", "clamp_min": "clamp", "clamp_max": "clamp", "where": "where",
             "cat": "cat", "concat": "cat", "stack": "stack", "tril": "tril", "triu": "triu", "expand": "expand",
             "iadd": "add", "imul": "mul", "isub": "sub", "itruediv": "div"}
    for prefix in ("max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool", "conv"):
        if name.startswith(prefix):
            return name
    return known.get(name, "torch:" + name)


def operand_kind(gm, a):
    """'scalar' for a number or a one-element constant, 'bias' for a parameter
    or buffer of more elements, None for an activation."""
    if isinstance(a, (bool, int, float)):
        return "scalar"
    if not isinstance(a, torch.fx.Node):
        return None
    if a.op == "get_attr":
        t = gm
        for part in a.target.split("."):
            t = getattr(t, part)
        return "scalar" if not isinstance(t, torch.Tensor) or t.numel() == 1 else "bias"
    if a.op == "call_function" and getattr(a.target, "__name__", "") in ("tensor", "full", "scalar_tensor"):
        return "scalar"
    return None


def marked(gm, node, op):
    """op, op@scalar or op@bias: what the non-activation operand is."""
    if op not in EPILOGUE_OPS:
        return op
    operands = list(node.args) + [v for k, v in node.kwargs.items() if k in ("other", "exponent", "input")]
    if op in ("min", "max"):
        # torch.min(x, dim) is a reduction; torch.min(x, other) is elementwise.
        if "dim" in node.kwargs or len(operands) < 2 or isinstance(operands[1], int):
            return op
    kinds = [operand_kind(gm, a) for a in operands]
    if "scalar" in kinds:
        return op + "@scalar"
    if "bias" in kinds:
        return op + "@bias"
    return op


def traced_ops(gm):
    ops = []
    for node in gm.graph.nodes:
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            if type(mod).__name__ in SKIP:
                continue
            ops.append(module_op(mod))
        elif node.op in ("call_function", "call_method"):
            name = kbi.function_name(node.target) if node.op == "call_function" else node.target
            op = call_op(name)
            if op:
                ops.append(marked(gm, node, op))
    return ops


def signature(root, name):
    path = os.path.join(root, name)
    level = int(name.split("/")[0].replace("level", ""))
    entry = {"name": os.path.splitext(name)[0], "level": level}
    module_obj = kbi.load_module(path)
    recorder = kbi.FactoryRecorder()
    with recorder:
        model = module_obj.Model(*module_obj.get_init_inputs())
        inputs = module_obj.get_inputs()
    entry["inputs"] = [{"shape": list(t.shape), "dtype": kbi.DTYPES.get(t.dtype, str(t.dtype))}
                       for t in inputs if isinstance(t, torch.Tensor)]
    try:
        gm = torch.fx.symbolic_trace(model)
        entry["ops"] = traced_ops(gm)
        entry["traced"] = True
    except Exception:
        if entry["name"] in UNTRACEABLE:
            entry["ops"] = UNTRACEABLE[entry["name"]]
            entry["traced"] = "by hand"
        else:
            entry["ops"] = [module_op(m) for m in model.modules()
                            if not list(m.children()) and type(m).__name__ not in SKIP]
            entry["traced"] = False
    task, report = kbi.import_problem(path)
    entry["importable"] = task is not None
    if task is None:
        entry["unsupported"] = report.get("reason", "")[:160]
    return entry


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernelbench_dir", help="the KernelBench/ folder holding level1, level2, level3")
    ap.add_argument("--names", required=True, help="level/file names, one per line (# comments)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    names = [line.strip() for line in open(a.names) if line.strip() and not line.startswith("#")]
    problems, failures = [], []
    for name in names:
        try:
            problems.append(signature(a.kernelbench_dir, name))
        except Exception as e:  # a problem that cannot even be built: listed, not fatal
            failures.append({"name": name, "error": "%s: %s" % (type(e).__name__, str(e)[:160])})
            problems.append({"name": os.path.splitext(name)[0], "level": int(name.split("/")[0][5:]), "ops": [],
                             "traced": False, "importable": False, "unsupported": failures[-1]["error"]})
    doc = {
        "format": "kforge-kernelbench-signatures/2",
        "generated_by": "data_synth/python/make_signatures.py (torch %s)" % torch.__version__,
        "normalization": "ops in KernelForge vocabulary names (torch:<name> outside it), arithmetic and min/max "
                         "with a scalar or parameter marked @scalar/@bias; contamination cores are derived in C++ "
                         "(data_synth/contamination.h)",
        "summary": {"problems": len(problems), "traced": sum(p["traced"] is True for p in problems),
                    "traced_by_hand": sum(p["traced"] == "by hand" for p in problems),
                    "importable": sum(p["importable"] for p in problems), "failed": len(failures)},
        "problems": problems,
    }
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("{\n")
        keys = [k for k in doc if k != "problems"]
        for k in keys:
            f.write(" %s: %s,\n" % (json.dumps(k), json.dumps(doc[k])))
        f.write(' "problems": [\n')
        f.write(",\n".join("  " + json.dumps(p) for p in problems))
        f.write("\n ]\n}\n")
    os.replace(tmp, a.out)
    print("%d problems, %d traced, %d importable, %d failed -> %s" % (
        len(problems), doc["summary"]["traced"], doc["summary"]["importable"], len(failures), a.out))
    for f in failures:
        print("  failed: %s: %s" % (f["name"], f["error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
