"""The torch.fx graph of a KernelBench model mapped node by node onto
KernelForge's op vocabulary (kernelbench_import.py); the first node that does
not map ends the import with the reason."""

import math
import operator

import torch
import torch.fx
import torch.nn as nn

from kernelbench_task import TaskBuilder, Unsupported, as_list, fan_in_bound, scalar
from kernelbench_trace import recorder_init
from kernelbench_vocab import ACTIVATION_MODULES, BINARY, REDUCTIONS, UNARY_FUNCTIONS, function_name


CONV_MODULES = {nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d",
                nn.ConvTranspose1d: "conv_transpose1d", nn.ConvTranspose2d: "conv_transpose2d",
                nn.ConvTranspose3d: "conv_transpose3d"}
NORM_MODULES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.InstanceNorm1d, nn.InstanceNorm2d,
                nn.InstanceNorm3d, nn.GroupNorm, nn.LayerNorm)
POOL_MODULES = {nn.MaxPool1d: "max_pool1d", nn.MaxPool2d: "max_pool2d", nn.MaxPool3d: "max_pool3d"}
AVG_POOL_MODULES = {nn.AvgPool1d: "avg_pool1d", nn.AvgPool2d: "avg_pool2d", nn.AvgPool3d: "avg_pool3d"}
ADAPTIVE_POOL_MODULES = {nn.AdaptiveAvgPool1d: "adaptive_avg_pool1d", nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d",
                         nn.AdaptiveAvgPool3d: "adaptive_avg_pool3d", nn.AdaptiveMaxPool2d: "adaptive_max_pool2d"}

# What a family of calls returns for a name it does not know (the next
# family is asked).
UNHANDLED = object()


