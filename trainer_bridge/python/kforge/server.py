"""LocalServer: start ``kforge serve`` as a child process and wait until ready."""

from __future__ import annotations

import collections
import json
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from typing import Deque, Dict, List, Optional, Sequence

from .errors import ServerExited


class LocalServer:
    """A ``kforge serve`` child process on this machine.

    The server prints one JSON line ``{"endpoint": ..., "pid": ...}`` on
    stdout once it is ready; ``start`` waits for it. Its stderr (the log) is
    kept, last lines first to go, in ``log_lines`` and echoed when
    ``echo_log`` is set.

    Args:
        kforge: the ``kforge`` executable (default: ``$KFORGE_BIN``, else
            ``kforge`` on PATH).
        args: further ``kforge serve`` arguments (``--config``, ``--envs``,
            ``--tasks`` ...).
        bind: endpoint to bind; port 0 picks a free one.
        env: environment of the child (default: this process's).
        startup_timeout_s: how long to wait for the ready line (the judge
            process loads libtorch on start).

    Example::

        with LocalServer(args=["--backend", "cpu", "--envs", "8"]) as server:
            env = RemoteEnv(server.endpoint)
    """

    def __init__(
        self,
        kforge: Optional[str] = None,
        args: Sequence[str] = (),
        bind: str = "tcp://127.0.0.1:0",
        env: Optional[Dict[str, str]] = None,
        startup_timeout_s: float = 300.0,
        echo_log: bool = False,
    ) -> None:
        self.kforge = kforge or os.environ.get("KFORGE_BIN") or shutil.which("kforge") or "kforge"
        self.args = list(args)
        self.bind = bind
        self.env = env
        self.startup_timeout_s = startup_timeout_s
        self.echo_log = echo_log
        self.endpoint: Optional[str] = None
        self.ready_info: Dict[str, object] = {}
        self.process: Optional[subprocess.Popen] = None
        self._log: Deque[str] = collections.deque(maxlen=500)
        self._log_thread: Optional[threading.Thread] = None

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process else None

    @property
    def log_lines(self) -> List[str]:
        return list(self._log)

    def start(self) -> "LocalServer":
        """Starts the server and waits for its ready line; ServerExited if it
        exits (or does not get ready) first."""
        command = [self.kforge, "serve", "--bind", self.bind, *self.args]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, stdin=subprocess.DEVNULL
        )
        self._log_thread = threading.Thread(target=self._read_log, daemon=True)
        self._log_thread.start()
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.startup_timeout_s
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise ServerExited(self._failure(f"not ready within {self.startup_timeout_s:g} s"), None)
                if not selector.select(remaining):
                    continue
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    code = self.process.wait()
                    raise ServerExited(self._failure(f"exited with code {code} before it was ready"), code)
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        info = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(info, dict) and "endpoint" in info:
                        self.ready_info = info
                        self.endpoint = str(info["endpoint"])
                        return self

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 120.0) -> Optional[int]:
        """Asks the server to stop (SIGTERM: finish or cancel in-flight steps,
        then exit 0) and returns its exit code; kills it after ``timeout_s``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log_thread is not None:
            self._log_thread.join(5)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "LocalServer":
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _read_log(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._log.append(line)
            if self.echo_log:
                print(line, flush=True)

    def _failure(self, what: str) -> str:
        if self._log_thread is not None:
            self._log_thread.join(2)
        tail = "\n".join(list(self._log)[-30:])
        return f"kforge serve ({self.kforge}) {what}" + (f"; its log:\n{tail}" if tail else "")
