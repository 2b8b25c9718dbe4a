"""The dependency direction of architecture.md, checked by walking imports.

server → pipeline → engine → transport → protocol, pipeline → compose → protocol; engine
may use compose.budget_split and the reranker's request and verdict; every layer may use
hostd.protocol and hostd.errors. hostd.chunking (the one chunker) uses only protocol:
the bundled providers and the mcp binding both load it. The pipeline (one request end to
end) sits between the wire and the engine: nothing below it imports it, and the
server's method table reaches the engine and the composition library only
through it (the lifecycle module ``server/_engine.py`` alone builds the engine).
hostd.quality (shadow records, feedback, replay, calibration, eval) is a library of
the CLI and the pipeline (and of the daemon, which builds the recorder), never of the
engine, the transport or the composition library; the mcp binding the engine starts
loads nothing of the ``hostd mcp`` face. hostd.rpc (the one
JSON-RPC core: envelope, dispatchers, correlation table, line encoder) sits
beside errors: every end uses it, it uses only protocol and errors; the client
library never loads the host side. Inside the
server, a connection is given its dispatch callable: ``_connection`` imports
neither ``_api`` nor ``_daemon``, and ``_api`` neither of those two. In the CLI,
check-provider points one way (command → checks → driver; command → the mcp
checks → checks) and its driver, which
owns the bytes only, loads nothing of the host side. Inside the transport,
``_stdout`` and ``_shim`` sit below ``_process`` and know no binding.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "hostd"

# package → hostd packages/modules it must never import
FORBIDDEN = {
    "protocol": {
        "pipeline",
        "compose",
        "engine",
        "transport",
        "server",
        "errors",
        "client",
        "cli",
        "config",
        "provider",
        "quality",
    },
    "compose": {
        "engine",
        "transport",
        "server",
        "pipeline",
        "client",
        "cli",
        "config",
        "provider",
        "quality",
    },
    "transport": {
        "engine",
        "compose",
        "server",
        "pipeline",
        "client",
        "cli",
        "mcp",
        "provider",
        "logs",
        "quality",
    },
    # The engine imports no face: the MCP binding reaches it through the transport's
    # binding registry, which imports that module by name only when it is used. Its
    # logger is the one factory's (hostd._log), not the host's logging set-up.
    # Nor the quality package: recording is the pipeline's stage, replay the CLI's.
    "engine": {"server", "pipeline", "client", "cli", "mcp", "logs", "quality"},
    "server": {"client", "cli", "provider"},
    # One request end to end: the wire, faces and the CLI are its callers, never its parts.
    "pipeline": {"server", "transport", "client", "cli", "mcp", "provider", "rpc"},
    # The MCP faces are handed a client API session (the CLI wires it) and plug into
    # the transport as a binding: they never reach into the engine, server or compose.
    "mcp": {"compose", "engine", "server", "client", "cli", "provider", "quality"},
    # The client library talks to a daemon: it never loads the host side.
    "client": {
        "compose",
        "engine",
        "transport",
        "server",
        "pipeline",
        "cli",
        "provider",
        "quality",
    },
    # Quality (shadow records, feedback, replay, calibration, eval) judges compositions
    # after the fact: the composition library and the protocol models only; the pipeline
    # hands it what it records, the CLI runs its commands.
    "quality": {
        "engine",
        "transport",
        "server",
        "pipeline",
        "client",
        "cli",
        "config",
        "provider",
        "mcp",
    },
    # Framework adapters are clients of the client API (forward) and of the provider
    # runtime (backward): never of the host side.
    "integrations": {
        "compose",
        "engine",
        "transport",
        "server",
        "pipeline",
        "cli",
        "mcp",
        "quality",
    },
}

_HOST_SIDE = {"compose", "engine", "transport", "server", "pipeline", "client", "cli", "config"}
# single modules → hostd packages/modules they must never import
FORBIDDEN_MODULES = {
    # The HTTPS provider server's listener guard: the provider side, and a leaf.
    "provider/_listener_guard.py": _HOST_SIDE | {"logs", "quality", "provider", "protocol"},
    # Words over a compose reply (a dict), shared by the CLI and hostd mcp: imports nothing.
    "_hints.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality"},
    # A compose reply's citations with their rank, shared by the CLI and hostd mcp.
    "_citations.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality", "protocol"},
    # Text made safe to print: the transport's redaction point and the CLI's reports both
    # use it, and the CLI must not load the transport for it: a leaf.
    "_printable.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality", "protocol"},
    # The state directory's tag, written by the daemon and read by the provider programs'
    # walk: a leaf both load.
    "_state_tag.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality", "protocol"},
    # Defaults the help texts name and the config's fields take: built without pydantic.
    "_defaults.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality", "protocol"},
    # Which build runs: setup.py loads the file alone at build time, so a leaf.
    "_build.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality", "protocol"},
    # The daemon's lock on its config, read by status, stop and reload when no daemon
    # answers: a leaf, so they read it without loading the daemon.
    "_daemon_lock.py": _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality", "protocol"},
    # check-provider's driver owns the bytes only: judging is the checks' (engine audit).
    # Of the transport it takes the binding codecs only (below).
    "cli/_check_driver.py": (_HOST_SIDE - {"transport"}) | {"provider", "quality", "mcp"},
    # The method table is the wire: requests go to the pipeline, never around it.
    "server/_api.py": {"engine", "compose", "transport", "quality"},
    "server/_local.py": {"engine", "compose", "transport", "quality"},
    "server/_params.py": {"engine", "compose", "transport", "quality", "pipeline"},
}
# hostd.rpc, the one JSON-RPC core, is shared by every end: it uses only protocol and errors.
FORBIDDEN["rpc"] = _HOST_SIDE | {"provider", "logs", "quality", "pipeline"}
# The provider runtime runs inside provider programs: it never loads the host side.
FORBIDDEN["provider"] = _HOST_SIDE | {"logs", "quality", "mcp", "pipeline"}
# hostd.chunking, the one chunker, serves the bundled providers and the mcp binding alike:
# it uses only protocol (a provider program loads it without the host side).
FORBIDDEN["chunking"] = _HOST_SIDE | {"provider", "rpc", "mcp", "logs", "quality"}

# server module → sibling modules it must never import (absolute or relative)
FORBIDDEN_SIBLINGS = {
    "_connection": {"_api", "_daemon"},
    "_api": {"_connection", "_daemon"},
}
# cli module → sibling modules it must never import: check-provider points one way,
# command (_check) → checks (_checks) → driver (_check_driver), which imports no sibling.
_CLI = {p.stem for p in (ROOT / "cli").glob("_*.py")}
CLI_FORBIDDEN_SIBLINGS = {
    "_check_driver": _CLI - {"_check_driver"},
    "_checks": _CLI - {"_checks", "_check_driver"},
    # The mcp path (one module, to be registered as a binding's checks) uses the checks'
    # report and nothing else of the CLI; the checks never import it.
    "_check_mcp": _CLI - {"_check_mcp", "_checks"},
}


def _hostd_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "hostd":
            names = [f"hostd.{a.name}" for a in node.names]  # from hostd import compose
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "hostd" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(package: str) -> None:
    pkg = ROOT / package
    if not pkg.exists():
        pytest.skip(f"hostd/{package} does not exist yet")
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        for target in _hostd_imports(path) & FORBIDDEN[package]:
            bad.append(f"{path.relative_to(ROOT.parent)} imports hostd.{target}")
    assert bad == []


@pytest.mark.parametrize("module", sorted(FORBIDDEN_MODULES))
def test_single_modules_import_only_their_layer(module: str) -> None:
    bad = sorted(_hostd_imports(ROOT / module) & FORBIDDEN_MODULES[module])
    assert bad == []


def _siblings(path: Path, package: str = "server") -> set[str]:
    """The ``hostd.<package>`` modules ``path`` imports, by relative or absolute name."""
    found: set[str] = set()
    prefix = f"hostd.{package}"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                if node.module:
                    found.add(node.module.split(".")[0])
                else:  # from . import _api
                    found.update(a.name for a in node.names)
            elif node.level == 0 and node.module and node.module.startswith(prefix + "."):
                found.add(node.module[len(prefix) + 1 :].split(".")[0])
            elif node.level == 0 and node.module == prefix:
                found.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                a.name[len(prefix) + 1 :].split(".")[0]
                for a in node.names
                if a.name.startswith(prefix + ".")
            )
    return found


@pytest.mark.parametrize("module", sorted(FORBIDDEN_SIBLINGS))
def test_server_modules_do_not_import_in_a_circle(module: str) -> None:
    found = _siblings(ROOT / "server" / f"{module}.py")
    assert sorted(found & FORBIDDEN_SIBLINGS[module]) == []


@pytest.mark.parametrize("module", sorted(CLI_FORBIDDEN_SIBLINGS))
def test_check_provider_modules_do_not_import_in_a_circle(module: str) -> None:
    found = _siblings(ROOT / "cli" / f"{module}.py", "cli")
    assert sorted(found & CLI_FORBIDDEN_SIBLINGS[module]) == []


def test_check_provider_s_driver_takes_only_the_binding_codecs_of_the_transport() -> None:
    # The same codec the daemon's pipes and HTTPS endpoint drive: nothing else of it.
    tree = ast.parse((ROOT / "cli" / "_check_driver.py").read_text(encoding="utf-8"))
    taken = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("hostd.transport")
    }
    assert taken == {"hostd.transport.bindings"}


# The server's lifecycle module builds the engine and the reranker process; every other
# server module reaches the engine and the composition library through the pipeline.
SERVER_LIFECYCLE = "_engine.py"
# The daemon builds the ``[shadow]`` recorder it hands the pipeline and closes it at its
# stop: of the server, it alone names the quality package.
SERVER_RECORDER = "_daemon.py"


@pytest.mark.parametrize("module", sorted(p.name for p in (ROOT / "server").glob("*.py")))
def test_the_server_reaches_the_engine_only_through_its_lifecycle_module(module: str) -> None:
    forbidden = set()
    if module != SERVER_LIFECYCLE:
        forbidden |= {"engine", "compose"}
    if module != SERVER_RECORDER:
        forbidden.add("quality")
    assert sorted(_hostd_imports(ROOT / "server" / module) & forbidden) == []


# Who may use hostd.quality: the CLI runs its commands (replay, eval, calibrate), the
# pipeline records into it and binds calibrations, the daemon builds the recorder.
QUALITY_USERS = ("cli/", "pipeline/", f"server/{SERVER_RECORDER}")


def test_quality_is_a_library_of_the_cli_and_the_pipeline() -> None:
    users = sorted(
        rel
        for path in ROOT.rglob("*.py")
        if not (rel := str(path.relative_to(ROOT))).startswith("quality/")
        and "quality" in _hostd_imports(path)
    )
    assert users, "the walker found no user of hostd.quality"
    assert [u for u in users if not u.startswith(QUALITY_USERS)] == []


# The ``hostd mcp`` server face: the stdio server, its schemas, its request screen, its
# citation store and its reconnecting session. The engine starts an mcp provider through
# the binding (``_binding``, imported by name by the transport's registry): nothing the
# binding loads may be part of the face.
MCP_FACE = {"_server", "_schema", "_wire", "_citations", "_reconnect"}


def test_the_engine_s_mcp_binding_never_loads_the_hostd_mcp_face() -> None:
    loaded, todo = set(), ["_binding"]
    while todo:
        module = todo.pop()
        if module not in loaded:
            loaded.add(module)
            todo.extend(_siblings(ROOT / "mcp" / f"{module}.py", "mcp") - {"__init__"})
    assert {"_binding", "_frames"} <= loaded  # the walker follows the binding's imports
    assert sorted(loaded & MCP_FACE) == []
    # and the engine and the transport name hostd.mcp in no import (the registry's row is
    # a module name in a string)
    for package in ("engine", "transport"):
        for path in sorted((ROOT / package).rglob("*.py")):
            assert "mcp" not in _hostd_imports(path), path


def test_the_walker_sees_imports() -> None:
    # Guard against a walker that silently finds nothing.
    assert "protocol" in _hostd_imports(ROOT / "errors.py")
    assert {"rpc", "errors"} <= _hostd_imports(ROOT / "provider" / "_runtime.py")
    assert "pipeline" in _hostd_imports(ROOT / "server" / "_api.py")
    assert {"engine", "compose", "quality"} <= _hostd_imports(ROOT / "pipeline" / "_pipeline.py")
    daemon = _siblings(ROOT / "server" / "_daemon.py")
    assert {"_api", "_connection"} <= daemon
    assert "_check_driver" in _siblings(ROOT / "cli" / "_checks.py", "cli")
    assert {"_check", "_checks"} <= _CLI


# transport.process module → sibling modules it must never import: a child's stdout feed
# and its start under the shim sit below the process (``_process`` uses them, never the
# reverse), and know no binding.
_BELOW_PROCESS = {"_process", "_connection", "_client"}
FORBIDDEN_TRANSPORT_SIBLINGS = {"_stdout": _BELOW_PROCESS, "_shim": _BELOW_PROCESS | {"_stdout"}}


@pytest.mark.parametrize("module", sorted(FORBIDDEN_TRANSPORT_SIBLINGS))
def test_the_transport_s_process_parts_sit_below_it(module: str) -> None:
    path = ROOT / "transport" / "process" / f"{module}.py"
    found = _siblings(path, "transport.process")
    assert sorted(found & FORBIDDEN_TRANSPORT_SIBLINGS[module]) == []
    # and no binding: nothing from the transport's other rooms
    assert not {"bindings", "remote"} & (_hostd_submodules(path, "transport"))


def _hostd_submodules(path: Path, package: str) -> set[str]:
    """The ``hostd.<package>`` subpackages ``path`` imports, by relative or absolute name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 2 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 0 and node.module and node.module.startswith(f"hostd.{package}."):
                found.add(node.module.split(".")[2])
    return found


