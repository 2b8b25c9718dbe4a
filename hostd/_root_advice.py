"""The trusted root a command suggests for files a provider cites, so that copying the
suggestion into ``trusted_roots`` makes the daemon re-read them (F5).

``trusted_roots = ["."]`` covers only the files under the config file's directory (a
relative root is read against it); a provider that indexes a folder elsewhere cites
files ``"."`` never holds, and its frames would then be dropped as
``untrusted_source``. So the root named is the cited file's project directory: the
config's own, written ``"."``, when the file is under it; else, absolute, the nearest
folder above the file holding a project's mark (``.git``, ``pyproject.toml`` …), or the
file's own directory when none is marked. Looks only for those marks by name, never
reads a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from hostd._printable import printable

__all__ = ["cited_path", "config_dir", "covering_roots", "roots_toml"]

#: What marks a project's directory: a repository, or a package's or hostd's own file.
_MARKS = (".git", ".hg", "hostd.toml", "pyproject.toml", "package.json", "Cargo.toml", "go.mod")
#: Roots a suggestion names at most (the files of one reply, as a rule, share one or two).
_NAMED = 3


def cited_path(uri: object) -> str | None:
    """The absolute path a ``file:`` URI names (percent-decoded), else None."""
    try:
        parts = urlsplit(str(uri or ""))
    except ValueError:
        return None
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    return path if path.startswith("/") and "\x00" not in path else None


def config_dir(source: str) -> Path | None:
    """The directory a config file's relative paths are read against (resolved, as
    ``load_config`` reads them), for the config ``source`` names; None for one built in
    code (``<defaults>``)."""
    return None if source.startswith("<") else Path(source).resolve().parent


def _marked(directory: str) -> bool:
    return any(os.path.lexists(os.path.join(directory, mark)) for mark in _MARKS)


def _under(path: str, base: str | None) -> bool:
    return base is not None and (path == base or path.startswith(base.rstrip(os.sep) + os.sep))


def _project_of(path: str, base: str | None) -> str:
    """The directory to name for cited ``path`` (resolved): ``base`` (the config's
    directory, resolved: the project's) when it is under it; else the nearest marked
    folder above it, never ``/`` or the home directory itself (too wide to trust), else
    the file's own directory."""
    if _under(path, base):
        assert base is not None
        return base
    here = os.path.dirname(path)
    home = os.path.realpath(os.path.expanduser("~"))
    directory = here
    while directory not in (os.sep, home):
        if _marked(directory):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return here


def covering_roots(paths: Iterable[str], base: Path | str | None) -> list[str]:
    """Roots that hold every one of the cited ``paths`` (absolute), as ``trusted_roots``
    takes them with the config file's directory ``base`` (None: not known, every root
    absolute): each file's project directory (module docstring), in the order first
    cited, none inside another named, at most a few."""
    resolved = os.path.realpath(base) if base is not None else None
    found: list[str] = []
    for path in paths:
        project = _project_of(os.path.realpath(path), resolved)
        if project not in found:
            found.append(project)
    # One inside another is covered by it: only the outer one is named.
    outer = [
        d
        for d in found
        if not any(o != d and (d + os.sep).startswith(o.rstrip(os.sep) + os.sep) for o in found)
    ]
    return [_written(d, resolved) for d in outer[:_NAMED]]


def _written(directory: str, base: str | None) -> str:
    """``directory`` as a config writes it: relative to ``base`` when under it."""
    return os.path.relpath(directory, base) if _under(directory, base) else directory


def roots_toml(roots: Sequence[str]) -> str:
    """``["docs", "/srv/notes"]``: the roots as a TOML array of strings, to copy (a
    provider's path, so printable: no escape of its reaches the terminal)."""
    quoted = (printable(r).replace("\\", "\\\\").replace('"', '\\"') for r in roots)
    return "[" + ", ".join(f'"{r}"' for r in quoted) + "]"
