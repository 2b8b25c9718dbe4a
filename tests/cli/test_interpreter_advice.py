"""A provider whose ``python`` is hostd's own interpreter and cannot import its own
dependency is told why and what to do (docs/config.md: ``python`` is hostd's)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.fixtures.cli import run_hostd

ADVICE = "`python` in its command is hostd's own interpreter"


def _config(tmp_path: Path, interpreter: str, command: list[str] | None = None) -> Path:
    """A provider ``mine`` that cannot import its dependency (or runs ``command``)."""
    (tmp_path / "prov.py").write_text("import no_such_dependency_of_this_provider\n")
    config = tmp_path / "hostd.toml"
    command = command or [interpreter, "prov.py"]
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "mine"\ncommand = {json.dumps(command)}\ncwd = "{tmp_path}"\n',
        encoding="utf-8",
    )
    return config


def test_a_missing_module_under_hostds_python_says_which_interpreter_ran(tmp_path: Path) -> None:
    config = _config(tmp_path, "python")
    for command in (["compose", "anything"], ["providers"]):
        done = run_hostd("--config", str(config), *command)
        lines = [x for x in done.stderr.splitlines() if ADVICE in x]
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("hostd:") and "mine:" in lines[0]
        assert "name the provider's interpreter by its path" in lines[0]


@pytest.mark.skipif(
    shutil.which("python3") in (None, sys.executable), reason="no other python3 on PATH"
)
def test_an_interpreter_named_by_its_path_gets_no_such_advice(tmp_path: Path) -> None:
    config = _config(tmp_path, str(shutil.which("python3")))
    done = run_hostd("--config", str(config), "compose", "anything")
    assert "No module named" in done.stderr  # it failed the same way
    assert ADVICE not in done.stderr


def test_a_misspelt_module_of_a_package_hostd_has_names_the_closest_one(tmp_path: Path) -> None:
    config = _config(tmp_path, "python", ["python", "-m", "providers.filez", "--root", "."])
    done = run_hostd("--config", str(config), "compose", "anything")
    lines = [x for x in done.stderr.splitlines() if "there is no module" in x]
    assert lines == [
        "hostd:   mine: there is no module providers.filez in providers (did you mean "
        "providers.files?): check the name in its command"
    ], done.stderr
    assert ADVICE not in done.stderr  # the interpreter is not what is wrong here