def test_one_logger_factory() -> None:
    """hostd's loggers come from ``hostd._log.get_logger`` only. ``hostd.rpc`` and the
    HTTPS provider's listener guard keep a stdlib ``hostd.*`` logger (they run in
    provider processes, where structlog is not set up and stdout may be the wire; the
    guard imports nothing of hostd); looking up another library's logger (to configure
    or filter it) is not building one."""
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
            ):
                continue
            call = (node.func.value.id, node.func.attr)
            named = node.args[0] if node.args else None
            ours = isinstance(named, ast.Constant) and str(named.value).startswith("hostd")
            if call == ("structlog", "get_logger") or (call == ("logging", "getLogger") and ours):
                found.add(str(path.relative_to(ROOT)))
    assert found == {"_log.py", "rpc/_envelope.py", "provider/_listener_guard.py"}


def test_the_mcp_binding_loads_without_the_mcp_server_face() -> None:
    """The engine's lazy binding row imports ``hostd.mcp._binding``; that runs
    ``hostd/mcp/__init__``, which must load its names on use only, so the ``hostd mcp``
    server face (``_server``, ``_schema``) stays unloaded (the engine imports no face)."""
    code = (
        "import sys, hostd.mcp._binding, hostd.mcp as m;"
        "faces = sorted(k for k in ('hostd.mcp._server', 'hostd.mcp._schema') if k in sys.modules);"
        "print(','.join(faces) or 'none');"
        "m.serve_mcp; print('hostd.mcp._server' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["none", "True"], done.stdout + done.stderr
