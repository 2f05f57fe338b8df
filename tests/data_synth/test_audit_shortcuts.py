"""The shortcut audit (bench/synth/audit_shortcuts.py) on task sets written
here: what it finds, and what it does with a task that runs out of memory
while shards share the device, alone or beside its neighbours."""

import json
import os
import subprocess
import sys

import pytest

SOURCE = os.environ.get("KFORGE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
AUDIT = os.path.join(SOURCE, "bench", "synth", "audit_shortcuts.py")

MODULE = '''import sys
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}


def get_inputs():
{inputs}
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
'''

# What each task's forward does, and what it does before drawing its inputs.
HONEST = ("        return torch.tanh(x) * 3.0", "")
CONSTANT = ("        return x * 0.0", "")
# An allocation no host grants: out of memory wherever it runs.
NEVER_FITS = HONEST[0], "    torch.empty(2 ** 45)"
# Out of memory beside other shards only: alone on the device (the audit's
# --only run) it fits, as a big task does once its neighbours are done.
FITS_ALONE = HONEST[0], '    if "--only" not in sys.argv:\n        torch.empty(2 ** 45)'


def write_set(tmp_path, kinds):
    (tmp_path / "kernelbench").mkdir()
    with open(tmp_path / "tasks.jsonl", "w") as tasks:
        for i, (body, inputs) in enumerate(kinds):
            task_id = "synth/t%02d" % i
            tasks.write(json.dumps({"id": task_id, "tolerance": {"rtol": 1e-2, "atol": 1e-2}}) + "\n")
            (tmp_path / "kernelbench" / ("synth_t%02d.py" % i)).write_text(MODULE.format(body=body, inputs=inputs))
    return str(tmp_path)


def audit(out, *args):
    done = subprocess.run([sys.executable, AUDIT, out, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    assert lines, done.stderr
    return done.returncode, json.loads(lines[-1])


def test_a_constant_output_is_found_and_an_honest_one_is_not(tmp_path):
    out = write_set(tmp_path, [HONEST, CONSTANT])
    rc, line = audit(out)
    assert rc == 0
    assert line["audited"] == 2
    assert line["passable_by_constant"] == 1
    assert line["ids"]["passable_by_constant"] == ["synth/t01"]
    assert line["errors"] == 0


def test_only_audits_the_listed_tasks(tmp_path):
    out = write_set(tmp_path, [HONEST, CONSTANT, HONEST])
    ids = tmp_path / "ids.txt"
    ids.write_text("synth/t01\n")
    rc, line = audit(out, "--only", str(ids))
    assert rc == 0
    assert (line["tasks"], line["audited"], line["passable_by_constant"]) == (1, 1, 1)


def test_a_task_short_of_memory_beside_shards_is_audited_alone_and_counted_once(tmp_path):
    out = write_set(tmp_path, [HONEST, CONSTANT, FITS_ALONE, HONEST, CONSTANT])
    rc, sharded = audit(out, "--jobs", "2", "--write")
    assert rc == 0, sharded
    assert sharded["deferred_alone"] == 1
    assert (sharded["tasks"], sharded["audited"], sharded["errors"]) == (5, 5, 0), sharded
    assert sharded["passable_by_constant"] == 2
    assert "deferred_out_of_memory" not in sharded["ids"]
    with open(os.path.join(out, "audit_shortcuts.json")) as f:
        assert json.load(f)["audited"] == 5


def test_a_task_short_of_memory_even_alone_is_an_error_that_names_it(tmp_path):
    out = write_set(tmp_path, [HONEST, NEVER_FITS, CONSTANT])
    rc, sharded = audit(out, "--jobs", "2")
    assert rc == 0, sharded
    assert sharded["deferred_alone"] == 1
    assert (sharded["tasks"], sharded["audited"], sharded["errors"]) == (3, 3, 1), sharded
    [error] = sharded["ids"]["errors"]
    assert error.startswith("synth/t01: ") and "can't allocate memory" in error, error
    assert sharded["passable_by_constant"] == 1


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
