"""The lock a daemon holds on its config (``state_dir/daemons/<its socket's stem>.lock``)
and the record it writes in it (pid, socket, config), read without holding it; and the
note (``<per-user state dir>/daemons/<its socket's stem>.where``) a daemon whose
state directory is another leaves there, naming it.

The daemon claims the lock (``hostd.server``); ``hostd status``, ``stop`` and ``reload``
read its record first, to reach the daemon serving the config wherever it listens
(after an edit of ``host.socket``, at the old one). The note finds the lock after an
edit of ``host.state_dir`` too: the lock stays where the daemon started. A leaf:
imports nothing of hostd, so those commands read it without loading the daemon.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

__all__ = [
    "config_holder",
    "lock_path",
    "note_state_dir",
    "read_record",
    "serving_holder",
    "where_path",
]


def lock_path(state_dir: Path, socket_name: str) -> Path:
    """Where the daemon of the config whose socket is named ``socket_name`` holds its lock."""
    return state_dir / "daemons" / (Path(socket_name).stem + ".lock")


def where_path(home: Path, socket_name: str) -> Path:
    """The note naming the state directory of the config's daemon, in the per-user
    state directory ``home`` (``default_state_dir``): a place no config edit moves."""
    return home / "daemons" / (Path(socket_name).stem + ".where")


def note_state_dir(home: Path, socket_name: str, state_dir: Path) -> None:
    """Leave the note saying the config's daemon keeps its lock in ``state_dir`` (when
    that is not ``home``, where a reader looks anyway). Best effort: a per-user state
    directory that cannot be written costs only the finding after a state_dir edit."""
    if state_dir.absolute() == home.absolute():
        return
    path = where_path(home, socket_name)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        spare = path.with_name(f".{path.name}.{os.getpid()}")
        spare.write_text(json.dumps({"state_dir": str(state_dir.absolute())}), encoding="utf-8")
        os.replace(spare, path)  # whole or not at all: a reader never meets half of it
    except OSError:
        return


def serving_holder(state_dir: Path, home: Path, socket_name: str) -> dict[str, object] | None:
    """The record of the daemon holding the config's lock, with its ``state_dir``: the
    lock in ``state_dir`` (the config's own), else in the one the note in ``home``
    names (the config's daemon started with another ``host.state_dir``), else in
    ``home`` itself (it started with none); ``None`` when no daemon holds any."""
    seen: list[Path] = []
    for where in (state_dir, _noted(home, socket_name), home):
        if where is None or where in seen:
            continue
        seen.append(where)
        try:
            holder = config_holder(where, socket_name)
        except OSError:
            continue
        if holder is not None:
            return {**holder, "state_dir": str(where)}
    return None


def _noted(home: Path, socket_name: str) -> Path | None:
    """The state directory the note names, if it names one."""
    try:
        said = json.loads(where_path(home, socket_name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    named = said.get("state_dir") if isinstance(said, dict) else None
    return Path(named) if isinstance(named, str) and named else None


def config_holder(state_dir: Path, socket_name: str) -> dict[str, object] | None:
    """The record of the daemon holding the config's lock (``claim_config``): pid,
    socket, config; ``None`` when no daemon holds it."""
    try:
        fd = os.open(lock_path(state_dir, socket_name), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_record(fd)
        return None  # not held: whatever it says is a past daemon's
    finally:
        os.close(fd)


def read_record(fd: int) -> dict[str, object]:
    """The record in the open lock file ``fd``; ``{}`` when it holds none that reads."""
    try:
        value = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
