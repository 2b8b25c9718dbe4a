"""What an entry point loads: a library is imported where it is first needed.

Every CLI command, daemon start and provider process pays for what its imports load
(and the test suite pays it thousands of times). jsonrpcserver (with jsonschema) is
the wire dispatcher's, loaded by the first request a ``Dispatcher`` answers; httpx is
the remote carrier's, loaded by the first ``RemoteEndpoint`` built. The protocol's wire
models load with the first use of one of their names: the command line, the client and
the error tree need none of them. ``hostd mcp
--connect`` serves a daemon's API over MCP without a daemon of its own: nothing of the
daemon (its engine, pipeline, composition library) loads before it answers. The command
line loads the transport only in the commands that reach a provider, and the engine
(``check-provider``'s) none of the composition library. Each is
checked in a fresh interpreter: this one has loaded all of them long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Libraries only some paths need: none of them may load with a module's import.
ON_USE = ("jsonrpcserver", "httpx")

#: What importing the command line leaves unloaded: the transport is loaded by the
#: commands that reach a provider (``serve``, ``check-provider``, an in-process
#: ``compose``), and the JSON-RPC core under it by those and by every command that talks
#: to a daemon (the client sends through it: ``status``, ``stop``, ``--connect``).
CLI_ON_USE = ("hostd.transport", "hostd.rpc")

#: Libraries a command loads only when it uses them: structlog (whose package imports its
#: console renderer and, with it, rich) with the first logger made or the log configured,
#: tqdm when a progress bar is drawn (a terminal, a provider warming), jsonschema when
#: ``hostd mcp`` checks a tool's arguments.
CLI_LIBRARIES_ON_USE = ("structlog", "rich", "tqdm", "jsonschema")

#: What the engine alone leaves unloaded: ``check-provider`` (its checks drive the
#: engine's launcher and leg audit) composes nothing; the composition library loads with
#: the first request that reranks, or with the daemon's pipeline.
ENGINE_ON_USE = ("hostd.compose", "hostd.pipeline", "hostd.quality", "hostd.server")

#: The protocol's wire models (pydantic, built at import) and the modules built on them:
#: the command line, the client and the error tree use only the protocol's codes, lines
#: and digests, so a command that talks to a daemon (``status``, ``stop``, ``reload``,
#: ``--connect``) or none (``--version``) never builds them.
WIRE_MODELS = (
    "hostd.protocol._models",
    "hostd.protocol._envelopes",
    "hostd.protocol._rules",
    "hostd.protocol._accept",
)

#: The daemon's packages: ``hostd mcp --connect`` talks to a daemon through the client
#: library, and needs none of them.
DAEMON = ("hostd.server", "hostd.engine", "hostd.pipeline", "hostd.compose", "hostd.quality")


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    )
    # The marker keeps out a debug line structlog (not configured here) prints.
    return [line[len("loaded=") :] for line in done.stdout.split() if line.startswith("loaded=")]


def _loaded(step: str) -> str:
    """A line of code printing which of ``ON_USE`` are loaded after ``step``."""
    found = f"','.join(m for m in {ON_USE!r} if m in sys.modules) or 'none'"
    return f"{step}\nprint('loaded=' + ({found}))\n"


@pytest.mark.parametrize(
    "module", ["hostd.server", "hostd.cli", "hostd.client", "hostd.provider", "hostd.engine"]
)
def test_importing_an_entry_point_loads_no_library_it_may_not_use(module: str) -> None:
    assert _run(_loaded(f"import sys, {module}")) == ["none"]


def test_importing_the_command_line_loads_no_transport() -> None:
    found = f"','.join(m for m in {CLI_ON_USE!r} if m in sys.modules) or 'none'"
    assert _run(f"import sys, hostd.cli\nprint('loaded=' + ({found}))\n") == ["none"]


def test_importing_the_command_line_loads_no_log_bar_or_schema_library() -> None:
    found = f"','.join(m for m in {CLI_LIBRARIES_ON_USE!r} if m in sys.modules) or 'none'"
    assert _run(f"import sys, hostd.cli\nprint('loaded=' + ({found}))\n") == ["none"]


@pytest.mark.parametrize("module", ["hostd.cli", "hostd.client", "hostd.config", "hostd.errors"])
def test_importing_the_command_line_builds_no_wire_model(module: str) -> None:
    found = f"','.join(m for m in {WIRE_MODELS!r} if m in sys.modules) or 'none'"
    assert _run(f"import sys, {module}\nprint('loaded=' + ({found}))\n") == ["none"]


def test_a_wire_model_loads_with_its_first_use() -> None:
    code = (
        "import sys\nfrom hostd.protocol import CgpErrorCode\n"
        "print('loaded=' + str('hostd.protocol._models' in sys.modules))\n"
        "from hostd.protocol import ContextFrame\n"
        "print('loaded=' + str('hostd.protocol._models' in sys.modules))\n"
    )
    assert _run(code) == ["False", "True"]


@pytest.mark.parametrize("module", ["hostd.engine", "hostd.cli._checks"])
def test_importing_the_engine_loads_no_composition_library(module: str) -> None:
    found = f"','.join(m for m in sys.modules if m.startswith({ENGINE_ON_USE!r})) or 'none'"
    assert _run(f"import sys, {module}\nprint('loaded=' + ({found}))\n") == ["none"]


def test_jsonrpcserver_loads_with_the_first_request_at_the_wire() -> None:
    code = (
        "import sys, anyio\n"
        "from pydantic import BaseModel\n"
        "from hostd.rpc import DirectDispatcher, Dispatcher, Method\n"
        "class P(BaseModel):\n    x: int = 0\n"
        "async def echo(ctx, p):\n    return p.x\n"
        "methods = {'echo': Method(P, echo)}\n"
        "wire, direct = Dispatcher(methods), DirectDispatcher(methods)\n"
        "assert anyio.run(direct.call, 'echo', {'x': 2}, None) == 2\n"
        + _loaded("")
        + "req = {'jsonrpc': '2.0', 'id': 1, 'method': 'echo', 'params': {'x': 3}}\n"
        "assert anyio.run(wire.dispatch, req, None)['result'] == 3\n" + _loaded("")
    )
    # Built and called in-process: nothing of the wire's library; one request at the wire.
    assert _run(code) == ["none", "jsonrpcserver"]


def test_httpx_loads_with_the_first_remote_endpoint() -> None:
    code = (
        _loaded("import sys\nfrom hostd.transport import RemoteEndpoint")
        + "RemoteEndpoint('p', 'https://provider.example/cgp')\n"
        + _loaded("")
    )
    assert _run(code) == ["none", "httpx"]


def test_hostd_mcp_connect_answers_without_loading_the_daemon(tmp_path: Path) -> None:
    """``hostd mcp --connect`` answers ``initialize`` and ``tools/list`` (no daemon is
    running: neither needs one) with no module of the daemon's packages loaded."""
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path / "run" / "hostd.sock"}"\n'
        f'state_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    stdin = tmp_path / "stdin"
    stdin.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    loaded = tmp_path / "loaded"
    # Stdout is the wire once hostd mcp runs: the modules loaded go to a file, at exit.
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(loaded)!r}, 'w').write('\\n'.join(sys.modules)))\n"
        "from hostd.cli import main\n"
        f"raise SystemExit(main(['--config', {str(config)!r}, 'mcp', '--connect']))\n"
    )
    with stdin.open("rb") as lines:
        done = subprocess.run(
            [sys.executable, "-c", code],
            stdin=lines,
            capture_output=True,
            check=True,
            timeout=120,
            cwd=ROOT,
        )
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert replies[1]["result"]["serverInfo"]["name"] == "hostd", replies
    assert len(replies[2]["result"]["tools"]) == 5, replies
    modules = loaded.read_text(encoding="utf-8").split("\n")
    assert "mcp.server.lowlevel" in modules  # the run got as far as serving
    assert [m for m in modules if m.startswith(DAEMON)] == []
    # Neither request checks a tool's arguments against its schema.
    assert "jsonschema" not in modules


