"""The sessions of kforge.openenv.server and their slots.

At most ``limit`` sessions at once, counting those being opened. Sessions do
not time out unless ``session_timeout_s`` is set (``reap``); at capacity, a new
session takes the slot of the session quiet longest, if quiet
``reclaim_after_s`` or more (``admit``). A WebSocket session's socket is
attached so an evicted session's peer is told why. Blocking work (ZeroMQ, a
session's env) runs on the registry's thread pool, off the event loop."""

import asyncio
import concurrent.futures
import json
import time
from typing import Any, Dict, List, Mapping, Optional

from ..client import Client
from .session import Session
from .wire import SESSION_ERROR


class SessionRegistry:
    """The sessions of one app and their slots: at most ``limit`` at once,
    counting those being opened (``reserved``); a socket per WebSocket
    session; blocking calls (ZeroMQ, the session's env) run on ``executor``."""

    def __init__(self, kforge_endpoint: str, limit: int, step_timeout_s: float,
                 session_timeout_s: Optional[float], reclaim_after_s: Optional[float]) -> None:
        self.kforge_endpoint = kforge_endpoint
        self.limit = limit
        self.step_timeout_s = step_timeout_s
        self.session_timeout_s = session_timeout_s
        self.reclaim_after_s = reclaim_after_s
        self.sessions: Dict[str, Session] = {}
        self.sockets: Dict[str, Any] = {}
        self.reserved = 0  # sessions being opened
        self.lock = asyncio.Lock()
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=2 * limit + 4,
                                                              thread_name_prefix="kforge-openenv")

    async def blocking(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def release(self, session: Session) -> None:
        # The slot counts until its env is released on the server: a new
        # session admitted earlier could find every env still held.
        await self.blocking(session.close)
        async with self.lock:
            self.sessions.pop(session.id, None)
            self.sockets.pop(session.id, None)

    async def evict(self, session: Session, why: str) -> None:
        ws = self.sockets.get(session.id)
        # The slot first: telling a half-open peer may wait for its close
        # handshake until the WebSocket close timeout.
        await self.release(session)
        if ws is not None:
            asyncio.get_running_loop().create_task(tell_and_close(ws, why))

    async def reap(self) -> None:
        timeout_s = self.session_timeout_s
        assert timeout_s is not None
        interval = min(max(timeout_s / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            async with self.lock:
                stale = [s for s in self.sessions.values() if not s.running and now - s.last_activity > timeout_s]
            for session in stale:
                await self.evict(session, f"session idle for more than {timeout_s} s; closed")

    async def admit(self) -> bool:
        """A slot for a new session: a free one, or that of the session quiet
        longest (nothing running, quiet reclaim_after_s or more)."""
        async with self.lock:
            if len(self.sessions) + self.reserved < self.limit:
                self.reserved += 1
                return True
            now = time.monotonic()
            quiet = [s for s in self.sessions.values() if not s.running and self.reclaim_after_s is not None
                     and now - s.last_activity >= self.reclaim_after_s]
            victim = min(quiet, key=lambda s: s.last_activity) if quiet else None
            if victim is None:
                return False
            self.reserved += 1
        await self.evict(victim, "another client needed this session's slot; this one was the quietest")
        return True

    async def open_session(self) -> Session:
        """The session of a slot ``admit`` gave."""
        session: Optional[Session] = None
        try:
            session = await self.blocking(Session, self.kforge_endpoint, self.step_timeout_s)
            return session
        finally:
            async with self.lock:
                self.reserved -= 1
                if session is not None:
                    self.sessions[session.id] = session

    async def attach(self, session: Session, ws: Any) -> None:
        """``session`` is ``ws``'s: evicting it tells that socket."""
        async with self.lock:
            self.sockets[session.id] = ws

    def one_shot(self, body: Mapping[str, Any], with_step: bool, task_ids: List[str]) -> Dict[str, Any]:
        """HTTP's episode on a fresh env: the reset of ``body``, then its
        action if ``with_step``."""
        session = Session(self.kforge_endpoint, self.step_timeout_s)
        try:
            reset_data = {k: v for k, v in body.items() if k not in ("action", "timeout_s", "request_id")}
            first = session.reset(reset_data, task_ids)
            if not with_step:
                return first
            return session.step(body["action"])
        finally:
            session.close()

    def ping(self) -> None:
        with Client(self.kforge_endpoint, timeout_s=10.0) as c:
            c.call("ping", {})


async def tell_and_close(ws: Any, why: str) -> None:
    """Tells an evicted WebSocket session's peer why, then closes it."""
    from starlette.websockets import WebSocketState

    try:
        if ws.client_state == WebSocketState.CONNECTED:
            await ws.send_text(json.dumps({"type": "error", "data": {"message": why, "code": SESSION_ERROR}}))
            await ws.close(code=1001)
    except Exception:  # noqa: BLE001 (the peer is gone; its slot is free already)
        pass
