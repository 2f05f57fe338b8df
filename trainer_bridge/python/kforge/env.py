"""RemoteEnv: one episode at a time on a ``kforge serve``, Gymnasium-style."""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .client import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, Client
from .errors import KForgeError

Observation = Dict[str, Any]
Info = Dict[str, Any]


def load_task(path: "os.PathLike[str] | str") -> Dict[str, Any]:
    """Reads a task JSON file (docs/architecture.md#tasks format) into a dict for ``reset``."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def action_params(action: Any) -> Dict[str, Any]:
    """The ``step`` params for an action, without the env_id.

    Accepted: an OpenAI-style tool call (``{"name", "arguments"}`` or the
    ``{"type": "function", "function": {...}, "id"}`` envelope, or an OpenAI
    SDK tool-call object), or a typed action ``{"type": "submit", "solution":
    {"source": ...}}``. Tool calls are the policy's output: the environment
    judges them, and a malformed one becomes an ``invalid_action``
    observation. Typed actions come from the trainer's code: a malformed one
    is a KForgeError.
    """
    if hasattr(action, "model_dump"):  # OpenAI SDK (pydantic) objects
        action = action.model_dump()
    elif hasattr(action, "to_dict"):
        action = action.to_dict()
    if isinstance(action, Mapping) and "type" in action and "function" not in action and "name" not in action:
        return {"action": dict(action)}
    return {"tool_call": action}


def task_params(task: Any, task_id: Optional[str]) -> Dict[str, Any]:
    """The task part of ``reset`` params."""
    if task is not None and task_id is not None:
        raise ValueError("give either task or task_id, not both")
    if task_id is not None:
        return {"task_id": str(task_id)}
    if isinstance(task, os.PathLike):
        return {"task": load_task(task)}
    if isinstance(task, Mapping):
        return {"task": dict(task)}
    if isinstance(task, str):
        raise TypeError("task must be a dict or a pathlib.Path; for an id of the server's task set use task_id=")
    raise ValueError("reset needs a task (a dict or a path) or a task_id")


def reset_params(
    task: Any, task_id: Optional[str], seed: Optional[int], options: Optional[Mapping[str, Any]]
) -> Dict[str, Any]:
    """``reset`` params (without env_id) from Gymnasium-style arguments."""
    params = task_params(task, task_id)
    if seed is not None:
        params["seed"] = int(seed)
    for key, value in (options or {}).items():
        if key != "exemplars":
            raise ValueError(f"unknown reset option {key!r}; the options are: exemplars")
        params["exemplars"] = list(value)
    return params


# Why a trainer ends an episode the policy left unfinished (RemoteEnv.end_episode;
# trainer_bridge/PROTOCOL.md, step param ``end``).
END_REASONS = ("policy_stopped", "context_length", "turn_limit")


def tool_message(tool_call: Mapping[str, Any], observation: Observation) -> Dict[str, Any]:
    """The chat message that answers ``tool_call`` with a step's observation."""
    message: Dict[str, Any] = {"role": "tool", "content": observation["text"]}
    call_id = tool_call.get("id") if isinstance(tool_call, Mapping) else None
    if call_id:
        message["tool_call_id"] = call_id
    return message


