"""kforge.openenv: an OpenEnv-compatible server in front of ``kforge serve``.

    python3 -m kforge.openenv.server --kforge-endpoint tcp://127.0.0.1:5555 --port 8000

or ``kforge.openenv.server:app`` for OpenEnv's tooling (openenv.yaml). Its
parts, a module each:

    server.py    the FastAPI app, its routes and the command line
    ws.py        one WebSocket session: messages in, answers within the deadline
    session.py   one OpenEnv session: an env of kforge serve
    registry.py  the sessions' slots, reclaiming and idle timeout
    wire.py      OpenEnv's wire format: bounded JSON, observations, schemas
    mcp.py       OpenEnv's MCP tool interface (JSON-RPC)

Nothing is imported here: ``python3 -m kforge.openenv.server`` runs the
server module as __main__, which must not have been imported before.
docs/trainers/openenv.md.
"""
