"""kforge.openenv.server against a client written from OpenEnv's spec.

The client side follows OpenEnv's own (meta-pytorch/OpenEnv at 685de41:
src/openenv/core/env_client.py and env_server/http_server.py): a WebSocket
to /ws per session, JSON text messages {"type": "reset"|"step"|"state"|
"close", "data"}, replies {"type": "observation"|"state"|"error", "data"}
with the observation serialized as {"observation", "reward", "done"}; HTTP
POST /reset and /step, GET /state, /health, /schema, /metadata. Everything
runs for real: a `kforge serve` (CPU backend), the adapter as a child
process on a loopback port, sockets between them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

# Debian packages that ./run installs: without one these tests fail, never skip.
import websockets  # noqa: F401
import fastapi  # noqa: F401
import uvicorn  # noqa: F401

from conftest import EXAMPLES, PYTHON_DIR, affine_task, source, start_server


AFFINE = EXAMPLES / "affine_relu6"


class Adapter:
    """`python3 -m kforge.openenv.server` as a child process."""

    def __init__(self, kforge_endpoint: str, *extra: str) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-m", "kforge.openenv.server", "--kforge-endpoint", kforge_endpoint, "--port", "0", *extra],
            cwd=str(PYTHON_DIR), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        line = self.p.stdout.readline() if self.p.stdout else ""
        if not line:
            err = self.p.stderr.read() if self.p.stderr else ""
            raise AssertionError(f"the adapter did not start: {err[-3000:]}")
        ready = json.loads(line)
        self.url: str = ready["url"]
        self.ws: str = ready["ws"]

    def stop(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


@pytest.fixture(scope="module")
def kforge_server() -> Iterator[Any]:
    s = start_server("--tasks", str(EXAMPLES), envs=4)
    yield s
    assert s.stop() == 0, "\n".join(s.log_lines[-30:])


@pytest.fixture(scope="module")
def adapter(kforge_server: Any) -> Iterator[Adapter]:
    # Its client waits 600 s for an answer: no reply deadline (docs/trainers/openenv.md, "Long steps").
    a = Adapter(kforge_server.endpoint, "--session-timeout", "600", "--reply-deadline", "0")
    yield a
    a.stop()


def http(method: str, url: str, body: Optional[bytes] = None) -> Tuple[int, Dict[str, Any]]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class WSClient:
    """OpenEnv's EnvClient protocol, from its source: one socket, one session."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def send(self, message: Dict[str, Any]) -> Dict[str, Any]:
        await self.conn.send(json.dumps(message))
        return json.loads(await asyncio.wait_for(self.conn.recv(), timeout=600))

    async def reset(self, **kwargs: Any) -> Dict[str, Any]:
        return await self.send({"type": "reset", "data": kwargs})

    async def step(self, action: Dict[str, Any]) -> Dict[str, Any]:
        return await self.send({"type": "step", "data": action})

    async def state(self) -> Dict[str, Any]:
        return await self.send({"type": "state"})


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_multi_step_episode_over_the_websocket_with_typed_fields(adapter: Adapter) -> None:
    async def episode() -> List[Dict[str, Any]]:
        async with websockets.connect(adapter.ws, max_size=8 << 20) as conn:
            c = WSClient(conn)
            first = await c.reset(task=affine_task(), seed=3, episode_id="ep-1")
            compiled = await c.step({"tool": "compile", "arguments": {"source": source(AFFINE / "cpu" / "fast.cpp")}})
            mid_state = await c.state()
            submitted = await c.step({"tool_call": {"type": "function", "id": "c2", "function": {
                "name": "submit", "arguments": json.dumps({"source": source(AFFINE / "cpu" / "fast.cpp")})}}})
            end_state = await c.state()
            after = await c.step({"tool": "verify", "arguments": {"source": "x"}})
            await conn.send(json.dumps({"type": "close"}))
            return [first, compiled, mid_state, submitted, end_state, after]

    first, compiled, mid_state, submitted, end_state, after = run(episode())
    assert first["type"] == "observation", first
    o = first["data"]["observation"]
    assert first["data"]["done"] is False and first["data"]["reward"] is None
    assert [m["role"] for m in o["messages"]] == ["system", "user"]
    assert {t["function"]["name"] for t in o["tools"]} >= {"compile", "verify", "submit"}
    assert o["episode_id"] == "ep-1" and o["seed"] == 3

    c = compiled["data"]
    assert compiled["type"] == "observation" and c["done"] is False
    assert c["observation"]["data"]["compile"]["ok"] is True
    assert c["observation"]["turn"] == 1 and o["turn"] == 0 and c["observation"]["stop_reason"] is None
    assert "turn_cost" in c["observation"]["reward_components"]
    assert mid_state == {"type": "state", "data": {**mid_state["data"], "step_count": 1, "episode_id": "ep-1"}}

    s = submitted["data"]
    assert s["done"] is True and s["reward"] > 0, s
    so = s["observation"]
    # What OpenEnv's metadata would have carried, as typed fields.
    assert so["terminated"] is True and so["truncated"] is False and so["stop_reason"] == "submitted"
    assert so["outcome"] == "correct" and so["correct"] is True
    assert so["measurement"]["outcome"] == "correct" and so["speedup_eager"] > 0
    assert abs(so["reward_components"]["total"] - s["reward"]) < 1e-9
    assert end_state["data"]["step_count"] == 2 and end_state["data"]["stop_reason"] == "submitted"
    assert end_state["data"]["terminated"] is True
    # A step after the end: an error naming the kforge code, the session lives on.
    assert after["type"] == "error" and after["data"]["kforge_code"] == "episode_finished", after


