"""kforge.openenv.server driven by OpenEnv's own client logic
(openenv_client.py, from meta-pytorch/OpenEnv at 685de41): steps longer than
the client's message timeout, the end rule, typed results of ended episodes,
idling past every timeout, MCP over /ws and POST /mcp, and `openenv
validate`'s criteria. A real `kforge serve` (CPU backend) and the adapter as
a child process."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict, Iterator, List

import pytest

# Debian packages that ./run installs: without one these tests fail, never skip.
import websockets  # noqa: F401
import fastapi  # noqa: F401

from conftest import EXAMPLES, HANG, affine_task, source, start_server


from openenv_client import (  # noqa: E402
    GenericEnvClient,
    MCPToolClient,
    ProductionMCPClient,
    get_json,
    post_json,
    validate_running_environment,
)
from test_openenv_server import Adapter  # noqa: E402

from kforge import RemoteEnv  # noqa: E402

AFFINE = EXAMPLES / "affine_relu6"
FAST, WRONG, HANG_SRC = source(AFFINE / "cpu" / "fast.cpp"), source(AFFINE / "cpu" / "wrong.cpp"), source(HANG)


@pytest.fixture(scope="module")
def kforge_server() -> Iterator[Any]:
    s = start_server("--tasks", str(EXAMPLES), "--reclaim-after", "1", envs=4)
    yield s
    assert s.stop() == 0, "\n".join(s.log_lines[-30:])


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def warm(endpoint: str) -> None:
    """The task's reference check and FAST's compile, cached by the kforge
    server: afterwards a reset and a compile of FAST answer in milliseconds,
    the hang.cpp verify still takes seconds (the runner's call timeout)."""
    with RemoteEnv(endpoint, timeout_s=600) as env:
        env.reset(task=affine_task(), seed=1)
        env.step({"name": "compile", "arguments": {"source": FAST}})


async def until_steps(c: GenericEnvClient, count: int) -> Dict[str, Any]:
    """Polls state (answered at once) until `count` steps have finished."""
    deadline = time.monotonic() + 300
    while True:
        state = await c.state()
        assert "observation" not in state, state
        if state["step_count"] >= count:
            return state
        assert time.monotonic() < deadline, state
        await asyncio.sleep(0.1)


def test_a_step_past_the_reply_deadline_is_answered_in_time_and_never_later(kforge_server: Any) -> None:
    warm(kforge_server.endpoint)
    a = Adapter(kforge_server.endpoint, "--reply-deadline", "1")
    try:
        async def go() -> List[Any]:
            c = await GenericEnvClient(a.ws, message_timeout_s=10).connect()
            await c.reset(task=affine_task(), seed=1)
            with pytest.raises(RuntimeError) as slow:  # hang.cpp: a step of seconds
                await c.step({"tool": "verify", "arguments": {"source": HANG_SRC}})
            state = await until_steps(c, 1)  # each state is a state, never the verify's observation
            compiled = await c.step({"tool": "compile", "arguments": {"source": FAST}})
            await c.close()
            return [str(slow.value), state, compiled]

        slow, state, compiled = run(go())
        assert "still_running" in slow or "still running" in slow, slow
        assert state["step_count"] == 1 and state["total_reward"] < 0, state  # the verify's effects, in the episode
        assert compiled["observation"]["data"]["action"] == "compile", compiled["observation"]["data"]
        assert compiled["observation"]["turn"] == 2
    finally:
        a.stop()


def test_a_client_that_stopped_waiting_never_gets_the_late_reply(kforge_server: Any) -> None:
    warm(kforge_server.endpoint)
    a = Adapter(kforge_server.endpoint, "--reply-deadline", "0")  # no deadline: the client times out first
    try:
        async def go() -> List[Any]:
            c = await GenericEnvClient(a.ws, message_timeout_s=600).connect()
            await c.reset(task=affine_task(), seed=1)
            c.message_timeout_s = 0.5
            with pytest.raises(asyncio.TimeoutError):
                await c.step({"tool": "verify", "arguments": {"source": HANG_SRC}})
            c.message_timeout_s = 600
            state = await until_steps(c, 1)
            compiled = await c.step({"tool": "compile", "arguments": {"source": FAST}})
            later = await c.state()
            await c.close()
            return [state, compiled, later]

        state, compiled, later = run(go())
        assert state["step_count"] == 1
        assert compiled["observation"]["data"]["action"] == "compile", compiled["observation"]["data"]
        assert later["step_count"] == 2 and "observation" not in later
    finally:
        a.stop()


def test_ending_an_episode_never_beats_a_failed_attempt_and_reports_the_scored_evaluation(kforge_server: Any) -> None:
    a = Adapter(kforge_server.endpoint)
    try:
        async def episode(actions: List[Dict[str, Any]], end: bool) -> Dict[str, Any]:
            c = await GenericEnvClient(a.ws, message_timeout_s=600).connect()
            await c.reset(task=affine_task(), seed=2)
            total, last = 0.0, {}
            for action in actions:
                last = await c.step(action)
                total += last["reward"]
            if end:
                last = await c.step({"end": "policy_stopped"})
                total += last["reward"]
            await c.close()
            return {"return": total, **last}

        async def all_of() -> List[Dict[str, Any]]:
            return [await episode([], True),
                    await episode([{"tool": "submit", "arguments": {"source": WRONG}}], False),
                    await episode([{"tool": "compile", "arguments": {"source": "not C++"}}], True),
                    await episode([{"tool": "compile", "arguments": {"source": FAST}}], True)]

        abstained, wrong, broken, kept = run(all_of())
        assert abstained["return"] <= wrong["return"] and abstained["return"] <= broken["return"], (
            abstained["return"], wrong["return"], broken["return"])
        o = kept["observation"]
        # The ended episode's fields describe its final evaluation, not the compile.
        assert kept["done"] is True and o["truncated"] is True and o["stop_reason"] == "policy_stopped"
        assert o["outcome"] == "correct" and o["correct"] is True and o["measurement"]["action"] == "submit", o
        assert kept["reward"] > 0 > wrong["reward"]
        assert abstained["observation"]["outcome"] == "not_run" and abstained["observation"]["correct"] is False
    finally:
        a.stop()


def test_sessions_idle_past_every_timeout_and_a_quiet_one_yields_its_slot(kforge_server: Any) -> None:
    a = Adapter(kforge_server.endpoint, "--max-sessions", "1", "--reclaim-after", "1")
    try:
        async def go() -> List[Any]:
            first = await GenericEnvClient(a.ws, message_timeout_s=600).connect()
            await first.reset(task=affine_task(), seed=1)
            await asyncio.sleep(2.5)  # past --reclaim-after here and of kforge serve; no session timeout
            survived = await first.step({"tool": "compile", "arguments": {"source": FAST}})
            await asyncio.sleep(1.5)
            # At capacity, a new session takes the quiet one's slot.
            second = await GenericEnvClient(a.ws, message_timeout_s=600).connect()
            started = await second.reset(task=affine_task(), seed=2)
            with pytest.raises(Exception):
                await first.step({"tool": "compile", "arguments": {"source": FAST}})
            await second.close()
            return [survived, started]

        survived, started = run(go())
        assert survived["observation"]["data"]["compile"]["ok"] is True
        assert started["observation"]["messages"]
    finally:
        a.stop()


def test_mcp_tools_through_steps_and_the_websocket_mcp_message(kforge_server: Any) -> None:
    a = Adapter(kforge_server.endpoint)
    try:
        async def go() -> List[Any]:
            c = await MCPToolClient(a.ws, message_timeout_s=600).connect()
            tools = await c.list_tools()  # no reset needed
            prompt = await c.call_tool("start_episode", task_id="example/affine_relu6", seed=3)
            await c.reset(task=affine_task(), seed=3)  # OpenEnv's reset works as well
            compiled = await c.call_tool("compile", source=FAST)
            submitted = await c.call_tool("submit", source=FAST)
            with pytest.raises(RuntimeError, match="Tool 'submit' failed"):
                await c.call_tool("submit", source=FAST)
            await c.ws.send('{"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 7}}')
            raw = await c.ws.recv()
            await c.close()
            # The WebSocket /mcp: raw JSON-RPC, a session per connection.
            async with websockets.connect(a.ws[: -len("/ws")] + "/mcp") as m:
                answers = []
                for i, (name, args) in enumerate([("start_episode", {"task_id": "example/affine_relu6"}),
                                                  ("compile", {"source": FAST})]):
                    await m.send(json.dumps({"jsonrpc": "2.0", "method": "tools/call", "id": i,
                                             "params": {"name": name, "arguments": args}}))
                    answers.append(json.loads(await m.recv()))
            return [tools, prompt, compiled, submitted, raw, answers]

        tools, prompt, compiled, submitted, raw, answers = run(go())
        assert [a["id"] for a in answers] == [0, 1] and "error" not in answers[1], answers[1]
        assert answers[1]["result"]["data"]["observation"]["data"]["compile"]["ok"] is True
        names = {t["name"] for t in tools}
        assert {"compile", "verify", "profile", "submit", "start_episode", "end_episode"} <= names
        assert all(t["input_schema"].get("type") == "object" for t in tools)
        assert prompt["observation"]["task_id"] == "example/affine_relu6" and prompt["observation"]["messages"]
        assert compiled["observation"]["data"]["compile"]["ok"] is True and compiled["done"] is False
        assert submitted["done"] is True and submitted["reward"] > 0 and submitted["observation"]["correct"] is True
        reply = json.loads(raw)
        assert reply["type"] == "mcp" and reply["data"]["jsonrpc"] == "2.0" and reply["data"]["id"] == 7
        assert {t["name"] for t in reply["data"]["result"]["tools"]} == names
    finally:
        a.stop()


def test_production_mcp_over_http_and_openenv_validate(kforge_server: Any) -> None:
    a = Adapter(kforge_server.endpoint)
    try:
        criteria = validate_running_environment(a.url)
        assert all(criteria.values()), criteria
        client = ProductionMCPClient(a.url)
        names = {t["name"] for t in client.list_tools()}
        assert {"compile", "submit", "start_episode"} <= names
        with pytest.raises(RuntimeError, match="reset first|no episode"):
            client.call_tool("compile", source=FAST)
        client.call_tool("start_episode", task_id="example/affine_relu6", seed=4)
        ended = client.call_tool("end_episode", reason="context_length")
        assert ended["done"] is True and ended["observation"]["stop_reason"] == "context_length"
        session = client.session_id
        client.close()
        status, gone = post_json(a.url + "/mcp", {"jsonrpc": "2.0", "method": "tools/list",
                                                  "params": {"session_id": session}, "id": 1})
        assert status == 200 and gone["error"]["code"] == -32602, gone
        status, unknown = post_json(a.url + "/mcp", {"jsonrpc": "2.0", "method": "resources/list", "id": 2})
        assert unknown["error"]["code"] == -32601
        assert get_json(a.url + "/openapi.json")[1]["info"]["version"] == "1.0.0"
        # Sessions of HTTP MCP count: all closed now.
        deadline = time.monotonic() + 60
        while get_json(a.url + "/metadata")[1]["active_sessions"] > 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        a.stop()
