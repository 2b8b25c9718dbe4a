"""Every README example runs as written: the quickstart from a user's own project (with
``hostd init``), the Python client (feedback included), the printf line, the ``Notes``
provider through ``check-provider`` and into a config, and the MCP entry's shape. The
blocks are taken from README.md itself and run unmodified, by bash or python, as real
child processes in a fresh home with the virtualenv's ``bin`` on ``PATH``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.home import fresh_home, hostd_in

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
HANG_GUARD_S = 300


def _blocks(heading: str, lang: str) -> list[str]:
    """The ``lang`` code blocks of the README section that starts at ``heading``."""
    section = README.split(heading + "\n", 1)[1]
    section = re.split(r"\n#{2,3} ", section, maxsplit=1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def _user(tmp_path: Path) -> dict[str, str]:
    """A fresh home whose ``PATH`` starts with this virtualenv's ``bin`` (``hostd``,
    ``python``), as after ``source .venv/bin/activate``."""
    env = fresh_home(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _myproject(env: dict[str, str]) -> Path:
    """``~/src/myproject``: a small project whose files answer the README's question."""
    project = Path(env["HOME"]) / "src" / "myproject"
    project.mkdir(parents=True)
    (project / "settings.md").write_text(
        "# How the config is loaded\n\nThe config is loaded from settings.toml by "
        "load_settings(), which reads the file once at start and validates every key.\n"
    )
    (project / "app.py").write_text(
        "def load_settings(path='settings.toml'):\n"
        "    '''Load the config: read settings.toml once and validate it.'''\n"
        "    return open(path).read()\n"
    )
    return project


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,  # a hang guard
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_the_two_commands_are_the_scripts_ci_runs() -> None:
    assert "scripts/demo" in README and "scripts/test" in README
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for script in ("demo", "test"):
        assert os.access(ROOT / "scripts" / script, os.X_OK), script


def test_every_relative_link_in_the_readme_names_a_file_of_the_checkout() -> None:
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []


@pytest.mark.slow
def test_the_quickstart_and_the_python_client_run_as_written_from_your_own_project(
    tmp_path: Path,
) -> None:
    env = _user(tmp_path)
    project = _myproject(env)
    quickstart = _blocks("## Quickstart, from your own project", "sh")[0]
    (client,) = _blocks("## Quickstart, from your own project", "python")
    (project.parent / "client.py").write_text(client)
    # Run as written; then, with the daemon it started still serving, the Python
    # example; then `hostd stop`, as the README says, and the daemon (`serve &`, the
    # last background job) has exited 0 when it returns.
    script = (
        f"{quickstart}\npython ../client.py\nstatus=$?\nhostd stop || exit 90\n"
        "wait $! || exit 91\nexit $status\n"
    )
    done = _bash(script, tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^stopped hostd \(pid \d+\) at ", done.stdout, re.M), done.stdout
    assert (project / "hostd.toml").is_file()
    cites = re.findall(r'<frame provider="[^"]+" kind="[^"]+" cite="([^"]+)"', done.stdout)
    assert cites and all(c.split()[0] in ("settings.md", "app.py") for c in cites), done.stdout
    assert "Traceback" not in done.stderr
    # The evidence loop: each label, its file and range, and the digest of its content.
    shown = re.findall(
        r"^(settings\.md|app\.py) (L\S+) file://\S+/(\S+) (L\S+) sha256:", done.stdout, re.M
    )
    assert shown and all(f == u and r == ur for f, r, u, ur in shown), done.stdout
    fed = re.search(r"^\{'request_id': .*\}$", done.stdout, re.M)  # print(hostd.feedback(…))
    assert fed, done.stdout
    assert "used" in fed.group(0)


def test_the_printf_line_runs_as_written_in_an_initialised_project(tmp_path: Path) -> None:
    env = _user(tmp_path)
    project = _myproject(env)
    assert hostd_in(project, env, "init", "--providers", "files,memory").returncode == 0
    (printf,) = [b for b in _blocks("## Quickstart, from your own project", "sh") if "printf" in b]
    done = _bash(printf, project, env)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout.splitlines()[0])
    assert reply["id"] == 1 and "load_settings" in reply["result"]["prompt"], reply


