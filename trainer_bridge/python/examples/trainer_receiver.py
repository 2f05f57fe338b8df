#!/usr/bin/env python3
"""A trainer's receiving end: take trajectories from KernelForge's rollout
workers, in batches, export them as training records, acknowledge them.

    python3 trainer_bridge/python/examples/trainer_receiver.py \\
        --bind tcp://127.0.0.1:5557 --state stream-state --out chat.jsonl --format chat

Where a real trainer would run an optimization step on each batch, this one
writes the batch to --out (kforge.export formats: chat, prompt_completion,
verl, raw) and prints the batch's mean reward. Killed at any point and started
again with the same arguments, the file ends up with every trajectory exactly
once. Per batch:

  1. the checkpoint (in the state directory) records the keys of the batch
     about to be written, next to the file size before it;
  2. the batch is written to the file (and fsync'd);
  3. the batch is acknowledged (``stream.ack``);
  4. the checkpoint records the new size and no pending keys.

At start, the records past the checkpointed size were written by a run that
died before acknowledging them: they are the first records of the pending
batch, in order, so their keys go to ``stream.ack_stored`` and their resends
are acknowledged instead of written twice. A torn last line is cut.

Prints one JSON line {"endpoint", "pid", ...} on stdout when ready (scripts
wait for it) and a summary line at exit. SIGINT/SIGTERM stop it cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kforge import TrajectoryStream  # noqa: E402
from kforge.export import FORMATS, record_line, to_record  # noqa: E402


def recover_tail(out: Path, committed: int) -> Tuple[int, int]:
    """Cuts a torn last line; returns (whole lines past `committed`, size)."""
    if not out.exists():
        if committed:
            raise SystemExit(f"{out} is missing but the state says {committed} bytes were written to it")
        return 0, 0
    size = out.stat().st_size
    if size < committed:
        raise SystemExit(f"{out} is shorter than the {committed} bytes written to it: truncated or replaced")
    with open(out, "rb+") as f:
        f.seek(committed)
        tail = f.read()
        whole = tail.rfind(b"\n") + 1
        if whole < len(tail):
            f.truncate(committed + whole)
            print(f"trainer_receiver: dropped an incomplete last line of {out}", file=sys.stderr)
    return tail[:whole].count(b"\n"), committed + whole


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bind", default="tcp://127.0.0.1:5557", help="endpoint to bind (port 0 picks one)")
    ap.add_argument("--state", required=True, help="state directory (acknowledged set, checkpoint)")
    ap.add_argument("--out", required=True, help="JSONL file of training records")
    ap.add_argument("--format", choices=FORMATS, default="chat")
    ap.add_argument("--batch", type=int, default=64, help="batch size")
    ap.add_argument("--timeout", type=float, default=1.0, help="seconds a partial batch waits to fill")
    ap.add_argument("--credit", type=int, default=128, help="trajectories each worker may have in flight")
    ap.add_argument("--count", type=int, default=0, help="exit once the file holds this many records (0: never)")
    ap.add_argument("--idle-exit", type=float, default=0, help="exit after this many idle seconds (0: never)")
    ap.add_argument("--heartbeat", type=float, default=1.0, help="heartbeat interval, seconds")
    ap.add_argument("--heartbeat-timeout", type=float, default=10.0, help="session timeout, seconds")
    ap.add_argument("--no-fsync", action="store_true", help="do not fsync the file and the state per batch")
    ap.add_argument("--curve-secret", help="this receiver's secret key (Z85 or .key_secret file)")
    ap.add_argument("--curve-clients", help="directory of the workers' public .key files")
    return ap.parse_args()


class Checkpoint:
    """trainer-out.json in the state directory: the file's committed size,
    its record count, and the keys of the batch being written."""

    def __init__(self, state: Path, out: Path, fmt: str, fsync: bool) -> None:
        self.path = state / "trainer-out.json"
        self.fsync = fsync
        self.data: Dict[str, Any] = {"out": str(out), "format": fmt, "committed_bytes": 0, "records": 0, "writing": []}
        if self.path.exists():
            saved = json.loads(self.path.read_text())
            if saved.get("out") != str(out) or saved.get("format") != fmt:
                raise SystemExit(f"{state} belongs to {saved.get('out')} ({saved.get('format')}); use another --state")
            self.data = saved

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self.data, f)
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)


def stop_on_signals() -> Dict[str, bool]:
    """SIGINT/SIGTERM set the returned flag "now"."""
    stop = {"now": False}

    def on_signal(signum, frame):  # noqa: ARG001
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop


def open_stream(a: argparse.Namespace, state: Path, fsync: bool) -> TrajectoryStream:
    return TrajectoryStream(
        a.bind,
        state_dir=str(state / "stream"),
        credit=a.credit,
        heartbeat_s=a.heartbeat,
        heartbeat_timeout_s=a.heartbeat_timeout,
        fsync=fsync,
        curve_secret_key=a.curve_secret,
        curve_authorized_keys=a.curve_clients,
    )


def commit_batch(f: BinaryIO, batch: Any, stream: TrajectoryStream, checkpoint: Checkpoint, fmt: str,
                 first_index: int) -> None:
    """Steps 1 to 4 of the module's docstring for one batch."""
    # The trainer's step would go here; this one exports and reports.
    text = "".join(record_line(to_record(d.data, fmt, index=first_index + i)) for i, d in enumerate(batch))
    checkpoint.data["writing"] = [list(k) for k in batch.keys]
    checkpoint.save()  # 1
    f.write(text.encode("utf-8"))  # 2
    f.flush()
    if checkpoint.fsync:
        os.fsync(f.fileno())
    stream.ack(batch)  # 3
    checkpoint.data.update(committed_bytes=f.tell(), records=first_index + len(batch), writing=[])
    checkpoint.save()  # 4


