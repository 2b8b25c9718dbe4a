"""The files the daemon keeps are its user's alone: state dir 0700, databases and log 0600,
and a state directory other users can write is refused at start with one clear line."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hostd.client import spawn
from hostd.engine import ConsentStore
from tests.server.conftest import ROOT, daemon_command, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def loose_umask() -> Iterator[None]:
    # The usual 022: what a file gets when its creator does not choose its mode.
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_consent_ledger_and_its_wal_files_are_private(tmp_path: Path, loose_umask) -> None:
    with ConsentStore(tmp_path / "state" / "consent.sqlite3") as store:
        store.grant("cloud", "api.example.com", "tester")
        files = sorted(p.name for p in (tmp_path / "state").iterdir())
        assert files == ["consent.sqlite3", "consent.sqlite3-shm", "consent.sqlite3-wal"]
        assert {name: _mode(tmp_path / "state" / name) for name in files} == dict.fromkeys(
            files, 0o600
        )
    assert _mode(tmp_path / "state") == 0o700


def test_an_existing_ledger_readable_by_others_is_made_private(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    ConsentStore(db).close()
    db.chmod(0o644)
    ConsentStore(db).close()
    assert _mode(db) == 0o600


async def test_every_file_a_daemon_creates_is_private(workdir, marker, loose_umask) -> None:
    config = workdir / "hostd.toml"
    log_file = workdir / "logs" / "hostd.log"
    (workdir / "logs").mkdir()
    text = write_config(workdir, marker, {"cloud": {"egress_scope": "api.example.com"}})
    text += f'[log]\nfile = "{log_file}"\n[shadow]\nenabled = true\nsample = 1.0\n'
    config.write_text(text)
    command = [sys.executable, "-m", "hostd", "--config", str(config), "serve", "--stdio"]
    async with spawn(command=command, cwd=ROOT) as client:
        await client.consent_grant("cloud", "api.example.com", "tester")
        result = await client.compose("private files", budget=200)
    assert {p.provider_id: p.status for p in result.providers} == {"cloud": "ok"}
    state = workdir / "state"
    assert _mode(state) == 0o700
    made = sorted(str(p.relative_to(state)) for p in state.rglob("*"))
    assert {"consent.sqlite3", "shadow.db", "handshakes/cloud.json"} <= set(made)
    # Files 0600, folders (the last handshakes') 0700, however loose the umask.
    modes = {name: _mode(state / name) for name in made}
    assert modes == {n: 0o700 if (state / n).is_dir() else 0o600 for n in made}
    assert _mode(log_file) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
async def test_a_state_dir_other_users_can_write_is_refused(workdir, mode: int) -> None:
    state = workdir / "state"
    state.mkdir()
    state.chmod(mode)
    config = workdir / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{workdir}/run/hostd.sock"\nstate_dir = "{state}"\n')
    for args in (("serve",), ("consent", "list")):
        done = await anyio.run_process(daemon_command(config, *args), check=False, cwd=ROOT)
        err = done.stderr.decode()
        assert done.returncode == 2, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "host.state_dir" in err and str(state) in err and f"{mode:04o}" in err
    assert not (state / "consent.sqlite3").exists()
    assert not (workdir / "run" / "hostd.sock").exists()


async def test_a_state_dir_readable_by_others_is_accepted(start_daemon, workdir) -> None:
    (workdir / "state").mkdir()
    (workdir / "state").chmod(0o755)
    daemon = await start_daemon({"alpha": {}})
    assert await daemon.stop() == 0


def test_the_missing_parents_of_a_state_dir_are_made_private_too(
    tmp_path: Path, loose_umask
) -> None:
    from hostd.server import private_state_dir

    (tmp_path / "home").mkdir(mode=0o755)
    state = tmp_path / "home" / "hostd" / "projects" / "app-0123abcd"
    private_state_dir(state)
    made = [tmp_path / "home" / "hostd", tmp_path / "home" / "hostd" / "projects", state]
    assert [_mode(d) for d in made] == [0o700, 0o700, 0o700]
    assert _mode(tmp_path / "home") == 0o755  # one that was there is left as it was
