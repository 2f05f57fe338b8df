"""What a trajectory receiver remembers across restarts (the same files as the
C++ receiver's, rollout/include/kforge/rollout/stream/receiver_state.h).

Per worker id: the spool instance its sequence numbers belong to, and the
seqs the trainer acknowledged. Two text files in a state directory::

    state.txt   a snapshot, replaced atomically; first line
                "kforge-receiver-state 1"
    acks.log    lines appended since, one write per acknowledge() call

    claim <worker> <instance>
    ack <worker> <first> <last> [<first> <last> ...]

A last line without its newline was cut short by a kill: the call that wrote
it had not returned, so nothing it acknowledged reached a sender; it is
ignored and cut away.
"""

from __future__ import annotations

import bisect
import os
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from .protocol import to_ranges, valid_instance, valid_worker_id

HEADER = "kforge-receiver-state 1"
COMPACT_BYTES = 8 << 20
MAX_LINE_BYTES = 1 << 20
RANGES_PER_LINE = 1024


class StateError(RuntimeError):
    """The state directory cannot be used or is damaged (the message names
    the file and line)."""


class SeqRanges:
    """A set of sequence numbers as sorted, merged, inclusive ranges."""

    __slots__ = ("_firsts", "_lasts")

    def __init__(self) -> None:
        self._firsts: List[int] = []
        self._lasts: List[int] = []

    def insert(self, first: int, last: Optional[int] = None) -> None:
        last = first if last is None else last
        if first > last:
            return
        i = bisect.bisect_right(self._firsts, first)
        # Merge with the range before if it touches.
        if i > 0 and self._lasts[i - 1] + 1 >= first:
            i -= 1
            if self._lasts[i] >= last:
                return
            first = self._firsts[i]
        j = i
        while j < len(self._firsts) and self._firsts[j] <= last + 1:
            last = max(last, self._lasts[j])
            j += 1
        self._firsts[i:j] = [first]
        self._lasts[i:j] = [last]

    def __contains__(self, seq: int) -> bool:
        i = bisect.bisect_right(self._firsts, seq)
        return i > 0 and self._lasts[i - 1] >= seq

    def through(self) -> int:
        """The largest n with 1..n all in the set (0 if 1 is not)."""
        if not self._firsts or self._firsts[0] > 1:
            return 0
        return self._lasts[0]

    def ranges(self) -> List[Tuple[int, int]]:
        return list(zip(self._firsts, self._lasts))

    def __len__(self) -> int:
        return sum(b - a + 1 for a, b in zip(self._firsts, self._lasts))