class Importer:
    def __init__(self, module_obj, task_id):
        self.m = module_obj
        self.b = TaskBuilder(task_id)
        self.values = {}  # fx node -> value name | ("tuple", [..]) | python value
        self.shapes = {}  # fx node -> meta tensor result
        self.ops_seen = []  # every op name in order, for signatures (known or not)

    # --- helpers
    def val(self, a):
        if isinstance(a, torch.fx.Node):
            v = self.values[a]
            return v
        return a

    def tensor_arg(self, a, what="operand"):
        v = self.val(a)
        if isinstance(v, str):
            return v
        raise Unsupported("%s %r is not a tensor of the graph" % (what, a))

    def meta(self, node):
        m = node.meta.get("tensor_meta")
        if m is None:
            raise Unsupported("no propagated shape for %s (shape propagation failed on this PyTorch)" % node.name)
        return m

    # --- emitters
    def unary(self, op, x, attrs=None, stem=None):
        return self.b.node(op, [x], attrs or {}, stem)

    def binary(self, op, a, b, node):
        va, vb = self.val(a), self.val(b)
        if isinstance(va, str) and isinstance(vb, str):
            return self.b.node(op, [va, vb], {}, node.name)
        if isinstance(va, str):
            return self.b.node(op, [va], {"other": scalar(vb)}, node.name)
        if isinstance(vb, str):
            s = scalar(va)
            if op in ("add", "mul", "maximum", "minimum", "eq", "ne"):
                return self.b.node(op, [vb], {"other": s}, node.name)
            if op == "sub":  # s - x = (-x) + s
                return self.b.node("add", [self.b.node("neg", [vb])], {"other": s}, node.name)
            if op == "div":  # s / x = (1/x) * s
                return self.b.node("mul", [self.b.node("reciprocal", [vb])], {"other": s}, node.name)
            raise Unsupported("%s with a number on the left" % op)
        raise Unsupported("%s of two numbers" % op)

    def reduction(self, name, x, args, kwargs, node):
        dim = kwargs.get("dim", args[0] if args else None)
        keepdim = kwargs.get("keepdim", args[1] if len(args) > 1 else False)
        attrs = {}
        if name in ("max", "min") and isinstance(self.val(dim), str):
            return self.b.node("maximum" if name == "max" else "minimum", [x, self.val(dim)], {}, node.name)
        if name in ("std", "var"):
            unbiased = kwargs.get("unbiased", args[1] if len(args) > 1 and isinstance(args[1], bool) else True)
            if len(args) > 1 and isinstance(args[1], bool):
                keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
            correction = kwargs.get("correction", 1 if unbiased else 0)
            attrs["correction"] = int(correction)
        if name == "norm":
            p = kwargs.get("p", args[0] if args and not isinstance(args[0], (list, tuple)) and "dim" in kwargs else 2)
            if p not in (2, 2.0, 1, 1.0) and not isinstance(p, (int, float)):
                raise Unsupported("norm with p=%r" % (p,))
            if args and "dim" not in kwargs and len(args) >= 1 and not isinstance(args[0], (list, tuple)):
                p = args[0]
                dim = args[1] if len(args) > 1 else kwargs.get("dim")
                keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
            attrs["p"] = float(p)
        if name == "cumsum":
            attrs["dim"] = int(dim)
            return self.b.node("cumsum", [x], attrs, node.name)
        if dim is not None:
            attrs["dim"] = as_list(dim)
        if name in ("max", "min", "argmax", "argmin", "prod", "cumsum") and isinstance(attrs.get("dim"), list):
            if len(attrs["dim"]) != 1:
                raise Unsupported("%s over several dims" % name)
            attrs["dim"] = attrs["dim"][0]
        if keepdim:
            attrs["keepdim"] = True
        out = self.b.node(name, [x], attrs, node.name)
        if name in ("max", "min") and dim is not None:
            return ("tuple", [out, None])  # (values, indices): only values are supported
        return out

    # --- node kinds
    def call_module(self, node):
        mod = self.m.get_submodule(node.target)
        x = self.tensor_arg(node.args[0], "input") if node.args else None
        t = type(mod)
        stem = node.name
        self.ops_seen.append(t.__name__)
        if t in ACTIVATION_MODULES:
            op, attrs = ACTIVATION_MODULES[t]
            return self.unary(op, x, attrs(mod), stem)
        if t in (nn.Identity,):
            return x
        if t in (nn.Dropout, nn.Dropout1d if hasattr(nn, "Dropout1d") else nn.Dropout, nn.Dropout2d, nn.Dropout3d):
            if mod.p == 0:
                return x
            raise Unsupported("%s with p=%g is random in training mode" % (t.__name__, mod.p))
        if t is nn.Linear or t in CONV_MODULES:
            return self.weighted_module(mod, x, stem)
        if t in NORM_MODULES:
            return self.norm_module(mod, x, stem)
        if t in POOL_MODULES or t in AVG_POOL_MODULES or t in ADAPTIVE_POOL_MODULES:
            return self.pool_module(mod, x, stem)
        if t is nn.Flatten:
            return self.b.node("flatten", [x], {"start_dim": int(mod.start_dim), "end_dim": int(mod.end_dim)}, stem)
        raise Unsupported("module %s (%s) is not in the vocabulary" % (node.target, t.__name__))

    def weighted_module(self, mod, x, stem):
        """nn.Linear and the convolutions: a weight, and a bias drawn within the
        fan-in bound as PyTorch initializes it."""
        t = type(mod)
        if t is nn.Linear:
            ins = [x, self.b.param(stem + "_weight", mod.weight, {"init": "kaiming_uniform"})]
            if mod.bias is not None:
                bound = 1.0 / math.sqrt(mod.in_features)
                ins.append(self.b.param(stem + "_bias", mod.bias, {"init": "uniform", "low": -bound, "high": bound}))
            return self.b.node("linear", ins, {}, stem)
        if isinstance(mod.padding, str):
            raise Unsupported("%s with padding=%r" % (t.__name__, mod.padding))
        if mod.padding_mode != "zeros":
            raise Unsupported("%s with padding_mode=%r" % (t.__name__, mod.padding_mode))
        attrs = {"stride": list(mod.stride), "padding": list(mod.padding), "dilation": list(mod.dilation),
                 "groups": int(mod.groups)}
        if t.__name__.startswith("ConvTranspose"):
            attrs["output_padding"] = list(mod.output_padding)
        ins = [x, self.b.param(stem + "_weight", mod.weight, {"init": "kaiming_uniform"})]
        if mod.bias is not None:
            bound = fan_in_bound(list(mod.weight.shape))
            ins.append(self.b.param(stem + "_bias", mod.bias, {"init": "uniform", "low": -bound, "high": bound}))
        return self.b.node(CONV_MODULES[t], ins, attrs, stem)

    def affine_params(self, mod, stem):
        """A norm's weight (ones) and bias (zeros)."""
        return [self.b.param(stem + "_weight", mod.weight, {"init": "ones"}),
                self.b.param(stem + "_bias", mod.bias, {"init": "zeros"})]

    def norm_module(self, mod, x, stem):
        t = type(mod)
        ins = [x]
        if t in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
            if not mod.training and mod.track_running_stats:
                raise Unsupported("%s in eval mode uses running statistics" % t.__name__)
            if mod.affine:
                ins += self.affine_params(mod, stem)
            return self.b.node("batch_norm", ins, {"eps": float(mod.eps)}, stem)
        if t in (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d):
            if mod.track_running_stats:
                raise Unsupported("%s with running statistics" % t.__name__)
            if mod.affine:
                ins += self.affine_params(mod, stem)
            return self.b.node("instance_norm", ins, {"eps": float(mod.eps)}, stem)
        if t is nn.GroupNorm:
            if mod.affine:
                ins += self.affine_params(mod, stem)
            return self.b.node("group_norm", ins, {"num_groups": int(mod.num_groups), "eps": float(mod.eps)}, stem)
        # nn.LayerNorm
        if mod.elementwise_affine:
            ins.append(self.b.param(stem + "_weight", mod.weight, {"init": "ones"}))
            if getattr(mod, "bias", None) is not None:
                ins.append(self.b.param(stem + "_bias", mod.bias, {"init": "zeros"}))
        return self.b.node("layer_norm", ins, {"normalized_shape": list(mod.normalized_shape),
                                               "eps": float(mod.eps)}, stem)

    def pool_module(self, mod, x, stem):
        t = type(mod)
        if t in POOL_MODULES:
            if mod.return_indices:
                raise Unsupported("%s with return_indices" % t.__name__)
            attrs = {"kernel_size": as_list(mod.kernel_size), "stride": as_list(mod.stride),
                     "padding": as_list(mod.padding), "dilation": as_list(mod.dilation),
                     "ceil_mode": bool(mod.ceil_mode)}
            return self.b.node(POOL_MODULES[t], [x], attrs, stem)
        if t in AVG_POOL_MODULES:
            attrs = {"kernel_size": as_list(mod.kernel_size), "stride": as_list(mod.stride),
                     "padding": as_list(mod.padding), "ceil_mode": bool(mod.ceil_mode),
                     "count_include_pad": bool(mod.count_include_pad)}
            if getattr(mod, "divisor_override", None) is not None:
                attrs["divisor_override"] = int(mod.divisor_override)
            return self.b.node(AVG_POOL_MODULES[t], [x], attrs, stem)
        size = mod.output_size
        if isinstance(size, (list, tuple)) and any(s is None for s in size):
            raise Unsupported("%s with a None output size" % t.__name__)
        if getattr(mod, "return_indices", False):
            raise Unsupported("%s with return_indices" % t.__name__)
        return self.b.node(ADAPTIVE_POOL_MODULES[t], [x], {"output_size": as_list(size)}, stem)

    def call_function(self, node):
        name = function_name(node.target)
        self.ops_seen.append(name)
        args, kwargs = node.args, node.kwargs
        if node.target is operator.getitem:
            base = self.val(args[0])
            if isinstance(base, tuple) and base[0] == "tuple":
                v = base[1][args[1]]
                if v is None:
                    raise Unsupported("indices of max/min are not supported")
                return v
            if isinstance(base, (list, tuple)):
                return base[args[1]]
            raise Unsupported("indexing a tensor (%r)" % (args[1],))
        if node.target is getattr:
            attr = args[1]
            if attr in ("T", "mT"):
                rank = len(self.meta(args[0]).shape)
                if attr == "T" and rank != 2:
                    raise Unsupported("x.T of a rank-%d tensor" % rank)
                return self.b.node("transpose", [self.tensor_arg(args[0])], {"dim0": -2, "dim1": -1}, node.name)
            if attr == "shape":
                return tuple(self.meta(args[0]).shape)
            if attr == "dtype":
                return self.meta(args[0]).dtype
            raise Unsupported("attribute .%s of a tensor" % attr)
        return self.dispatch(name, args, kwargs, node, method=False)

    def call_method(self, node):
        name = node.target
        self.ops_seen.append(name)
        if name == "size" or name == "dim":
            x = self.val(node.args[0])
            meta = self.meta(node.args[0])
            if name == "dim":
                return len(meta.shape)
            return tuple(meta.shape) if len(node.args) == 1 else meta.shape[node.args[1]]
        return self.dispatch(name, node.args, node.kwargs, node, method=True)

    def dispatch(self, name, args, kwargs, node, method):
        """A function or method call by name: each family of calls is asked in
        turn, and the first that knows the name builds its node."""
        for family in (self.shape_call, self.matmul_call, self.activation_call, self.elementwise_call,
                       self.pool_call):
            out = family(name, args, kwargs, node)
            if out is not UNHANDLED:
                return out
        if name in ("layer_norm", "group_norm", "instance_norm", "batch_norm"):
            raise Unsupported("functional %s (use the module form)" % name)
        if name in ("float", "to", "type", "detach", "clone"):
            if name in ("detach", "clone"):
                return self.tensor_arg(args[0])
            meta = self.meta(node)
            src = self.meta(args[0]) if isinstance(args[0], torch.fx.Node) else None
            if src is not None and meta.dtype == src.dtype:
                return self.tensor_arg(args[0])
            raise Unsupported("dtype conversion (%s)" % name)
        raise Unsupported("%s %s is not in the vocabulary" % ("method" if method else "function", name))

    def shape_call(self, name, args, kwargs, node):
        """Views, transposes, squeezes, masks, concatenation."""
        stem = node.name
        if name in ("view", "reshape"):
            meta = self.meta(node)
            return self.b.node("reshape", [self.tensor_arg(args[0])], {"shape": list(meta.shape)}, stem)
        if name in ("flatten",):
            start = kwargs.get("start_dim", args[1] if len(args) > 1 else 0)
            end = kwargs.get("end_dim", args[2] if len(args) > 2 else -1)
            return self.b.node("flatten", [self.tensor_arg(args[0])], {"start_dim": start, "end_dim": end}, stem)
        if name in ("transpose", "swapaxes"):
            return self.b.node("transpose", [self.tensor_arg(args[0])],
                               {"dim0": int(self.val(args[1])), "dim1": int(self.val(args[2]))}, stem)
        if name == "t":
            return self.b.node("transpose", [self.tensor_arg(args[0])], {"dim0": 0, "dim1": 1}, stem)
        if name == "permute":
            dims = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
            return self.b.node("permute", [self.tensor_arg(args[0])], {"dims": [int(d) for d in dims]}, stem)
        if name in ("squeeze", "unsqueeze"):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            attrs = {} if dim is None else {"dim": int(dim)}
            return self.b.node(name, [self.tensor_arg(args[0])], attrs, stem)
        if name in ("tril", "triu"):
            return self.b.node(name, [self.tensor_arg(args[0])],
                               {"diagonal": int(kwargs.get("diagonal", args[1] if len(args) > 1 else 0))}, stem)
        if name in ("expand",):
            return self.b.node("expand", [self.tensor_arg(args[0])], {"shape": list(self.meta(node).shape)}, stem)
        if name in ("cat", "concat", "stack"):
            tensors = [self.tensor_arg(t) for t in args[0]]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            return self.b.node("stack" if name == "stack" else "cat", tensors, {"dim": int(dim)}, stem)
        return UNHANDLED

    def matmul_call(self, name, args, kwargs, node):
        stem = node.name
        if name in ("matmul", "mm"):
            return self.b.node("matmul", [self.tensor_arg(args[0]), self.tensor_arg(args[1])], {}, stem)
        if name == "bmm":
            return self.b.node("bmm", [self.tensor_arg(args[0]), self.tensor_arg(args[1])], {}, stem)
        if name == "linear":
            ins = [self.tensor_arg(a) for a in args[:3] if a is not None]
            if kwargs.get("bias") is not None:
                ins.append(self.tensor_arg(kwargs["bias"]))
            return self.b.node("linear", ins, {}, stem)
        return UNHANDLED

    def activation_call(self, name, args, kwargs, node):
        """Activations with arguments (softmax's dim, gelu's approximation,
        slopes, bounds)."""
        stem = node.name
        if name in ("softmax", "log_softmax"):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else -1)
            return self.b.node(name, [self.tensor_arg(args[0])], {"dim": int(dim)}, stem)
        if name in ("gelu",):
            return self.b.node("gelu", [self.tensor_arg(args[0])],
                               {"approximate": kwargs.get("approximate", "none")}, stem)
        if name == "leaky_relu":
            slope = kwargs.get("negative_slope", args[1] if len(args) > 1 else 0.01)
            return self.b.node("leaky_relu", [self.tensor_arg(args[0])], {"negative_slope": float(slope)}, stem)
        if name == "elu":
            return self.b.node("elu", [self.tensor_arg(args[0])],
                               {"alpha": float(kwargs.get("alpha", args[1] if len(args) > 1 else 1.0))}, stem)
        if name == "hardtanh":
            lo = kwargs.get("min_val", args[1] if len(args) > 1 else -1.0)
            hi = kwargs.get("max_val", args[2] if len(args) > 2 else 1.0)
            return self.b.node("hardtanh", [self.tensor_arg(args[0])], {"min_val": float(lo), "max_val": float(hi)},
                               stem)
        if name == "softplus":
            beta = kwargs.get("beta", args[1] if len(args) > 1 else 1.0)
            threshold = kwargs.get("threshold", args[2] if len(args) > 2 else 20.0)
            return self.b.node("softplus", [self.tensor_arg(args[0])],
                               {"beta": float(beta), "threshold": float(threshold)}, stem)
        if name in ("clamp", "clip", "clamp_min", "clamp_max"):
            attrs = {}
            lo = kwargs.get("min", args[1] if len(args) > 1 and name != "clamp_max" else None)
            hi = kwargs.get("max", args[2] if len(args) > 2 else (args[1] if name == "clamp_max" else None))
            if lo is not None:
                attrs["min"] = scalar(self.val(lo))
            if hi is not None:
                attrs["max"] = scalar(self.val(hi))
            return self.b.node("clamp", [self.tensor_arg(args[0])], attrs, stem)
        return UNHANDLED

    def elementwise_call(self, name, args, kwargs, node):
        """where, the unary functions, reductions, the binary operators."""
        if name == "where":
            return self.b.node("where", [self.tensor_arg(a) for a in args[:3]], {}, node.name)
        if name in UNARY_FUNCTIONS and len(args) >= 1:
            if UNARY_FUNCTIONS[name] == "contiguous":
                return self.tensor_arg(args[0])
            return self.b.node(UNARY_FUNCTIONS[name], [self.tensor_arg(args[0])], {}, node.name)
        if name in REDUCTIONS:
            return self.reduction(name, self.tensor_arg(args[0]), list(args[1:]), dict(kwargs), node)
        if name in BINARY or name in ("iadd", "imul", "isub", "itruediv"):
            op = BINARY.get(name, {"iadd": "add", "imul": "mul", "isub": "sub", "itruediv": "div"}.get(name))
            other = kwargs.get("other", args[1] if len(args) > 1 else None)
            if "alpha" in kwargs and kwargs["alpha"] != 1:
                raise Unsupported("%s with alpha" % name)
            return self.binary(op, args[0], other, node)
        return UNHANDLED

    def pool_call(self, name, args, kwargs, node):
        stem = node.name
        if name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
            keys = (["kernel_size", "stride", "padding", "dilation", "ceil_mode"] if name.startswith("max")
                    else ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"])
            attrs = {}
            for i, k in enumerate(keys):
                v = kwargs.get(k, args[i + 1] if len(args) > i + 1 else None)
                if v is not None and not (k == "stride" and v == []):
                    attrs[k] = v if isinstance(v, bool) else as_list(v)
            if kwargs.get("return_indices"):
                raise Unsupported("%s with return_indices" % name)
            return self.b.node(name, [self.tensor_arg(args[0])], attrs, stem)
        if name in ("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool2d"):
            size = kwargs.get("output_size", args[1] if len(args) > 1 else None)
            if isinstance(size, (list, tuple)) and any(v is None for v in size):
                raise Unsupported("%s with a None output size" % name)
            return self.b.node(name, [self.tensor_arg(args[0])], {"output_size": as_list(size)}, stem)
        return UNHANDLED

    def get_attr(self, node):
        obj = self.m
        for part in node.target.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, torch.Tensor):
            if obj.device.type != "meta" and obj.numel() == 1:
                return obj.item()
            init = recorder_init(self.recorder, obj)
            return self.b.param(node.target.replace(".", "_"), obj, init)
        raise Unsupported("attribute %s of type %s" % (node.target, type(obj).__name__))

    def run(self, gm, inputs, input_inits, recorder):
        self.recorder = recorder
        self.m = gm
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise Unsupported("forward takes %d inputs but get_inputs() returns %d" % (len(placeholders),
                                                                                       len(inputs)))
        for node, tensor, init in zip(placeholders, inputs, input_inits):
            if not isinstance(tensor, torch.Tensor):
                raise Unsupported("get_inputs() returns a non-tensor (%s)" % type(tensor).__name__)
            self.values[node] = self.b.input(node.name, tensor, init)
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                out = self.val(node.args[0])
                outs = list(out) if isinstance(out, (list, tuple)) and not (out and out[0] == "tuple") else [out]
                for o in outs:
                    if not isinstance(o, str):
                        raise Unsupported("the model returns a non-tensor")
                    if o in [i["name"] for i in self.b.task["inputs"]] or o in [p["name"] for p in
                                                                                self.b.task["params"]]:
                        o = self.b.node("contiguous", [o], {})
                    self.b.task["outputs"].append(o)
                continue
            handler = getattr(self, node.op)
            self.values[node] = handler(node)
        if not self.b.task["nodes"]:
            raise Unsupported("the model computes nothing")
        if not self.b.task["params"]:
            del self.b.task["params"]
        return self.b.task

