"""``hostd memory …`` runs the bundled memory provider's commands, as a user would run
them: from inside a project, even one with a ``providers`` package of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.procs import ROOT


def _hostd(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m hostd ARGS`` in ``cwd``: ``-m`` puts ``cwd`` first on the module path,
    as ``python -m providers.memory`` does; hostd itself from the checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("HOSTD_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "hostd", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _own_providers_package(project: Path) -> None:
    """A project's own ``providers.memory``, which says so if it is ever run."""
    (project / "providers" / "memory").mkdir(parents=True)
    (project / "providers" / "__init__.py").write_text('print("the project\'s providers")\n')
    (project / "providers" / "memory" / "__init__.py").write_text("")
    (project / "providers" / "memory" / "__main__.py").write_text('print("the project\'s")\n')


def test_memory_runs_hostds_memory_provider_inside_a_project_with_its_own_providers(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    _own_providers_package(project)
    db = tmp_path / "m.db"
    added = _hostd(project, "memory", "add", "--db", str(db), "--title", "port", "port 5432")
    assert added.returncode == 0, added.stderr
    assert "the project's" not in added.stdout + added.stderr
    listed = _hostd(project, "memory", "list", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["content"] for line in listed.stdout.splitlines()] == ["port 5432"]
    helped = _hostd(project, "memory", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: hostd memory")


def test_memory_edits_the_database_of_the_config_hostd_is_given(tmp_path: Path) -> None:
    db = tmp_path / "project.db"
    config = tmp_path / "hostd.toml"
    config.write_text(
        "[[provider]]\n"
        'id = "memory"\n'
        f'command = ["python", "-m", "providers.memory", "--db", "{db}"]\n',
        encoding="utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    added = _hostd(elsewhere, "--config", str(config), "memory", "add", "--title", "t", "x")
    assert added.returncode == 0, added.stderr
    assert f'database {db} (provider "memory" of {config})' in added.stderr
    (entry,) = _hostd(elsewhere, "memory", "list", "--db", str(db), "--json").stdout.splitlines()
    assert json.loads(entry)["content"] == "x"
