"""The contamination cross-check (bench/synth/audit_contamination.py): which
op lists it calls a KernelBench level-1 problem by meaning, and what it
writes for a set."""

import json
import os
import subprocess
import sys

SOURCE = os.environ.get("KFORGE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "bench", "synth"))
import audit_contamination as ac  # noqa: E402


def test_one_level1_op_with_pointwise_work_around_it_is_flagged():
    assert ac.flag(["selu", "adaptive_avg_pool1d"]) == \
        "one level-1 problem plus pointwise work: level1/44-46 average pooling"
    assert ac.flag(["matmul", "neg"]) == "one level-1 problem plus pointwise work: level1/1-18 matrix multiplication"
    assert ac.flag(["conv2d", "add", "transpose", "mul"]) == \
        "one level-1 problem plus pointwise work: level1/54-87 convolution"
    assert ac.flag(["layer_norm"]) == "one level-1 problem plus pointwise work: level1/40 LayerNorm"


def test_a_pointwise_chain_is_flagged_only_with_a_level1_activation():
    assert ac.flag(["minimum", "tanh"]) == "pointwise only, with a level-1 activation: level1/22 Tanh"
    assert ac.flag(["add", "mul", "sin"]) is None
    assert ac.flag(["mish", "exp"]) is None, "Mish is not a level-1 problem"


def test_two_heavy_ops_or_an_op_without_a_level1_problem_are_left_to_the_cost_model():
    assert ac.flag(["matmul", "layer_norm", "matmul"]) is None
    assert ac.flag(["var", "gelu"]) is None
    assert ac.flag(["cat", "add"]) is None


def test_a_set_is_counted_and_written(tmp_path):
    tasks = [{"id": "synth/a", "nodes": [{"op": "selu"}, {"op": "adaptive_avg_pool1d"}]},
             {"id": "synth/b", "nodes": [{"op": "matmul"}, {"op": "softmax"}, {"op": "matmul"}]},
             {"id": "synth/c", "nodes": [{"op": "hardtanh"}, {"op": "relu"}]}]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    done = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "synth", "audit_contamination.py"),
                           str(tmp_path), "--write"], stdout=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 0
    line = json.loads(done.stdout)
    assert (line["tasks"], line["flagged"]) == (3, 2)
    written = json.loads((tmp_path / "audit_contamination.json").read_text())
    assert written == line
    assert written["examples"]["pointwise only, with a level-1 activation: level1/32 HardTanh"] == \
        ["synth/c: hardtanh, relu"]


def test_a_line_that_is_not_a_task_is_an_error_that_names_it(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "x", "nodes": "matmul"}) + "\n")
    done = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "synth", "audit_contamination.py"),
                           str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 2
    assert "tasks.jsonl line 1: `nodes` must be a list" in done.stderr
