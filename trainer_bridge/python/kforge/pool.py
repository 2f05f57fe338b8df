"""RemoteEnvPool: many episodes in flight on one ``kforge serve``, EnvPool-style."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Deque, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .client import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, Client
from .env import Info, Observation, action_params, reset_params
from .errors import KForgeError, KForgeTimeout
from .protocol import ENV_BUSY, Reply


class StepResult(NamedTuple):
    """One finished step of a RemoteEnvPool; unpacks like Gymnasium's tuple
    with the env index in front."""

    env_id: int  # index into the pool, 0..num_envs-1
    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: Info


class RemoteEnvPool:
    """``num_envs`` envs on one server, stepped asynchronously.

    ``send(actions, env_ids)`` returns at once; ``recv()`` returns results as
    they finish, in completion order (steps of different envs overlap on the
    server: compiles run in parallel while evaluations queue for the device).
    ``step`` is send + recv for one batch. Env ids are the pool's indices
    0..num_envs-1 (``server_env_ids`` maps them to the server's slots, which
    is what ``info["env_id"]`` shows).

    Args:
        endpoint: the server's endpoint.
        num_envs: envs to allocate; KForgeError("pool_full") if the server
            has fewer free.
        timeout_s: default wait for replies; None waits forever.
        client: share a Client instead of opening a connection.
        connect_timeout_s: how long the first request (``hello``) waits for a
            server (default 10 s); see RemoteEnv.
    """

    def __init__(
        self,
        endpoint: Optional[str],
        num_envs: int,
        timeout_s: Optional[float] = DEFAULT_TIMEOUT_S,
        client: Optional[Client] = None,
        connect_timeout_s: Optional[float] = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        if num_envs < 1:
            raise ValueError("num_envs must be at least 1")
        if client is None and endpoint is None:
            raise ValueError("RemoteEnvPool needs an endpoint or a client")
        self._own_client = client is None
        self.client = client if client is not None else Client(endpoint or "", timeout_s)
        self.timeout_s = timeout_s
        self.server_env_ids: List[int] = []
        self._inflight: Dict[int, int] = {}  # request id -> env index
        self._ready: Deque[StepResult] = deque()
        try:
            self.server_info: Dict[str, Any] = self.client.hello("kforge.RemoteEnvPool", connect_timeout_s)
            self.tools: List[Dict[str, Any]] = self.server_info.get("tools", [])
            requests = [self.client.send("make", {}) for _ in range(num_envs)]
            errors: List[KForgeError] = []
            for request_id in requests:
                try:
                    self.server_env_ids.append(int(self.client.wait(request_id, timeout_s)["env_id"]))
                except KForgeError as e:
                    errors.append(e)
            if errors:
                raise errors[0]
        except BaseException:
            self.close()
            raise

    @property
    def num_envs(self) -> int:
        return len(self.server_env_ids)

    @property
    def pending(self) -> int:
        """Steps sent and not yet returned by recv()."""
        return len(self._inflight) + len(self._ready)

    def reset(
        self,
        tasks: Any = None,
        task_ids: Optional[Sequence[str]] = None,
        seeds: Optional[Sequence[Optional[int]]] = None,
        env_ids: Optional[Sequence[int]] = None,
        options: Optional[Mapping[str, Any]] = None,
    ) -> List[Tuple[Observation, Info]]:
        """Resets several envs at once (default: all). ``tasks`` is one task
        for all or a list with one per env (or ``task_ids``); ``seeds`` one
        per env. Returns ``[(observation, info)]`` in ``env_ids`` order."""
        ids = list(range(self.num_envs)) if env_ids is None else [self._index(i) for i in env_ids]
        per_env_tasks = _per_env(tasks, len(ids), "tasks")
        per_env_ids = _per_env(task_ids, len(ids), "task_ids", broadcast=False)
        per_env_seeds = _per_env(seeds, len(ids), "seeds", broadcast=False)
        for index in ids:
            if index in self._inflight.values():
                raise KForgeError(ENV_BUSY, f"env {index} has a step in flight; recv() it before reset", env_id=index)
        requests = []
        for k, index in enumerate(ids):
            params = reset_params(per_env_tasks[k], per_env_ids[k], per_env_seeds[k], options)
            requests.append((index, self.client.send("reset", {"env_id": self.server_env_ids[index], **params})))
        out: List[Tuple[Observation, Info]] = []
        error: Optional[KForgeError] = None
        for index, request_id in requests:
            try:
                result = self.client.wait(request_id, self.timeout_s)
                out.append((result["observation"], result["info"]))
            except KForgeTimeout:
                raise
            except KForgeError as e:
                e.env_id = index
                error = error or e
        if error is not None:
            raise error
        return out

    def send(self, actions: Sequence[Any], env_ids: Optional[Sequence[int]] = None) -> None:
        """Queues one step per (action, env id) and returns at once."""
        ids = list(range(len(actions))) if env_ids is None else [self._index(i) for i in env_ids]
        if len(ids) != len(actions):
            raise ValueError(f"{len(actions)} actions for {len(ids)} env_ids")
        busy = set(self._inflight.values())
        for index in ids:
            if index in busy or ids.count(index) > 1:
                raise KForgeError(
                    ENV_BUSY, f"env {index} already has a step in flight; recv() its result first", env_id=index
                )
        for action, index in zip(actions, ids):
            request_id = self.client.send("step", {"env_id": self.server_env_ids[index], **action_params(action)})
            self._inflight[request_id] = index

    def recv(
        self, min_count: int = 1, timeout_s: Optional[float] = -1.0, max_count: Optional[int] = None
    ) -> List[StepResult]:
        """Waits for ``min_count`` results (fewer if fewer are in flight) and
        returns those ready, at most ``max_count``, in completion order.

        An error reply raises KForgeError (with ``env_id`` set); results that
        arrived before it are kept for the next recv(). A timeout raises
        KForgeTimeout; the steps stay in flight.
        """
        if timeout_s is not None and timeout_s < 0:
            timeout_s = self.timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        want = min(min_count, self.pending)
        self._take(self.client.poll(among=self._inflight.keys()))
        while len(self._ready) < want:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                reply = self.client.recv(remaining, among=self._inflight.keys())
            except KForgeTimeout:
                raise KForgeTimeout(
                    f"{len(self._ready)} of {want} step results arrived within {timeout_s:g} s; "
                    f"{len(self._inflight)} step(s) still in flight"
                ) from None
            self._take([reply] + self.client.poll(among=self._inflight.keys()))
        count = len(self._ready) if max_count is None else min(max_count, len(self._ready))
        return [self._ready.popleft() for _ in range(count)]

    def step(self, actions: Sequence[Any], env_ids: Optional[Sequence[int]] = None) -> List[StepResult]:
        """send + recv of one batch; results in ``env_ids`` order (results of
        earlier sends that arrive meanwhile stay queued for recv())."""
        ids = list(range(len(actions))) if env_ids is None else [self._index(i) for i in env_ids]
        self.send(actions, ids)
        wanted = set(ids)
        got: Dict[int, StepResult] = {}
        others: List[StepResult] = []
        try:
            while len(got) < len(ids):
                for r in self.recv(1):
                    if r.env_id in wanted and r.env_id not in got:
                        got[r.env_id] = r
                    else:
                        others.append(r)
        finally:
            self._ready.extendleft(reversed(others))
        return [got[i] for i in ids]

    def close(self) -> None:
        """Releases every env (and the connection, if owned)."""
        if not self.client.closed:
            requests = [self.client.send("close", {"env_id": e}) for e in self.server_env_ids]
            for request_id in requests:
                try:
                    self.client.wait(request_id, min(5.0, self.timeout_s or 5.0))
                except KForgeError:
                    pass  # already released, or the server is gone
        self.server_env_ids = []
        if self._own_client:
            self.client.close()

    def __enter__(self) -> "RemoteEnvPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_envs

    def _index(self, env_id: int) -> int:
        index = int(env_id)
        if not 0 <= index < self.num_envs:
            raise KForgeError(
                "unknown_env", f"env {env_id} is not in this pool (0..{self.num_envs - 1})", env_id=env_id
            )
        return index

    def _take(self, replies: List[Reply]) -> None:
        """Queues step results; raises the first error reply after queueing
        every result, so none is lost."""
        error: Optional[KForgeError] = None
        for reply in replies:
            index = self._inflight.pop(reply.id)  # type: ignore[arg-type]
            if not reply.ok:
                error = error or reply.to_error(env_id=index)
                continue
            r = reply.result
            self._ready.append(
                StepResult(
                    index, r["observation"], float(r["reward"]), bool(r["terminated"]), bool(r["truncated"]), r["info"]
                )
            )
        if error is not None:
            raise error


def _per_env(value: Any, n: int, name: str, broadcast: bool = True) -> List[Any]:
    """One value per env: a list of n, or (broadcast) one value for all."""
    if value is None:
        return [None] * n
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: {len(value)} values for {n} envs")
        return list(value)
    if not broadcast:
        raise ValueError(f"{name} must be a list with one value per env")
    return [value] * n
