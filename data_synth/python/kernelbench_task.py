"""The task a KernelBench problem becomes (kernelbench_import.py): its
inputs, params and nodes as a task spec holds them (task_spec.h in
core/include/kforge/core), and the error that says why a problem cannot
become one."""

import math
import re

import torch

DTYPES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "float64",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}


class Unsupported(Exception):
    """The problem cannot become a task; the message says why."""



def fan_in_bound(weight_shape, transposed=False):
    receptive = 1
    for s in weight_shape[2:]:
        receptive *= s
    fan_in = weight_shape[1] * receptive
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


class TaskBuilder:
    def __init__(self, task_id):
        self.task = {"id": task_id, "source": "kernelbench", "inputs": [], "params": [], "nodes": [], "outputs": []}
        self.used = set()
        self.count = 0

    def unique(self, stem):
        stem = re.sub(r"\W", "_", stem) or "v"
        name, i = stem, 1
        while name in self.used:
            i += 1
            name = "%s_%d" % (stem, i)
        self.used.add(name)
        return name

    def input(self, stem, tensor, init):
        return self._tensor("inputs", stem, tensor, init)

    def param(self, stem, tensor, init):
        return self._tensor("params", stem, tensor, init)

    def _tensor(self, kind, stem, tensor, init):
        name = self.unique(stem)
        spec = {"name": name, "shape": list(tensor.shape), "dtype": dtype_name(tensor.dtype)}
        spec.update(init_fields(init))
        self.task[kind].append(spec)
        return name

    def node(self, op, ins, attrs=None, stem=None):
        out = self.unique(stem or "t%d" % self.count)
        self.count += 1
        n = {"op": op, "in": list(ins), "out": out}
        if attrs:
            n["attrs"] = attrs
        self.task["nodes"].append(n)
        return out


def dtype_name(dtype):
    if dtype not in DTYPES:
        raise Unsupported("dtype %s is not supported" % dtype)
    return DTYPES[dtype]


def init_fields(init):
    """The task schema's "init": a kind alone, or {"kind": ..., parameters}."""
    if init is None:
        return {"init": "normal"}
    params = {k: init[k] for k in ("low", "high", "mean", "std") if k in init}
    if not params:
        return {"init": init["init"]}
    return {"init": dict(kind=init["init"], **params)}


def as_list(v, n=None):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return int(v)


def scalar(v):
    if isinstance(v, bool):
        raise Unsupported("boolean scalar operand")
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, torch.Tensor) and v.numel() == 1 and v.device.type != "meta":
        return v.item()
    raise Unsupported("operand %r is neither a tensor of the graph nor a number" % (v,))

