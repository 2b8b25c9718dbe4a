"""A remote provider's consent names the origin its queries go to: the same provider id
pointed at another server needs consent again. Real ``hostd`` commands against two real
HTTPS provider processes on loopback, one ledger under one state directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.remote._servers import TOKEN
from tests.remote.test_serve import _hostd, served

pytestmark = pytest.mark.slow


def _config(tmp_path: Path, url: str, ca_file: Path) -> Path:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "team-search"\nurl = "{url}"\nca_file = "{ca_file}"\n'
        f'token_file = "{tmp_path}/one/served-token"\ntimeout_ms = 60000\n'
    )
    return config


def _origin(url: str) -> str:
    """``https://127.0.0.1:PORT`` of the URL a served provider announced."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"


def _status(done: object) -> str:
    result = json.loads(done.stdout)  # type: ignore[attr-defined]
    (leg,) = result["providers"]
    return str(leg["status"])


def test_consent_given_for_one_origin_does_not_follow_the_id_to_another(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "retry.md").write_text(
        "# Retry policy\n\nThe retry loop gives up after five tries.\n"
    )
    goal = "retry loop gives up"
    one, two = tmp_path / "one", tmp_path / "two"  # a certificate and a CA each
    one.mkdir()
    two.mkdir()
    with (
        served("providers.files", one, "--root", str(corpus)) as (first, first_ca),
        served("providers.files", two, "--root", str(corpus)) as (second, second_ca),
    ):
        assert first != second
        config = _config(tmp_path, first, first_ca)
        granted = _hostd(config, "consent", "grant", "team-search", "egress", "--json")
        there = _hostd(config, "compose", goal, "--json")
        # The config now sends the same id to another server.
        config = _config(tmp_path, second, second_ca)
        moved = _hostd(config, "compose", goal, "--json")
        listed = _hostd(config, "consent", "list", "team-search", "--json")
        told = _hostd(config, "consent", "list", "team-search")
        again = _hostd(config, "consent", "grant", "team-search", "egress")
        here = _hostd(config, "compose", goal, "--json")
    for done in (granted, there, listed, told, again, here):
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout + done.stderr
    first_origin, second_origin = _origin(first), _origin(second)
    assert json.loads(granted.stdout)["receipt"]["destination"] == first_origin
    assert _status(there) == "ok"
    # Nothing to show: the one provider had no consent for where it is now.
    assert moved.returncode == 1 and TOKEN not in moved.stdout + moved.stderr
    assert _status(moved) == "no_consent"
    assert f"no consent recorded for {second_origin} for scope(s): egress" in moved.stderr
    receipts = json.loads(listed.stdout)["receipts"]
    assert [(r["destination"], r["active"]) for r in receipts] == [(first_origin, True)]
    assert json.loads(listed.stdout)["declared"]["team-search"] == {
        "recorded": True,
        "scopes": ["egress"],
        "missing": ["egress"],
        "destination": second_origin,
    }
    assert f"live receipts are for {first_origin}, not {second_origin}" in told.stderr
    # Told to a person: the grant names the origin it counts for.
    assert again.stdout.startswith(f"granted team-search egress for {second_origin} (receipt ")
    assert _status(here) == "ok"