def _modules_of_command(tmp_path: Path, *argv: str) -> tuple[int, list[str]]:
    """``hostd --config CFG ARGV`` run in a fresh interpreter (a config naming its own
    socket and state, where no daemon runs): its exit status and the modules it loaded."""
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path / "run" / "hostd.sock"}"\n'
        f'state_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    loaded = tmp_path / "loaded"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(loaded)!r}, 'w').write('\\n'.join(sys.modules)))\n"
        "from hostd.cli import main\n"
        f"raise SystemExit(main(['--config', {str(config)!r}, *{list(argv)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=120, cwd=ROOT, check=False
    )
    return done.returncode, loaded.read_text(encoding="utf-8").split("\n")


@pytest.mark.parametrize("command", ["status", "stop", "reload"])
def test_a_command_finding_no_daemon_loads_none_of_the_daemon(tmp_path: Path, command: str) -> None:
    """``hostd status || alert`` pays this every time the daemon is down: looking for a
    daemon serving the config elsewhere reads its lock's record, loading none of it."""
    status, modules = _modules_of_command(tmp_path, command)
    assert status == 3  # no daemon
    assert [m for m in modules if m.startswith((*DAEMON, *WIRE_MODELS, "hostd.transport"))] == []
    # Its log is configured (structlog), but it draws no bar and checks no schema.
    assert [m for m in ("tqdm", "jsonschema") if m in modules] == []


