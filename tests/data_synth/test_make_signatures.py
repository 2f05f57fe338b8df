"""make_signatures.py on problem files written for these tests: models that
torch.fx cannot trace (a recurrent module whose outputs are unpacked, a
factory sized by x.size(0), einops, shape-dependent checks) get op
signatures recorded from forward() like the traced ones, not lists of their
modules (LSTM, GRU, Mamba and NetVLAD problems used to keep module lists, so
contamination by meaning did not cover them)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.environ.get("KFORGE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "data_synth", "python"))
import make_signatures as ms  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
LSTM_STEP = ["linear", "linear", "add", "torch:chunk", "sigmoid", "sigmoid", "tanh", "sigmoid", "mul", "mul", "add",
             "tanh", "mul"]

PROBLEMS = {
    # KernelBench level3/35's shape: h0/c0 from torch.randn sized by x.size(0),
    # the LSTM's outputs unpacked, the last step through a Linear.
    "level3/1_LSTM.py": HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, 2, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        h0 = torch.randn(2, x.size(0), 16, device=x.device)
        c0 = torch.randn(2, x.size(0), 16, device=x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])

def get_inputs():
    return [torch.rand(3, 5, 8)]

def get_init_inputs():
    return []
''',
    "level3/2_GRU.py": HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, 1)

    def forward(self, x, h0):
        output, h_n = self.gru(x, h0)
        return output

def get_inputs():
    return [torch.rand(5, 3, 8), torch.rand(1, 3, 16)]

def get_init_inputs():
    return []
''',
    # einops (a minimal rearrange stands in when it is not installed), a
    # parameter scaling the activation, a device check fx cannot trace.
    "level3/3_Rearranged.py": HEADER + '''from einops import rearrange

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6))

    def forward(self, x):
        if x.device != self.w.device:
            raise ValueError("device")
        y = rearrange(x, "b (c l) h -> b h c l", l=2)
        y = torch.exp(y.cumsum(dim=-1))
        y = rearrange(y, "b h c l -> b (c l) h") * self.w
        return F.normalize(y - 0.5)

def get_inputs():
    return [torch.rand(3, 4, 6)]

def get_init_inputs():
    return []
''',
}


@pytest.fixture()
def problem_dir(tmp_path):
    for name, text in PROBLEMS.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_an_lstm_is_its_cell_step_then_what_follows(problem_dir):
    entry = ms.signature(str(problem_dir), "level3/1_LSTM.py")
    assert entry["traced"] == "recorded", entry
    assert entry["ops"] == LSTM_STEP + ["linear"], entry["ops"]


def test_a_gru_is_its_cell_step(problem_dir):
    entry = ms.signature(str(problem_dir), "level3/2_GRU.py")
    assert entry["traced"] == "recorded", entry
    ops = entry["ops"]
    assert ops.count("linear") == 2 and ops.count("sigmoid") == 2 and "tanh" in ops, ops
    assert "sub@scalar" in ops, "1 - z is a scalar epilogue: %s" % ops
    assert not any(op.startswith("torch:GRU") for op in ops), ops


def test_einops_and_parameters_are_recorded_as_fx_would_mark_them(problem_dir):
    entry = ms.signature(str(problem_dir), "level3/3_Rearranged.py")
    assert entry["traced"] == "recorded", entry
    ops = [op for op in entry["ops"] if op not in ("reshape", "permute")]
    assert ops == ["cumsum", "exp", "mul@bias", "sub@scalar", "torch:normalize"], entry["ops"]


def test_the_minimal_rearrange_agrees_with_reshape_and_permute():
    import torch
    x = torch.arange(2 * 6 * 3 * 5).reshape(2, 6, 3, 5)
    y = ms._rearrange(x, "b (c l) ... -> b c l ...", l=3)
    assert torch.equal(y, x.reshape(2, 2, 3, 3, 5))
    z = ms._rearrange(y, "b c l h p -> b h c l p")
    assert torch.equal(z, y.permute(0, 3, 1, 2, 4))
    assert torch.equal(ms._rearrange(z.permute(0, 2, 3, 1, 4), "b c l h p -> b (c l) h p"), x)


def test_the_committed_file_has_no_module_lists_for_these_families():
    import json
    path = os.path.join(os.path.dirname(ms.__file__), "..", "signatures", "kernelbench_signatures.json")
    problems = {p["name"]: p for p in json.load(open(path))["problems"]}
    for name, p in problems.items():
        if any(k in name for k in ("LSTM", "GRU", "Mamba", "NetVlad")):
            assert p["traced"] in (True, "recorded"), name
            assert not any(op in ("torch:LSTM", "torch:GRU") for op in p["ops"]), name
            assert len(p["ops"]) >= 10, (name, p["ops"])
        if "LSTM" in name:
            assert p["ops"][:len(LSTM_STEP)] == LSTM_STEP, (name, p["ops"])
