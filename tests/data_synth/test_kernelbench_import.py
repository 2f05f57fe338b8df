"""The KernelBench importer on problem files written for these tests: what
imports becomes a task that computes what the problem's Model computes (run
here under PyTorch, with the task's own ops spelled in torch), and what does
not import is reported with the reason."""

import json
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.environ.get("KFORGE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "data_synth", "python"))
import kernelbench_import as kbi  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

PROBLEMS = {
    "level2/1_Conv2d_ReLU_BiasAdd.py": HEADER + '''
class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

def get_inputs():
    return [torch.rand(2, 3, 10, 10)]

def get_init_inputs():
    return [3, 8, 3, (8, 1, 1)]
''',
    "level2/2_Gemm_GroupNorm_Softmax_Max.py": HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.gn = nn.GroupNorm(4, 32)

    def forward(self, x):
        x = self.fc(x)
        x = self.gn(x)
        x = 2.0 - x
        x = F.softmax(x, dim=1)
        x = torch.max(x, dim=1, keepdim=True)[0]
        return x.view(x.size(0), -1)

def get_inputs():
    return [torch.randn(5, 16)]

def get_init_inputs():
    return []
''',
    "level1/3_Huge_Matmul.py": HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b.T)

def get_inputs():
    # 16 GiB each at full size: the importer must never allocate them.
    return [torch.rand(65536, 65536), torch.rand(65536, 65536)]

def get_init_inputs():
    return []
''',
    "level2/4_Dropout.py": HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(torch.tanh(x))

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
''',
    "level2/5_Einsum.py": HEADER + '''
class Model(nn.Module):
    def forward(self, x, y):
        return torch.einsum("ij,jk->ik", x, y)

def get_inputs():
    return [torch.randn(4, 4), torch.randn(4, 4)]

def get_init_inputs():
    return []
''',
    "level2/6_Broken.py": "this is not python(\n",
    "level2/7_NotAProblem.py": "x = 1\n",
}


@pytest.fixture(scope="module")
def problem_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("kb")
    for name, text in PROBLEMS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def imported(problem_dir, name):
    return kbi.import_problem(str(problem_dir / name))


def run_task(task, inputs, params):
    """Evaluates a task's nodes with torch (an independent spelling of the vocabulary)."""
    env = dict(inputs)
    env.update(params)
    for n in task["nodes"]:
        a = [env[v] for v in n["in"]]
        at = n.get("attrs", {})
        op = n["op"]
        if op == "conv2d":
            out = F.conv2d(*a, stride=at["stride"], padding=at["padding"], dilation=at["dilation"], groups=at["groups"])
        elif op == "linear":
            out = F.linear(*a)
        elif op == "relu":
            out = torch.relu(a[0])
        elif op == "add":
            out = a[0] + (a[1] if len(a) > 1 else at["other"])
        elif op == "neg":
            out = -a[0]
        elif op == "group_norm":
            out = F.group_norm(a[0], at["num_groups"], *a[1:], eps=at["eps"])
        elif op == "softmax":
            out = torch.softmax(a[0], dim=at["dim"])
        elif op == "max":
            out = torch.max(a[0], dim=at["dim"], keepdim=at.get("keepdim", False))[0]
        elif op == "reshape":
            out = a[0].reshape(at["shape"])
        else:
            raise AssertionError("op %s not covered by this test" % op)
        env[n["out"]] = out
    return [env[o] for o in task["outputs"]]


def check_against_model(problem_dir, name):
    task, entry = imported(problem_dir, name)
    assert task is not None, entry
    module = kbi.load_module(str(problem_dir / name))
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    # Params in task order are the model's parameters in registration order.
    named = dict(model.named_parameters())
    params = {}
    for p in task.get("params", []):
        match = [v for k, v in named.items() if k.replace(".", "_") in p["name"] or p["name"].startswith(
            k.split(".")[0])]
        assert match, (p["name"], list(named))
        value = named[[k for k in named if k.replace(".", "_") == p["name"]][0]] if any(
            k.replace(".", "_") == p["name"] for k in named) else match[0]
        assert list(value.shape) == p["shape"], (p, value.shape)
        params[p["name"]] = value.detach()
    feeds = {spec["name"]: t for spec, t in zip(task["inputs"], inputs)}
    with torch.no_grad():
        got = run_task(task, feeds, params)[0]
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    return task


def test_conv_relu_bias_imports_and_matches_the_model(problem_dir):
    task = check_against_model(problem_dir, "level2/1_Conv2d_ReLU_BiasAdd.py")
    assert [n["op"] for n in task["nodes"]] == ["conv2d", "relu", "add"]
    assert task["id"] == "kernelbench/level2/1_Conv2d_ReLU_BiasAdd"
    # The task schema's init: a kind alone, or {"kind": ..., parameters}.
    assert task["inputs"][0]["init"] == {"kind": "uniform", "low": 0.0, "high": 1.0}  # torch.rand
    bias = [p for p in task["params"] if p["shape"] == [8, 1, 1]][0]
    assert bias["init"] == "normal"  # torch.randn
    conv_bias = [p for p in task["params"] if p["shape"] == [8]][0]
    assert conv_bias["init"]["kind"] == "uniform" and abs(conv_bias["init"]["high"] - 1 / 27 ** 0.5) < 1e-12


def test_scalar_on_the_left_and_tuple_reductions(problem_dir):
    task = check_against_model(problem_dir, "level2/2_Gemm_GroupNorm_Softmax_Max.py")
    ops = [n["op"] for n in task["nodes"]]
    assert ops == ["linear", "group_norm", "neg", "add", "softmax", "max", "reshape"], ops


def test_huge_inputs_are_never_allocated(problem_dir):
    task, entry = imported(problem_dir, "level1/3_Huge_Matmul.py")
    assert task is not None, entry
    assert task["inputs"][0]["shape"] == [65536, 65536]
    assert [n["op"] for n in task["nodes"]] == ["transpose", "matmul"]


@pytest.mark.parametrize("name,reason", [
    ("level2/4_Dropout.py", "random in training mode"),
    ("level2/5_Einsum.py", "einsum is not in the vocabulary"),
    ("level2/6_Broken.py", "SyntaxError"),
    ("level2/7_NotAProblem.py", "not a KernelBench problem file"),
])
def test_what_cannot_be_imported_says_why(problem_dir, name, reason):
    task, entry = imported(problem_dir, name)
    assert task is None
    assert entry["imported"] is False
    assert reason in entry["reason"], entry


def test_command_line_writes_tasks_and_report(problem_dir, tmp_path):
    out = tmp_path / "tasks.jsonl"
    assert kbi.main([str(problem_dir), "--out", str(out)]) == 0
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert {t["id"] for t in tasks} == {"kernelbench/level2/1_Conv2d_ReLU_BiasAdd",
                                        "kernelbench/level2/2_Gemm_GroupNorm_Softmax_Max",
                                        "kernelbench/level1/3_Huge_Matmul"}
    report = json.loads((tmp_path / "tasks.jsonl.report.json").read_text())
    assert report["files"] == 7 and report["imported"] == 3
    assert {p["task_id"] for p in report["problems"] if not p["imported"]} == {
        "kernelbench/level2/4_Dropout", "kernelbench/level2/5_Einsum", "kernelbench/level2/6_Broken",
        "kernelbench/level2/7_NotAProblem"}
