"""``hostd consent`` reads what each provider declared at its last handshake (recorded
under the state directory) instead of starting every provider, and refuses a scope the
provider did not declare unless told ``--force``. Real ``hostd`` child processes; each
provider counts its own starts in a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hostd.config import load_config
from hostd.engine import HandshakeRecords
from tests.fixtures.cli import run_hostd as _hostd
from tests.fixtures.procs import ROOT


def _provider(tmp_path: Path, pid: str, *extra: str) -> str:
    """A healthy fixture provider that appends a line to ``<pid>.starts`` at each start."""
    starts = tmp_path / f"{pid}.starts"
    script = f'echo start >> {starts}; exec "$0" -m tests.fixtures.healthy_provider "$@"'
    words = ["/bin/sh", "-c", script, sys.executable, "--name", pid, *extra]
    return f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        + _provider(tmp_path, "alpha")
        + _provider(tmp_path, "cloud", "--egress-scope", "api.example.com")
    )
    return path


def _starts(tmp_path: Path, pid: str) -> int:
    path = tmp_path / f"{pid}.starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _hostd_at(config: Path, *args: str) -> tuple[int, str, str]:
    done = _hostd("--config", str(config), *args)
    return done.returncode, done.stdout, done.stderr


def test_consent_list_reads_the_recorded_handshakes_and_starts_no_provider(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    code, _, err = _hostd_at(config, "providers")  # every provider starts once, and records
    assert code == 0, err
    before = (_starts(tmp_path, "alpha"), _starts(tmp_path, "cloud"))
    assert before == (1, 1)
    code, out, err = _hostd_at(config, "consent", "list", "--json")
    assert code == 0, err
    assert (_starts(tmp_path, "alpha"), _starts(tmp_path, "cloud")) == before
    declared = json.loads(out)["declared"]
    assert declared["cloud"] == {
        "recorded": True,
        "scopes": ["api.example.com"],
        "missing": ["api.example.com"],
        "destination": None,  # a child process: its receipts name no origin
    }
    assert declared["alpha"] == {
        "recorded": True,
        "scopes": [],
        "missing": [],
        "destination": None,
    }
    code, _, err = _hostd_at(config, "consent", "list")
    assert "hostd: cloud: declares api.example.com; not granted: api.example.com" in err


def test_a_grant_with_no_record_starts_only_the_named_provider_once(tmp_path: Path) -> None:
    config = _config(tmp_path)
    code, out, err = _hostd_at(config, "consent", "grant", "cloud", "api.example.com", "--json")
    assert code == 0, err
    assert json.loads(out)["receipt"]["scope"] == "api.example.com"
    assert (_starts(tmp_path, "alpha"), _starts(tmp_path, "cloud")) == (0, 1)
    cfg = load_config(config)
    spec = next(s for s in cfg.provider_specs() if s.id == "cloud")
    info = HandshakeRecords(cfg.state_path).read(spec)
    assert info is not None and info.data_flow.egress_scopes == ["api.example.com"]
    record = cfg.state_path / "handshakes" / "cloud.json"
    assert record.stat().st_mode & 0o777 == 0o600
    # Recorded now: the next command reads it and starts nothing.
    code, out, _ = _hostd_at(config, "consent", "list", "cloud", "--json")
    assert json.loads(out)["declared"]["cloud"]["missing"] == []
    assert _starts(tmp_path, "cloud") == 1


@pytest.mark.slow
def test_an_undeclared_scope_is_refused_unless_forced(tmp_path: Path) -> None:
    config = _config(tmp_path)
    code, _, err = _hostd_at(config, "consent", "grant", "cloud", "api.exmaple.com")
    assert code == 1
    (line,) = [x for x in err.splitlines() if not x.startswith("{")]
    assert "did not declare scope 'api.exmaple.com'" in line and "api.example.com" in line
    assert "--force" in line
    code, out, _ = _hostd_at(config, "consent", "list", "cloud", "--json")
    assert json.loads(out)["receipts"] == []  # nothing was recorded
    code, _, err = _hostd_at(config, "consent", "grant", "alpha", "egress")
    assert code == 1 and "it sends nothing off the machine" in err
    code, out, err = _hostd_at(config, "consent", "grant", "cloud", "api.exmaple.com", "--force")
    assert code == 0, err
    # A receipt on record can be revoked, declared or not.
    code, out, err = _hostd_at(config, "consent", "revoke", "cloud", "api.exmaple.com", "--json")
    assert code == 0 and json.loads(out)["revoked"][0]["scope"] == "api.exmaple.com", err
    code, _, err = _hostd_at(config, "consent", "revoke", "cloud", "api.exmaple.com")
    assert code == 1 and "did not declare" in err  # nothing live left to revoke


def test_a_changed_provider_command_is_not_read_from_an_old_record(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert _hostd_at(config, "providers")[0] == 0
    config.write_text(config.read_text().replace("api.example.com", "api.example.org"))
    code, out, err = _hostd_at(config, "consent", "grant", "cloud", "api.example.org")
    assert code == 0, err  # started again (its command changed): it declares .org now
    assert _starts(tmp_path, "cloud") == 2


def test_an_unknown_provider_is_named_with_the_configured_ones(tmp_path: Path) -> None:
    config = _config(tmp_path)
    code, _, err = _hostd_at(config, "consent", "grant", "clod", "egress")
    assert code == 1 and "unknown provider 'clod'" in err and "alpha, cloud" in err


@pytest.mark.slow
def test_force_and_a_revoke_of_a_held_receipt_need_no_start_of_a_provider_that_cannot(
    tmp_path: Path,
) -> None:
    # A provider that cannot start (a remote one down, a broken command): its declared
    # scopes cannot be read, but a forced grant and the revoke of a receipt on record
    # do not need them.
    config = _config(tmp_path)
    ghost = '[[provider]]\nid = "ghost"\ncommand = ["/no/such/provider-cmd"]\n'
    config.write_text(config.read_text() + ghost)
    code, _, err = _hostd_at(config, "consent", "grant", "ghost", "egress")
    assert code == 1 and "[provider_not_started]" in err, err
    assert "did not start, so its declared scopes are unknown" in err
    assert "[internal]" not in err
    code, out, err = _hostd_at(config, "consent", "grant", "ghost", "egress", "--force", "--json")
    assert code == 0, err
    assert json.loads(out)["receipt"]["scope"] == "egress"
    code, out, err = _hostd_at(config, "consent", "list", "ghost", "--json")
    assert code == 0 and "did not start" in err, err  # listed all the same, and why not known
    listed = json.loads(out)
    assert [r["scope"] for r in listed["receipts"] if r["active"]] == ["egress"]
    assert listed["declared"]["ghost"] == {"recorded": False}
    code, out, err = _hostd_at(config, "consent", "revoke", "ghost", "egress", "--json")
    assert code == 0, err
    assert [r["scope"] for r in json.loads(out)["revoked"]] == ["egress"]
    # Nothing held any more: to revoke it again its scopes are needed, and it cannot start.
    code, _, err = _hostd_at(config, "consent", "revoke", "ghost", "egress")
    assert code == 1 and "[provider_not_started]" in err, err
