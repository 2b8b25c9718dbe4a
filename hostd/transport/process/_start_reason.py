"""Why a provider's command could not be run, in words that say what to fix.

An exec fails with a bare OS error, and the same one for different mistakes:
``ENOENT`` for a name that is not on PATH, for a path that does not exist and for a
script whose ``#!`` interpreter is missing; ``EACCES`` for a file that is not
executable and for a directory. ``start_reason`` looks at the command as the exec saw
it (the PATH the provider gets, its working directory, the file's kind, mode and
first line) and says which mistake it is, where the command was looked for and what
to do, in one bounded line. It runs after the failure, so where the files no longer
tell, it gives the OS error as it came. Of the provider's environment it shows PATH
only: the other values may be credentials (C8).
"""

from __future__ import annotations

import errno
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._redact import printable

__all__ = ["shown_command", "start_reason"]

#: The most characters of one path or command a reason shows (its middle cut).
SHOWN_CHARS = 160

#: The most characters of the PATH a reason shows: often longer, and all of it counts.
PATH_CHARS = 300

#: How much of a script is read for its ``#!`` line.
_FIRST_LINE_BYTES = 256

#: An interpreter to suggest by a script's suffix, when it names none on its first line.
_BY_SUFFIX = {".py": "python3", ".sh": "sh", ".bash": "bash", ".js": "node", ".rb": "ruby"}


def _short(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` on one line, its middle cut when longer than ``limit``."""
    text = printable(text)
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return text[:keep] + "…" + text[-keep:]


def shown_command(command: Sequence[str]) -> str:
    """``command`` as a shell would take it, bounded."""
    return _short(shlex.join(command))


def _interpreter(script: Path) -> str | None:
    """The interpreter the ``#!`` first line of ``script`` names, or ``None``."""
    try:
        with script.open("rb") as fh:
            head = fh.read(_FIRST_LINE_BYTES)
    except OSError:
        return None
    line = head.split(b"\n", 1)[0]
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode("utf-8", "replace").split()
    return words[0] if words else None


def _through_interpreter(script: Path, given: str) -> str:
    """``["python3", "prov.py"]``: the command that runs ``script`` (as the command gave
    it: ``given``) through an interpreter, the one its ``#!`` line names if any."""
    named = _interpreter(script)
    if named is not None:
        interpreter = Path(named).name
    else:
        interpreter = _BY_SUFFIX.get(script.suffix, "python3")
    return _short(json.dumps([interpreter, given]))


def _on_path(name: str, path: str | None, workdir: Path) -> Path | None:
    """The first entry named ``name`` in the directories of ``path`` (a relative one read
    against ``workdir``), as the exec searched them; ``None`` when there is none."""
    for folder in os.get_exec_path({} if path is None else {"PATH": path}):
        candidate = workdir / (folder or ".") / name
        if candidate.exists():
            return candidate
    return None


def start_reason(
    command: Sequence[str],
    exc: OSError,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """What kept ``command`` from running (``exc``: the exec's or the spawn's error), where
    it was looked for and what to do, in one line. ``cwd``: the provider's working
    directory (default: this process's); ``env``: the environment it was given (only
    its ``PATH`` is read, and shown)."""
    workdir = Path(os.getcwd() if cwd is None else cwd)
    filename = None if exc.filename is None else os.fsdecode(exc.filename)
    if cwd is not None and filename == os.fspath(cwd):
        return _bad_workdir(workdir, exc)
    program = command[0]
    if os.sep not in program:  # a bare name: the exec searched the provider's PATH
        path = None if env is None else env.get("PATH")
        found = _on_path(program, path, workdir)
        if found is None and exc.errno == errno.ENOENT:
            dirs = os.pathsep.join(os.get_exec_path({} if path is None else {"PATH": path}))
            searched = _short(dirs, PATH_CHARS)
            return (
                f"{_short(program)} was not found on the PATH hostd gives the provider "
                f"({searched}): "
                "give its absolute path in the command, or install it in a folder on that PATH"
            )
        if found is None:
            return _as_it_came(exc, program)
        return _bad_file(found, str(found), exc)
    target = workdir / program
    if not target.exists():
        where = "" if Path(program).is_absolute() else f" (read against {_short(str(workdir))})"
        return f"there is no file {_short(str(target))}{where}: fix the path in the command"
    return _bad_file(target, program, exc)


def _bad_file(target: Path, given: str, exc: OSError) -> str:
    """Why the file ``target`` (``given`` in the command) that exists did not run."""
    shown = _short(str(target))
    if target.is_dir():
        return f"{shown} is a directory, not a program: name the program in it"
    if exc.errno == errno.EACCES and not os.access(target, os.X_OK):
        return (
            f"{shown} is not executable: make it so (chmod +x {shown}) or run it through "
            f"its interpreter, e.g. {_through_interpreter(target, given)}"
        )
    if exc.errno == errno.ENOENT:  # the file is there: what it needs to run is not
        named = _interpreter(target)
        if named is None:
            return (
                f"{shown} needs a loader that was not found (a program built for another system?)"
            )
        return (
            f"the interpreter on the first line of {shown} ({_short(named)}) was not found: "
            "install it or fix that #! line, or run the script through one that is there, "
            f"e.g. {_through_interpreter(target, given)}"
        )
    if exc.errno == errno.ENOEXEC:
        return (
            f"{shown} is neither a program nor a script with a #! first line: add one "
            f"(#!/usr/bin/env python3) or run it through its interpreter, "
            f"e.g. {_through_interpreter(target, given)}"
        )
    return _as_it_came(exc, str(target))


def _bad_workdir(workdir: Path, exc: OSError) -> str:
    """Why the provider's working directory could not be entered, and what to do."""
    shown = _short(str(workdir))
    if exc.errno == errno.ENOENT:
        return f"its working directory {shown} does not exist: create it, or fix its cwd"
    if exc.errno == errno.ENOTDIR:
        return f"its working directory {shown} is not a directory: fix its cwd"
    return f"its working directory {shown} cannot be entered ({exc.strerror}): fix its cwd"


def _as_it_came(exc: OSError, name: str) -> str:
    """The OS error for a case not told apart above."""
    return f"{exc.strerror or exc}: {_short(name)}"
