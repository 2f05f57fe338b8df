"""kforge.TrajectoryStream against real C++ senders (`kforge send`, the
TrajectorySender the rollout workers use) and hand-driven protocol peers, over
loopback. Kills of real processes: test_stream_faults.py."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from conftest import kforge_bin
from kforge import Batch, TrajectoryStream
from kforge.stream import protocol as proto
from kforge.stream.state import ReceiverState, SeqRanges
from stream_helpers import (
    RawSender,
    finish,
    read_ids,
    spool_instance,
    start_receive,
    start_send,
    trajectory,
    wait_for,
    write_trajectories,
)

FAST = dict(heartbeat_s=0.1, heartbeat_timeout_s=1.0)


def drain(stream: TrajectoryStream, until: int, timeout: float = 60.0, ack: bool = True) -> Batch:
    got = Batch()
    deadline = time.monotonic() + timeout
    while len(got) < until and time.monotonic() < deadline:
        batch = stream.next_batch(64, timeout=0.2)
        if ack and batch:
            assert stream.ack(batch) == len(batch)
        got.extend(batch)
    return got


def test_every_trajectory_from_several_cpp_senders_arrives_exactly_once(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", state_dir=str(tmp_path / "state"), **FAST) as stream:
        inputs = {}
        senders = []
        for w in range(4):
            path = tmp_path / f"w{w}.jsonl"
            inputs.update({tid: w for tid in write_trajectories(path, f"w{w}", 200)})
            senders.append(start_send(path, stream.endpoint, f"worker-{w}", tmp_path / f"spool{w}"))
        got = Batch()
        # The loop ends when everything arrived; the idle limit only guards
        # against a hang, so it must outlast four senders starting on a
        # loaded 2-core machine (5 s did not: the senders then waited for
        # acks nobody sent and all exited 1).
        for batch in stream.batches(size=64, timeout=0.2, idle_timeout=60.0):
            assert 1 <= len(batch) <= 64
            got.extend(batch)
            stream.ack(batch)
            if len(got) == len(inputs):
                break
        summaries = [finish(p) for p in senders]
        assert [s["_exit"] for s in summaries] == [0, 0, 0, 0], [s["_stderr"][-500:] for s in summaries]
        assert all(s["acked"] == 200 and s["unacked"] == 0 for s in summaries)
        assert len(got) == 800
        assert len(set(got.keys)) == 800
        assert sorted(got.ids) == sorted(inputs)
        for d in got:
            assert d.worker == f"worker-{inputs[d.id]}"
            assert d.data == trajectory(d.id)  # the dict the worker recorded, unchanged
        # Per worker, the seqs are 1..200.
        assert sorted(d.seq for d in got if d.worker == "worker-0") == list(range(1, 201))
        s = stream.stats()
        assert s["acked"] == 800 and s["delivered"] == 800 and s["duplicates"] == 0 and s["unacked"] == 0


def test_a_restarted_stream_does_not_deliver_what_the_trainer_acknowledged(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    s1 = TrajectoryStream("tcp://127.0.0.1:0", state_dir=state, **FAST)
    endpoint = s1.endpoint
    raw = RawSender(endpoint, worker="w")
    assert raw.hello()["type"] == "welcome"
    for seq in range(1, 6):
        raw.traj(seq)
    got = drain(s1, 5, ack=False)
    assert [d.seq for d in got] == [1, 2, 3, 4, 5]
    assert s1.ack([d for d in got if d.seq <= 3]) == 3
    acks = set()
    while len(acks) < 3:
        m = raw.recv()
        assert m["type"] == "ack"
        acks.update(s for a, b in m["ranges"] for s in range(a, b + 1))
    assert acks == {1, 2, 3}
    s1.close()  # dies holding 4 and 5, unacknowledged
    raw.close()

    s2 = TrajectoryStream(endpoint, state_dir=state, **FAST)
    raw = RawSender(endpoint, worker="w")
    welcome = raw.hello()
    assert welcome["type"] == "welcome" and welcome["acked_through"] == 3
    for seq in range(1, 6):
        raw.traj(seq)
    got = drain(s2, 2)
    assert sorted(d.seq for d in got) == [4, 5]
    assert s2.next(timeout=0.3) is None  # 1..3 were not delivered again
    acked = set()
    while len(acked) < 5:
        m = raw.recv()
        assert m["type"] == "ack", m
        acked.update(s for a, b in m["ranges"] for s in range(a, b + 1))
    assert acked == {1, 2, 3, 4, 5}
    assert s2.stats()["duplicates"] == 3
    s2.close()
    raw.close()


def test_a_trajectory_resent_before_its_ack_is_not_delivered_twice(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", **FAST) as stream:
        raw = RawSender(stream.endpoint)
        raw.hello()
        raw.traj(1)
        d = stream.next(timeout=5)
        assert d is not None and d.seq == 1
        raw.traj(1)  # resent (a reconnect) while the trainer holds it
        assert stream.next(timeout=0.3) is None
        assert stream.ack(d) == 1
        assert stream.ack(d) == 0  # once
        assert raw.recv()["ranges"] == [(1, 1)]
        raw.close()


def test_ack_on_next_and_on_receive(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", ack="on_next", **FAST) as stream:
        raw = RawSender(stream.endpoint)
        raw.hello()
        for seq in (1, 2, 3):
            raw.traj(seq)
        first = stream.next(timeout=5)
        raw.recv_none(0.3)  # nothing acknowledged while the trainer holds it
        second = stream.next(timeout=5)
        assert raw.recv()["ranges"] == [(first.seq, first.seq)]
        assert second.seq == 2
        stream.next(timeout=5)
        assert raw.recv()["ranges"] == [(2, 2)]
        stream.close()  # acknowledges the last one handed out
        assert raw.recv()["ranges"] == [(3, 3)]
        raw.close()
    with TrajectoryStream("tcp://127.0.0.1:0", ack="on_receive", **FAST) as stream:
        raw = RawSender(stream.endpoint)
        raw.hello()
        raw.traj(1)
        assert stream.next(timeout=5).seq == 1
        assert raw.recv()["ranges"] == [(1, 1)]
        raw.close()


def test_credit_bounds_what_a_worker_has_in_flight(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", credit=3, **FAST) as stream:
        raw = RawSender(stream.endpoint)
        welcome = raw.hello()
        assert welcome["credit"] == 3 and welcome["heartbeat_ms"] == 100
        assert welcome["max_message_bytes"] == 64 << 20
        for seq in (1, 2, 3, 4):
            raw.traj(seq)
        err = raw.recv()
        assert err["type"] == "error" and err["code"] == "credit_exceeded" and err["seq"] == 4
        assert len(drain(stream, 3)) == 3
        stream.set_credit(10)
        acked, credit = set(), None
        while credit is None or len(acked) < 3:
            m = raw.recv()
            if m["type"] == "ack":
                acked.update(s for a, b in m["ranges"] for s in range(a, b + 1))
            else:
                credit = m
        assert acked == {1, 2, 3}
        assert credit == {"type": "credit", "v": 1, "credit": 10}
        raw.close()


def test_a_cpp_sender_respects_the_credit_of_a_python_receiver(tmp_path: Path) -> None:
    # The trainer takes its time: at most `credit` trajectories are ever
    # queued or held unacknowledged.
    with TrajectoryStream("tcp://127.0.0.1:0", credit=5, **FAST) as stream:
        path = tmp_path / "t.jsonl"
        write_trajectories(path, "c", 60)
        p = start_send(path, stream.endpoint, "slowpoke", tmp_path / "spool")
        got = Batch()
        while len(got) < 60:
            time.sleep(0.05)
            s = stream.stats()
            assert s["queued"] + s["unacked"] <= 5, s
            batch = stream.next_batch(64, timeout=0.5)
            stream.ack(batch)
            got.extend(batch)
        assert finish(p)["_exit"] == 0
        assert stream.stats()["errors"] == 0


def test_heartbeats_flow_and_a_silent_worker_loses_its_session(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", **FAST) as stream:
        raw = RawSender(stream.endpoint)
        raw.hello()
        assert raw.recv(timeout=1.0, heartbeats=True)["type"] == "heartbeat"
        time.sleep(1.5)  # past the 1 s session timeout, without a word
        wait_for(lambda: stream.stats()["sessions_live"] == 0, 5, "the session to expire")
        raw.traj(1)
        err = raw.recv()
        assert err["code"] == "no_session" and err["seq"] == 1
        assert stream.next(timeout=0.2) is None
        raw.close()


def test_protocol_errors_are_answered_and_the_stream_serves_on(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", **FAST) as stream:
        future = RawSender(stream.endpoint, worker="future")
        err = future.hello(versions=(3, 2))
        assert err["code"] == "unsupported_version" and err["versions"] == [1]
        welcome = future.hello(versions=(3, 1))
        assert welcome["type"] == "welcome" and welcome["v"] == 1

        stranger = RawSender(stream.endpoint, worker="stranger")
        stranger.traj(9)
        err = stranger.recv()
        assert err["code"] == "no_session" and err["seq"] == 9

        future.traj(4, data=b"\x92\x01\x02")  # an array, not a trajectory object
        err = future.recv()
        assert err["code"] == "rejected" and err["seq"] == 4 and "map" in err["message"]
        future.send(b"\xc1 not msgpack")
        assert future.recv()["code"] == "bad_message"
        future.send(msgpack.packb({"v": 1, "type": "traj", "id": "x", "data": b"\x80"}))
        err = future.recv()
        assert err["code"] == "bad_message" and '"seq"' in err["message"]
        future.send(proto.encode_ack([(1, 1)]))
        assert "does not send" in future.recv()["message"]
        future.sock.send_multipart([b"a", b"b"])
        assert future.recv()["code"] == "bad_message"
        # and an honest worker still gets through
        future.traj(5)
        assert stream.next(timeout=5).seq == 5
        assert stream.stats()["errors"] >= 4
        future.close()
        stranger.close()


def test_a_second_spool_under_the_same_worker_id_is_refused(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", state_dir=str(tmp_path / "s"), **FAST) as stream:
        a = RawSender(stream.endpoint, worker="twin", instance="spoolA")
        assert a.hello()["type"] == "welcome"
        b = RawSender(stream.endpoint, worker="twin", instance="spoolB")
        err = b.hello()
        assert err["code"] == "worker_conflict" and "spoolA" in err["message"]
        a.close()
        b.close()


def test_keys_stored_before_a_crash_are_acknowledged_not_delivered(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", state_dir=str(tmp_path / "s"), **FAST) as stream:
        assert stream.ack_stored([("raw", 2)]) == 1
        assert stream.ack_stored([("raw", 2)]) == 0
        raw = RawSender(stream.endpoint)
        assert raw.hello()["acked_through"] == 0
        for seq in (1, 2, 3):
            raw.traj(seq)
        got = drain(stream, 2)
        assert sorted(d.seq for d in got) == [1, 3]
        acked = set()
        while len(acked) < 3:
            m = raw.recv()
            acked.update(s for a, b in m["ranges"] for s in range(a, b + 1))
        assert stream.stats()["duplicates"] == 1
        # Queued or handed out in this run: taken back too.
        raw.traj(4)
        raw.traj(5)
        wait_for(lambda: stream.stats()["queued"] == 2, 5, "two queued")
        handed = stream.next(timeout=1)
        assert stream.ack_stored([handed.key, ("raw", 5)]) == 2
        assert stream.next(timeout=0.2) is None and stream.stats()["unacked"] == 0
        raw.close()


def test_the_state_directory_is_shared_with_the_cpp_receiver(tmp_path: Path) -> None:
    # kforge receive (C++) acknowledges 30 trajectories; the Python stream
    # opened on its state knows them: welcome says acked_through 30.
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    receiver = start_receive(out, state, "tcp://127.0.0.1:0", "--count", "30")
    path = tmp_path / "t.jsonl"
    write_trajectories(path, "shared", 30)
    assert finish(start_send(path, receiver.endpoint, "shared", tmp_path / "spool"))["_exit"] == 0
    assert receiver.stop()["records"] == 30
    with TrajectoryStream("tcp://127.0.0.1:0", state_dir=str(state), **FAST) as stream:
        raw = RawSender(stream.endpoint, worker="shared", instance=spool_instance(tmp_path / "spool"))
        welcome = raw.hello()
        assert welcome["acked_through"] == 30
        raw.close()
        intruder = RawSender(stream.endpoint, worker="shared", instance="another")
        assert intruder.hello()["code"] == "worker_conflict"
        intruder.close()


def test_receiver_state_ranges_and_torn_lines(tmp_path: Path) -> None:
    r = SeqRanges()
    for s in (5, 3, 1, 2, 4, 10, 11, 9):
        r.insert(s)
    assert r.ranges() == [(1, 5), (9, 11)] and r.through() == 5
    assert 10 in r and 6 not in r
    st = ReceiverState(str(tmp_path))
    assert st.claim("w", "i1") == (True, None)
    st.acknowledge({"w": [1, 2, 7]})
    st.close()
    with open(tmp_path / "acks.log", "a") as f:
        f.write("ack w 3 6")  # cut short by a kill
    st = ReceiverState(str(tmp_path))
    assert st.acknowledged("w", 7) and not st.acknowledged("w", 3)
    assert st.claim("w", "i2") == (False, "i1")
    st.acknowledge({"w": [3]})
    st.close()
    st = ReceiverState(str(tmp_path))
    assert st.acked_through("w") == 3
    st.close()


@pytest.mark.parametrize("authorized", ["directory", "key list"])
def test_curve_admits_only_authorized_workers(tmp_path: Path, authorized: str) -> None:
    keys = tmp_path / "keys"
    clients = tmp_path / "clients"
    clients.mkdir()
    for name in ("trainer", "worker", "stranger"):
        out = subprocess.run(
            [kforge_bin(), "keygen", "--out", str(keys / name)], capture_output=True, text=True, check=True
        )
        assert len(json.loads(out.stdout)["public_key"]) == 40
    (clients / "worker.key").write_text((keys / "worker.key").read_text())
    worker_public = (keys / "worker.key").read_text().split('public-key = "')[1][:40]
    with TrajectoryStream(
        "tcp://127.0.0.1:0",
        curve_secret_key=str(keys / "trainer.key_secret"),
        curve_authorized_keys=str(clients) if authorized == "directory" else [worker_public],
        **FAST,
    ) as stream:
        path = tmp_path / "t.jsonl"
        write_trajectories(path, "sec", 5)
        server_key = str(keys / "trainer.key")
        good = start_send(
            path, stream.endpoint, "good", tmp_path / "sp1", "--curve-server-key", server_key,
            "--curve-secret", str(keys / "worker.key_secret"),
        )
        bad = start_send(
            path, stream.endpoint, "bad", tmp_path / "sp2", "--curve-server-key", server_key,
            "--curve-secret", str(keys / "stranger.key_secret"), flush_timeout=2,
        )
        plain = start_send(path, stream.endpoint, "plain", tmp_path / "sp3", flush_timeout=2)
        got = drain(stream, 5, timeout=20)
        assert finish(good)["_exit"] == 0
        assert finish(bad)["_exit"] == 1  # never welcomed: everything stays in its spool
        assert finish(plain)["_exit"] == 1
        assert sorted(d.worker for d in got) == ["good"] * 5
        assert stream.next(timeout=0.5) is None


def test_a_non_local_bind_without_curve_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="kforge.stream"):
        with TrajectoryStream("tcp://0.0.0.0:0", **FAST):
            pass
    assert any("CurveZMQ is off" in r.getMessage() for r in caplog.records)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="ack must be one of"):
        TrajectoryStream("tcp://127.0.0.1:0", ack="sometimes")
    with pytest.raises(ValueError, match="credit"):
        TrajectoryStream("tcp://127.0.0.1:0", credit=0)
    with pytest.raises(ValueError, match="cannot bind"):
        TrajectoryStream("tcp://256.0.0.1:1")
    with pytest.raises(ValueError, match="neither a 40-character Z85 key nor a certificate file"):
        TrajectoryStream("tcp://127.0.0.1:0", curve_secret_key="nope")


def test_python_codec_reads_what_the_cpp_side_writes_and_fuzz(tmp_path: Path) -> None:
    import random

    rng = random.Random(5)
    frames = [
        proto.encode_hello("w", "i", (1,), heartbeat_ms=10),
        proto.encode_traj(3, "t", msgpack.packb({"id": "t"})),
        proto.encode_ack([(1, 4)]),
        proto.encode_welcome("r", 5, 100, 1 << 20, 2),
        proto.encode_error("rejected", "x" * 5000, 4, (1,)),
        proto.encode_credit(3),
    ]
    assert len(proto.decode(frames[4])["message"].encode()) <= proto.MAX_ERROR_MESSAGE_BYTES
    decoded = 0
    for i in range(20000):
        b = bytearray(frames[i % len(frames)])
        for _ in range(rng.randint(1, 4)):
            if not b:
                break
            at = rng.randrange(len(b))
            op = rng.randrange(4)
            if op == 0:
                b[at] = rng.randrange(256)
            elif op == 1:
                del b[at : at + rng.randint(1, 4)]
            elif op == 2:
                b.insert(at, rng.randrange(256))
            else:
                del b[at:]
        try:
            proto.decode(bytes(b))
            decoded += 1
        except proto.DecodeError:
            pass
    assert decoded > 100
