"""The compose package re-exports ranking as it is, and its imports stay pure."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import hostd.compose as compose
import hostd.compose.ranking as ranking

PKG = Path(compose.__file__).resolve().parent

# A pure library: the protocol models, the error tree and the standard library's
# pure parts. Nothing that does I/O, nothing from the engine, transport or server.
# ``hostd._param_words`` is the error tree's wording of a refused param (the standard
# library's ``json`` and ``typing`` only), which the tree itself imports.
ALLOWED_HOSTD = {"hostd.protocol", "hostd.errors", "hostd._param_words"}
FORBIDDEN_STDLIB = {
    "asyncio",
    "anyio",
    "io",
    "os",
    "pathlib",
    "shutil",
    "socket",
    "sqlite3",
    "subprocess",
    "threading",
    "time",
    "structlog",
    "logging",
}


def test_the_package_reexports_ranking_as_it_is() -> None:
    # (``__all__`` both ways, for every public module: tests/test_public_surface.py.)
    for name in ranking.__all__:
        assert getattr(compose, name) is getattr(ranking, name)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_compose_imports_only_the_protocol_the_error_tree_and_pure_stdlib() -> None:
    bad = []
    for path in sorted(PKG.glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "hostd" and name not in ALLOWED_HOSTD:
                bad.append(f"{path.name}: {name}")
            elif top in FORBIDDEN_STDLIB:
                bad.append(f"{path.name}: {name}")
            elif (
                top not in {"hostd", "__future__", "orjson"} and top not in sys.stdlib_module_names
            ):
                # third-party: only pydantic types arrive, through hostd.protocol; orjson
                # is hostd's one JSON library (pure, no I/O)
                bad.append(f"{path.name}: {name}")
    assert bad == []


def test_the_precomputed_key_is_the_frame_id_tuple() -> None:
    from hostd.protocol import FrameId

    from ._helpers import frame

    for f in (frame("x", digest="sha256:" + "a" * 64), frame("x")):
        assert compose.frame_sort_key("p", f) == FrameId.of("p", f)
        assert compose.CandidateSet.of([("p", f)]).key(0) == FrameId.of("p", f)