def receive_batches(a: argparse.Namespace, stream: TrajectoryStream, checkpoint: Checkpoint, out: Path,
                    records: int, stop: Dict[str, bool]) -> Tuple[int, int]:
    """Commits batches until stopped, --count or --idle-exit; returns (records
    in the file, records written by this run)."""
    written = 0
    last = time.monotonic()
    with open(out, "ab") as f:
        while not stop["now"] and not (a.count and records >= a.count):
            batch = stream.next_batch(a.batch, timeout=min(a.timeout, 0.25))
            if not batch:
                if a.idle_exit and time.monotonic() - last > a.idle_exit:
                    break
                continue
            last = time.monotonic()
            commit_batch(f, batch, stream, checkpoint, a.format, records)
            records += len(batch)
            written += len(batch)
            rewards = [float(d.data.get("total_reward", 0.0) or 0.0) for d in batch]
            print(
                f"trainer_receiver: batch of {len(batch)}, mean reward {sum(rewards) / len(rewards):.4f}, "
                f"{records} records",
                file=sys.stderr,
            )
    return records, written


def main() -> int:
    a = parse_args()
    state = Path(a.state)
    state.mkdir(parents=True, exist_ok=True)
    out = Path(a.out).resolve()
    fsync = not a.no_fsync
    checkpoint = Checkpoint(state, out, a.format, fsync)
    stored, size = recover_tail(out, checkpoint.data["committed_bytes"])
    if stored > len(checkpoint.data["writing"]):
        raise SystemExit(f"{out} has {stored} records past the checkpoint that this script did not write")
    stop = stop_on_signals()
    stream = open_stream(a, state, fsync)
    # Written by a run that died before acknowledging them: stored, so acknowledged now.
    recovered = [tuple(k) for k in checkpoint.data["writing"][:stored]]
    stream.ack_stored(recovered)
    checkpoint.data.update(committed_bytes=size, records=checkpoint.data["records"] + stored, writing=[])
    checkpoint.save()
    records = checkpoint.data["records"]
    print(json.dumps({"endpoint": stream.endpoint, "pid": os.getpid(), "out": str(out), "records": records}), flush=True)

    records, written = receive_batches(a, stream, checkpoint, out, records, stop)
    stats = stream.stats()
    stream.close()
    print(json.dumps({"records": records, "written": written, "recovered": stored, **stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
