"""Helpers of the trajectory-stream tests: trajectory files, real C++ senders
and receivers (`kforge send`, `kforge receive`) and the example trainer as
child processes, and a hand-driven DEALER for protocol-level checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import msgpack
import zmq

from conftest import PYTHON_DIR, kforge_bin
from kforge.stream import protocol as proto

EXAMPLE_RECEIVER = PYTHON_DIR / "examples" / "trainer_receiver.py"
FAST_HEARTBEATS = ["--heartbeat-ms", "100", "--heartbeat-timeout-ms", "1000"]


def trajectory(tid: str, filler: int = 200, reward: float = 1.0) -> Dict[str, Any]:
    """A trajectory in the shape of core/trajectory.h's to_json."""
    return {
        "schema_version": 1,
        "id": tid,
        "group_id": "g-" + tid.split("-")[0],
        "task_id": "task-a",
        "turns": [
            {
                "messages": [
                    {"role": "system", "content": "You write CUDA kernels."},
                    {"role": "user", "content": "Make it fast."},
                    {
                        "role": "assistant",
                        "content": "x" * filler,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
                        ],
                    },
                ],
                "action": {"type": "submit"},
                "observation": {"text": "correct, 2.0x", "data": {}},
                "reward": reward,
                "reward_components": {"speedup": reward},
                "timings": {"compile_ms": 1.0},
            }
        ],
        "policy_version_start": "v1",
        "policy_version_end": "v1",
        "total_reward": reward,
        "terminated": True,
        "truncated": False,
        "info": {},
    }


def write_trajectories(path: Path, prefix: str, n: int, filler: int = 200) -> List[str]:
    ids = [f"{prefix}-{i}" for i in range(n)]
    with open(path, "w") as f:
        for tid in ids:
            f.write(json.dumps(trajectory(tid, filler)) + "\n")
    return ids


def start_send(
    path: Path, endpoint: str, worker: str, spool: Path, *extra: str, flush_timeout: float = 60
) -> subprocess.Popen:
    args = [kforge_bin(), "send", str(path), "--to", endpoint, "--worker", worker, "--spool", str(spool)]
    args += ["--flush-timeout", str(flush_timeout), *FAST_HEARTBEATS, *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen, timeout: float = 120) -> Dict[str, Any]:
    """Waits for a child that prints a JSON summary as its last stdout line."""
    out, err = p.communicate(timeout=timeout)
    lines = [l for l in out.splitlines() if l.strip()]
    assert lines, f"no output (exit {p.returncode}); stderr:\n{err[-3000:]}"
    summary = json.loads(lines[-1])
    summary["_exit"] = p.returncode
    summary["_stderr"] = err
    return summary


class Child:
    """A receiver process that prints a ready JSON line first."""

    def __init__(self, args: Sequence[str], env: Optional[Dict[str, str]] = None) -> None:
        self.p = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f"{args[0]} exited before it was ready: {self.p.stderr.read()[-3000:]}")
        self.ready = json.loads(line)
        self.endpoint = self.ready["endpoint"]

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
        self.p.communicate()

    def stop(self, timeout: float = 30) -> Dict[str, Any]:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        return finish(self.p, timeout)


def start_receive(out: Path, state: Path, bind: str = "tcp://127.0.0.1:0", *extra: str) -> Child:
    return Child(
        [kforge_bin(), "receive", "--bind", bind, "--out", str(out), "--state", str(state), *FAST_HEARTBEATS, *extra]
    )


def start_python_receiver(out: Path, state: Path, bind: str = "tcp://127.0.0.1:0", *extra: str) -> Child:
    args = [sys.executable, str(EXAMPLE_RECEIVER), "--bind", bind, "--out", str(out), "--state", str(state)]
    args += ["--heartbeat", "0.1", "--heartbeat-timeout", "1.0", "--timeout", "0.05", "--format", "raw", *extra]
    return Child(args)


def read_ids(path: Path, key: str = "id") -> List[str]:
    ids = []
    if not path.exists():
        return ids
    with open(path) as f:
        for line in f:
            if line.endswith("\n") and line.strip():
                ids.append(json.loads(line)[key])
    return ids


def wait_for(condition, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class RawSender:
    """A DEALER that speaks the protocol by hand."""

    def __init__(self, endpoint: str, worker: str = "raw", instance: str = "inst1") -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.worker = worker
        self.instance = instance

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def hello(self, versions: Sequence[int] = (1,)) -> Dict[str, Any]:
        self.send(proto.encode_hello(self.worker, self.instance, versions))
        return self.recv()

    def traj(self, seq: int, tid: Optional[str] = None, data: Optional[bytes] = None) -> None:
        tid = tid or f"{self.worker}-{seq}"
        if data is None:
            data = msgpack.packb(trajectory(tid), use_bin_type=True)
        self.send(proto.encode_traj(seq, tid, data))

    def recv(self, timeout: float = 5.0, heartbeats: bool = False) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000)):
                raise AssertionError("no message from the receiver in time")
            m = proto.decode(self.sock.recv())
            if m["type"] != "heartbeat" or heartbeats:
                return m

    def recv_none(self, within: float = 0.3) -> None:
        deadline = time.monotonic() + within
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.sock.poll(int(left * 1000)):
                m = proto.decode(self.sock.recv())
                assert m["type"] == "heartbeat", f"unexpected {m}"

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


def spool_instance(spool: Path) -> str:
    return json.loads((spool / "spool.json").read_text())["instance"]


def env_without_curve() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("KFORGE_CURVE")}
