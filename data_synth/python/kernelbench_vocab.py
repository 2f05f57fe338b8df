"""How PyTorch modules, functions and operators map onto KernelForge's op
vocabulary (docs/ops.md) in kernelbench_import.py; make_signatures.py reads
the same tables."""

import operator

import torch.nn as nn

ACTIVATION_MODULES = {
    nn.ReLU: ("relu", lambda m: {}),
    nn.ReLU6: ("relu6", lambda m: {}),
    nn.GELU: ("gelu", lambda m: {"approximate": getattr(m, "approximate", "none")}),
    nn.SiLU: ("silu", lambda m: {}),
    nn.Sigmoid: ("sigmoid", lambda m: {}),
    nn.Tanh: ("tanh", lambda m: {}),
    nn.LeakyReLU: ("leaky_relu", lambda m: {"negative_slope": float(m.negative_slope)}),
    nn.ELU: ("elu", lambda m: {"alpha": float(m.alpha)}),
    nn.SELU: ("selu", lambda m: {}),
    nn.Hardtanh: ("hardtanh", lambda m: {"min_val": float(m.min_val), "max_val": float(m.max_val)}),
    nn.Hardswish: ("hardswish", lambda m: {}),
    nn.Hardsigmoid: ("hardsigmoid", lambda m: {}),
    nn.Mish: ("mish", lambda m: {}),
    nn.Softplus: ("softplus", lambda m: {"beta": float(m.beta), "threshold": float(m.threshold)}),
    nn.Softsign: ("softsign", lambda m: {}),
    nn.Softmax: ("softmax", lambda m: {"dim": -1 if m.dim is None else int(m.dim)}),
    nn.LogSoftmax: ("log_softmax", lambda m: {"dim": -1 if m.dim is None else int(m.dim)}),
}
# nn.ReLU6 subclasses nn.Hardtanh: look up exact types first.

UNARY_FUNCTIONS = {
    "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu", "mish": "mish",
    "selu": "selu", "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "softsign": "softsign",
    "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "sin": "sin", "cos": "cos",
    "erf": "erf", "log1p": "log1p", "neg": "neg", "negative": "neg", "reciprocal": "reciprocal", "sign": "sign",
    "square": "square", "contiguous": "contiguous",
}
REDUCTIONS = {"sum", "mean", "amax", "amin", "logsumexp", "prod", "std", "var", "norm", "cumsum", "argmax",
              "argmin", "max", "min"}
BINARY = {"add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul", "div": "div",
          "true_divide": "div", "truediv": "div", "maximum": "maximum", "minimum": "minimum", "pow": "pow",
          "eq": "eq", "ne": "ne", "gt": "gt", "ge": "ge", "lt": "lt", "le": "le"}
OPERATORS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
             operator.pow: "pow", operator.gt: "gt", operator.lt: "lt", operator.ge: "ge", operator.le: "le",
             operator.eq: "eq", operator.ne: "ne", operator.neg: "neg", operator.matmul: "matmul"}


def function_name(target):
    if target in OPERATORS:
        return OPERATORS[target]
    return getattr(target, "__name__", str(target))

