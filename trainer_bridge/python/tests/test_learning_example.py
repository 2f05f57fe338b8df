"""examples/learning in its short form: a PyTorch policy served through
kforge.PolicyServer to a real `kforge rollout` (CPU backend), trajectories
through kforge.TrajectoryStream, GRPO updates publishing policy versions,
against a random-choice baseline played through the same system.

Two tasks whose knobs matter by an order of magnitude on any CPU (an unfused
affine chain makes three passes instead of one; a naive matmul against a
tiled one), so the assertions on what was learned hold on a loaded machine;
the full run (all five examples, more iterations) is the example itself.
Eight updates of groups of four: a couple of minutes on two cores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO, kforge_bin

TRAIN = REPO / "examples" / "learning" / "train.py"


def test_the_policy_learns_through_the_whole_loop(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, str(TRAIN), "--kforge", kforge_bin(), "--out", str(out),
         "--only", "example/affine_relu6", "example/matmul_bias_relu",
         "--iterations", "8", "--baseline-iterations", "2", "--group-size", "4", "--seed", "1"],
        capture_output=True, text=True, timeout=1500,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    curve = json.loads((out / "curve.json").read_text())
    rows = curve["training"]
    assert [row["policy_version"] for row in rows] == list(range(1, 9))  # one published version per update
    assert all(row["episodes"] == 8 for row in rows), rows
    assert curve["baseline"]["mean_reward"]["episodes"] == 16
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Everything the worker streamed reached the trainer, with the policy's
    # choice (token_ids) and its sampling logprobs carried in the trajectory.
    trained = [json.loads(l) for l in (out / "trajectories-train.jsonl").read_text().splitlines()]
    assert len(trained) == sum(row["episodes"] for row in rows)
    versions = set()
    for t in trained:
        policy = t["turns"][0]["info"]["policy"]
        assert len(policy["token_ids"]) == 5 and len(policy["logprobs"]) == 5
        assert all(lp <= 0 for lp in policy["logprobs"])
        versions.add(int(policy["version"]))
    assert versions >= {0, 1, 2}, versions  # later episodes were played by updated policies

    # What was learned: the knobs worth an order of magnitude.
    greedy = curve["final_greedy_choices"]
    assert "fuse=1" in greedy["example/affine_relu6"], greedy
    assert "naive_matmul=0" in greedy["example/matmul_bias_relu"], greedy
    last = sum(row["mean_reward"] for row in rows[-3:]) / 3
    assert last > curve["baseline"]["mean_reward"]["mean"], (rows, curve["baseline"])


def test_task_template_names_what_is_wrong(tmp_path: Path) -> None:
    task = REPO / "examples" / "affine_relu6" / "task.json"
    run = lambda *a: subprocess.run([kforge_bin(), "task", "template", str(task), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    r = run("--variant", "fuse=1")
    assert r.returncode == 2 and "is not a variant" in r.stderr and "naive_matmul=" in r.stderr, r.stderr
    r = run("--variant", "fuse=1 block=256 vec=4 unroll=1 acc=4 tile=4 naive_matmul=0",
            "--variant", "fuse=0 block=256 vec=4 unroll=1 acc=4 tile=4 naive_matmul=0")
    assert r.returncode == 2 and "--json" in r.stderr
    r = run("--json", "--variant", "fuse=1 block=256 vec=4 unroll=1 acc=4 tile=4 naive_matmul=0",
            "--variant", "fuse=0 block=256 vec=4 unroll=1 acc=4 tile=4 naive_matmul=0")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["task_id"] == "example/affine_relu6" and len(out["sources"]) == 2
    assert len(set(out["sources"].values())) == 2  # fusion changes the kernel
