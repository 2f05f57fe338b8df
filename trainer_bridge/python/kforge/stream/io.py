"""The I/O thread of a TrajectoryStream (kforge.stream): it alone owns the
ROUTER socket; it admits workers (hello, welcome), grants them credit,
answers heartbeats while the trainer is busy, deduplicates trajectories by
(worker, seq), queues new ones for the trainer and sends the acks the
trainer's side queued. Protocol: trainer_bridge/STREAM.md."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

import zmq

from . import protocol as proto
from .delivery import Delivery

_log = logging.getLogger("kforge.stream")


@dataclass
class _Session:
    worker: str
    instance: str
    last_recv: float
    last_send: float = 0.0
    inflight: Set[int] = field(default_factory=set)
    credit: int = 0


class StreamIO:
    """TrajectoryStream's I/O-thread half: the state it shares with the
    trainer's side is set up by TrajectoryStream.__init__ and guarded by
    ``_mu``; the sessions are this thread's alone."""

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._wake_rx, zmq.POLLIN)
        next_housekeeping = 0.0
        interval_ms = max(1, int(self.heartbeat_s * 250))
        while not self._stop.is_set():
            try:
                events = dict(poller.poll(min(interval_ms, 100)))
                if self._wake_rx in events:
                    while True:
                        try:
                            self._wake_rx.recv(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                self._send_outgoing()
                if self._sock in events:
                    for i in range(4096):
                        try:
                            frames = self._sock.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._handle(frames)
                        if i % 64 == 63:
                            self._send_outgoing()
                now = time.monotonic()
                if now >= next_housekeeping:
                    next_housekeeping = now + self.heartbeat_s / 4
                    self._housekeeping(now)
            except Exception:  # one bad pass must not end the thread
                _log.exception("trajectory stream: error in the I/O thread")
        try:
            self._send_outgoing()
        except Exception:
            _log.exception("trajectory stream: error sending the last acks")

    def _send(self, rid: bytes, frame: bytes) -> bool:
        try:
            self._sock.send_multipart([rid, frame], zmq.NOBLOCK)
        except zmq.ZMQError:
            self._drop(rid, "its connection is gone")
            return False
        s = self._sessions.get(rid)
        if s is not None:
            s.last_send = time.monotonic()
        return True

    def _send_error(self, rid: bytes, code: str, message: str, seq: Optional[int] = None, versions=None) -> None:
        try:
            self._sock.send_multipart([rid, proto.encode_error(code, message, seq, versions)], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass

    def _drop(self, rid: bytes, why: str) -> None:
        s = self._sessions.pop(rid, None)
        if s is None:
            return
        _log.info("worker %s disconnected (%s)", s.worker, why)
        if self._session_of_worker.get(s.worker) == rid:
            del self._session_of_worker[s.worker]

    def _housekeeping(self, now: float) -> None:
        for rid, s in list(self._sessions.items()):
            if now - s.last_recv > self.heartbeat_timeout_s:
                self._drop(rid, f"nothing heard for {self.heartbeat_timeout_s:g} s")
            elif now - s.last_send >= self.heartbeat_s:
                self._send(rid, proto.encode_heartbeat())

    def _send_outgoing(self) -> None:
        with self._mu:
            acks, self._outgoing = self._outgoing, []
            changed, self._new_credit = self._new_credit, None
        if changed is not None:
            self.credit = changed
            for rid, s in list(self._sessions.items()):
                s.credit = max(s.credit, changed)
                self._send(rid, proto.encode_credit(changed))
        for worker, seqs in acks:
            rid = self._session_of_worker.get(worker)
            if rid is None:
                continue  # answered as a duplicate when the worker sends it again
            s = self._sessions[rid]
            s.inflight.difference_update(seqs)
            self._send(rid, proto.encode_ack(proto.to_ranges(seqs)))

    def _count(self, what: str) -> None:
        with self._mu:
            self._stats[what] += 1

    def _handle(self, frames: List[bytes]) -> None:
        rid = frames[0]
        if len(frames) != 2:
            self._count("errors")
            self._send_error(rid, proto.BAD_MESSAGE, "a message is one frame (one MessagePack map)")
            return
        try:
            m = proto.decode(frames[1])
        except proto.DecodeError as e:
            if e.traj_seq is not None and rid in self._sessions:
                self._count("rejected")
                _log.warning("rejected seq %d of worker %s: %s", e.traj_seq, self._sessions[rid].worker, e)
                self._send_error(rid, proto.REJECTED, str(e), e.traj_seq)
            else:
                self._count("errors")
                self._send_error(rid, proto.BAD_MESSAGE, str(e))
            return
        s = self._sessions.get(rid)
        if s is not None:
            s.last_recv = time.monotonic()
        kind = m["type"]
        if kind == "hello":
            self._on_hello(rid, m)
        elif kind == "traj":
            if s is None:
                self._send_error(rid, proto.NO_SESSION, "no session for this connection: send hello", m["seq"])
            else:
                self._on_traj(rid, s, m)
        elif kind == "heartbeat":
            if s is None:
                self._send_error(rid, proto.NO_SESSION, "no session for this connection: send hello")
        elif kind == "bye":
            self._drop(rid, "it said bye")
        else:
            self._count("errors")
            self._send_error(rid, proto.BAD_MESSAGE, f'a sender does not send "{kind}" messages')

    def _on_hello(self, rid: bytes, m: Dict[str, Any]) -> None:
        common = [v for v in m["versions"] if v in proto.SUPPORTED_VERSIONS]
        if not common:
            self._send_error(
                rid,
                proto.UNSUPPORTED_VERSION,
                f"this receiver speaks protocol version {proto.VERSION}",
                versions=proto.SUPPORTED_VERSIONS,
            )
            return
        version = max(common)
        worker, instance = m["worker"], m["instance"]
        existing = self._sessions.get(rid)
        if existing is not None and (existing.worker != worker or existing.instance != instance):
            self._send_error(rid, proto.BAD_MESSAGE, f"this connection already streams as worker {existing.worker}")
            return
        if existing is None and worker not in self._session_of_worker and len(self._sessions) >= self.max_workers:
            self._send_error(rid, proto.TOO_MANY_WORKERS, f"this receiver serves at most {self.max_workers} workers")
            return
        with self._mu:
            ok, known = self._state.claim(worker, instance)
            if not ok:
                self._stats["errors"] += 1
            acked_through = self._state.acked_through(worker)
        if not ok:
            _log.warning("refused worker %s: its spool instance %s is not %s", worker, instance, known)
            self._send_error(
                rid,
                proto.WORKER_CONFLICT,
                f"worker id {worker} belongs to spool instance {known} at this receiver, and this sender's spool "
                f"is {instance}: two senders share the worker id, or the spool was deleted and its sequence "
                "numbers restarted. Give this sender a new worker id",
            )
            return
        if existing is None:
            old = self._session_of_worker.get(worker)
            if old is not None and old != rid:
                self._drop(old, "it reconnected")
            self._sessions[rid] = _Session(worker, instance, time.monotonic(), credit=self.credit)
            self._session_of_worker[worker] = rid
            self._count("sessions")
            _log.info("worker %s connected (%d unacknowledged, next seq %d)", worker, m["unacked"], m["next_seq"])
        self._send(
            rid,
            proto.encode_welcome(
                self.receiver_id,
                self._sessions[rid].credit,
                int(self.heartbeat_s * 1000),
                self.max_message_bytes,
                acked_through,
                version,
            ),
        )

    def _on_traj(self, rid: bytes, s: _Session, m: Dict[str, Any]) -> None:
        seq = m["seq"]
        action = "deliver"
        with self._mu:
            self._stats["received"] += 1
            pending = self._pending.setdefault(s.worker, {})
            if self._state.acknowledged(s.worker, seq):
                action = "ack"
                self._stats["duplicates"] += 1
            elif seq in pending:
                action = "ignore"  # delivered or queued: its ack comes when the trainer gives it
                self._stats["duplicates"] += 1
            elif len(s.inflight) >= s.credit or len(pending) >= s.credit:
                action = "no_credit"
            else:
                pending[seq] = False
                self._queue.append(Delivery(s.worker, seq, m["id"], m["trajectory"], time.monotonic()))
                self._ready.notify()
            if not pending:
                del self._pending[s.worker]
        if action == "ack":
            self._send(rid, proto.encode_ack([(seq, seq)]))
        elif action == "no_credit":
            self._send_error(
                rid, proto.CREDIT_EXCEEDED, f"more than the credit of {s.credit} trajectories in flight; dropped", seq
            )
        else:
            s.inflight.add(seq)