def test_the_daemons_params_load_without_the_daemon() -> None:
    """``hostd compose --connect`` checks its params as the daemon would (the daemon's
    ``ComposeParams``) before it sends them: that loads the params' module alone, none of
    the daemon's method table, engine, pipeline or composition library, and no wire
    model (the rule check an ``as_of`` needs loads with the first ``as_of``)."""
    found = (
        f"','.join(m for m in sys.modules if m.startswith({(*DAEMON, *WIRE_MODELS)!r})) or 'none'"
    )
    code = (
        "import sys\nfrom hostd.server import ComposeParams\n"
        "ComposeParams.model_validate({'goal': 'g'})\n"
        f"print('loaded=' + ({found}))\n"
        "ComposeParams.model_validate({'goal': 'g', 'as_of': '2026-01-02'})\n"
        "print('loaded=' + str('hostd.protocol._rules' in sys.modules))\n"
    )
    assert _run(code) == ["hostd.server,hostd.server._params", "True"]


def test_the_daemon_loads_the_quality_package_as_it_records_or_calibrates() -> None:
    """A daemon's start names its calibration file and loads nothing else of
    hostd.quality: the recorder loads with ``[shadow]``, calibration with the first
    ``calibrated`` request, the CLI's faces (replay, eval) with their commands."""
    found = "','.join(m for m in sys.modules if m.startswith('hostd.quality')) or 'none'"
    code = (
        "import sys\nimport hostd.server._daemon\n"
        f"print('loaded=' + ({found}))\n"
        "from hostd.quality import ShadowRecorder, run_eval\n"
        "print('loaded=' + str(['hostd.quality._recorder' in sys.modules,"
        " 'hostd.quality._run' in sys.modules]).replace(' ', ''))\n"
    )
    assert _run(code) == ["hostd.quality,hostd.quality._paths", "[True,True]"]


def test_the_daemons_params_build_their_validators_on_first_use() -> None:
    """A daemon's start validates no request: each method's params model is built by
    the first request of that method, not by the daemon's import."""
    built = "print('loaded=' + ','.join(str(m.__pydantic_complete__) for m in models))\n"
    code = (
        "import hostd.server._daemon\nfrom hostd.server._params import ComposeParams, NoParams\n"
        "models = [ComposeParams, NoParams]\n"
        + built
        + "ComposeParams.model_validate({'goal': 'g'})\n"
        + built
    )
    assert _run(code) == ["False,False", "True,False"]


def test_the_envelope_and_memory_models_build_on_first_use() -> None:
    """Only a provider speaking the envelope wire needs the envelope models, and only
    remember and forget the memory ones: a daemon's import builds neither."""
    built = "print('loaded=' + ','.join(str(m.__pydantic_complete__) for m in models))\n"
    code = (
        "import hostd.server._daemon\n"
        "from hostd.protocol import ErrorEnvelope, RememberRequest, parse_envelope\n"
        "models = [ErrorEnvelope, RememberRequest]\n"
        + built
        + "parse_envelope({'type': 'error', 'message': 'm'})\n"
        + "RememberRequest.model_validate({'kind': 'k', 'title': 't', 'content': 'c'})\n"
        + "print('loaded=' + str(ErrorEnvelope(message='m').message == 'm'))\n"
        + built
    )
    assert _run(code) == ["False,False", "True", "True,True"]


