"""`kforge rollout --stream`: rollout workers streaming their trajectories
to a Python TrajectoryStream on loopback (trainer_bridge/STREAM.md), next to
the JSONL file, with exact counts; and a receiver that is absent at the end
of a run loses nothing (the spool keeps it for the next run)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

from conftest import REPO, kforge_bin
from kforge import TrajectoryStream

TASK = REPO / "tests" / "gym" / "data" / "scale_bias_relu.json"
ENV = REPO / "tests" / "rollout" / "data" / "env.yaml"


def free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


class Collector:
    """The trainer's side: takes every delivery and acknowledges it."""

    def __init__(self, stream: TrajectoryStream) -> None:
        self.stream = stream
        self.received: List[Dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            delivery = self.stream.next(timeout=0.2)
            if delivery is not None:
                self.received.append(delivery.data)
                self.stream.ack(delivery)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def rollout(tmp: Path, name: str, stream: Dict[str, Any],
            cli: Tuple[str, ...] = ()) -> Tuple[int, Dict[str, Any], str, List[Dict[str, Any]]]:
    out = tmp / f"{name}.jsonl"
    config = {
        "env": str(ENV),
        "tasks": str(TASK),
        "groups": 1,
        "group_size": 2,
        "concurrency": 2,
        "policy": {"kind": "template", "template": {"mode": "cpp", "explore_turns": 0}},
        "output": {"jsonl": str(out)},
        "stream": stream,
    }
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([kforge_bin(), "rollout", "--config", str(path), "--json", "--quiet", *cli],
                          capture_output=True, text=True, timeout=600, cwd=tmp)
    stats = json.loads(proc.stdout) if proc.stdout.strip() else {}
    written = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return proc.returncode, stats, proc.stderr, written


def test_every_trajectory_reaches_the_python_receiver_once(tmp_path: Path) -> None:
    with TrajectoryStream("tcp://127.0.0.1:0", state_dir=str(tmp_path / "state")) as stream:
        collector = Collector(stream)
        # The endpoint from the command line; the rest from the config.
        code, stats, stderr, written = rollout(
            tmp_path, "run", {"endpoint": "tcp://127.0.0.1:1", "worker_id": "w-test", "flush_timeout_s": 60},
            cli=("--stream", stream.endpoint))
        collector.stop()
    assert code == 0, stderr
    assert stats["episodes_written"] == 2
    assert stats["stream"]["written"] == 2
    assert stats["stream"]["acked"] == 2 and stats["stream"]["unacked"] == 0
    assert stats["stream"]["worker_id"] == "w-test"
    assert stats["sinks_flushed"] is True
    # Exactly the JSONL's trajectories, once each, the same objects.
    assert len(collector.received) == 2
    by_id = {t["id"]: t for t in collector.received}
    assert sorted(by_id) == sorted(t["id"] for t in written)
    for t in written:
        got = by_id[t["id"]]
        assert got["group_id"] == t["group_id"] and got["total_reward"] == t["total_reward"]
        assert got["turns"][-1]["info"]["env"]["measurement"] == t["turns"][-1]["info"]["env"]["measurement"]
        assert got["info"]["group"]["size"] == 2
    # The default spool, in the working directory, under the worker id.
    assert (tmp_path / "rollout-spool" / "w-test").is_dir()


def test_an_absent_receiver_leaves_them_spooled_for_the_next_run(tmp_path: Path) -> None:
    endpoint = free_endpoint()
    stream_cfg = {"endpoint": endpoint, "worker_id": "w-late", "spool_dir": str(tmp_path / "spool"),
                  "flush_timeout_s": 1}
    code, stats, stderr, first = rollout(tmp_path, "first", stream_cfg)
    assert code == 1, stderr  # done, but not everything acknowledged
    assert stats["stream"]["written"] == 2 and stats["stream"]["acked"] == 0 and stats["stream"]["unacked"] == 2
    assert "2 trajectories not acknowledged" in stderr and str(tmp_path / "spool") in stderr
    assert len(first) == 2  # the JSONL sink is not held back by the stream
    # The receiver comes up; the next run on the same spool and worker id
    # sends the first run's trajectories, then its own.
    with TrajectoryStream(endpoint, state_dir=str(tmp_path / "state")) as stream:
        collector = Collector(stream)
        stream_cfg["flush_timeout_s"] = 60
        code, stats, stderr, second = rollout(tmp_path, "second", stream_cfg)
        collector.stop()
    assert code == 0, stderr
    assert stats["stream"]["unacked"] == 0
    ids = [t["id"] for t in collector.received]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert set(ids) == {t["id"] for t in first + second}