def test_the_provider_example_passes_check_provider_and_serves_from_a_config(
    tmp_path: Path,
) -> None:
    env = _user(tmp_path)
    project = _myproject(env)
    (provider,) = _blocks("### Writing a provider", "python")
    (check,) = _blocks("### Writing a provider", "sh")
    (table,) = _blocks("### Writing a provider", "toml")
    (project / "notes.py").write_text(provider)
    done = _bash(check, project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert hostd_in(project, env, "init", "--providers", "files").returncode == 0
    with (project / "hostd.toml").open("a") as config:
        config.write("\n" + table)
    (project / "sub").mkdir()  # from another directory of the project: paths still resolve
    composed = hostd_in(
        project / "sub", env, "compose", "when do deploys happen?", "--providers", "notes"
    )
    assert composed.returncode == 0, composed.stderr
    assert "Deploys happen on Tuesdays." in composed.stdout and 'cite="notes #1"' in composed.stdout


def test_the_providers_guide_shows_the_readme_s_provider_which_runs() -> None:
    # One example, two places: the run above vouches for both, and a matching frame left
    # out for the budget is truncated in both (the leg then says "nothing fit").
    (provider,) = _blocks("### Writing a provider", "python")
    guide = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    section = guide.split("## Writing a provider\n", 1)[1]
    assert re.findall(r"```python\n(.*?)```", section, re.S)[0] == provider
    assert "truncated=True" in provider


def test_the_mcp_entry_names_the_projects_config_and_every_tool() -> None:
    from hostd.mcp._server import TOOLS

    section = README.split("## Use from an MCP client\n", 1)[1].split("\n## ", 1)[0]
    (entry,) = re.findall(r"```json\n(.*?)```", section, re.S)
    server = json.loads(entry)["mcpServers"]["hostd"]
    args = server["args"]
    assert args[0] == "--config" and args[1].endswith("/hostd.toml") and args[2:] == ["mcp"]
    # As hostd init prints it (tests/mcp/test_init_entry.py): hostd by its absolute path.
    assert server["command"].startswith("/") and server["command"].endswith("/bin/hostd")
    numbers = {2: "two", 3: "three", 4: "four", 5: "five"}
    assert f"with {numbers[len(TOOLS)]} tools" in section
    assert all(f"`{tool.name}`" in section for tool in TOOLS)
    assert "hostd[mcp]" not in section or "/path/to/hostd" in section  # no registry install


def test_the_contrib_unit_is_a_notify_service_running_serve_as_its_readme_says() -> None:
    import configparser

    class CaseKept(configparser.ConfigParser):
        def optionxform(self, optionstr: str) -> str:
            return optionstr  # keys keep their case

    unit = CaseKept(strict=False, interpolation=None)
    unit.read(ROOT / "contrib" / "systemd" / "hostd.service")
    service = unit["Service"]
    assert service["Type"] == "notify"  # hostd serve sends READY=1 (tests/cli/test_serve_ready.py)
    assert service["ExecStart"].split()[-1] == "serve"
    assert service["Environment"].startswith("HOSTD_CONFIG=")
    guide = (ROOT / "contrib" / "README.md").read_text(encoding="utf-8")
    for path in re.findall(r"cp (contrib/\S+)", guide):
        assert (ROOT / path).is_file(), path


@pytest.mark.slow
def test_the_python_client_says_why_a_provider_gave_nothing_and_sends_no_feedback(
    tmp_path: Path,
) -> None:
    # The README's client, as written, in a project whose providers give no evidence (a
    # memory with nothing in it, a provider that cannot start): the composition is
    # degraded, so the example says what each provider did and why, and sends no
    # feedback for a request that had nothing to use.
    env = _user(tmp_path)
    project = _myproject(env)
    assert hostd_in(project, env, "init", "--providers", "memory").returncode == 0
    with (project / "hostd.toml").open("a") as config:
        config.write('\n[[provider]]\nid = "ghost"\ncommand = ["no-such-provider-cmd"]\n')
    (client,) = _blocks("## Quickstart, from your own project", "python")
    (project.parent / "client.py").write_text(client)
    script = (
        "hostd serve --log-level error --ready-file ready &\n"
        "while [ ! -e ready ]; do kill -0 $! || exit 92; sleep 0.05; done\n"
        "python ../client.py\nstatus=$?\nhostd stop || exit 90\nwait $! || exit 91\n"
        "exit $status\n"
    )
    done = _bash(script, project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    said = re.search(r"^ghost crashed provider 'ghost' cannot start\b.*$", done.stdout, re.M)
    assert said and "no-such-provider-cmd" in said.group(0), done.stdout
    assert re.search(r"^memory ok ", done.stdout, re.M), done.stdout
    assert "'request_id'" not in done.stdout, done.stdout  # no feedback was sent