class RemoteEnv:
    """A KernelForge environment served by ``kforge serve``, Gymnasium-style.

    ``reset(task=...)`` starts an episode and returns ``(observation, info)``;
    ``step(action)`` returns ``(observation, reward, terminated, truncated,
    info)``. An observation is ``{"text": str, "data": dict}``: ``text`` is
    what the policy reads, ``data`` the same facts structured. ``terminated``
    is set by a submit, ``truncated`` by the turn or time budget.

    Attributes:
        tools: the OpenAI tool definitions to give the policy's chat template.
        server_info: the server's ``hello`` (versions, backend, device,
            reward, limits).
        env_id: the server's slot for this env.
        messages: the chat messages of the current episode's prompt.

    Args:
        endpoint: the server's endpoint, e.g. ``"tcp://127.0.0.1:5555"``.
        timeout_s: how long to wait for any reply (a step runs compiles and
            evaluations); None waits forever. Nothing is retried on timeout.
        client: share a Client instead of opening a connection.
        connect_timeout_s: how long the first request (``hello``) waits for a
            server (default 10 s): a wrong endpoint fails with KForgeTimeout
            naming it, instead of waiting ``timeout_s``. None: ``timeout_s``.
        acquire: take an env of the server now (``make``); False: at the
            first ``reset`` (``release`` gives it back between episodes).
        acquire_timeout_s: with every env of the server held, how long
            ``acquire`` waits for one to be freed before KForgeError
            ("pool_full"); 0 fails at once.

    A reset finds its env released by the server (``unknown_env``: quiet
    while another client needed one, ``kforge serve --reclaim-after``) and
    takes another one; a step cannot (the episode is gone) and raises.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        endpoint: Optional[str] = None,
        timeout_s: Optional[float] = DEFAULT_TIMEOUT_S,
        client: Optional[Client] = None,
        connect_timeout_s: Optional[float] = DEFAULT_CONNECT_TIMEOUT_S,
        acquire: bool = True,
        acquire_timeout_s: float = 0.0,
    ) -> None:
        if client is None and endpoint is None:
            raise ValueError("RemoteEnv needs an endpoint or a client")
        self._own_client = client is None
        self.client = client if client is not None else Client(endpoint or "", timeout_s)
        self.timeout_s = timeout_s
        self.acquire_timeout_s = acquire_timeout_s
        self.env_id: Optional[int] = None
        self._prompt: Optional[Observation] = None
        self._closed = False
        try:
            self.server_info: Dict[str, Any] = self.client.hello("kforge.RemoteEnv", connect_timeout_s)
            self.tools: List[Dict[str, Any]] = self.server_info.get("tools", [])
            if acquire:
                self.acquire()
        except BaseException:
            if self._own_client:
                self.client.close()
            raise

    def acquire(self) -> int:
        """Makes sure this RemoteEnv holds an env of the server (``make``)
        and returns its id. With every env held, waits up to
        ``acquire_timeout_s`` for one to be freed, then raises
        KForgeError("pool_full") naming ``--envs``."""
        if self._closed:
            raise KForgeError("closed", "this RemoteEnv is closed")
        if self.env_id is not None:
            return self.env_id
        deadline = time.monotonic() + max(0.0, self.acquire_timeout_s)
        pause = 0.05
        while True:
            try:
                self.env_id = int(self.client.call("make", {}, self.timeout_s)["env_id"])
                return self.env_id
            except KForgeError as e:
                if e.code != "pool_full" or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def release(self) -> None:
        """Gives the env back to the server but keeps the connection: the
        next ``reset`` acquires one again. For adapters that hold an env
        only while an episode runs."""
        if self.env_id is not None and not self.client.closed:
            env_id, self.env_id = self.env_id, None
            try:
                self.client.call("close", {"env_id": env_id}, min(5.0, self.timeout_s or 5.0))
            except KForgeError:
                pass  # the server is gone or already released it
        self.env_id = None

    def reset(
        self,
        task: Any = None,
        task_id: Optional[str] = None,
        seed: Optional[int] = None,
        options: Optional[Mapping[str, Any]] = None,
    ) -> Tuple[Observation, Info]:
        """Starts an episode: a task dict (or a path to a task file), or a
        task_id of the server's task set. ``options={"exemplars": [...]}``
        puts earlier solutions in the prompt (contrastive rewards)."""
        params = reset_params(task, task_id, seed, options)
        try:
            result = self.client.call("reset", {"env_id": self.acquire(), **params}, self.timeout_s)
        except KForgeError as e:
            if e.code != "unknown_env":
                raise
            # The server released the env (this client was quiet while
            # another needed one, or it restarted): no episode is lost at a
            # reset, so take another env and go on.
            self.env_id = None
            result = self.client.call("reset", {"env_id": self.acquire(), **params}, self.timeout_s)
        self._prompt = result["observation"]
        return result["observation"], result["info"]

    def step(self, action: Any) -> Tuple[Observation, float, bool, bool, Info]:
        """One environment step (see ``action_params`` for the action forms)."""
        return self._step_call(action_params(action))

    def _step_call(self, params: Dict[str, Any]) -> Tuple[Observation, float, bool, bool, Info]:
        """The server's ``step`` on this env with ``params``, as the step tuple."""
        env_id = self._live_env_id()
        try:
            result = self.client.call("step", {"env_id": env_id, **params}, self.timeout_s)
        except KForgeError as e:
            e.env_id = env_id
            raise
        return (
            result["observation"],
            float(result["reward"]),
            bool(result["terminated"]),
            bool(result["truncated"]),
            result["info"],
        )

    def end_episode(self, reason: str = "policy_stopped") -> Tuple[Observation, float, bool, bool, Info]:
        """Ends the running episode by the environment's own truncation rule
        (the server does it: step param ``end``): its latest solution is
        scored as the submission, or, with none, a failed submission is paid,
        and the turns left are paid as idle turns, so stopping early never
        beats trying. ``reason``: one of END_REASONS. Returns the step tuple
        (``truncated`` set; ``StepInfo.from_dict(info).scored_measurement()`` is the verdict)."""
        if reason not in END_REASONS:
            raise ValueError(f"unknown reason {reason!r}; the reasons are {', '.join(END_REASONS)}")
        return self._step_call({"end": reason})

    @property
    def messages(self) -> List[Dict[str, Any]]:
        """The prompt of the current episode as chat messages (system, user),
        a copy to extend with the policy's turns."""
        if self._prompt is None:
            raise KForgeError("no_episode", "call reset() first")
        return copy.deepcopy(self._prompt["data"].get("messages", []))

    def close(self) -> None:
        """Releases the env on the server (and the connection, if owned).
        Safe to call twice; errors of an unreachable server are ignored."""
        self.release()
        self._closed = True
        if self._own_client:
            self.client.close()

    def __enter__(self) -> "RemoteEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteEnv({self.client.endpoint!r}, env_id={self.env_id})"

    def _live_env_id(self) -> int:
        if self._closed:
            raise KForgeError("closed", "this RemoteEnv is closed")
        if self.env_id is None:
            raise KForgeError("no_episode", "this RemoteEnv holds no env: call reset() first")
        return self.env_id