def test_compose_connect_finding_no_daemon_loads_none_of_the_daemon(tmp_path: Path) -> None:
    """``hostd compose --connect`` talks to a daemon: up to its connection (here none
    answers) it loads the daemon's params and nothing else of the daemon's."""
    status, modules = _modules_of_command(
        tmp_path, "compose", "--wait", "0", "--connect", "", "a goal"
    )
    assert status == 3  # no daemon
    daemon = [m for m in modules if m.startswith((*DAEMON, *WIRE_MODELS, "hostd.transport"))]
    assert sorted(daemon) == ["hostd.server", "hostd.server._params"]


@pytest.mark.parametrize("argv", [["--version"], ["compose", "--help"]])
def test_a_command_that_logs_nothing_loads_no_log_library(tmp_path: Path, argv: list[str]) -> None:
    """``hostd --version`` and a command's ``--help`` end before any log is configured
    or written: structlog and rich stay unloaded, and tqdm and jsonschema with them."""
    status, modules = _modules_of_command(tmp_path, *argv)
    assert status == 0
    assert "hostd.cli._main" in modules  # the run got as far as the command line
    assert [m for m in CLI_LIBRARIES_ON_USE if m in modules] == []


#: What building and printing the command line (``--help``) leaves unloaded: the config's
#: models (pydantic) load with the config a command reads; the help texts name their
#: defaults from ``hostd._defaults``.
HELP_MAY_NOT_LOAD = ("hostd.config", "pydantic", "pydantic_core")


@pytest.mark.parametrize("argv", [["--help"], ["compose", "--help"], ["check-provider", "-h"]])
def test_help_loads_neither_the_config_nor_pydantic(tmp_path: Path, argv: list[str]) -> None:
    status, modules = _modules_of_command(tmp_path, *argv)
    assert status == 0
    assert "hostd.cli._main" in modules  # the run got as far as the command line
    assert [m for m in modules if m.startswith(HELP_MAY_NOT_LOAD)] == []


#: What ``hostd --version`` alone may load of hostd and the libraries: the version, and
#: nothing of the commands, the config (pydantic) or the event loop.
VERSION_MAY_NOT_LOAD = ("hostd.cli._main", "hostd.config", "hostd.errors", "hostd.protocol")
VERSION_LIBRARIES = ("pydantic", "anyio", "orjson", "structlog", "jsonrpcserver", "httpx")


@pytest.mark.parametrize("how", ["python -m hostd", "the hostd script"])
def test_hostd_version_answers_without_loading_the_command_line(how: str) -> None:
    """``hostd --version`` (a health check, a script, an install's smoke test) is
    answered before any command's module, the config or a library loads."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('loaded=' + ','.join(sys.modules)))\n"
        "sys.argv[1:] = ['--version']\n"
        "import runpy\n"
        + (
            "runpy.run_module('hostd', run_name='__main__')\n"
            if how == "python -m hostd"
            else "from hostd.cli import main\nraise SystemExit(main())\n"
        )
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hostd 0.") and done.stdout.count("\n") == 1, done.stdout
    (said,) = [line for line in done.stderr.split("\n") if line.startswith("loaded=")]
    modules = said.removeprefix("loaded=").split(",")
    assert "hostd._build" in modules  # the run got as far as the version
    assert [m for m in modules if m.startswith(VERSION_MAY_NOT_LOAD)] == []
    assert [m for m in VERSION_LIBRARIES if m in modules] == []


def test_hostd_version_among_other_options_is_the_command_lines() -> None:
    # Only ``--version`` alone takes the short way; with other options it is argparse's.
    done = subprocess.run(
        [sys.executable, "-m", "hostd", "--log-level", "error", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    fast = subprocess.run(
        [sys.executable, "-m", "hostd", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.stdout == fast.stdout and fast.stdout.startswith("hostd "), (done, fast)
