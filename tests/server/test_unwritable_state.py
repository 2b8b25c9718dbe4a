"""A file or folder ``hostd serve`` must write from its start that it cannot (the
state directory, the daemon lock, the consent ledger, the shadow store, the socket's
folder, the log, the ready file) ends the start with exit 2 and one line naming the
path, the key (or option) that puts it there and what to do: a set-up problem, which
a service manager's ``RestartPreventExitStatus=2`` does not restart, never a raw
errno with exit 1. Real ``hostd serve`` processes.

Root writes through any mode, so each case makes the path unusable for root too: a
file where a folder is expected (or a folder where a file is); the mode case runs only
for a user the mode binds."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.server.conftest import ROOT, daemon_command

pytestmark = pytest.mark.anyio

#: A hang guard: each start ends by itself, refused before it serves.
HANG_GUARD_S = 120


def _file_where_a_folder_goes(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text("not a folder\n")
    path.chmod(0o600)


def _folder_where_a_file_goes(path: Path) -> None:
    path.mkdir(parents=True, mode=0o700)


def _read_only_folder(path: Path) -> None:
    path.mkdir(parents=True, mode=0o700)
    path.chmod(stat.S_IRUSR | stat.S_IXUSR)


#: case -> (what makes it unusable, and where; the path the line names; its key).
CASES: dict[str, tuple[Callable[[Path], None], str, str, str]] = {
    "state_dir is a file": (_file_where_a_folder_goes, "state", "state", "host.state_dir"),
    "state_dir not writable": (_read_only_folder, "state", "state", "host.state_dir"),
    "daemon lock": (
        _file_where_a_folder_goes,
        "state/daemons",
        "state/daemons/hostd-",  # its name: the config's stem and digest
        "host.state_dir",
    ),
    "consent ledger": (
        _folder_where_a_file_goes,
        "state/consent.sqlite3",
        "state/consent.sqlite3",
        "host.state_dir",
    ),
    "shadow store": (
        _folder_where_a_file_goes,
        "state/shadow.db",
        "state/shadow.db",
        "host.state_dir",
    ),
    "socket folder": (_file_where_a_folder_goes, "run", "run", "host.socket"),
    "log file": (_folder_where_a_file_goes, "logs/hostd.log", "logs/hostd.log", "log.file"),
    "ready file": (_file_where_a_folder_goes, "ready", "ready/ready.json", "--ready-file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_an_unwritable_start_file_ends_the_start_with_exit_2_naming_path_and_key(
    workdir: Path, case: str
) -> None:
    make, where, named, key = CASES[case]
    if case == "state_dir not writable" and os.geteuid() == 0:
        pytest.skip("root writes through a folder's mode; the other cases cover root")
    config = workdir / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{workdir}/run/hostd.sock"\nstate_dir = "{workdir}/state"\n'
        f'[log]\nfile = "{workdir}/logs/hostd.log"\n'
        "[shadow]\nenabled = true\n"
    )
    make(workdir / where)
    if not (workdir / "ready").exists():
        (workdir / "ready").mkdir()
    command = daemon_command(config, "serve", "--ready-file", str(workdir / "ready" / "ready.json"))
    try:
        with anyio.fail_after(HANG_GUARD_S):
            done = await anyio.run_process(command, check=False, cwd=ROOT)
    finally:
        if (workdir / "state").is_dir():  # the mode case's: removable again
            (workdir / "state").chmod(0o700)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{workdir}/{named}" in err and key in err, err
    assert "[Errno" not in err, err  # hostd's words, the OS's reason in them
    if key == "host.state_dir":  # what to do about it
        assert "set host.state_dir to a directory this user can write" in err
    assert not (workdir / "run" / "hostd.sock").exists()  # refused before it served
