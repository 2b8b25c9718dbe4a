"""First use: a cold daemon over the default config answers its first request with
evidence (``config/hostd.toml``, the checkout as a project, in a fresh home, so empty
state and cache dirs; real child processes).

A request that names no ``timeout_ms`` waits for readiness only up to
``start_timeout_s``: past it, a build still going is reported ``warming``, as
documented. How long a cold build takes is the machine's speed, so these tests run the
shipped config with its deadlines raised to hang guards (``_checkout_config``): the
request waits for the provider's ready event, whatever the load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd.client import Client, ComposeResult

from ._stdio import REPO, child_env

pytestmark = pytest.mark.slow

GOAL = "how is the config loaded?"
#: hostd's own checkout as a project (the embedded default configures no provider).
CHECKOUT_CONFIG = REPO / "config" / "hostd.toml"
#: Hang guards, not the things tested: a cold build on a busy machine may take minutes.
START_GUARD_S, LEG_GUARD_MS, TEST_GUARD_S = 240, 120_000, 300


def _checkout_config(tmp_path: Path) -> Path:
    """``config/hostd.toml`` as shipped, but for its deadlines: ``start_timeout_s`` and
    each provider's ``timeout_ms`` raised to hang guards, its relative directories made
    absolute (the copy lives in ``tmp_path``)."""
    text = CHECKOUT_CONFIG.read_text()
    swaps = {
        "[host]\n": f"[host]\nstart_timeout_s = {START_GUARD_S}\n",
        "timeout_ms = 2000\n": f"timeout_ms = {LEG_GUARD_MS}\n",
        '".."': json.dumps(str(REPO)),
    }
    for old, new in swaps.items():
        assert old in text, f"config/hostd.toml no longer holds {old!r}: update this test"
        text = text.replace(old, new)
    config = tmp_path / "hostd.toml"
    config.write_text(text)
    return config


def _home(tmp_path: Path) -> dict[str, str]:
    """A fresh home: the daemon's state dir, the memory database and the files cache all
    land under it (the providers see ``HOME`` through the environment allow-list)."""
    home = tmp_path / "home"
    home.mkdir()
    env = child_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(home / "run")})
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "HOSTD_CONFIG"):
        env.pop(name, None)
    return env


def _legs(result: ComposeResult) -> dict[str, str]:
    return {p.provider_id: p.status for p in result.providers}


@pytest.mark.timeout(TEST_GUARD_S + 60)
def test_the_first_request_to_a_cold_daemon_returns_evidence(tmp_path: Path) -> None:
    env, config = _home(tmp_path), _checkout_config(tmp_path)
    with Client.spawn(config, env=env, cwd=tmp_path, stderr=subprocess.DEVNULL) as client:
        # Names no timeout_ms: waits for readiness (``timeout``: this client's hang guard).
        first = client.compose(GOAL, budget=1500, timeout=TEST_GUARD_S)
        assert _legs(first)["files"] == "ok", first.providers
        assert first.prompt.strip() and first.citations


@pytest.mark.timeout(TEST_GUARD_S + 60)
def test_the_printf_example_answers_with_evidence_on_a_cold_start(tmp_path: Path) -> None:
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "context/compose",
            "params": {"goal": GOAL, "budget": 1500},
        }
    )
    out = subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(_checkout_config(tmp_path))]
        + ["serve", "--stdio"],
        input=line + "\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_home(tmp_path),
        timeout=TEST_GUARD_S,
        check=True,
    )
    reply = json.loads(out.stdout.splitlines()[0])
    assert reply["id"] == 1 and reply["result"]["prompt"].strip(), reply
    assert _legs(ComposeResult.model_validate(reply["result"]))["files"] == "ok"


@pytest.mark.timeout(TEST_GUARD_S + 60)
def test_one_shot_compose_on_a_cold_start_prints_evidence(tmp_path: Path) -> None:
    env, config = _home(tmp_path), _checkout_config(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(config), "compose", GOAL]
        + ["--budget", "1500"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=TEST_GUARD_S,
        check=True,
    )
    assert out.stdout.strip()
    assert "files=ok(" in out.stderr, out.stderr


def _gated_config(tmp_path: Path, pid: str, flag: str, gate: Path) -> Path:
    """A config of one ``warming_provider`` held by ``gate`` (``--warm-gate`` or
    ``--handshake-gate``), its log in ``hostd.log`` beside it. Its deadlines are hang
    guards: once the gate opens, a request naming no ``timeout_ms`` waits for the
    provider's ready event, however slow its start on a busy machine."""
    command = ["python", "-m", "tests.fixtures.warming_provider", flag, str(gate)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f"start_timeout_s = {START_GUARD_S}\n"
        f'\n[log]\nfile = "{tmp_path / "hostd.log"}"\n'
        f'\n[[provider]]\nid = "{pid}"\ncommand = {json.dumps(command)}\ncwd = "{REPO}"\n'
        f"timeout_ms = {LEG_GUARD_MS}\n"
    )
    return config


