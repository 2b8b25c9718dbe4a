"""Where clients connect: stdio, a private Unix socket, opt-in loopback TCP.

Owns the file-descriptor and socket-file rules. Stdio: the real stdout is
duplicated for the wire and fd 1 is pointed at stderr, so a stray print or a
library's output can never corrupt the stream. Unix socket: created mode 0600
in a directory of ours with mode 0700; a stale socket file left by a dead
daemon is replaced, a live one is never stolen. TCP: loopback only, and the
connection must authenticate with the bearer token first. The state
directory (consent ledger, shadow store) follows the socket directory's rule:
created 0700, refused when another user can write it; one this user cannot write
(or a file in it the daemon writes from its start) is refused at start too, as a
config problem naming the path and ``host.state_dir``, never a raw errno.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

import anyio
from anyio.abc import SocketListener, SocketStream
from anyio.streams.stapled import MultiListener

from hostd._daemon_lock import config_holder, lock_path, note_state_dir, read_record
from hostd._state_tag import write_state_tag
from hostd.errors import ConfigError, ListenerError
from hostd.protocol import is_loopback_host
from hostd.rpc import Stdio, open_stdio, reserve_stdout

__all__ = [
    "CONSENT_FILES",
    "SHADOW_FILES",
    "ListenerError",
    "Stdio",
    "open_stdio",
    "open_tcp_listener",
    "open_unix_listener",
    "claim_config",
    "config_holder",
    "private_state_dir",
    "release_config",
    "socket_is_live",
    "remove_socket",
    "reserve_stdout",
    "unwritable_state",
]


# -- Unix socket ------------------------------------------------------------------------


def _make_private(directory: Path) -> None:
    """``directory`` and each missing parent, mode 0700 (``mkdir(parents=True)`` gives the
    parents the umask's mode): their names, a project's under ``hostd init``'s
    ``projects/``, are no other user's to list."""
    missing = [d for d in (directory, *directory.parents) if not d.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


#: What a socket path's error says to do: where it is set.
_SOCKET_FIX = "set host.socket (or --socket) to a path in a directory of this user's"


def _private_dir(directory: Path) -> None:
    try:
        _make_private(directory)
        st = directory.stat()
    except OSError as exc:
        raise ListenerError(
            f"cannot create socket directory {directory}: {exc.strerror}; {_SOCKET_FIX}"
        ) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise ListenerError(f"socket directory {directory} is not a directory; {_SOCKET_FIX}")
    if st.st_uid != os.getuid():
        raise ListenerError(f"socket directory {directory} is not owned by this user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise ListenerError(
            f"socket directory {directory} is accessible by other users "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); use a directory with mode 0700"
        )


#: The files under ``state_dir`` every engine start opens for writing: the consent
#: ledger (``hostd.engine.consent``) and the side files SQLite keeps beside it.
CONSENT_FILES = ("consent.sqlite3", "consent.sqlite3-wal", "consent.sqlite3-shm")
#: The shadow store's (``hostd.quality``), written from a start with ``[shadow]`` on.
SHADOW_FILES = ("shadow.db", "shadow.db-wal", "shadow.db-shm")


def private_state_dir(
    directory: Path, source: str = "<config>", *, writes: Iterable[str] = CONSENT_FILES
) -> None:
    """Create ``state_dir`` (0700) or refuse one other users can write or do not own,
    or one this user cannot write (nor ``writes``, the files under it that will be
    opened for writing, where they exist); tag the one accepted (``hostd._state_tag``).

    Another user who can write the directory could swap the consent ledger (C1, C2)
    or the shadow store under us; like the socket directory, it is refused at start.
    One we cannot write would fail later with a bare errno (the lock, the ledger):
    refused here as the config problem it is (exit 2), which a service manager does
    not restart. The tag keeps the bundled providers out of it when it lies inside
    the project.
    """
    try:
        _make_private(directory)
        st = directory.stat()
    except OSError as exc:
        raise ConfigError(
            f"{source}: host.state_dir: cannot create {directory}: {exc.strerror}",
            file=source,
            key="host.state_dir",
        ) from exc
    mode = stat.S_IMODE(st.st_mode)
    problem = None
    if st.st_uid != os.getuid():
        problem = f"{directory} is not owned by this user"
    elif mode & 0o022:
        problem = (
            f"{directory} is writable by other users (mode {mode:04o}); "
            f"use a directory only its owner can write (chmod 700 {directory})"
        )
    if problem is not None:
        raise ConfigError(
            f"{source}: host.state_dir: {problem}",
            file=source,
            key="host.state_dir",
            problem=problem,
        )
    _check_writable(directory, source, writes)
    write_state_tag(directory)


def unwritable_state(path: Path, exc: OSError, source: str) -> ConfigError:
    """The config error for a file or folder under ``state_dir`` this user cannot write
    (``exc``: why): its path, the key that put it there, and what to do."""
    problem = f"cannot write {path} ({exc.strerror or exc})"
    fix = (
        f"make it writable by this user (uid {os.getuid()}), or set host.state_dir to a "
        "directory this user can write"
    )
    return ConfigError(
        f"{source}: host.state_dir: {problem}; {fix}",
        file=source,
        key="host.state_dir",
        problem=problem,
    )


def _check_writable(directory: Path, source: str, names: Iterable[str]) -> None:
    """``directory`` takes a new file, and each of ``names`` in it that exists opens for
    writing (none is created here); ``unwritable_state`` when not."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".hostd-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise unwritable_state(directory, exc, source) from exc
    for name in names:
        path = directory / name
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise unwritable_state(path, exc, source) from exc
        os.close(fd)


def socket_is_live(path: Path) -> bool:
    """Whether a listener answers on the Unix socket ``path`` (one connect, at most 2 s)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        return True  # e.g. EAGAIN: a busy but live listener
    else:
        return True
    finally:
        probe.close()


def _prepare_socket_path(path: Path) -> bool:
    """Make ``path`` free to bind; whether a stale socket (a dead daemon's) was removed."""
    _private_dir(path.parent)
    if path.exists() or path.is_symlink():
        st = path.lstat()
        if not stat.S_ISSOCK(st.st_mode):
            raise ListenerError(f"{path} exists and is not a socket; refusing to replace it")
        if socket_is_live(path):
            raise ListenerError(
                f"another hostd is already serving on {path}; `hostd stop` stops it"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            return True
    return False


async def open_unix_listener(path: Path) -> tuple[SocketListener, bool]:
    """Bind ``path`` (0600, private dir), replacing a stale socket, never a live one;
    the listener, and whether a stale socket was replaced (an unclean stop's)."""
    stale = await anyio.to_thread.run_sync(_prepare_socket_path, path)
    # umask makes the file private from the moment it exists; mode= re-asserts it.
    old = os.umask(0o177)
    try:
        listener = await anyio.create_unix_listener(path, mode=0o600)
    except OSError as exc:
        raise ListenerError(f"cannot listen on {path}: {exc.strerror}; {_SOCKET_FIX}") from exc
    finally:
        os.umask(old)
    return listener, stale


def socket_owner_lost(path: Path, identity: tuple[int, int]) -> str | None:
    """Why ``path`` is no longer the socket we bound (``identity``: its device and
    inode): "removed", "replaced", or None while it is still ours."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return "removed"
    except OSError:
        return None  # unreadable now (e.g. a permission change): not proof it is gone
    return None if (st.st_dev, st.st_ino) == identity else "replaced"


# -- one daemon per config ---------------------------------------------------------------


def claim_config(
    state_dir: Path,
    socket_name: str,
    record: dict[str, object],
    source: str = "<config>",
    home: Path | None = None,
) -> tuple[int, dict[str, object]]:
    """Hold the config's daemon lock (``state_dir/daemons/<its socket's stem>.lock``, an
    ``flock`` the kernel drops when the process ends, however it ends) and write
    ``record`` (pid, socket, config) in it: the open file, to ``release_config``, and
    the record found there, a daemon's that ended without a clean stop (``{}`` after a
    clean one: ``release_config`` empties it). ``ListenerError`` naming the holder when
    another daemon holds it: two daemons of one config would share its state and its
    memories (a second one started with another ``XDG_RUNTIME_DIR``, so another socket,
    is how that happens). ``ConfigError`` (``unwritable_state``) when the lock cannot be
    written. With ``home`` (the per-user state directory), a note there names
    ``state_dir``, so the config's commands find this daemon after an edit of
    ``host.state_dir`` (``serving_holder``)."""
    path = lock_path(state_dir, socket_name)
    try:
        _make_private(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise unwritable_state(path, exc, source) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = read_record(fd)
        os.close(fd)
        where = f" at {holder['socket']}" if holder.get("socket") else ""
        pid = f" (pid {holder['pid']})" if holder.get("pid") else ""
        stop = f"`hostd stop {holder['socket']}`" if holder.get("socket") else "`hostd stop`"
        raise ListenerError(
            f"another hostd{pid} is already serving this config{where}; {stop} stops it"
        ) from None
    except OSError:
        os.close(fd)
        raise
    previous = read_record(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    if home is not None:
        note_state_dir(home, socket_name, state_dir)
    return fd, previous


def release_config(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    os.close(fd)  # the lock goes with it


def remove_socket(path: Path, inode: int | None) -> None:
    """Remove our socket file (only if it is still ours: same inode)."""
    with contextlib.suppress(OSError):
        if inode is None or path.lstat().st_ino == inode:
            path.unlink()


# -- TCP --------------------------------------------------------------------------------


async def open_tcp_listener(host: str, port: int) -> MultiListener[SocketStream]:
    if not is_loopback_host(host):
        raise ListenerError(f"refusing to listen on non-loopback address {host!r}")
    try:
        return await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as exc:
        raise ListenerError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
