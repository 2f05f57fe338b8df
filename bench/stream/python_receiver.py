#!/usr/bin/env python3
"""The Python receiver's side of bench_stream: kforge.TrajectoryStream takes
--count trajectories in batches and acknowledges each batch, then prints its
rate. Prints {"endpoint", "pid"} when ready and a summary line at the end."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_bridge" / "python"))

from kforge import TrajectoryStream  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", default="tcp://127.0.0.1:0")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--credit", type=int, default=128)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kforge-bench-py-") as state:
        with TrajectoryStream(a.bind, state_dir=state, credit=a.credit) as stream:
            print(json.dumps({"endpoint": stream.endpoint, "pid": os.getpid()}), flush=True)
            n, nbytes, first, last = 0, 0, None, None
            for batch in stream.batches(size=a.batch, timeout=0.02, idle_timeout=60):
                if first is None:
                    first = time.monotonic()
                stream.ack(batch)
                n += len(batch)
                last = time.monotonic()
                if n >= a.count:
                    break
            seconds = (last - first) if first is not None else 0.0
            stats = stream.stats()
    print(json.dumps({"received": n, "seconds": seconds, "per_s": n / seconds if seconds else 0.0,
                      "duplicates": stats["duplicates"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
