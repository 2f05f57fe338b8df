"""One OpenEnv session of kforge.openenv.server: an env of ``kforge serve``
(through kforge.RemoteEnv) and the state of its current episode."""

import secrets
import threading
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional

from ..env import RemoteEnv
from ..step_info import ResetInfo, StepInfo
from .wire import (
    EXECUTION_ERROR,
    RESET_KEYS,
    OpenEnvState,
    VALIDATION_ERROR,
    RequestError,
    reset_observation,
    step_observation,
    tool_call_of,
)


class Session:
    """One OpenEnv session: one env of ``kforge serve``, one episode at a time."""

    def __init__(self, endpoint: str, timeout_s: float) -> None:
        self.id = str(uuid.uuid4())
        # Requests of this session still running (the WebSocket loop may
        # answer before they finish: reply deadline, or a newer message).
        self.running = 0
        self.created_at = time.time()
        self.last_activity = time.monotonic()
        self.busy = False
        self.closed = False
        self.env = RemoteEnv(endpoint, timeout_s=timeout_s)
        self.episode_id: Optional[str] = None
        self.task_id: Optional[str] = None
        self.seed: Optional[int] = None
        self.step_count = 0
        self.total_reward = 0.0
        self.terminated = False
        self.truncated = False
        self.stop_reason: Optional[str] = None
        self._lock = threading.Lock()

    def reset(self, data: Mapping[str, Any], task_ids: List[str]) -> Dict[str, Any]:
        if not isinstance(data, Mapping):
            raise RequestError(VALIDATION_ERROR, "data: reset parameters are a JSON object", "data")
        # As OpenEnv's server does: keys the environment does not take are
        # dropped; the observation lists them (a typo shows).
        ignored = sorted(k for k in data if k not in RESET_KEYS)
        data = {k: v for k, v in data.items() if k in RESET_KEYS}
        seed = data.get("seed")
        if seed is None:
            seed = secrets.randbits(63)
        elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
            raise RequestError(VALIDATION_ERROR, "data/seed: an integer in [0, 2^64-1]", "data/seed")
        task, task_id = data.get("task"), data.get("task_id")
        if task is not None and task_id is not None:
            raise RequestError(VALIDATION_ERROR, "data: give task or task_id, not both", "data/task_id")
        if task is not None and not isinstance(task, Mapping):
            raise RequestError(VALIDATION_ERROR, "data/task: a task object (docs/architecture.md#tasks)", "data/task")
        if task_id is not None and not isinstance(task_id, str):
            raise RequestError(VALIDATION_ERROR, "data/task_id: a string", "data/task_id")
        if task is None and task_id is None:
            if not task_ids:
                raise RequestError(
                    VALIDATION_ERROR,
                    "data/task_id: required: the kforge server has no task set (start it with --tasks)",
                    "data/task_id",
                )
            task_id = task_ids[seed % len(task_ids)]  # the seed picks the task, reproducibly
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or not 0 < len(episode_id) <= 255):
            raise RequestError(VALIDATION_ERROR, "data/episode_id: a string of 1..255 characters", "data/episode_id")
        options = {"exemplars": data["exemplars"]} if "exemplars" in data else None
        with self._lock:
            obs, info = self.env.reset(task=task, task_id=task_id, seed=seed, options=options)
            self.episode_id = episode_id or str(uuid.uuid4())
            reset_info = ResetInfo.from_dict(info)
            self.task_id = reset_info.task_id
            self.seed = seed
            self.step_count = 0
            self.total_reward = 0.0
            self.terminated = self.truncated = False
            self.stop_reason = None
            return reset_observation(obs, reset_info, self.episode_id, ignored)

    def step(self, action: Mapping[str, Any]) -> Dict[str, Any]:
        params = tool_call_of(action)
        with self._lock:
            if self.episode_id is None:
                raise RequestError(EXECUTION_ERROR, "no episode: send a reset first")
            if "end" in params:
                obs, reward, terminated, truncated, info = self.env.end_episode(params["end"])
            else:
                obs, reward, terminated, truncated, info = self.env.step(params.get("tool_call", params.get("action")))
            self.step_count += 1
            self.total_reward += reward
            self.terminated, self.truncated = terminated, truncated
            out = step_observation(obs, reward, terminated, truncated, StepInfo.from_dict(info), self.episode_id)
            self.stop_reason = out["observation"]["stop_reason"]
            return out

    def call_tool(self, name: str, arguments: Dict[str, Any], task_ids: List[str]) -> Dict[str, Any]:
        """An MCP tool call (mcp.py): a step of the episode, or
        start_episode / end_episode."""
        if name == "start_episode":
            return self.reset(arguments, task_ids)
        if name == "end_episode":
            return self.step({"end": arguments.get("reason", "policy_stopped")})
        return self.step({"tool": name, "arguments": arguments})

    def state(self) -> Dict[str, Any]:
        return OpenEnvState(
            episode_id=self.episode_id,
            step_count=self.step_count,
            task_id=self.task_id,
            seed=self.seed,
            total_reward=self.total_reward,
            terminated=self.terminated,
            truncated=self.truncated,
            stop_reason=self.stop_reason,
            env_id=self.env.env_id,
        ).to_dict()

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self.env.close()
