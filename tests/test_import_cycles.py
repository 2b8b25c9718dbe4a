"""No import cycle anywhere in hostd, counting imports inside functions.

Every module's imports are read with ``ast`` (module level, inside functions and
under ``TYPE_CHECKING`` alike) and resolved to hostd modules: ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``; a
relative import is resolved from the importing module's package. A package's
``__init__`` is the package's own node, and importing a submodule is an edge to
that submodule only (its parent package runs first, but it is not what the
importer depends on). Any strongly connected group of more than one module, or
a module importing itself, fails the test with the cycle spelled out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTD = ROOT / "hostd"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(HOSTD.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = importer.split(".")
    if not _is_package(importer):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(name: str) -> set[str]:
    """The hostd modules ``name`` imports, wherever in it the import statement is."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(name, node)
            if module is None:
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                targets.append(sub if sub in MODULES else module)
        for target in targets:
            while target and target not in MODULES:  # import a.b.c of a non-module c
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one member (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_hostd_has_no_import_cycle() -> None:
    graph = {name: imports_of(name) for name in MODULES}
    assert _cycles(graph) == []


def test_the_walker_sees_function_local_and_relative_imports() -> None:
    # Guard against a walker that silently finds nothing: config imports the transport
    # inside a validator; the provider package's __init__ imports _http inside run_http.
    assert "hostd.transport" in imports_of("hostd.config")
    assert "hostd.provider._http" in imports_of("hostd.provider")
    assert "hostd.transport.bindings._codec" in imports_of("hostd.transport.bindings._cgp")
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"c"}}) == [["a", "b"], ["c"]]
