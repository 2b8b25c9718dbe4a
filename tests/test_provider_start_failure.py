"""A provider of the user's own, configured with a relative path, run by ``hostd`` from
any working directory (as an MCP client or a service manager would launch it): the
config's paths are the config's, and a provider that dies at start says why (its exit
status and its last stderr line) in the CLI's summary at default settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.procs import ROOT, marked_env

WORKING = """\
from hostd.protocol import Capabilities, ProviderInfo, QueryCapability
from hostd.provider import Provider, make_frame, run_stdio


class Notes(Provider):
    info = ProviderInfo(name="notes", version="1.0")
    capabilities = Capabilities(query=QueryCapability(kinds=["fact"]))

    async def query(self, query):
        return [make_frame(id="n1", kind="fact", title="Deploys", citation_label="notes #1",
                           content="Deploys happen on Tuesdays.", score=0.7)]


run_stdio(Notes())
"""

BROKEN = "from os import no_such_name_in_os  # raises ImportError at start\n"


def _project(tmp_path: Path, script: str) -> Path:
    project = tmp_path / "project"
    (project / "prov").mkdir(parents=True)
    (project / "prov" / "notes.py").write_text(script)
    (project / "hostd.toml").write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        '[[provider]]\nid = "notes"\ncommand = ["python", "prov/notes.py"]\n'
        "timeout_ms = 60000\n"  # a hang guard: child start-up is slow on a loaded machine
    )
    return project


def _compose(config: Path, cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``hostd [options] --config CONFIG compose GOAL`` from ``cwd``, as a shell with a short
    PATH would run it."""
    env = {**marked_env(), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "hostd", *options, "--config", str(config)]
    return subprocess.run(
        [*command, "compose", "when do we deploy"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("where", ["project", "elsewhere"])
def test_a_relative_provider_script_runs_from_any_working_directory(
    tmp_path: Path, where: str
) -> None:
    project = _project(tmp_path, WORKING)
    cwd = project if where == "project" else ROOT
    done = _compose(project / "hostd.toml", cwd)
    assert done.returncode == 0, done.stderr
    assert "Deploys happen on Tuesdays." in done.stdout
    assert "notes=ok(1 of 1)" in done.stderr, done.stderr


@pytest.mark.parametrize("where", ["project", "elsewhere"])
def test_a_provider_that_dies_at_start_says_why_at_default_settings(
    tmp_path: Path, where: str
) -> None:
    project = _project(tmp_path, BROKEN)
    cwd = project if where == "project" else ROOT
    done = _compose(project / "hostd.toml", cwd)
    assert done.returncode != 0
    summary = [line for line in done.stderr.splitlines() if line.startswith("hostd:   notes:")]
    assert summary, done.stderr
    assert "crashed" in summary[0] and "exited with status 1" in summary[0], summary
    # Its error line under it, with the last lines of its stderr, and said once.
    assert summary[1] == "hostd:   notes: its stderr ended with:", summary
    error = "ImportError: cannot import name 'no_such_name_in_os'"
    said = [line for line in done.stderr.splitlines() if error in line]
    assert len(said) == 1 and said[0].startswith("hostd:       "), done.stderr


@pytest.mark.parametrize("script", ["broken", "working"])
def test_an_mcp_client_launching_hostd_elsewhere_sees_why_the_provider_failed(
    tmp_path: Path, script: str
) -> None:
    """The official MCP SDK client launches ``hostd mcp`` from another working directory
    (as an MCP client does): a provider that dies at start is named with its exit status
    and its ImportError line in the tool result, and a working one serves its frame."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    project = _project(tmp_path, BROKEN if script == "broken" else WORKING)
    server = StdioServerParameters(
        command=sys.executable,
        # Waits for the provider's start as long as it takes (its start deadline), so a
        # busy machine's slow start is no verdict.
        args=["-m", "hostd", "--config", str(project / "hostd.toml"), "mcp"]
        + ["--ready-wait-ms", "600000"],
        env={**marked_env(), "PATH": "/usr/bin:/bin"},
        cwd=str(tmp_path),  # neither the project nor the checkout
    )

    async def call() -> tuple[bool, str]:
        with anyio.fail_after(120):  # a hang guard
            async with stdio_client(server) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool(
                        "compose_context", {"goal": "when do we deploy"}
                    )
        text = "\n".join(c.text for c in result.content if c.type == "text")
        return bool(result.is_error), text

    is_error, text = anyio.run(call)
    if script == "working":
        assert not is_error and "Deploys happen on Tuesdays." in text
        return
    assert is_error, text
    line = next((ln for ln in text.splitlines() if "notes" in ln), "")
    assert "exited with status 1" in line, text
    assert "ImportError: cannot import name 'no_such_name_in_os'" in line, text


def test_a_command_not_on_path_is_told_once_with_where_it_was_looked_for_and_what_to_do(
    tmp_path: Path,
) -> None:
    """One sentence, on the summary line and in the log's event alike: not found, on
    which PATH (the provider's, which a service's may not share with a shell), and what
    to do; nothing of the reaper shim's own (its exit status 127, its stderr line), and
    no value of the provider's env."""
    secret = "s3cret-token-of-notes"
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        '[[provider]]\nid = "notes"\ncommand = ["notes-provider-not-installed", "--x"]\n'
        f'env = {{ NOTES_TOKEN = "{secret}" }}\n'
    )
    done = _compose(config, tmp_path, "--log-level", "warning", "--log-format", "json")
    assert done.returncode != 0
    why = (
        "provider 'notes' cannot start notes-provider-not-installed --x: "
        "notes-provider-not-installed was not found on the PATH hostd gives the provider "
        "(/usr/bin:/bin): give its absolute path in the command, or install it in a folder "
        f"on that PATH; then `hostd --config {config} check-provider --provider notes` tries "
        "it alone"
    )
    summary = [line for line in done.stderr.splitlines() if line.startswith("hostd:   notes:")]
    # Run once, at boot: no restart cures a command that cannot run, so the request is
    # told that reason, not "restart attempts exhausted"; and a one-shot command, whose
    # providers end with it, says what to do, not when a daemon would run it again.
    again = " (fix that, then run the command again: each run starts its providers anew)"
    assert summary == [f"hostd:   notes: crashed: {why}{again}"], done.stderr
    assert "providers/restart" not in done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    failed = [e for e in events if e.get("event") == "provider.start.failed"]
    assert [e["error"] for e in failed] == [why], failed
    assert "cannot start provider" not in done.stderr and "status 127" not in done.stderr
    assert secret not in done.stderr + done.stdout
