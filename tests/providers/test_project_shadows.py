"""A project's own packages never stand in for hostd's or a framework's: a project with a
``providers/`` package of its own, or a ``llama_index/`` directory, as real child
processes (``hostd compose``, ``hostd check-provider``, the retriever adapter).

``python -m`` puts its working directory first on the module path. The bundled providers
run in the project (``cwd = "."``), so without ``-P`` the project's ``providers`` is
imported in place of hostd's: in this dev venv too (the editable install's finder comes
after the path), so these tests reproduce what a wheel install does."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.home import fresh_home, hostd_in
from tests.fixtures.procs import ROOT
from tests.integrations._factories import corpus, write_factories

GOAL = "why does the retry loop give up"

#: A module the project's own ``providers`` package has: run, it says so and fails.
WRONG = 'import sys\nprint("WRONG: the project\'s providers.files")\nsys.exit(1)\n'


def _config(project: Path, command: list[str], roots: str = ".") -> None:
    (project / "hostd.toml").write_text(
        f'[host]\nstate_dir = "{project / ".state"}"\n\n'
        f'[[provider]]\nid = "p"\ncommand = {json.dumps(command)}\ncwd = "."\n'
        f'trusted_roots = ["{roots}"]\ntimeout_ms = 100000\nstart_timeout_s = 300\n'
    )


def test_a_project_with_its_own_providers_package_is_served_by_hostds_files(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    (project / "providers").mkdir(parents=True)
    (project / "providers" / "__init__.py").write_text("")
    (project / "providers" / "files.py").write_text(WRONG)
    (project / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three tries.\n")
    # As `hostd init` writes it: the bundled provider, run in the project.
    _config(project, ["python", "-m", "providers.files", "--root", ".", "--exclude", "/hostd.toml"])
    done = hostd_in(project, fresh_home(tmp_path), "compose", GOAL, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["status"] for p in result["providers"]] == ["ok"]
    assert "gives up after three tries" in result["prompt"]
    assert [c["label"] for c in result["citations"]] == ["notes.md L1-3"]
    assert "WRONG" not in done.stderr


def _retriever_project(tmp_path: Path, module: str) -> Path:
    """A project with a ``llama_index/`` package of its own (a user's folder of notes
    on the library, say) and a LlamaIndex retriever in ``module``.py."""
    project = tmp_path / "proj"
    (project / "llama_index").mkdir(parents=True)
    (project / "llama_index" / "__init__.py").write_text("")
    write_factories(project, corpus(project / "corpus"))
    (project / "li_factory.py").rename(project / f"{module}.py")
    return project


@pytest.mark.slow
def test_the_retriever_adapter_imports_the_library_and_the_projects_module(
    tmp_path: Path,
) -> None:
    """Run by the daemon (with ``-P``): the adapter finds the user's module in its working
    directory, and llama-index-core where it is installed, not ``./llama_index``."""
    project = _retriever_project(tmp_path, "mymod")
    _config(
        project,
        ["python", "-m", "providers.llama_index", "--retriever", "mymod:build"],
        roots="corpus",
    )
    done = hostd_in(project, fresh_home(tmp_path), "compose", GOAL, "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["status"] for p in result["providers"]] == ["ok"]
    assert "retry loop gives up after three attempts" in result["prompt"]


@pytest.mark.slow
def test_run_by_hand_the_adapter_puts_the_project_after_the_library(tmp_path: Path) -> None:
    """``python -m providers.llama_index`` run by hand (no ``-P``: an interpreter named by
    its path is run as written): the working directory, first on the path, is moved
    after the installed packages, though the module ``--retriever`` names is still the
    project's, even where an installed module (trustme) has its name."""
    project = _retriever_project(tmp_path, "trustme")
    command = [sys.executable, "-m", "providers.llama_index", "--retriever", "trustme:build"]
    done = hostd_in(
        project,
        fresh_home(tmp_path),
        *("check-provider", "--goal", GOAL, "--timeout-ms", "100000", "--", *command),
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout, done.stderr[-2000:])
    assert f"ran {shlex.join(command)}" in done.stdout  # as written: no -P
    # Its corpus is two documents, both served whatever the goal, so the query check's
    # unrelated goal gets the same two frames, neither answer cut: served whole, no warning.
    (summary,) = re.findall(r"^(\d+)/(\d+) passed$", done.stdout, re.MULTILINE)
    assert summary[0] == summary[1], done.stdout
    assert "; served whole: the goal " in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("framework", "shadow", "says"),
    [
        (
            "llama_index",
            "llama_index/__init__.py",
            "./lib/llama_index shadows the llama-index-core",
        ),
        ("langchain", "langchain_core.py", "./lib/langchain_core.py shadows the langchain-core"),
    ],
)
def test_a_package_that_shadows_the_framework_is_named_not_the_extra(
    framework: str, shadow: str, says: str, tmp_path: Path
) -> None:
    """The library is installed, but a directory ahead of it on the module path has a
    package (or module) of its name: the one line names that, not the extra."""
    (tmp_path / "lib" / shadow).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "lib" / shadow).write_text("")
    # ./lib ahead of this checkout (its providers, not the editable install's tree).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["lib", str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", f"providers.{framework}", "--retriever", "mymod:build"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,  # a hang guard
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"providers.{framework}: {says} library; rename it, or take ./lib off the Python path\n"
    )
