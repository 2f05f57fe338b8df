"""Regenerates the KernelBench signature file that data synthesis checks
contamination against (data_synth/signatures/kernelbench_signatures.json).

For every level 1-3 problem named in the names file, the problem is traced
with torch.fx on the meta device (kernelbench_import.py) and its canonical op
sequence recorded in KernelForge's op names, with its input shapes. Calls
outside the vocabulary keep their PyTorch name prefixed with "torch:"; a model
torch.fx cannot trace (shape-dependent control flow, tuple unpacking that
torch 1.13's fx cannot do under Python 3.11, a Proxy as a factory's size)
takes its sequence from UNTRACEABLE where one was read off forward() by hand,
else is recorded: forward() runs on the meta device under a
TorchFunctionMode that writes down each torch call at module level, as fx
would ("traced": "recorded"). Recurrent modules (nn.LSTM, nn.GRU, nn.RNN),
whose C++ kernels have no Python body, stand for one step of their cell,
recorded the same way from the equations in PyTorch's documentation
(CELLS). einops, when it is not installed, is replaced by a minimal
rearrange (reshape + permute: layout, dropped from the core). Only a model
that cannot even run on the meta device keeps its leaf modules in definition
order ("traced": false). Arithmetic and min/max with a scalar or a parameter are marked
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
import types

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

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


# ------------------------------------------------------------ recording

# Tensor operators as their torch names; None drops the call (indexing).
DUNDER = {"__add__": "add", "__radd__": "add", "__iadd__": "add", "__sub__": "sub", "__rsub__": "sub",
          "__isub__": "sub", "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul", "__truediv__": "div",
          "__rtruediv__": "div", "__itruediv__": "div", "__div__": "div", "__matmul__": "matmul", "__pow__": "pow",
          "__rpow__": "pow", "__neg__": "neg", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le",
          "__gt__": "gt", "__ge__": "ge", "__getitem__": None, "__setitem__": None}
# Functionals whose modules fx records by the vocabulary's name (module_op);
# None drops the call, as fx drops a Dropout module.
FUNCTIONAL_NAMES = {"batch_norm": "batch_norm", "layer_norm": "layer_norm", "group_norm": "group_norm",
                    "instance_norm": "instance_norm", "dropout": None}
# Calls that compute nothing of the model's (shape queries, conversions,
# factories: their values are inputs, not work).
RECORD_SKIP = {"size", "dim", "__get__", "numel", "__len__", "item", "is_floating_point", "to", "type",
               "type_as", "requires_grad_", "flatten_parameters", "__format__", "__repr__", "__bool__",
               "__index__", "__int__", "__float__", "is_contiguous", "stride", "data_ptr", "get_device"}
RECORD_SKIP |= set(kbi.FactoryRecorder.FACTORIES) | SKIP


def _rearrange(x, pattern, **sizes):
    """einops.rearrange for what KernelBench uses: named axes, (grouped
    axes) and ..., sizes by keyword: a reshape, a permute and a reshape."""
    def parse(side):
        groups, cur = [], None
        for tok in side.replace("(", " ( ").replace(")", " ) ").split():
            if tok == "(":
                cur = []
            elif tok == ")":
                groups.append(cur)
                cur = None
            elif cur is not None:
                cur.append(tok)
            else:
                groups.append([tok])
        return groups
    lhs, rhs = (parse(side) for side in pattern.split("->"))
    shape = list(x.shape)
    n_ell = len(shape) - len([g for g in lhs if g != ["..."]])
    known, elems, d = dict(sizes), [], 0
    for g in lhs:
        if g == ["..."]:
            for k in range(n_ell):
                known["...%d" % k] = shape[d]
                elems.append("...%d" % k)
                d += 1
            continue
        size, prod = shape[d], 1
        d += 1
        for a in g:
            prod *= known.get(a, 1)
        unknown = [a for a in g if a not in known]
        if unknown:
            known[unknown[0]] = size // prod
        elems.extend(g)
    out = []
    for g in rhs:
        out.extend([["...%d" % k] for k in range(n_ell)] if g == ["..."] else [g])
    order = [a for g in out for a in g]
    t = x.reshape([known[a] for a in elems]).permute([elems.index(a) for a in order])
    final = []
    for g in out:
        n = 1
        for a in g:
            n *= known[a]
        final.append(n)
    return t.reshape(final)


def ensure_einops():
    """The real einops when installed; else a module with _rearrange."""
    try:
        import einops  # noqa: F401
    except ImportError:
        shim = types.ModuleType("einops")
        shim.rearrange = _rearrange
        sys.modules["einops"] = shim


class Recorder(TorchFunctionMode):
    """Writes down each torch call made at module level (the calls inside a
    call run with the mode off, as torch.fx keeps a leaf module or a
    functional whole), marked like traced_ops marks fx nodes."""

    def __init__(self, activations, params):
        super().__init__()
        self.ops = []
        self.keep = list(activations)  # ids stay unique while the tensors live
        self.activation_ids = {id(t) for t in activations}
        self.param_ids = {id(t) for t in params}

    def kind(self, a):
        if isinstance(a, (bool, int, float)):
            return "scalar"
        if not isinstance(a, torch.Tensor) or id(a) in self.activation_ids:
            return None
        if id(a) in self.param_ids:
            return "scalar" if a.numel() == 1 else "bias"
        return "scalar" if a.numel() == 1 else None

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name in DUNDER:
            name = DUNDER[name]
        elif name.endswith("_") and not name.startswith("_"):
            name = name[:-1]  # in place: the same op
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, (list, tuple)):
                tensors += [t for t in a if isinstance(t, torch.Tensor)]
        if name and name not in RECORD_SKIP and not all(not t.is_floating_point() for t in tensors):
            if name in _CELLS:
                self.ops.extend(_CELLS[name])
            else:
                op = FUNCTIONAL_NAMES[name] if name in FUNCTIONAL_NAMES else call_op(name)
                if op and op in EPILOGUE_OPS:
                    op = self.marked(op, args, kwargs)
                if op:
                    self.ops.append(op)
        if any(id(t) in self.activation_ids for t in tensors):
            for t in out if isinstance(out, (list, tuple)) else [out]:
                for u in t if isinstance(t, (list, tuple)) else [t]:
                    if isinstance(u, torch.Tensor):
                        self.keep.append(u)
                        self.activation_ids.add(id(u))
        return out

    def marked(self, op, args, kwargs):
        operands = list(args) + [v for k, v in kwargs.items() if k in ("other", "exponent", "input")]
        if op in ("min", "max"):
            if "dim" in kwargs or len(operands) < 2 or isinstance(operands[1], int):
                return op
        kinds = [self.kind(a) for a in operands]
        if "scalar" in kinds:
            return op + "@scalar"
        if "bias" in kinds:
            return op + "@bias"
        return op


def record(fn, activations, params):
    rec = Recorder(activations, params)
    with rec:
        fn(*activations)
    return rec.ops


# One step of each recurrent cell, from the equations in PyTorch's nn.LSTM,
# nn.GRU and nn.RNN documentation, on the meta device.
def _lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    gates = torch.chunk(F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh), 4, 1)
    i, f, g, o = torch.sigmoid(gates[0]), torch.sigmoid(gates[1]), torch.tanh(gates[2]), torch.sigmoid(gates[3])
    c = f * c + i * g
    return o * torch.tanh(c), c


def _gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    gi = torch.chunk(F.linear(x, w_ih, b_ih), 3, 1)
    gh = torch.chunk(F.linear(h, w_hh, b_hh), 3, 1)
    r = torch.sigmoid(gi[0] + gh[0])
    z = torch.sigmoid(gi[1] + gh[1])
    n = torch.tanh(gi[2] + r * gh[2])
    return (1 - z) * n + z * h


def _rnn_step(activation):
    def step(x, h, w_ih, w_hh, b_ih, b_hh):
        return activation(F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh))
    return step


def _cell_ops(step, gates, n_state):
    meta = {"device": "meta"}
    activations = [torch.empty(2, 8, **meta) for _ in range(1 + n_state)]  # x and the state
    weights = [torch.empty(gates * 8, 8, **meta), torch.empty(gates * 8, 8, **meta), torch.empty(gates * 8, **meta),
               torch.empty(gates * 8, **meta)]
    return record(lambda *a: step(*a, *weights), activations, weights)


_CELLS = {}


def cells():
    """The calls the Recorder expands (torch._VF.lstm, ...): one cell step each."""
    if not _CELLS:
        _CELLS.update({
            "lstm": _cell_ops(_lstm_step, 4, 2),
            "gru": _cell_ops(_gru_step, 3, 1),
            "rnn_tanh": _cell_ops(_rnn_step(torch.tanh), 1, 1),
            "rnn_relu": _cell_ops(_rnn_step(torch.relu), 1, 1),
        })
    return _CELLS


def recorded_ops(model, inputs):
    """forward() on the meta device under the Recorder."""
    cells()
    params = list(model.parameters()) + list(model.buffers())
    activations = [t for t in inputs if isinstance(t, torch.Tensor)]
    rec = Recorder(activations, params)
    with rec, torch.no_grad():
        model(*inputs)
    return rec.ops


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
    ensure_einops()
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
            try:
                with recorder:
                    entry["ops"] = recorded_ops(model, inputs)
                entry["traced"] = "recorded"
            except Exception:
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
                    "recorded": sum(p["traced"] == "recorded" for p in problems),
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
    print("%d problems, %d traced, %d by hand, %d recorded, %d importable, %d failed -> %s" % (
        len(problems), doc["summary"]["traced"], doc["summary"]["traced_by_hand"], doc["summary"]["recorded"],
        doc["summary"]["importable"], len(failures), a.out))
    for f in failures:
        print("  failed: %s: %s" % (f["name"], f["error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
