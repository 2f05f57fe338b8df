"""KernelForge as a TRL GRPO environment (``GRPOTrainer(environment_factory=...)``).

The contract, read from TRL's source (huggingface/trl at f2cd577, July 2026,
version 1.10.0.dev0: ``trl/trainer/grpo_trainer.py``, the
``environment_factory`` docstring, ``_tool_call_loop`` and
``_generate_and_score_completions``):

- ``environment_factory()`` makes an instance; TRL keeps a pool of them and
  reuses each across batches (construct once, reset often), one per rollout.
- ``reset(**example)`` is called with the dataset row before generation; a
  returned string is appended to the last user message of the row's prompt.
- Every public method other than ``reset`` and ``get_reward`` is a tool: its
  schema comes from its signature and docstring (transformers'
  ``get_json_schema``: typed arguments, a Google-style ``Args:`` section),
  TRL calls it with the model's arguments as keywords and puts ``str(result)``
  in a ``{"role": "tool"}`` message; an exception becomes ``{"error": ...}``.
- ``get_reward()`` (no argument, a float) is called once per finished
  rollout: the environment owns the reward.

This class maps that onto an env of a ``kforge serve`` (``kforge.RemoteEnv``),
held only while an episode runs: ``reset`` acquires one (waiting up to
``acquire_timeout_s`` when the server's ``--envs`` are all held) and
``get_reward`` gives it back, so the envs in use are the rollouts in flight,
however large TRL's pool of instances grows. An env the server released
meanwhile (``--reclaim-after``) is replaced at the next ``reset``.
The tools are ``compile``, ``verify``, ``profile`` and ``submit``, each one
environment step. ``get_reward`` is the episode's return (the sum of its
step rewards); an episode the model left unfinished is ended first by the
environment's own truncation rule, on the server (``RemoteEnv.end_episode``):
its latest solution is scored as the submission, or, with none, a failed
submission is paid, and the turns left are paid as idle turns, so stopping
early never beats trying. ``get_reward`` is a coroutine (TRL awaits it in
both trainers): in the async trainer, other rollouts keep generating while a
final evaluation runs. Token ids and logprobs stay with TRL: it generates and
tokenizes itself; KernelForge sees only tool arguments.

    from functools import partial
    from kforge.trainers.trl import KForgeToolEnv
    trainer = GRPOTrainer(model=..., args=GRPOConfig(max_steps=..., ...),
                          train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": ""}],
                                                            "task_id": "example/affine_relu6"}]),
                          environment_factory=partial(KForgeToolEnv, "tcp://127.0.0.1:5555"))

docs/trainers/trl.md.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import weakref
from typing import Any, Dict, List, Optional

from ..env import RemoteEnv
from ..step_info import Measurement, ResetInfo, StepInfo


class KForgeToolEnv:
    """One KernelForge episode at a time, in TRL's environment_factory shape.

    Args of the constructor (not tools): ``endpoint`` of ``kforge serve``
    (default ``$KFORGE_ENDPOINT``), ``timeout_s`` for a step,
    ``acquire_timeout_s`` (how long ``reset`` waits for a free env), and the
    dataset columns read by ``reset``: ``task_key`` (a task id of the
    server's ``--tasks`` set), ``seed_key`` (optional; a fresh random seed
    otherwise). Attributes after a rollout: ``rewards`` (per step),
    ``info``, the last step's ``kforge.StepInfo``, and from it
    ``reward_components`` and the scored evaluation's ``measurement`` (a
    ``kforge.Measurement``: the submit's, or the final evaluation of an ended
    episode) with its ``outcome``, ``correct`` and ``speedup_eager``;
    ``stop_reason``, ``observations``.
    """

    def __init__(
        self,
        endpoint: Optional[str] = None,
        timeout_s: float = 900.0,
        task_key: str = "task_id",
        seed_key: str = "seed",
        acquire_timeout_s: float = 0.0,
    ) -> None:
        endpoint = endpoint or os.environ.get("KFORGE_ENDPOINT")
        if not endpoint:
            raise ValueError("KForgeToolEnv needs the kforge serve endpoint (argument or $KFORGE_ENDPOINT)")
        self._env = RemoteEnv(endpoint, timeout_s=timeout_s, acquire=False, acquire_timeout_s=acquire_timeout_s)
        self._finalizer = weakref.finalize(self, self._env.close)
        self._task_key = task_key
        self._seed_key = seed_key
        self.rewards: List[float] = []
        self.observations: List[Dict[str, Any]] = []
        self.info: Optional[StepInfo] = None
        self.done = False
        self.stop_reason: Optional[str] = None
        self.task_id: Optional[str] = None
        self.seed: Optional[int] = None

    @property
    def reward_components(self) -> Dict[str, float]:
        return dict(self.info.reward_components) if self.info else {}

    @property
    def measurement(self) -> Optional[Measurement]:
        return self.info.scored_measurement() if self.info else None

    @property
    def outcome(self) -> Optional[str]:
        return self.measurement.outcome if self.measurement else None

    @property
    def correct(self) -> bool:
        return self.outcome == "correct"

    @property
    def speedup_eager(self) -> Optional[float]:
        return self.measurement.speedup_eager if self.measurement else None

    def reset(self, **example: Any) -> str:
        """Starts an episode on the row's task; returns the task's prompt
        (system and user text) for TRL to append to the row's user message."""
        task_id = example.get(self._task_key)
        if not isinstance(task_id, str):
            raise ValueError(
                f"KForgeToolEnv.reset: the dataset row needs a {self._task_key!r} column with a task id of the "
                f"server's --tasks set; the row has {sorted(example)}"
            )
        seed = example.get(self._seed_key)
        self.seed = int(seed) if seed is not None else secrets.randbits(63)
        obs, info = self._env.reset(task_id=task_id, seed=self.seed)
        self.task_id = ResetInfo.from_dict(info).task_id or task_id
        self.rewards, self.observations = [], []
        self.info = None
        self.done, self.stop_reason = False, None
        messages = obs["data"].get("messages", [])
        return "\n\n".join(m["content"] for m in messages if m.get("content"))

    def compile(self, source: str) -> str:
        """Compiles a kernel solution and reports diagnostics and resource usage.

        Args:
            source: The complete solution source implementing kf_forward.
        """
        return self._step("compile", source)

    def verify(self, source: str) -> str:
        """Compiles the solution and checks it against the reference on every seed and shape variant.

        Args:
            source: The complete solution source implementing kf_forward.
        """
        return self._step("verify", source)

    def profile(self, source: str) -> str:
        """Verifies the solution, times it against eager PyTorch and reports a profile.

        Args:
            source: The complete solution source implementing kf_forward.
        """
        return self._step("profile", source)

    def submit(self, source: str) -> str:
        """Submits the solution as final: verified, timed and scored; the episode ends.

        Args:
            source: The complete solution source implementing kf_forward.
        """
        return self._step("submit", source)

    async def get_reward(self) -> float:
        """The episode's return. An unfinished episode is first ended by the
        environment's truncation rule (``policy_stopped``: TRL's loop stops
        when the model stops calling tools or hits its own limits). The env
        goes back to the server afterwards. Runs the blocking call on a
        thread, so an event loop awaiting it keeps going."""
        return await asyncio.get_running_loop().run_in_executor(None, self._finish)

    def _finish(self) -> float:
        try:
            if not self.done and self.task_id is not None:
                self._record(*self._env.end_episode("policy_stopped"))
        finally:
            self._env.release()
        return float(sum(self.rewards))

    def _step(self, tool: str, source: str) -> str:
        if self.done:
            return "The episode is over; no more tool calls are run."
        return self._record(*self._env.step({"name": tool, "arguments": {"source": source}}))

    def _record(self, obs: Dict[str, Any], reward: float, terminated: bool, truncated: bool, info: Dict[str, Any]) -> str:
        self.rewards.append(float(reward))
        self.observations.append(obs)
        self.info = StepInfo.from_dict(info)
        self.done = bool(terminated or truncated)
        if self.done:
            self.stop_reason = "submitted" if terminated else self.info.truncation_reason or "truncated"
        return str(obs.get("text", ""))

    def _close(self) -> None:
        self._finalizer()