def wait_until_no_sessions(adapter: Adapter) -> None:
    """Sessions of earlier tests end when the adapter has seen their sockets
    close and released their envs; until then they count."""
    deadline = time.monotonic() + 120
    while http("GET", adapter.url + "/metadata")[1]["active_sessions"] > 0:
        assert time.monotonic() < deadline, "sessions of closed sockets were never released"
        time.sleep(0.02)


def test_many_sessions_at_once_each_its_own_episode(adapter: Adapter) -> None:
    n = 4  # the kforge server's --envs
    wait_until_no_sessions(adapter)

    async def one(i: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        async with websockets.connect(adapter.ws) as conn:
            c = WSClient(conn)
            await c.reset(task=affine_task(), seed=i)
            kind = "fast.cpp" if i % 2 == 0 else "wrong.cpp"
            r = await c.step({"tool": "submit", "arguments": {"source": source(AFFINE / "cpu" / kind)}})
            return r, await c.state()

    async def all_of() -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
        return await asyncio.gather(*(one(i) for i in range(n)))

    results = run(all_of())
    episode_ids = set()
    for i, (r, state) in enumerate(results):
        assert r["type"] == "observation", r
        assert r["data"]["observation"]["correct"] is (i % 2 == 0), (i, r["data"]["observation"]["outcome"])
        assert (r["data"]["reward"] > 0) is (i % 2 == 0)
        assert state["data"]["seed"] == i
        episode_ids.add(state["data"]["episode_id"])
    assert len(episode_ids) == n
    # Every session released its env: a new one gets a slot at once.
    status, meta = http("GET", adapter.url + "/metadata")
    assert status == 200 and meta["max_sessions"] == n


def test_bad_messages_get_errors_naming_what_is_wrong(adapter: Adapter) -> None:
    async def go() -> List[Dict[str, Any]]:
        async with websockets.connect(adapter.ws) as conn:
            c = WSClient(conn)
            out = []
            await conn.send("{not json")
            out.append(json.loads(await conn.recv()))
            out.append(await c.send({"type": "dance"}))
            out.append(await c.step({"tool": "submit"}))  # before any reset
            out.append(await c.reset(task_id="example/affine_relu6", sed=1))
            out.append(await c.reset(task_id="example/affine_relu6", seed=-1))
            out.append(await c.reset(task_id="no/such/task"))
            await c.reset(task=affine_task())
            out.append(await c.step({"tool": "submit", "action": {"type": "submit"}}))
            out.append(await c.step({"tol": "submit"}))
            # The policy's mistake is an observation, not an error.
            out.append(await c.step({"tool": "benchmark", "arguments": "{"}))
            await conn.send("[" * 100000 + "]" * 100000)
            out.append(json.loads(await conn.recv()))
            out.append(await c.state())  # the session survived all of it
            return out

    (bad_json, unknown, no_episode, typo, negative, unknown_task, two_actions, bad_key, invalid_call, deep,
     state) = run(go())
    assert bad_json["type"] == "error" and bad_json["data"]["code"] == "INVALID_JSON"
    assert unknown["data"]["code"] == "UNKNOWN_TYPE" and "dance" in unknown["data"]["message"]
    assert no_episode["type"] == "error" and "reset" in no_episode["data"]["message"]
    # As OpenEnv's server: keys the environment does not take are dropped, and named.
    assert typo["type"] == "observation" and typo["data"]["observation"]["ignored_keys"] == ["sed"]
    assert negative["data"]["field"] == "data/seed" and "2^64-1" in negative["data"]["message"]
    assert unknown_task["data"]["kforge_code"] == "unknown_task"
    assert two_actions["data"]["code"] == "VALIDATION_ERROR" and "exactly one" in two_actions["data"]["message"]
    assert bad_key["data"]["field"] == "data/tol"
    assert invalid_call["type"] == "observation"
    assert invalid_call["data"]["observation"]["error_kind"] == "invalid_action"
    assert invalid_call["data"]["done"] is False
    assert deep["data"]["code"] == "INVALID_JSON" and "deeper" in deep["data"]["message"]
    assert state["type"] == "state" and state["data"]["step_count"] == 1


def test_oversized_messages_are_refused_and_cost_only_their_sender(kforge_server: Any) -> None:
    a = Adapter(kforge_server.endpoint, "--max-message-bytes", "65536")
    try:
        async def go() -> Tuple[Optional[int], Dict[str, Any]]:
            code = None
            async with websockets.connect(a.ws, max_size=None) as big:
                try:
                    await big.send("x" * 100000)
                    await asyncio.wait_for(big.recv(), timeout=120)
                except websockets.ConnectionClosed as e:
                    code = e.code
            async with websockets.connect(a.ws) as conn:
                return code, await WSClient(conn).state()

        code, state = run(go())
        assert code == 1009, code  # "message too big"
        assert state["type"] == "state"
        status, err = http("POST", a.url + "/reset", b" " * 100000)
        assert status == 422 and "limit" in err["detail"][0]["message"], err
    finally:
        a.stop()


def test_http_endpoints_as_openenv_serves_them(adapter: Adapter) -> None:
    status, health = http("GET", adapter.url + "/health")
    assert status == 200 and health == {"status": "healthy"}
    status, state = http("GET", adapter.url + "/state")
    assert status == 200 and state == {"episode_id": None, "step_count": 0}
    status, schema = http("GET", adapter.url + "/schema")
    assert status == 200 and set(schema) == {"action", "observation", "state"}
    assert "stop_reason" in schema["observation"]["properties"]
    # /reset: a first observation.
    status, first = http("POST", adapter.url + "/reset", json.dumps({"task_id": "example/affine_relu6"}).encode())
    assert status == 200 and first["done"] is False and first["observation"]["messages"], first
    # /step: a one-step episode, a single submit scored.
    body = {"task": affine_task(), "seed": 5,
            "action": {"tool": "submit", "arguments": {"source": source(AFFINE / "cpu" / "fast.cpp")}}}
    status, scored = http("POST", adapter.url + "/step", json.dumps(body).encode())
    assert status == 200 and scored["done"] is True and scored["reward"] > 0, scored
    assert scored["observation"]["stop_reason"] == "submitted"
    # Bad bodies: 422 naming the field; an oversized body is refused unread.
    status, err = http("POST", adapter.url + "/step", json.dumps({"task": affine_task()}).encode())
    assert status == 422 and err["detail"][0]["field"] == "body/action"
    assert err["detail"][0]["loc"] == ["body", "action"] and err["detail"][0]["msg"]  # FastAPI's shape, as OpenEnv's
    status, err = http("POST", adapter.url + "/reset", json.dumps({"task_id": 7}).encode())
    assert status == 422 and err["detail"][0]["field"] == "data/task_id"
    status, err = http("POST", adapter.url + "/reset", b"\xff\xfe garbage")
    assert status == 422 and err["detail"][0]["code"] == "INVALID_JSON"
    # HTTP has no session: a step names its task, none is picked for it.
    body = {"action": {"tool": "submit", "arguments": {"source": "x"}}}
    status, err = http("POST", adapter.url + "/step", json.dumps(body).encode())
    assert status == 422 and err["detail"][0]["field"] == "body/task_id", err


def test_capacity_and_the_idle_timeout_free_slots(kforge_server: Any) -> None:
    a = Adapter(kforge_server.endpoint, "--max-sessions", "1", "--session-timeout", "1")
    try:
        async def go() -> Tuple[Dict[str, Any], Dict[str, Any], Optional[int], Dict[str, Any]]:
            # A half-open session: the handshake, then silence.
            host, port = a.url.split("//")[1].split(":")
            raw = socket.create_connection((host, int(port)))
            raw.sendall(f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
            assert b"101" in raw.recv(4096).split(b"\r\n")[0]
            # Wait until the adapter holds it, then a second session is refused.
            deadline = time.monotonic() + 120
            while http("GET", a.url + "/metadata")[1]["active_sessions"] < 1:
                assert time.monotonic() < deadline, "the half-open session never registered"
                await asyncio.sleep(0.05)
            async with websockets.connect(a.ws) as second:
                refused = json.loads(await second.recv())
                try:
                    await second.recv()
                    closed = None
                except websockets.ConnectionClosed as e:
                    closed = e.code
            # The silent session is reaped (one second idle), its slot freed.
            while http("GET", a.url + "/metadata")[1]["active_sessions"] > 0:
                assert time.monotonic() < deadline, "the idle session was never reaped"
                await asyncio.sleep(0.05)
            raw.close()
            async with websockets.connect(a.ws) as third:
                c = WSClient(third)
                first = await c.reset(task_id="example/affine_relu6")
            return refused, first, closed, http("GET", a.url + "/metadata")[1]

        refused, first, closed, meta = run(go())
        assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED", refused
        assert refused["data"]["max_sessions"] == 1
        assert closed == 1013
        assert first["type"] == "observation"
        assert meta["max_sessions"] == 1
    finally:
        a.stop()


def test_parse_message_bounds_size_and_depth() -> None:
    from kforge.openenv.server import RequestError, parse_message, tool_call_of

    with pytest.raises(RequestError, match="limit"):
        parse_message("{}" + " " * 100, 50)
    with pytest.raises(RequestError, match="deeper"):
        parse_message('{"a":' * 70 + "1" + "}" * 70, 1 << 20)
    with pytest.raises(RequestError, match="object"):
        parse_message("[1, 2]", 1 << 20)
    for garbage in (b"\x00\x01", b"\xc1", "nan-ish", "{" * 5000):
        with pytest.raises(RequestError):
            parse_message(garbage, 1 << 20)
    assert tool_call_of({"tool": "submit", "arguments": {"source": "x"}}) == {
        "tool_call": {"name": "submit", "arguments": {"source": "x"}}}
    assert tool_call_of({"action": {"type": "verify"}, "metadata": {}}) == {"action": {"type": "verify"}}
    assert tool_call_of({"end": "turn_limit"}) == {"end": "turn_limit"}
    with pytest.raises(RequestError, match="policy_stopped"):
        tool_call_of({"end": "bored"})


def test_mcp_and_http_error_shapes() -> None:
    from kforge.openenv.mcp import mcp_tools, read_jsonrpc
    from kforge.openenv.server import RequestError, http_error_detail

    tools = mcp_tools([{"type": "function", "function": {"name": "submit", "description": "d",
                                                         "parameters": {"type": "object"}}}])
    assert tools[0] == {"name": "submit", "description": "d", "input_schema": {"type": "object"}}
    assert [t["name"] for t in tools[1:]] == ["start_episode", "end_episode"]
    assert read_jsonrpc({"jsonrpc": "2.0", "method": "tools/list", "id": 3}) == {
        "method": "tools/list", "params": {}, "id": 3}
    for bad in ({}, {"jsonrpc": "1.0", "method": "x"}, {"jsonrpc": "2.0", "method": "x", "id": [1]},
                {"jsonrpc": "2.0", "method": "x", "params": [1]}):
        with pytest.raises(RequestError):
            read_jsonrpc(bad)
    detail = http_error_detail({"message": "m", "code": "VALIDATION_ERROR", "field": "body/action"})
    assert detail == [{"loc": ["body", "action"], "msg": "m", "type": "validation_error", "message": "m",
                       "code": "VALIDATION_ERROR", "field": "body/action"}]


def test_the_manifests_app_is_built_from_the_environment(kforge_server: Any, monkeypatch: Any) -> None:
    # openenv.yaml: `app: kforge.openenv.server:app`, configured by variables.
    import importlib

    manifest = (PYTHON_DIR / "openenv.yaml").read_text()
    assert "app: kforge.openenv.server:app" in manifest and "spec_version: 1" in manifest
    monkeypatch.setenv("KFORGE_ENDPOINT", kforge_server.endpoint)
    monkeypatch.setenv("KFORGE_OPENENV_MAX_SESSIONS", "3")
    module = importlib.import_module("kforge.openenv.server")
    module.__dict__.pop("app", None)
    app = module.app
    paths = {getattr(r, "path", None) for r in app.routes}
    assert {"/ws", "/reset", "/step", "/state", "/health", "/metadata", "/schema", "/mcp"} <= paths
    assert app.state.max_sessions == 3 and "example/affine_relu6" in app.state.task_ids
    module.__dict__.pop("app", None)
    monkeypatch.delenv("KFORGE_ENDPOINT")
    with pytest.raises(RuntimeError, match="KFORGE_ENDPOINT"):
        module.__getattr__("app")
