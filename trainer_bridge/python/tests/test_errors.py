"""Error handling: what is a KForgeError and what is an observation."""

from __future__ import annotations

import msgpack
import pytest
import zmq
from conftest import HANG, small_task, source, tool_call

from kforge import Client, KForgeError, KForgeTimeout, RemoteEnv, RemoteEnvPool


def test_unknown_env_is_an_error_naming_the_field(server):
    with Client(server.endpoint, timeout_s=60) as client:
        with pytest.raises(KForgeError) as e:
            client.call("step", {"env_id": 999, "tool_call": tool_call("verify")})
        assert e.value.code == "unknown_env"
        assert e.value.field == "/params/env_id"
        assert "999" in str(e.value)


def test_a_malformed_tool_call_is_an_observation_for_the_policy(server):
    with RemoteEnv(server.endpoint, timeout_s=120) as env:
        env.reset(task=small_task())
        obs, reward, terminated, truncated, info = env.step({"name": "compile", "arguments": "{not json"})
        assert obs["data"]["error"]["kind"] == "invalid_action"
        assert "Invalid tool call" in obs["text"]
        assert not terminated and info["counted_turn"]
        obs, *_ = env.step({"name": "benchmark", "arguments": {}})
        assert obs["data"]["error"]["kind"] == "invalid_action"


def test_a_malformed_typed_action_is_an_error(server):
    with RemoteEnv(server.endpoint, timeout_s=120) as env:
        env.reset(task=small_task())
        with pytest.raises(KForgeError) as e:
            env.step({"type": "submit", "solution": {"source": "int x;", "mdoe": "cpp"}})
        assert e.value.code == "invalid_action"
        assert e.value.field == "/params/action/solution/mdoe"
        assert 'did you mean "mode"' in e.value.message
        assert e.value.env_id == env.env_id


def test_an_invalid_task_names_the_field(server):
    with RemoteEnv(server.endpoint, timeout_s=120) as env:
        task = small_task()
        task["inputs"][0]["dtype"] = "float33"
        with pytest.raises(KForgeError) as e:
            env.reset(task=task)
        assert e.value.code == "invalid_task"
        assert e.value.field == "/params/task/inputs/0/dtype"
        with pytest.raises(KForgeError) as e:
            env.reset(task_id="example/nope")
        assert e.value.code == "unknown_task"
        with pytest.raises(TypeError):
            env.reset(task="example/affine_relu6")


def test_stepping_before_reset(server):
    with RemoteEnv(server.endpoint, timeout_s=60) as env:
        with pytest.raises(KForgeError) as e:
            env.step(tool_call("verify"))
        assert e.value.code == "no_episode"


def test_garbage_on_the_wire_gets_an_error_reply_and_the_server_lives(server):
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(server.endpoint)
    try:
        for garbage in (b"", b"\xc1\xc1", b"definitely not msgpack", b"\x91" * 100000 + b"\x01"):
            socket.send(garbage)
            assert socket.poll(60000), "no reply to garbage"
            reply = msgpack.unpackb(socket.recv(), raw=False)
            assert reply["ok"] is False and reply["id"] is None
            assert reply["error"]["code"] == "bad_request"
    finally:
        socket.close()
    with RemoteEnv(server.endpoint, timeout_s=60) as env:
        assert env.client.call("hello")["protocol_version"] == 1
        with pytest.raises(KForgeError) as e:
            env.client.call("reset", {"env_id": env.env_id, "task": small_task(), "sede": 1})
        assert e.value.code == "bad_request"
        assert e.value.field == "/params/sede"
        with pytest.raises(KForgeError) as e:
            env.client.call("frobnicate")
        assert e.value.code == "unknown_method"


def test_a_timeout_raises_and_is_not_retried(server):
    with RemoteEnv(server.endpoint, timeout_s=120) as env:
        env.reset(task=small_task())
        env.timeout_s = 0.05
        with pytest.raises(KForgeTimeout) as e:
            env.step(tool_call("verify", source=source(HANG)))
        assert isinstance(e.value, TimeoutError)
        assert "not retried" in str(e.value)
        # The step still runs on the server: the env stays busy until it ends.
        env.timeout_s = 120
        with pytest.raises(KForgeError) as busy:
            env.step(tool_call("verify"))
        assert busy.value.code == "env_busy"


def test_the_pool_is_bounded(fresh_server):
    with RemoteEnv(fresh_server.endpoint, timeout_s=60):
        with pytest.raises(KForgeError) as e:
            RemoteEnv(fresh_server.endpoint, timeout_s=60)
        assert e.value.code == "pool_full"
    # Closing the first env freed the slot.
    with RemoteEnv(fresh_server.endpoint, timeout_s=60) as env:
        assert env.env_id == 0


def _unused_loopback_endpoint() -> str:
    import socket as pysocket

    s = pysocket.socket(pysocket.AF_INET, pysocket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"tcp://127.0.0.1:{port}"


def test_a_wrong_endpoint_fails_within_the_connect_timeout():
    endpoint = _unused_loopback_endpoint()
    with pytest.raises(KForgeTimeout) as e:
        RemoteEnv(endpoint, connect_timeout_s=0.3)
    assert endpoint in str(e.value)
    assert "connect_timeout_s" in str(e.value)
    with pytest.raises(KForgeTimeout) as e:
        RemoteEnvPool(endpoint, 2, connect_timeout_s=0.3)
    assert endpoint in str(e.value)


def test_a_malformed_endpoint_is_a_clear_error():
    with pytest.raises(KForgeError) as e:
        RemoteEnv("not-an-endpoint")
    assert e.value.code == "bad_endpoint"
    assert "tcp://127.0.0.1:5555" in str(e.value)


def test_deep_tool_call_arguments_are_an_observation_and_the_server_serves_on(server):
    deep = "[" * 200000 + "]" * 200000
    with RemoteEnv(server.endpoint, timeout_s=60) as env:
        env.reset(task=small_task())
        obs, reward, terminated, truncated, info = env.step({"name": "compile", "arguments": deep})
        assert obs["data"]["error"]["kind"] == "invalid_action"
        assert info["counted_turn"]
        assert "nested deeper than 64 levels" in obs["text"]
        # A JSON text with a key twice is refused the same way.
        obs, *_ = env.step({"name": "compile", "arguments": '{"source": "a", "source": "b"}'})
        assert "duplicate key" in obs["text"]
    with RemoteEnv(server.endpoint, timeout_s=60) as env:
        assert env.client.call("ping")["envs"] == [env.env_id]
