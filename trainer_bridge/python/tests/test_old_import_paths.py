"""The flat module names of before the subpackages still import, as the very
same modules (docs/python.md, "The package's layout").

Trainers' configs name dotted paths (verl's agent loop ``_target_``, TRL's
``environment_factory``, OpenEnv's ``app: kforge.openenv_server:app``), so an
old path must give the same module, and so the same classes, not a copy:
a copy would register verl's agent loop twice and make isinstance checks
disagree. Everything runs for real: imports in this process, and in fresh
interpreters where the old path is imported first, and ``python3 -m`` of
both server paths as child processes.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from typing import Dict, List

import pytest

from conftest import PYTHON_DIR

# Every old module name and the module that replaced it.
MOVED: Dict[str, str] = {
    "kforge.stream_curve": "kforge.stream.curve",
    "kforge.stream_delivery": "kforge.stream.delivery",
    "kforge.stream_io": "kforge.stream.io",
    "kforge.stream_protocol": "kforge.stream.protocol",
    "kforge.stream_state": "kforge.stream.state",
    "kforge.openenv_mcp": "kforge.openenv.mcp",
    "kforge.openenv_registry": "kforge.openenv.registry",
    "kforge.openenv_server": "kforge.openenv.server",
    "kforge.openenv_session": "kforge.openenv.session",
    "kforge.openenv_wire": "kforge.openenv.wire",
    "kforge.openenv_ws": "kforge.openenv.ws",
    "kforge.trl_env": "kforge.trainers.trl",
    "kforge.verl_agent_loop": "kforge.trainers.verl",
}

# kforge.stream was one module; it is now the package. Every name that was
# imported from it (what it defined and what it re-exported) and where that
# name lives now.
OLD_STREAM_NAMES: Dict[str, str] = {
    "TrajectoryStream": "kforge.stream.receiver",
    "ACK_MODES": "kforge.stream.receiver",
    "_log": "kforge.stream.receiver",
    "Batch": "kforge.stream.delivery",
    "Delivery": "kforge.stream.delivery",
    "Key": "kforge.stream.delivery",
    "_key_of": "kforge.stream.delivery",
    "StreamIO": "kforge.stream.io",
    "_Session": "kforge.stream.io",
    "ReceiverState": "kforge.stream.state",
    "_ZAP_DOMAIN": "kforge.stream.curve",
    "_curve_key": "kforge.stream.curve",
    "_is_local": "kforge.stream.curve",
}

# The modules that stay at the top of the package.
CORE = {"__init__", "client", "env", "errors", "export", "policy_server", "pool", "protocol", "server", "step_info"}


@pytest.mark.parametrize("old,new", sorted(MOVED.items()))
def test_an_old_module_name_is_the_new_module(old: str, new: str) -> None:
    moved = importlib.import_module(new)
    assert importlib.import_module(old) is moved
    assert sys.modules[old] is moved
    # `from kforge import stream_io` reads the package's attribute.
    parent, _, child = old.rpartition(".")
    assert getattr(importlib.import_module(parent), child) is moved


def test_the_trainers_classes_are_one_class_under_both_paths() -> None:
    import kforge.trainers.trl
    import kforge.trainers.verl
    import kforge.trl_env
    import kforge.verl_agent_loop
    from kforge.trl_env import KForgeToolEnv
    from kforge.verl_agent_loop import KForgeAgentLoop, parse_tool_call

    assert KForgeToolEnv is kforge.trainers.trl.KForgeToolEnv
    assert kforge.trl_env.KForgeToolEnv is kforge.trainers.trl.KForgeToolEnv
    assert KForgeAgentLoop is kforge.trainers.verl.KForgeAgentLoop
    assert kforge.verl_agent_loop.KForgeAgentLoop is kforge.trainers.verl.KForgeAgentLoop
    assert parse_tool_call is kforge.trainers.verl.parse_tool_call


def test_the_openenv_servers_app_and_names_are_shared() -> None:
    import kforge.openenv.server
    import kforge.openenv.wire
    from kforge.openenv_server import RequestError, create_app, main, parse_message

    assert main is kforge.openenv.server.main and create_app is kforge.openenv.server.create_app
    assert RequestError is kforge.openenv.wire.RequestError and parse_message is kforge.openenv.wire.parse_message
    # `kforge.openenv_server:app` is resolved by the module's __getattr__,
    # which a re-export by name would have lost.
    assert importlib.import_module("kforge.openenv_server").__getattr__ is kforge.openenv.server.__getattr__


@pytest.mark.parametrize("name,home", sorted(OLD_STREAM_NAMES.items()))
def test_what_kforge_stream_exported_still_imports_from_it(name: str, home: str) -> None:
    package = importlib.import_module("kforge.stream")
    assert getattr(package, name) is getattr(importlib.import_module(home), name)


def test_kforge_stream_proto_is_the_protocol_module() -> None:
    import kforge
    from kforge.stream import TrajectoryStream, proto

    assert proto is importlib.import_module("kforge.stream.protocol")
    assert TrajectoryStream is kforge.TrajectoryStream


def test_every_top_level_module_is_core_or_an_alias() -> None:
    # A module added at the top, or an alias that is missing, shows up here.
    top = {p.stem for p in (PYTHON_DIR / "kforge").glob("*.py")}
    aliases = {old.split(".", 1)[1] for old in MOVED}
    assert top == CORE | aliases


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_alias_module_holds_no_code_of_its_own(old: str) -> None:
    # Docstring, `import sys`, one import of the new module, the sys.modules
    # assignment (and for the server, running its main under -m): nothing that
    # could drift from the new module.
    path = PYTHON_DIR / (old.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    body = tree.body
    assert ast.get_docstring(tree) and MOVED[old] in ast.get_docstring(tree)
    kinds: List[str] = [type(node).__name__ for node in body[1:]]
    allowed = ["Import", "ImportFrom", "If", "Assign"] if old == "kforge.openenv_server" else \
        ["Import", "ImportFrom", "Assign"]
    assert kinds == allowed
    imported = body[2]
    assert isinstance(imported, ast.ImportFrom) and imported.level == 1
    assert f"kforge.{imported.module}.{imported.names[0].name}" == MOVED[old]
    assert ast.unparse(body[-1]) == "sys.modules[__name__] = _moved"
    assert len(path.read_text().splitlines()) <= 15


def run_python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=str(PYTHON_DIR), capture_output=True, text=True,
                          timeout=120)


def test_old_paths_imported_first_in_a_fresh_interpreter() -> None:
    # Here the old name is the first import of each module: the alias loads
    # the new module, then stands aside for it.
    script = (
        "import importlib, json, sys\n"
        f"moved = {MOVED!r}\n"
        "old = {o: importlib.import_module(o) for o in moved}\n"
        "print(json.dumps({o: old[o] is importlib.import_module(n) and old[o].__name__ == n\n"
        "                  for o, n in moved.items()}))\n"
    )
    done = run_python("-c", script)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {old: True for old in MOVED}


@pytest.mark.parametrize("module", ["kforge.openenv_server", "kforge.openenv.server"])
def test_the_openenv_server_runs_under_both_paths(module: str) -> None:
    done = run_python("-m", module, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python3 -m kforge.openenv.server")
    assert "--kforge-endpoint" in done.stdout and "--reply-deadline" in done.stdout
    # runpy warns when the module it runs was imported before (two copies of
    # it would then exist); neither path may do that.
    assert "RuntimeWarning" not in done.stderr, done.stderr


@pytest.mark.parametrize("module", ["kforge.openenv_server", "kforge.openenv.server"])
def test_the_openenv_server_rejects_bad_arguments_under_both_paths(module: str) -> None:
    # Its argument check runs too (main, not a bare import): neither or both
    # of --kforge-endpoint and --kforge-bin is an error that names them.
    done = run_python("-m", module, "--port", "0")
    assert done.returncode == 2
    assert "give one of --kforge-endpoint and --kforge-bin" in done.stderr
