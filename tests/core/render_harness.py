"""Runs KernelBench-format modules rendered by KernelForge on given inputs and
compares them with outputs computed by the C++ reference.

Usage: render_harness.py MANIFEST.json RESULTS.json

The manifest lists cases: {"label", "module", "inputs": [{"py", "file",
"dtype", "shape", "param"}], "outputs": [{"file", "dtype", "shape"}], "rtol",
"atol"}. Inputs marked "param" are copied into the Model attribute of that name;
the others are passed to forward() in order. Each file holds the raw
row-major bytes of one tensor. Results: {label: {"ok": bool, "detail": str}}.
"""

import importlib.util
import json
import sys
import traceback

import numpy as np
import torch

# Rendered modules live in a scratch directory that the test removes file by file.
sys.dont_write_bytecode = True

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


def load_tensor(spec):
    raw = np.fromfile(spec["file"], dtype=np.uint8)
    return torch.from_numpy(raw.copy()).view(DTYPES[spec["dtype"]]).reshape(spec["shape"])


def load_module(label, path):
    spec = importlib.util.spec_from_file_location("rendered_" + label, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_case(case):
    module = load_module(case["label"], case["module"])
    model = module.Model(*module.get_init_inputs())
    plain_inputs = [i for i in case["inputs"] if not i["param"]]

    # get_inputs() must create what the task declares.
    generated = module.get_inputs()
    if len(generated) != len(plain_inputs):
        return False, "get_inputs() returned %d tensors, expected %d" % (len(generated), len(plain_inputs))
    for tensor, spec in zip(generated, plain_inputs):
        if list(tensor.shape) != spec["shape"] or tensor.dtype != DTYPES[spec["dtype"]]:
            return False, "get_inputs() made %s %s for %s, expected %s %s" % (
                list(tensor.shape), tensor.dtype, spec["py"], spec["shape"], spec["dtype"])

    args = []
    with torch.no_grad():
        for spec in case["inputs"]:
            value = load_tensor(spec)
            if spec["param"]:
                target = getattr(model, spec["py"])
                if list(target.shape) != spec["shape"] or target.dtype != value.dtype:
                    return False, "Model.%s is %s %s, expected %s %s" % (
                        spec["py"], list(target.shape), target.dtype, spec["shape"], spec["dtype"])
                target.copy_(value)
            else:
                args.append(value)
        try:
            result = model(*args)
        except RuntimeError as e:
            # CPU PyTorch 1.13 lacks some half kernels (batch_norm); the C++
            # reference holds half values in float32 on the CPU
            # (core/src/reference/run_reference.cpp), so the module runs the
            # same way here and its outputs are cast back.
            low = [a for a in args if a.dtype in (torch.float16, torch.bfloat16)]
            if "not implemented for" not in str(e) or not low:
                raise
            declared = low[0].dtype
            model = model.float()
            result = model(*[a.float() if a.dtype == declared else a for a in args])
            result = tuple(r.to(declared) if r.is_floating_point() else r
                           for r in (result if isinstance(result, tuple) else (result,)))
    outputs = result if isinstance(result, tuple) else (result,)
    if len(outputs) != len(case["outputs"]):
        return False, "forward returned %d outputs, expected %d" % (len(outputs), len(case["outputs"]))
    for index, (actual, spec) in enumerate(zip(outputs, case["outputs"])):
        expected = load_tensor(spec)
        if actual.dtype != expected.dtype or list(actual.shape) != list(expected.shape):
            return False, "output %d is %s %s, expected %s %s" % (
                index, list(actual.shape), actual.dtype, list(expected.shape), expected.dtype)
        if actual.is_floating_point():
            a = actual.double().numpy()
            e = expected.double().numpy()
            if not np.allclose(a, e, rtol=case["rtol"], atol=case["atol"]):
                return False, "output %d differs: max abs error %g" % (index, float(np.max(np.abs(a - e))))
        elif not torch.equal(actual, expected):
            return False, "output %d differs (exact comparison for %s)" % (index, actual.dtype)
    return True, "ok"


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = {}
    for case in cases:
        try:
            ok, detail = check_case(case)
        except Exception:  # a rendering that does not run is a result, not a harness crash
            ok, detail = False, traceback.format_exc(limit=3)
        results[case["label"]] = {"ok": ok, "detail": detail}
    with open(sys.argv[2], "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
