"""Loading a KernelBench problem file and tracing its model on the meta
device (kernelbench_import.py), recording which init each tensor factory
call stands for."""

import importlib.util
import os
import re

import torch
import torch.fx

from kernelbench_task import Unsupported

MAX_FILE_BYTES = 1 << 20  # a problem file is source code, not data


class FactoryRecorder:
    """Redirects tensor factories to the meta device and remembers the init
    each created tensor stands for."""

    FACTORIES = ("rand", "randn", "randint", "zeros", "ones", "empty", "full", "tensor", "arange",
                 "rand_like", "randn_like", "zeros_like", "ones_like", "empty_like")

    def __init__(self):
        self.inits = {}  # id(tensor) -> init dict
        self.created = []  # (tensor, init) in creation order
        self.saved = {}

    def init_for(self, name, args, kwargs):
        if name in ("rand", "rand_like"):
            return {"init": "uniform", "low": 0.0, "high": 1.0}
        if name in ("randn", "randn_like", "empty", "empty_like"):
            return {"init": "normal"}
        if name in ("zeros", "zeros_like"):
            return {"init": "zeros"}
        if name in ("ones", "ones_like"):
            return {"init": "ones"}
        if name == "randint":
            ints = [a for a in args if isinstance(a, int)]
            low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1]) if len(ints) >= 2 else (0, 2)
            return {"init": "randint", "low": float(low), "high": float(high)}
        return None  # full/tensor/arange: values we cannot describe as an init

    def __enter__(self):
        for name in self.FACTORIES:
            original = getattr(torch, name)
            self.saved[name] = original

            def factory(*args, _name=name, _original=original, **kwargs):
                if _name in ("tensor", "full", "arange"):
                    t = _original(*args, **kwargs)  # small constants: real values
                    return t
                kwargs = dict(kwargs)
                kwargs.pop("device", None)
                if _name.endswith("_like"):
                    t = _original(*args, **kwargs, device="meta")
                else:
                    t = _original(*args, **kwargs, device="meta")
                init = self.init_for(_name, args, kwargs)
                if init is not None:
                    self.inits[id(t)] = init
                    self.created.append((t, init))
                return t

            setattr(torch, name, factory)
        return self

    def __exit__(self, *exc):
        for name, original in self.saved.items():
            setattr(torch, name, original)
        return False


def load_module(path):
    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise Unsupported("file is larger than %d bytes" % MAX_FILE_BYTES)
    name = "kb_problem_" + re.sub(r"\W", "_", os.path.basename(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise Unsupported("not a KernelBench problem file: no %s" % attr)
    return module


def recorder_init(recorder, tensor):
    if recorder is None:
        return None
    init = recorder.inits.get(id(tensor))
    if init is not None:
        return init
    # nn.Parameter(t) is a new object: match the unused created tensor of the same shape.
    for i, (t, init) in enumerate(recorder.created):
        if t is not None and tuple(t.shape) == tuple(tensor.shape) and t.dtype == tensor.dtype:
            recorder.created[i] = (None, init)
            return init
    return None


def trace(module_obj):
    """Builds the model and inputs on the meta device; returns (gm, inputs, input inits, recorder)."""
    recorder = FactoryRecorder()
    with recorder:
        init_inputs = module_obj.get_init_inputs()
        model_recorder_start = len(recorder.created)
        model = module_obj.Model(*init_inputs)
        created_by_model = recorder.created[model_recorder_start:]
        inputs = module_obj.get_inputs()
    recorder.created = created_by_model
    model = model.to("meta") if any(p.device.type != "meta" for p in model.parameters()) else model
    input_inits = [recorder.inits.get(id(t)) for t in inputs]
    inputs = [t.to("meta") if isinstance(t, torch.Tensor) and t.device.type != "meta" else t for t in inputs]
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # control flow on values, unsupported Python
        raise Unsupported("torch.fx cannot trace the model: %s" % str(e).splitlines()[0][:200])
    try:
        from torch.fx.passes.shape_prop import ShapeProp

        ShapeProp(gm).propagate(*inputs)
    except Exception:
        # Some ops lack meta kernels in older PyTorch: only the nodes that need
        # a propagated shape (view, reshape, expand) fail then, by name.
        pass
    return gm, inputs, input_inits, recorder

