"""The stream's commands (`kforge send`, `kforge receive`, `kforge keygen`):
bad input gets exit code 2 and a message that names the file, line or field;
resuming rules; help."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import List

from conftest import kforge_bin
from stream_helpers import finish, read_ids, start_receive, start_send, trajectory, write_trajectories


def run(args: List[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([kforge_bin(), *args], capture_output=True, text=True, timeout=timeout)


def test_every_stream_command_has_help() -> None:
    for cmd in ("send", "receive", "keygen"):
        r = run([cmd, "--help"])
        assert r.returncode == 0 and "Usage" in r.stdout, r.stdout + r.stderr
        assert "STREAM.md" in r.stdout


def test_send_names_the_line_of_a_trajectory_without_an_id(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a"}\n{"no_id": 1}\n')
    r = run(["send", str(path), "--to", "tcp://127.0.0.1:9", "--worker", "w", "--spool", str(tmp_path / "sp"),
             "--flush-timeout", "0"])
    assert r.returncode == 2 and "t.jsonl:2" in r.stderr and '"id"' in r.stderr, r.stderr
    r = run(["send", str(tmp_path / "missing.jsonl"), "--worker", "w", "--spool", str(tmp_path / "sp")])
    assert r.returncode == 2 and "missing.jsonl" in r.stderr
    r = run(["send", str(path), "--worker", "bad id", "--spool", str(tmp_path / "sp2")])
    assert r.returncode == 2 and "worker" in r.stderr


def test_a_spool_belongs_to_its_worker_and_remembers_what_it_sent(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_trajectories(a, "a", 3)
    write_trajectories(b, "b", 3)
    spool = str(tmp_path / "sp")
    # Nobody listens: a's trajectories stay unacknowledged (exit 1).
    r = run(["send", str(a), "--to", "tcp://127.0.0.1:9", "--worker", "w", "--spool", spool, "--flush-timeout", "0.2"])
    s = json.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 1 and s["unacked"] == 3 and s["complete"] is False
    # Another file may join the spool at once: the spool keys by trajectory id.
    r = run(["send", str(b), "--to", "tcp://127.0.0.1:9", "--worker", "w", "--spool", spool, "--flush-timeout", "0"])
    assert r.returncode == 1 and json.loads(r.stdout.splitlines()[-1])["written"] == 3, r.stderr
    r = run(["send", str(a), "--to", "tcp://127.0.0.1:9", "--worker", "v", "--spool", spool, "--flush-timeout", "0"])
    assert r.returncode == 2 and 'belongs to worker "w"' in r.stderr
    # With a receiver: the rerun sends nothing new, the spool delivers both.
    out = tmp_path / "out.jsonl"
    receiver = start_receive(out, tmp_path / "state", "tcp://127.0.0.1:0")
    s = finish(start_send(a, receiver.endpoint, "w", Path(spool)))
    assert s["_exit"] == 0 and s["already_sent"] == 3 and s["written"] == 0 and s["acked"] == 6, s
    # Other paths to the same file: a copy, a symlink, a rename chain.
    copy, link, renamed = tmp_path / "copy.jsonl", tmp_path / "link.jsonl", tmp_path / "renamed.jsonl"
    copy.write_bytes(a.read_bytes())
    link.symlink_to(a)
    for path in (copy, link):
        s = finish(start_send(path, receiver.endpoint, "w", Path(spool)))
        assert s["_exit"] == 0 and s["written"] == 0 and s["already_sent"] == 3, (path, s)
    a.rename(renamed)
    s = finish(start_send(renamed, receiver.endpoint, "w", Path(spool)))
    assert s["_exit"] == 0 and s["written"] == 0, s
    renamed.rename(a)
    s = finish(start_send(a, receiver.endpoint, "w", Path(spool)))
    assert s["_exit"] == 0 and s["written"] == 0, s
    # Repeated ids inside one file go out once; the same id with other
    # content is refused, naming the line, and the rest still goes out.
    d = tmp_path / "d.jsonl"
    lines = [trajectory("d-0"), trajectory("d-1"), trajectory("d-0")]
    d.write_text("".join(json.dumps(t) + "\n" for t in lines))
    s = finish(start_send(d, receiver.endpoint, "w", Path(spool)))
    assert s["_exit"] == 0 and s["written"] == 2 and s["duplicate_ids"] == 1, s
    e = tmp_path / "e.jsonl"
    e.write_text(json.dumps(trajectory("d-1", reward=-1.0)) + "\n" + json.dumps(trajectory("e-0")) + "\n")
    p = start_send(e, receiver.endpoint, "w", Path(spool))
    s = finish(p)
    assert s["_exit"] == 2 and s["id_conflicts"] == 1 and s["written"] == 1, s
    assert "e.jsonl:1" in s["_stderr"] and '"d-1"' in s["_stderr"], s["_stderr"]
    summary = receiver.stop()
    assert summary["records"] == 9
    expected = [f"a-{i}" for i in range(3)] + [f"b-{i}" for i in range(3)] + ["d-0", "d-1", "e-0"]
    assert sorted(read_ids(out)) == sorted(expected)


def test_send_fails_when_a_trajectory_was_rejected(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    # A receiver that takes messages up to 64 KiB: the large trajectory is set
    # aside (never delivered), the small one is delivered.
    receiver = start_receive(out, tmp_path / "state", "tcp://127.0.0.1:0", "--max-message-mb", "0.0625")
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(trajectory("small")) + "\n" + json.dumps(trajectory("large", filler=200000)) + "\n")
    s = finish(start_send(path, receiver.endpoint, "w", tmp_path / "sp"))
    assert s["_exit"] == 1 and s["complete"] is False and s["rejected"] == 1, s
    assert "rejected.jsonl" in s["_stderr"] and '"large"' in s["_stderr"], s["_stderr"]
    # Run again: still not complete (the set-aside trajectory was never delivered).
    s = finish(start_send(path, receiver.endpoint, "w", tmp_path / "sp"))
    assert s["_exit"] == 1 and s["written"] == 0 and s["rejected"] == 1, s
    receiver.stop()
    assert read_ids(out) == ["small"]
    r = run(["send", "--help"])
    assert "Exit 0 when every trajectory" in r.stdout and "rejected" in r.stdout


def test_receive_refuses_a_state_of_another_output_and_a_truncated_output(tmp_path: Path) -> None:
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    receiver = start_receive(out, state, "tcp://127.0.0.1:0")
    path = tmp_path / "t.jsonl"
    write_trajectories(path, "r", 5)
    assert finish(start_send(path, receiver.endpoint, "w", tmp_path / "sp"))["_exit"] == 0
    receiver.stop()
    r = run(["receive", "--bind", "tcp://127.0.0.1:0", "--out", str(tmp_path / "other.jsonl"), "--state", str(state)])
    assert r.returncode == 2 and "belongs to the output" in r.stderr
    out.write_text("")
    r = run(["receive", "--bind", "tcp://127.0.0.1:0", "--out", str(out), "--state", str(state)])
    assert r.returncode == 2 and "truncated or replaced" in r.stderr
    r = run(["receive", "--bind", "not-an-endpoint", "--out", str(tmp_path / "x.jsonl")])
    assert r.returncode == 2 and "not-an-endpoint" in r.stderr


def test_receive_recovers_a_batch_written_but_not_acknowledged(tmp_path: Path) -> None:
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    receiver = start_receive(out, state, "tcp://127.0.0.1:0")
    endpoint = receiver.endpoint
    first = tmp_path / "first.jsonl"
    ids = write_trajectories(first, "t", 4)
    spool = tmp_path / "sp"
    assert finish(start_send(first, endpoint, "w", spool))["_exit"] == 0
    receiver.kill()
    # As if the next run died after writing seq 5's line (and half of seq
    # 6's) but before acknowledging them: the checkpoint names the batch.
    checkpoint_file = state / "receive-out.json"
    checkpoint = json.loads(checkpoint_file.read_text())
    assert checkpoint["records"] == 4 and checkpoint["writing"] == []
    checkpoint["writing"] = [["w", 5], ["w", 6]]
    checkpoint_file.write_text(json.dumps(checkpoint))
    with open(out, "a") as f:
        f.write(json.dumps({"id": "t-fifth", "turns": []}) + "\n")
        f.write('{"id": "t-six')
    receiver = start_receive(out, state, endpoint)
    assert receiver.ready["records"] == 5
    # The worker's seq 5 and 6: 5 is stored already (acknowledged, never
    # written again), 6 is written. Seq 5 arrives as a duplicate only when the
    # sender spooled it before the receiver's welcome; otherwise the welcome's
    # acked_through = 5 makes the sender drop it unsent. Both are correct.
    second = tmp_path / "second.jsonl"
    write_trajectories(second, "u", 2)
    assert finish(start_send(second, endpoint, "w", spool))["_exit"] == 0
    summary = receiver.stop()
    assert summary["recovered"] == 1 and summary["records"] == 6 and summary["duplicates"] in (0, 1)
    assert read_ids(out) == ids + ["t-fifth", "u-1"]
    assert out.read_text().endswith("\n")
    # Lines nobody checkpointed are refused.
    with open(out, "a") as f:
        f.write(json.dumps({"id": "stranger"}) + "\n")
    r = run(["receive", "--bind", "tcp://127.0.0.1:0", "--out", str(out), "--state", str(state)])
    assert r.returncode == 2 and "something else wrote to it" in r.stderr


def test_keygen_writes_a_pair_and_never_overwrites(tmp_path: Path) -> None:
    r = run(["keygen", "--out", str(tmp_path / "k" / "trainer")])
    assert r.returncode == 0
    info = json.loads(r.stdout)
    assert len(info["public_key"]) == 40
    assert (tmp_path / "k" / "trainer.key").exists()
    assert (tmp_path / "k" / "trainer.key_secret").stat().st_mode & 0o077 == 0
    import zmq.auth

    public, secret = zmq.auth.load_certificate(str(tmp_path / "k" / "trainer.key_secret"))
    assert public.decode() == info["public_key"] and len(secret) == 40
    r = run(["keygen", "--out", str(tmp_path / "k" / "trainer")])
    assert r.returncode == 2 and "not overwritten" in r.stderr
    r = run(["send", str(tmp_path / "k" / "trainer.key"), "--worker", "w", "--spool", str(tmp_path / "sp"),
             "--curve-server-key", "garbage"])
    assert r.returncode == 2 and "Z85" in r.stderr
