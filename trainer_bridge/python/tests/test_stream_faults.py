"""Kill tests of the trajectory stream with real processes: C++ senders
(`kforge send`, the TrajectorySender of the rollout workers) and receivers
(`kforge receive`, and the example trainer on kforge.TrajectoryStream) are
killed with SIGKILL at random points and started again on the same spool or
state. Every trajectory must end up in the receiver's output exactly once.
The longer randomized run is bench/stream/stream_fault_run.py (its short
form is a ctest too)."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Callable, List

import pytest

from stream_helpers import (
    Child,
    finish,
    read_ids,
    start_python_receiver,
    start_receive,
    start_send,
    wait_for,
    write_trajectories,
)

SEED = 20261203


def assert_exactly_once(got: List[str], expected: List[str]) -> None:
    missing = set(expected) - set(got)
    duplicated = len(got) - len(set(got))
    assert not missing and duplicated == 0, f"{len(missing)} lost, {duplicated} duplicated"
    assert sorted(got) == sorted(expected)


def _spool_has_records(spool: Path) -> bool:
    if not spool.is_dir():
        return False
    return any(f.is_file() and f.name != "lock" and f.stat().st_size > 0 and f.suffix != ".json"
               for f in spool.rglob("*"))


def test_a_sender_killed_mid_send_resumes_and_nothing_is_lost_or_doubled(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    n = 3000
    path = tmp_path / "t.jsonl"
    expected = write_trajectories(path, "s", n, filler=1000)
    out = tmp_path / "out.jsonl"
    receiver = start_receive(out, tmp_path / "state", "tcp://127.0.0.1:0", "--count", str(n))
    spool = tmp_path / "spool"
    # Each restart reaches the same file by another path (the spool keys by
    # trajectory id, not by path): the file, a copy, a symlink, a new name.
    copy, link = tmp_path / "copy.jsonl", tmp_path / "link.jsonl"
    copy.write_bytes(path.read_bytes())
    link.symlink_to(path)
    killed_alive = 0
    for i in range(4):
        if i == 3:
            moved = tmp_path / "moved.jsonl"
            path.rename(moved)
            path = moved
            link.unlink()
            link.symlink_to(path)
        p = start_send([path, copy, link, path][i], receiver.endpoint, "phoenix", spool)
        # Mid-send: once the spool holds records (kforge takes about a second
        # to start, libtorch included), then at a random point.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and p.poll() is None and not _spool_has_records(spool):
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.2))
        if p.poll() is None:
            killed_alive += 1
        p.send_signal(signal.SIGKILL)
        p.communicate()
    assert killed_alive >= 2, "the sender finished before it could be killed; make the input larger"
    last = finish(start_send(copy, receiver.endpoint, "phoenix", spool))
    assert last["_exit"] == 0, last["_stderr"][-2000:]
    assert last["already_sent"] > 0  # it picked up where the killed ones stopped
    summary = finish(receiver.p, timeout=60)
    assert summary["records"] == n
    assert_exactly_once(read_ids(out), expected)


@pytest.mark.parametrize("which", ["cpp", "python"])
def test_a_receiver_killed_and_restarted_loses_and_doubles_nothing(tmp_path: Path, which: str) -> None:
    rng = random.Random(SEED + (1 if which == "python" else 0))
    n = 4000
    launch: Callable[..., Child] = start_receive if which == "cpp" else start_python_receiver

    def start(out: Path, state: Path, bind: str) -> Child:
        # A small credit keeps the stream slow enough to be killed mid-way.
        return launch(out, state, bind, "--credit", "4")

    def lines() -> int:
        return out.read_bytes().count(b"\n") if out.exists() else 0

    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    receiver = start(out, state, "tcp://127.0.0.1:0")
    endpoint = receiver.endpoint
    paths = []
    expected: List[str] = []
    for w in range(2):
        paths.append(tmp_path / f"w{w}.jsonl")
        expected += write_trajectories(paths[-1], f"w{w}", n // 2, filler=1000)
    senders = [start_send(p, endpoint, f"w{i}", tmp_path / f"spool{i}", flush_timeout=120) for i, p in enumerate(paths)]
    kills = 0
    for fraction in (0.1, 0.3, 0.5):
        # Kill it while trajectories are flowing, at a random point past each mark.
        wait_for(lambda: lines() >= fraction * n, 60, f"{fraction:.0%} of the trajectories")
        time.sleep(rng.uniform(0.0, 0.05))
        if lines() >= n:
            break
        receiver.kill()
        kills += 1
        receiver = start(out, state, endpoint)
    receiver_final = receiver
    for p in senders:
        s = finish(p, timeout=180)
        assert s["_exit"] == 0, s["_stderr"][-2000:]
    wait_for(lambda: lines() >= n, 30, "the last trajectories")
    summary = receiver_final.stop()
    assert kills >= 2
    assert summary["records"] == n
    assert_exactly_once(read_ids(out), expected)
