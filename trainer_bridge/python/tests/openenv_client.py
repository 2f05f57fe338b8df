"""OpenEnv's clients as their source makes them (meta-pytorch/OpenEnv at
685de41): ``env_client.py`` (EnvClient: one WebSocket to /ws, one message
out, the next message in as its answer, within ``message_timeout_s``;
``{"type": "error"}`` raised as RuntimeError), ``generic_client.py``
(GenericEnvClient: actions and results as dicts), ``mcp_client.py``
(MCPToolClient: ``list_tools`` and ``call_tool`` as steps, or JSON-RPC to
``POST /mcp`` in production mode) and ``cli/_validation.py``
(``validate_running_environment``'s criteria). Rewritten here from those
facts, on Debian's websockets and urllib (OpenEnv is not packaged)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

import websockets


class GenericEnvClient:
    def __init__(self, ws_url: str, message_timeout_s: float = 60.0) -> None:
        self.ws_url = ws_url
        self.message_timeout_s = message_timeout_s
        self.ws: Any = None

    async def connect(self) -> "GenericEnvClient":
        self.ws = await websockets.connect(self.ws_url, max_size=100 << 20)
        return self

    async def close(self) -> None:
        try:
            await self.ws.send(json.dumps({"type": "close"}))
        except Exception:  # noqa: BLE001 (best effort, as OpenEnv's)
            pass
        await self.ws.close()

    async def _send_and_receive(self, message: Dict[str, Any]) -> Dict[str, Any]:
        await self.ws.send(json.dumps(message))
        response = json.loads(await asyncio.wait_for(self.ws.recv(), timeout=self.message_timeout_s))
        if response.get("type") == "error":
            data = response.get("data", {})
            raise RuntimeError(f"Server error: {data.get('message', 'Unknown error')} "
                               f"(code: {data.get('code', 'UNKNOWN')})")
        return response

    async def reset(self, **kwargs: Any) -> Dict[str, Any]:
        return (await self._send_and_receive({"type": "reset", "data": kwargs})).get("data", {})

    async def step(self, action: Dict[str, Any]) -> Dict[str, Any]:
        return (await self._send_and_receive({"type": "step", "data": action})).get("data", {})

    async def state(self) -> Dict[str, Any]:
        return (await self._send_and_receive({"type": "state"})).get("data", {})


class MCPToolClient(GenericEnvClient):
    """Simulation mode (the default): tools through steps on /ws."""

    async def list_tools(self) -> List[Dict[str, Any]]:
        obs = (await self.step({"type": "list_tools"})).get("observation", {})
        if "tools" not in obs:
            return []
        return [{"name": t.get("name", ""), "description": t.get("description", ""),
                 "input_schema": t.get("input_schema", t.get("inputSchema", {}))} for t in obs["tools"]]

    async def call_tool(self, name: str, **kwargs: Any) -> Any:
        obs = (await self.step({"type": "call_tool", "tool_name": name, "arguments": kwargs})).get("observation", {})
        if "tools" in obs or "tool_name" not in obs:
            return obs
        if obs.get("error"):
            raise RuntimeError(f"Tool '{name}' failed: {obs['error']['message']} (type: {obs['error']['error_type']})")
        result = obs.get("result")
        if isinstance(result, dict) and "data" in result:
            return result["data"]
        return result


def post_json(url: str, body: Any, timeout: float = 600.0) -> Tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get_json(url: str, timeout: float = 60.0) -> Tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class ProductionMCPClient:
    """MCPToolClient with use_production_mode: JSON-RPC to POST /mcp, one
    session created with openenv/session/create."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url.rstrip("/") + "/mcp"
        self.next_id = 0
        self.session_id: Optional[str] = None

    def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        self.next_id += 1
        status, data = post_json(self.url, {"jsonrpc": "2.0", "method": method, "params": params or {},
                                            "id": self.next_id})
        assert status == 200, (status, data)  # raise_for_status
        return data

    def ensure_session(self) -> str:
        if self.session_id is None:
            data = self.request("openenv/session/create")
            if "error" in data:
                raise RuntimeError(f"Failed to create MCP session: {data['error'].get('message')}")
            self.session_id = data["result"]["session_id"]
        return self.session_id

    def list_tools(self) -> List[Dict[str, Any]]:
        data = self.request("tools/list", {"session_id": self.ensure_session()})
        if "error" in data:
            raise RuntimeError(f"list_tools failed: {data['error'].get('message')}")
        return [{"name": t.get("name", ""), "input_schema": t.get("input_schema", t.get("inputSchema", {}))}
                for t in data["result"]["tools"]]

    def call_tool(self, name: str, **kwargs: Any) -> Any:
        data = self.request("tools/call", {"name": name, "arguments": kwargs, "session_id": self.ensure_session()})
        if "error" in data:
            raise RuntimeError(f"Tool '{name}' failed: {data['error'].get('message')}")
        result = data.get("result")
        return result["data"] if isinstance(result, dict) and "data" in result else result

    def close(self) -> None:
        if self.session_id is not None:
            self.request("openenv/session/close", {"session_id": self.session_id})
            self.session_id = None


def validate_running_environment(base_url: str) -> Dict[str, bool]:
    """The criteria of `openenv validate --url`, each passed or not."""
    out: Dict[str, bool] = {}
    status, openapi = get_json(base_url + "/openapi.json")
    version = (openapi.get("info") or {}).get("version") if isinstance(openapi, dict) else None
    out["openapi_version_available"] = status == 200 and isinstance(version, str)
    out["standard_profile_1x"] = isinstance(version, str) and version.startswith("1.")
    status, health = get_json(base_url + "/health")
    out["health_endpoint"] = status == 200 and health.get("status") == "healthy"
    status, meta = get_json(base_url + "/metadata")
    out["metadata_endpoint"] = status == 200 and isinstance(meta.get("name"), str) and isinstance(
        meta.get("description"), str)
    status, schema = get_json(base_url + "/schema")
    out["schema_endpoint"] = status == 200 and all(isinstance(schema.get(k), dict)
                                                   for k in ("action", "observation", "state"))
    status, mcp = post_json(base_url + "/mcp", {})
    out["mcp_endpoint"] = status == 200 and isinstance(mcp, dict) and mcp.get("jsonrpc") == "2.0"
    paths = openapi.get("paths", {}) if isinstance(openapi, dict) else {}
    out["mode_endpoint_consistency"] = all(p in paths for p in ("/reset", "/step", "/state"))
    return out