class ReceiverState:
    """The acknowledged set, in memory (``state_dir=None``) or persisted.

    Not thread-safe: the stream serializes access.
    """

    def __init__(self, state_dir: Optional[str] = None, fsync: bool = False) -> None:
        self.dir = state_dir
        self.fsync = fsync
        self._instances: Dict[str, str] = {}
        self._acked: Dict[str, SeqRanges] = {}
        self._log = None
        self._log_bytes = 0
        if state_dir is not None:
            os.makedirs(state_dir, exist_ok=True)
            self._load()

    @property
    def persistent(self) -> bool:
        return self.dir is not None

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- queries ---------------------------------------------------------

    def acknowledged(self, worker: str, seq: int) -> bool:
        r = self._acked.get(worker)
        return r is not None and seq in r

    def acked_through(self, worker: str) -> int:
        r = self._acked.get(worker)
        return r.through() if r is not None else 0

    def workers(self) -> List[str]:
        return sorted(set(self._instances) | set(self._acked))

    # -- changes ---------------------------------------------------------

    def claim(self, worker: str, instance: str) -> Tuple[bool, Optional[str]]:
        """Ties ``worker`` to ``instance`` the first time; (False, known) when
        it is tied to another instance already."""
        known = self._instances.get(worker)
        if known is not None:
            return (known == instance, None if known == instance else known)
        if self.persistent:
            self._append(f"claim {worker} {instance}\n")
        self._instances[worker] = instance
        return True, None

    def acknowledge(self, seqs_by_worker: Mapping[str, Iterable[int]]) -> None:
        """Records acknowledgements durably (a write; with fsync, fdatasync)
        before returning."""
        lines = []
        ranges_by_worker = {w: to_ranges(s) for w, s in seqs_by_worker.items()}
        for worker, ranges in ranges_by_worker.items():
            for i in range(0, len(ranges), RANGES_PER_LINE):
                chunk = ranges[i : i + RANGES_PER_LINE]
                lines.append(f"ack {worker} " + " ".join(f"{a} {b}" for a, b in chunk) + "\n")
        if not lines:
            return
        if self.persistent:
            self._append("".join(lines))
        for worker, ranges in ranges_by_worker.items():
            r = self._acked.setdefault(worker, SeqRanges())
            for a, b in ranges:
                r.insert(a, b)
        if self.persistent and self._log_bytes > COMPACT_BYTES:
            self._compact()

    # -- files -------------------------------------------------------------

    def _damaged(self, path: str, number: int, why: str) -> StateError:
        return StateError(
            f"{path}:{number}: {why}; the receiver state is damaged (move the state directory away to start "
            "from nothing, which may deliver again what the trainer already acknowledged)"
        )

    def _apply(self, line: str, path: str, number: int) -> None:
        parts = line.split()
        if not parts:
            return
        if len(parts) < 2 or not valid_worker_id(parts[1]):
            raise self._damaged(path, number, "bad worker id")
        kind, worker = parts[0], parts[1]
        if kind == "claim":
            if len(parts) != 3 or not valid_instance(parts[2]):
                raise self._damaged(path, number, "bad claim line")
            self._instances[worker] = parts[2]
            return
        if kind != "ack":
            raise self._damaged(path, number, f'unknown line kind "{kind[:32]}"')
        nums = parts[2:]
        if len(nums) % 2 or not all(n.isdigit() and len(n) <= 20 for n in nums):
            raise self._damaged(path, number, "bad range")
        r = self._acked.setdefault(worker, SeqRanges())
        for a, b in zip(nums[0::2], nums[1::2]):
            first, last = int(a), int(b)
            if first == 0 or first > last:
                raise self._damaged(path, number, "bad range")
            r.insert(first, last)

    def _read_lines(self, path: str, header: bool) -> int:
        """Applies every complete line; returns the byte offset after the last."""
        if not os.path.exists(path):
            return 0
        complete = 0
        number = 0
        with open(path, "rb") as f:
            pending = b""
            while True:
                chunk = f.read(1 << 16)
                if not chunk:
                    break
                pending += chunk
                while True:
                    nl = pending.find(b"\n")
                    if nl < 0:
                        break
                    raw, pending = pending[:nl], pending[nl + 1 :]
                    complete += nl + 1
                    number += 1
                    text = raw.decode("utf-8", "replace")
                    if header and number == 1:
                        if text != HEADER:
                            raise StateError(f'{path} does not start with "{HEADER}"')
                        continue
                    self._apply(text, path, number)
                if len(pending) > MAX_LINE_BYTES:
                    raise StateError(f"{path}: line {number + 1} is longer than {MAX_LINE_BYTES} bytes; damaged")
        return complete

    def _load(self) -> None:
        assert self.dir is not None
        self._read_lines(os.path.join(self.dir, "state.txt"), header=True)
        log_path = os.path.join(self.dir, "acks.log")
        complete = self._read_lines(log_path, header=False)
        self._log = open(log_path, "ab")
        # A torn last line is cut away so that the next append starts a line.
        self._log.truncate(complete)
        self._log.seek(complete)
        self._log_bytes = complete

    def _append(self, text: str) -> None:
        assert self._log is not None
        data = text.encode("ascii")
        self._log.write(data)
        self._log.flush()  # one write(2): the data is the kernel's once this returns
        if self.fsync:
            os.fdatasync(self._log.fileno())
        self._log_bytes += len(data)

    def _compact(self) -> None:
        assert self.dir is not None and self._log is not None
        lines = [HEADER + "\n"]
        for worker in self.workers():
            if worker in self._instances:
                lines.append(f"claim {worker} {self._instances[worker]}\n")
            ranges = self._acked[worker].ranges() if worker in self._acked else []
            for i in range(0, len(ranges), RANGES_PER_LINE):
                chunk = ranges[i : i + RANGES_PER_LINE]
                lines.append(f"ack {worker} " + " ".join(f"{a} {b}" for a, b in chunk) + "\n")
        snapshot = os.path.join(self.dir, "state.txt")
        tmp = snapshot + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, snapshot)
        # A kill between the rename and the truncation replays lines the
        # snapshot already has, which changes nothing.
        self._log.truncate(0)
        self._log.seek(0)
        self._log_bytes = 0