def test_a_bounded_first_request_reports_warming_through_the_client_api(tmp_path: Path) -> None:
    # The gated provider cannot be ready: the leg must say warming, within its bound.
    gate = tmp_path / "gate"
    config = _gated_config(tmp_path, "gated", "--warm-gate", gate)
    with Client.spawn(config, env=child_env(), cwd=REPO) as client:
        first = client.compose(GOAL, budget=500, timeout_ms=300)
        listed = client.call("providers/list", {})["providers"][0]
        notes: list[dict[str, Any]] = []

        def heard(note: dict[str, Any]) -> None:
            notes.append(note)
            gate.touch()  # ready once the request has heard it warming

        # No timeout named: it waits for readiness, hearing the warm-up as it goes.
        after = client.compose(GOAL, budget=500, on_progress=heard)
        again = client.call("providers/list", {})["providers"][0]
    assert _legs(first) == {"gated": "warming"}
    error = first.providers[0].error
    assert error is not None and error.code in ("starting", "warming")
    assert listed["state"] in ("warming", "starting", "idle")
    assert _legs(after) == {"gated": "ok"} and after.prompt.strip()
    warm = [n for n in notes if n.get("status") == "warming"]
    assert warm and warm[0]["provider"] == "gated" and warm[0]["warming"]["phase"] == "build"
    assert warm[-1]["warming"]["state"] == "ready"
    assert [n for n in notes if "done" in n and "warming" not in n]  # and the leg's own
    assert again["health"]["restarts"] == 0 and again["health"]["starts"] == 1
    assert os.getpid() != again["health"]["pid"]
    # The log's audit summary names the warming leg (it offered no entry to count).
    events = [json.loads(line) for line in (tmp_path / "hostd.log").read_text().splitlines()]
    summaries = {e["request_id"]: e for e in events if e["event"] == "compose.audit.summary"}
    assert summaries[first.request_id]["warming"] == ["gated"]
    assert summaries[after.request_id]["warming"] == []


def test_the_daemon_serves_while_its_providers_start(tmp_path: Path) -> None:
    # The provider answers no handshake until the gate exists: a bounded request that
    # arrives meanwhile is answered (its leg starting), not held until every start ends.
    gate = tmp_path / "gate"
    config = _gated_config(tmp_path, "slow", "--handshake-gate", gate)
    with Client.spawn(config, env=child_env(), cwd=REPO) as client:
        first = client.compose(GOAL, budget=500, timeout_ms=300)
        gate.touch()
        after = client.compose(GOAL, budget=500)  # no timeout named: waits for the start
        row = client.call("providers/list", {})["providers"][0]
    assert _legs(first) == {"slow": "warming"}
    error = first.providers[0].error
    assert error is not None and error.code == "starting"
    assert _legs(after) == {"slow": "ok"} and after.prompt.strip()
    # One start, never cut: the boot start is the one both requests joined.
    assert row["health"]["starts"] == 1 and row["health"]["consecutive_failures"] == 0
