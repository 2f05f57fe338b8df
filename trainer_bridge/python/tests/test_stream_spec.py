"""trainer_bridge/STREAM.md is complete enough to write a receiver from: the
"Minimal receiver" it contains, written from the page alone, is run against
the C++ sender (`kforge send`), killed and restarted included."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO
from stream_helpers import Child, finish, read_ids, start_send, write_trajectories

STREAM_MD = REPO / "trainer_bridge" / "STREAM.md"


def minimal_receiver(tmp_path: Path) -> Path:
    text = STREAM_MD.read_text()
    blocks = re.findall(r"```python\n(# minimal_receiver\.py.*?)```", text, re.S)
    assert len(blocks) == 1, "STREAM.md must hold exactly one minimal receiver"
    path = tmp_path / "minimal_receiver.py"
    path.write_text(blocks[0])
    return path


def test_the_documented_minimal_receiver_takes_a_cpp_senders_stream(tmp_path: Path) -> None:
    script = minimal_receiver(tmp_path)
    out = tmp_path / "out.jsonl"
    receiver = Child([sys.executable, str(script), "tcp://127.0.0.1:0", str(out), "400"])
    path = tmp_path / "t.jsonl"
    expected = write_trajectories(path, "spec", 400)
    spool = tmp_path / "spool"
    # The sender is killed once mid-stream and resumes on its spool.
    p = start_send(path, receiver.endpoint, "spec-worker", spool)
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    last = finish(start_send(path, receiver.endpoint, "spec-worker", spool))
    assert last["_exit"] == 0, last["_stderr"][-2000:]
    receiver.p.wait(timeout=30)
    got = read_ids(out)
    assert sorted(got) == sorted(expected) and len(got) == len(set(got))
