"""docs/pipeline.md's traced path names functions that exist: a rename or a removal
that leaves the list stale fails here (regenerate it with scripts/trace_path.py)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "pipeline.md"
_ROW = re.compile(r"^\| (\d+) \| `([\w.]+):([\w.<>]+)` \| `([^`]+)` \| (\w+) \| ([^|]+) \|$")
#: Code objects a function makes inside itself: they exist when their parent does.
_INNER = {"<lambda>", "<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>"}


def _rows() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            rows.append((m.group(2), m.group(3), m.group(4), m.group(5)))
    return rows


def _defined(tree: ast.AST, parts: list[str]) -> bool:
    """Whether ``parts`` (a qualname split on dots, ``<locals>`` dropped) is a chain of
    class and function definitions in ``tree``."""
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if head in _INNER:
        return not rest
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == head
            and _defined(node, rest)
        ):
            return True
        # A dataclass's generated __init__: the class is there, and a dataclass.
        if (
            rest == []
            and head == "__init__"
            and isinstance(tree, ast.ClassDef)
            and any("dataclass" in ast.unparse(d) for d in tree.decorator_list)
        ):
            return True
    return False


def test_the_doc_lists_the_traced_path() -> None:
    rows = _rows()
    assert len(rows) >= 20, "docs/pipeline.md lost its traced-path table"
    packages = {package for _, _, _, package in rows}
    assert {"server", "rpc", "pipeline", "engine", "transport", "compose"} <= packages
    # the reranker stage is on the traced path
    assert any("Rerank" in qualname for _, qualname, _, _ in rows)


@pytest.mark.parametrize(("module", "qualname", "file", "package"), _rows())
def test_every_function_on_the_traced_path_exists(
    module: str, qualname: str, file: str, package: str
) -> None:
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    if module.split(".")[0] == "hostd":
        path = ROOT / file
        assert path.is_file(), f"{module}: {file} is gone"
        assert importlib.util.find_spec(module) is not None, module
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert _defined(tree, parts), f"{module}:{qualname} is not defined in {file}"
        return
    # A library's entry: its module imports and names the function's outermost part.
    mod = importlib.import_module(module)
    assert hasattr(mod, parts[0]), f"{module} has no {parts[0]}"


@pytest.mark.timeout(300)
def test_the_tracer_still_traces_a_composition() -> None:
    """scripts/trace_path.py keeps running: one real composition traced, the reranker's
    stage on its path, every hop in a package other than its caller's."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "trace_path.py")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,  # a hang guard
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["strategy"] == "rerank"
    assert out["hops"] == len(out["path"]) and out["functions"] >= out["hops"]
    names = {hop["hop"] for hop in out["path"]}
    # The reranker's stage: one engine call for a verdict, then its process asked.
    assert "hostd.engine._rerank:rerank_order" in names
    assert "hostd.transport.process._client:PipeClient.start_call" in names
    assert "hostd.pipeline._pipeline:Pipeline.compose" in names
    assert out["crossings"] == sum(out["pairs"].values())
    # Read without a call out of hostd: a child's exit code (its exit watcher's), a count.
    assert "anyio._backends._asyncio:Process.returncode" not in names
    assert "collections:Counter.__init__" not in names
    # One engine clock: anyio's time read by one engine function, not by each caller.
    readers = [c for c in out["crossing_calls"] if c.endswith("._eventloop:current_time")]
    assert len([c for c in readers if c.startswith("hostd.engine.")]) <= 1, readers
    # A request's log scope: its id set in its own task (no call into the log, nor into
    # structlog, at its start); the one call into the log is its end (request.done).
    assert not any(name.startswith("structlog.") for name in names), names
    assert {name for name in names if name.startswith("hostd.logs:")} == {"hostd.logs:end_request"}
    # A socket's wait is one library entry: the call and the coroutine it returns.
    assert (
        not {
            "anyio._core._sockets:wait_readable",
            "anyio._backends._asyncio:AsyncIOBackend.wait_readable",
        }
        <= names
    )
