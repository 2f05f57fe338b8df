"""Fixtures: a real ``kforge serve`` (CPU backend) on a free loopback port.

ctest passes the built binary in $KFORGE_BIN and a shared compile cache in
$KFORGE_CACHE_DIR (trainer_bridge/CMakeLists.txt).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PYTHON_DIR))

from kforge import LocalServer  # noqa: E402

REPO = PYTHON_DIR.parents[1]
DATA = Path(__file__).resolve().parent / "data"
GYM_DATA = REPO / "tests" / "gym" / "data"
EXAMPLES = REPO / "examples"
HANG = REPO / "tests" / "server" / "data" / "hang.cpp"


def kforge_bin() -> str:
    path = os.environ.get("KFORGE_BIN") or str(REPO / "build" / "default" / "cli" / "kforge")
    if not Path(path).is_file():
        pytest.fail(f"the kforge binary {path} does not exist; build it, or set KFORGE_BIN")
    return path


def start_server(*extra: str, envs: int = 6) -> LocalServer:
    args = ["--config", str(DATA / "server.yaml"), "--envs", str(envs), *extra]
    return LocalServer(kforge_bin(), args=args).start()


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """One server per test module, with the examples as its task set."""
    s = start_server("--tasks", str(EXAMPLES))
    yield s
    code = s.stop()
    assert code == 0, "\n".join(s.log_lines[-30:])


@pytest.fixture
def fresh_server() -> Iterator[LocalServer]:
    """A server of one env, for tests that stop or starve it."""
    s = start_server(envs=1)
    yield s
    s.kill()


def read_json(path: Path) -> Dict[str, Any]:
    return json.loads(path.read_text())


def small_task() -> Dict[str, Any]:
    """A 64x32 task: fast to verify; too small to time reliably."""
    return read_json(GYM_DATA / "scale_bias_relu.json")


def medium_task() -> Dict[str, Any]:
    """The same at 1024x1024: a call takes a fraction of a millisecond, well
    above the harness's per-call overhead, so correct solutions earn their
    speed reward reliably; tests that expect reward > 0 use it."""
    return read_json(REPO / "tests" / "server" / "data" / "medium_task.json")


def affine_task() -> Dict[str, Any]:
    """examples/affine_relu6 with smaller shapes (its own take seconds to
    verify on a CPU); its solutions read the shapes from the ABI."""
    task = read_json(EXAMPLES / "affine_relu6" / "task.json")
    task["inputs"][0]["shape"] = [1024, 1024]
    task["shape_variants"] = [{"x": [100, 1024]}]
    return task


def tool_call(name: str, call_id: str = "call_0", **arguments: Any) -> Dict[str, Any]:
    """An OpenAI chat-completions tool call, arguments as a JSON string."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def source(path: Path) -> str:
    return path.read_text()


def tool_names(tools: List[Dict[str, Any]]) -> List[str]:
    return [t["function"]["name"] for t in tools]


SMALL_AFFINE_ID = "test/affine_small"


@pytest.fixture(scope="module")
def small_task_server(tmp_path_factory: Any) -> Iterator[LocalServer]:
    """A server whose task set is examples/affine_relu6 at the small shapes of
    affine_task() (id SMALL_AFFINE_ID): adapters that reset by task id run
    quick episodes on it."""
    tasks = tmp_path_factory.mktemp("tasks")
    task = affine_task()
    task["id"] = SMALL_AFFINE_ID
    (tasks / "affine_small").mkdir()
    (tasks / "affine_small" / "task.json").write_text(json.dumps(task))
    s = start_server("--tasks", str(tasks), envs=4)
    yield s
    code = s.stop()
    assert code == 0, "\n".join(s.log_lines[-30:])
