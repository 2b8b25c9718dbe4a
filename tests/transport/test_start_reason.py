"""What a user is told when a provider's command cannot run: which mistake it is, where
the command was looked for and what to do, in one bounded line that shows no value of
the provider's environment but its PATH. Each case is fed the OS error a real exec
gives for it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from hostd.transport.process._start_reason import PATH_CHARS, SHOWN_CHARS, start_reason
from tests.fixtures.unstartable import unstartable_files

SECRET = "s3cret-token-value"


def _exec_error(
    command: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> OSError:
    """The error the exec of ``command`` raises here (it must fail)."""
    with pytest.raises(OSError) as caught:
        subprocess.Popen(command, cwd=cwd, env=env)
    return caught.value


def _reason(
    command: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> str:
    return start_reason(command, _exec_error(command, cwd, env), cwd=cwd, env=env)


def _env(*path: Path) -> dict[str, str]:
    return {"PATH": os.pathsep.join(map(str, path)), "API_TOKEN": SECRET}


def test_a_name_not_on_path_names_the_path_searched_and_what_to_do(tmp_path: Path) -> None:
    env = _env(tmp_path / "bin", tmp_path / "sbin")
    why = _reason(["no-such-provider-cmd", "--flag"], tmp_path, env)
    assert why.startswith("no-such-provider-cmd was not found on the PATH hostd gives the provider")
    assert f"({tmp_path}/bin:{tmp_path}/sbin)" in why, why
    assert "give its absolute path in the command, or install it" in why, why
    assert SECRET not in why


def test_a_relative_path_that_does_not_exist_names_the_working_directory(tmp_path: Path) -> None:
    why = _reason(["prov/notes.py"], tmp_path, _env())
    assert why == (
        f"there is no file {tmp_path}/prov/notes.py (read against {tmp_path}): "
        "fix the path in the command"
    )


def test_a_file_that_is_not_executable_says_chmod_or_its_interpreter(tmp_path: Path) -> None:
    plain = unstartable_files(tmp_path)["plain"]  # "#!/bin/sh", mode 0644
    why = _reason([str(plain)], tmp_path, _env())
    assert why == (
        f"{plain} is not executable: make it so (chmod +x {plain}) or run it through its "
        f'interpreter, e.g. ["sh", "{plain}"]'
    )


def test_a_python_script_with_no_first_line_is_run_through_python3(tmp_path: Path) -> None:
    script = tmp_path / "prov.py"
    script.write_text("print('hi')\n")
    script.chmod(0o644)
    why = _reason(["./prov.py"], tmp_path, _env())
    assert why.endswith('e.g. ["python3", "./prov.py"]'), why


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / "prov").mkdir()
    why = _reason(["./prov"], tmp_path, _env())
    assert why == f"{tmp_path}/prov is a directory, not a program: name the program in it"


@pytest.mark.parametrize("how", ["by path", "on PATH"])
def test_a_script_whose_interpreter_is_missing_names_its_first_line(
    tmp_path: Path, how: str
) -> None:
    script = unstartable_files(tmp_path)["badshebang"]  # "#!/no/such/interpreter", 0755
    # Found on PATH, it fails as a missing name does (ENOENT): told apart by the file.
    command = [str(script)] if how == "by path" else [script.name]
    why = _reason(command, tmp_path, _env(tmp_path / "empty", tmp_path))
    assert why.startswith(
        f"the interpreter on the first line of {script} (/no/such/interpreter) was not found: "
        "install it or fix that #! line"
    ), why
    assert f'e.g. ["interpreter", "{script}"]' in why, why


def test_a_file_that_is_neither_program_nor_script_asks_for_a_first_line(tmp_path: Path) -> None:
    noformat = unstartable_files(tmp_path)["noformat"]
    why = _reason([str(noformat)], tmp_path, _env())
    assert why.startswith(
        f"{noformat} is neither a program nor a script with a #! first line: add one"
    ), why


def test_a_missing_working_directory_is_named_as_such(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    why = _reason(["sh", "-c", "true"], gone, _env())
    assert why == f"its working directory {gone} does not exist: create it, or fix its cwd"


def test_long_names_and_a_long_path_are_cut_to_a_bounded_line(tmp_path: Path) -> None:
    env = _env(*(tmp_path / ("d" * 60 + str(i)) for i in range(40)))
    name = "p" * 200
    why = _reason([name], tmp_path, env)
    assert len(why) <= SHOWN_CHARS + PATH_CHARS + 150, len(why)
    assert "…" in why and "\n" not in why
    assert why.endswith("install it in a folder on that PATH"), why
