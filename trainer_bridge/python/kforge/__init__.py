"""kforge: the Python side of KernelForge.

The environment runs in a separate ``kforge serve`` process (C++); this pure
Python package talks to it over ZeroMQ + MessagePack, so a trainer never
loads libtorch, CUDA or any compiled extension of ours, and a crash in the
environment cannot take the trainer down. Needs only pyzmq and msgpack.

    from kforge import RemoteEnv
    with RemoteEnv("tcp://127.0.0.1:5555") as env:
        obs, info = env.reset(task=task_dict, seed=0)
        obs, reward, terminated, truncated, info = env.step(tool_call)

Trainers that let KernelForge's rollout workers run the episodes receive
the finished trajectories instead, exactly once, from a TrajectoryStream:

    from kforge import TrajectoryStream
    with TrajectoryStream("tcp://127.0.0.1:5557", state_dir="stream-state") as stream:
        for batch in stream.batches(size=64, timeout=5.0):
            train_on(batch.trajectories)
            stream.ack(batch)

The core modules are here; kforge.stream (the stream's receiver), kforge.openenv
(an OpenEnv server) and kforge.trainers (TRL's and verl's adapters) are
subpackages. The flat names of before (kforge.stream_io, kforge.openenv_server,
kforge.trl_env, ...) still import: each is the new module itself.

See docs/python.md, trainer_bridge/PROTOCOL.md and trainer_bridge/STREAM.md.
"""

from .client import Client
from .env import RemoteEnv, action_params, load_task, tool_message
from .errors import KForgeError, KForgeTimeout, ServerExited
from .policy_server import POLICY_PROTOCOL, PolicyServer
from .pool import RemoteEnvPool, StepResult
from .protocol import ERROR_CODES, PROTOCOL_VERSION, Reply
from .server import LocalServer
from .step_info import Measurement, ResetInfo, StepInfo, StepInfoError
from .stream import Batch, Delivery, TrajectoryStream

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "Client",
    "Delivery",
    "ERROR_CODES",
    "KForgeError",
    "KForgeTimeout",
    "LocalServer",
    "Measurement",
    "POLICY_PROTOCOL",
    "PolicyServer",
    "PROTOCOL_VERSION",
    "RemoteEnv",
    "RemoteEnvPool",
    "Reply",
    "ResetInfo",
    "ServerExited",
    "StepInfo",
    "StepInfoError",
    "StepResult",
    "TrajectoryStream",
    "action_params",
    "load_task",
    "tool_message",
]
