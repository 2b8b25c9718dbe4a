"""``Client.reload`` / ``AsyncClient.reload``: ``host/reload``'s typed result from a real
daemon child, its config file rewritten between calls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hostd.client import Client, NeedsRestart, Reloaded, RpcError, spawn

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, providers: list[str], extra: str = "") -> Path:
    path = tmp_path / "hostd.toml"
    text = f'[host]\nstate_dir = "{tmp_path / "state"}"\n{extra}\n'
    for pid in providers:
        text += (
            f'[[provider]]\nid = "{pid}"\n'
            f'command = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "{pid}"]\n'
            f'timeout_ms = 60000\ncwd = "{ROOT}"\n\n'
        )
    path.write_text(text, encoding="utf-8")
    return path


def test_the_sync_client_reloads_and_reads_what_changed(tmp_path: Path) -> None:
    config = _config(tmp_path, ["alpha"])
    with Client.spawn(config, stderr=subprocess.DEVNULL, cwd=ROOT) as hostd:
        hostd.status()  # answered: the daemon has read the file as it was
        _config(tmp_path, ["alpha", "beta"], extra="[log]\nmax_bytes = 200000\n")
        done = hostd.reload()
        assert isinstance(done, Reloaded)
        assert (done.started, done.stopped, done.restarted) == (["beta"], [], [])
        assert (done.updated, done.kept) == ([], ["alpha"])
        assert done.config is not None and done.config["file"] == str(config.resolve())
        (held,) = done.needs_restart
        assert isinstance(held, NeedsRestart) and held.key == "log.max_bytes"
        assert held.reason == "the log file is opened at start"
        assert done.tcp_token is None  # no TCP listener
        assert [p["id"] for p in hostd.providers()] == ["alpha", "beta"]

        config.write_text("[host\n", encoding="utf-8")
        with pytest.raises(RpcError) as caught:
            hostd.reload()
        assert caught.value.remote_reason == "bad_config"
        assert caught.value.message.startswith("config not reloaded")
        assert [p["id"] for p in hostd.providers()] == ["alpha", "beta"]


@pytest.mark.anyio
async def test_the_async_client_reloads_a_setting_applied_at_once(tmp_path: Path) -> None:
    config = _config(tmp_path, ["alpha"])
    async with spawn(config, stderr=subprocess.DEVNULL, cwd=ROOT) as client:
        await client.status()  # answered: the daemon has read the file as it was
        _config(tmp_path, ["alpha"], extra="default_budget = 1234\n")
        done = await client.reload()
        assert done.applied == ["host.default_budget"] and done.needs_restart == []
        assert done.to_wire()["kept"] == ["alpha"]
        reply = await client.compose("g")
        assert reply.usage is not None and reply.usage.global_budget == 1234
