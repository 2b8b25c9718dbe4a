"""Layering and public surfaces: transport sees only protocol/errors; engine takes only
``budget_split`` from compose (``__all__``: tests/test_public_surface.py)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def hostd_imports(package: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / package.replace(".", "/")).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("hostd"):
                    found.add(node.module)
                    if node.module == "hostd.compose":
                        found.update(f"hostd.compose:{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("hostd"))
    return found


def test_transport_imports_only_protocol_and_errors() -> None:
    # hostd.rpc: the one JSON-RPC core; _teardown/_reaper: the one teardown ladder;
    # _log: the one logger factory; _hints: where advice to a user is worded (a leaf
    # that imports nothing of hostd); _printable: text made safe to print, another such
    # leaf, which the CLI uses without loading the transport.
    allowed = {
        "hostd.protocol",
        "hostd.errors",
        "hostd.rpc",
        "hostd._teardown",
        "hostd._reaper",
        "hostd._log",
        "hostd._hints",
        "hostd._printable",
    }
    assert hostd_imports("hostd.transport") <= allowed


def _module_imports(path: Path) -> set[str]:
    """The modules ``path`` imports from, relative ones resolved inside ``hostd.provider``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(f"hostd.provider.{node.module}" if node.level == 1 else node.module)
    return {m for m in found if m.startswith("hostd")}


def test_the_provider_runtime_imports_only_protocol() -> None:
    # hostd.rpc is the shared JSON-RPC dispatcher; it imports only protocol and errors.
    # _warmup is the runtime's readiness record, under the same rule.
    assert _module_imports(ROOT / "hostd/provider/_runtime.py") == {
        "hostd.protocol",
        "hostd.errors",
        "hostd.rpc",
        "hostd.provider._warmup",
    }
    used = _module_imports(ROOT / "hostd/provider/_warmup.py")
    assert used <= {"hostd.protocol", "hostd.errors"}


def test_the_provider_package_imports_downward() -> None:
    # The package re-exports its modules; _http (run_http, imported late) is the
    # provider side's HTTPS server, _stdio its stdio loop; neither imports the package.
    assert _module_imports(ROOT / "hostd/provider/__init__.py") == {
        "hostd.errors",
        "hostd.protocol",
        "hostd.provider._runtime",
        "hostd.provider._stdio",
        "hostd.provider._warmup",
        "hostd.provider._http",
    }


def test_the_provider_https_server_imports_only_the_provider_runtime_and_protocol() -> None:
    used = _module_imports(ROOT / "hostd/provider/_http.py")
    assert used <= {"hostd.protocol", "hostd.provider._runtime", "hostd.provider._listener_guard"}


def test_the_listener_guard_imports_nothing_of_hostd() -> None:
    tree = ast.parse((ROOT / "hostd/provider/_listener_guard.py").read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in mods if m.startswith("hostd")}


def test_the_provider_stdio_loop_imports_only_the_provider_side() -> None:
    assert _module_imports(ROOT / "hostd/provider/_stdio.py") <= {
        "hostd.protocol",
        "hostd.errors",
        "hostd.rpc",
        "hostd.provider._runtime",
    }


def test_engine_takes_nothing_but_budget_split_and_the_rerank_request_from_compose() -> None:
    # ``rerank_order`` asks for a verdict in one call: the pure request (``rerank_request``,
    # whose ``verdict`` reads the answer) on either side of the engine's I/O. The engine
    # still never renders, ranks or reads a verdict's keys itself.
    found: set[str] = set()
    for path in sorted((ROOT / "hostd/engine").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "hostd.compose":
                found.update(a.name for a in node.names)
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith(("hostd.server", "hostd.compose."))
            ):
                found.add(node.module)
    # ``RerankRequest`` and ``PrecomputedOrder`` are named for types only.
    assert found <= {"budget_split", "rerank_request", "RerankRequest", "PrecomputedOrder"}


# What opens a connection: spawning a child, reaching a remote endpoint (its token
# source, C7). ``_launch`` alone does that I/O; the pool keeps the bookkeeping, the
# fan-out and the reranker only read the pool. A binding's client (the MCP one too)
# is the transport's binding registry's: the engine names no binding module.
_OPENERS = {"RemoteConnection", "RemoteEndpoint", "TokenSource", "mcp_client_factory"}


def _engine_openers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "hostd/engine").rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.update(a.name for a in node.names if a.name in _OPENERS)
                if node.module == "hostd.mcp" or node.module.startswith("hostd.mcp."):
                    names.add(node.module)
            elif isinstance(node, ast.Attribute) and node.attr == "open":
                if isinstance(node.value, ast.Name) and node.value.id.endswith("Connection"):
                    names.add(f"{node.value.id}.open")
        if names:
            found[str(path.relative_to(ROOT / "hostd/engine"))] = names
    return found


def test_only_the_launcher_opens_a_provider_connection() -> None:
    assert _engine_openers() == {
        "_launch.py": {
            "RemoteConnection",
            "RemoteEndpoint",
            "TokenSource",
            "RemoteConnection.open",
            "ProviderConnection.open",
        }
    }
