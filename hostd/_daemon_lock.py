"""The lock a daemon holds on its config (``state_dir/daemons/<its socket's stem>.lock``)
and the record it writes in it (pid, socket, config), read without holding it.

The daemon claims the lock (``hostd.server``); ``hostd status`` and ``stop`` read its
record when no daemon answers at the config's socket, to name the one serving the
config elsewhere, and ``reload`` reads it first, to reach that one wherever it listens
(after an edit of ``host.socket``, at the old one). A leaf: imports nothing of hostd,
so those commands read it without loading the daemon.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

__all__ = ["config_holder", "lock_path", "read_record"]


def lock_path(state_dir: Path, socket_name: str) -> Path:
    """Where the daemon of the config whose socket is named ``socket_name`` holds its lock."""
    return state_dir / "daemons" / (Path(socket_name).stem + ".lock")


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
