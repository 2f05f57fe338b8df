"""Server lifetime: clients that die mid-step, and graceful shutdown."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from conftest import GYM_DATA, HANG, PYTHON_DIR, medium_task, small_task, source, start_server, tool_call

from kforge import KForgeError, RemoteEnv

# A client in its own process: makes the server's only env, starts a step
# that runs for a while, says so once the server has it, and waits to be
# killed.
DOOMED_CLIENT = """
import json, sys, time
sys.path.insert(0, {python_dir!r})
from kforge import Client
client = Client({endpoint!r}, timeout_s=120)
env_id = client.call("make")["env_id"]
client.call("reset", {{"env_id": env_id, "task": json.loads({task!r})}})
client.send("step", {{"env_id": env_id, "tool_call": json.loads({call!r})}})
client.call("ping")  # the step has reached the server
print("stepping", flush=True)
time.sleep(600)
"""


def make_env_when_free(endpoint: str) -> RemoteEnv:
    """Waits (no assertion on how long) until the server has a free env."""
    for _ in range(600):
        try:
            return RemoteEnv(endpoint, timeout_s=120)
        except KForgeError as e:
            if e.code != "pool_full":
                raise
        time.sleep(0.2)
    raise AssertionError("the env of the killed client was never reclaimed")


def test_a_client_killed_mid_step_does_not_hurt_the_server(fresh_server):
    script = DOOMED_CLIENT.format(
        python_dir=str(PYTHON_DIR),
        endpoint=fresh_server.endpoint,
        task=json.dumps(small_task()),
        call=json.dumps(tool_call("verify", source=source(HANG))),
    )
    doomed = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "stepping"
    finally:
        doomed.kill()
        doomed.wait()
    # The server's only env belonged to the dead client: it comes back once
    # the step's reply bounces.
    with make_env_when_free(fresh_server.endpoint) as env:
        env.reset(task=medium_task())
        _, reward, terminated, _, _ = env.step(tool_call("submit", source=source(GYM_DATA / "correct.cpp")))
        assert terminated and reward > 0
    assert fresh_server.process.poll() is None


def test_sigterm_finishes_the_step_in_flight_and_exits_0():
    server = start_server(envs=2)
    try:
        env = RemoteEnv(server.endpoint, timeout_s=120)
        env.reset(task=small_task())
        request = env.client.send("step", {"env_id": env.env_id, "tool_call": tool_call("verify", source=source(HANG))})
        assert env.client.call("ping")["envs"] == [env.env_id]  # the step is in the server's hands
        server.process.send_signal(signal.SIGTERM)
        result = env.client.wait(request)  # the default drain lets it finish
        assert result["info"]["measurement"]["outcome"] == "timeout"
        assert server.process.wait(120) == 0, "\n".join(server.log_lines)
        env.client.close()
    finally:
        server.kill()


def test_sigint_with_no_drain_cancels_the_step_and_exits_0():
    server = start_server("--drain-timeout", "0", envs=2)
    try:
        env = RemoteEnv(server.endpoint, timeout_s=120)
        env.reset(task=small_task())
        request = env.client.send("step", {"env_id": env.env_id, "tool_call": tool_call("verify", source=source(HANG))})
        env.client.call("ping")
        assert server.stop(signal.SIGINT) == 0, "\n".join(server.log_lines)
        try:
            env.client.wait(request, timeout_s=30)
            raise AssertionError("the cancelled step returned a result")
        except KForgeError as e:
            assert e.code == "shutting_down"
        env.client.close()
    finally:
        server.kill()
