"""Contested budget over the real daemon: providers asked for share × overfetch.

Two providers both have far more to offer than the budget: one scores in a high
band, one in a low band. With over-fetch the budget is contested, so the ranking
policy decides who gets in: raw-score ranking admits only the high band, rank
fusion admits both.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hostd.client import ComposeResult, RpcError, connect
from hostd.config import parse_config
from hostd.errors import ConfigError
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio


def _banded(pid: str, marker: str, low: float, high: float) -> str:
    cmd = ", ".join(
        f'"{w}"'
        for w in (
            "python", "-m", "tests.server.banded_provider", "--name", f"{pid}-{marker}",
            "--frames", "40", "--size", "120", "--low", str(low), "--high", str(high),
        )
    )  # fmt: skip
    # A generous leg deadline: the first leg includes the provider's lazy start.
    return f'[[provider]]\nid = "{pid}"\ncommand = [{cmd}]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'


async def _contested(start_daemon: Any, marker: str, **host: Any) -> Any:
    extra = _banded("high", marker, 0.8, 0.99) + _banded("low", marker, 0.01, 0.2)
    return await start_daemon(providers={}, extra=extra, **host)


def _included(result: ComposeResult) -> Counter[str]:
    return Counter(e.provider for e in result.audit.included())


async def test_score_admits_only_the_high_band_and_rrf_admits_both(start_daemon, marker) -> None:
    daemon = await _contested(start_daemon, marker, overfetch=2.0)
    async with connect(daemon.socket) as client:
        by_score = await client.compose("contested", budget=400, strategy="score")
        fused = await client.compose("contested", budget=400, strategy={"rrf": {"k": 60}})
    for result in (by_score, fused):
        audit = result.audit
        assert audit.tokens_used <= audit.global_budget == 400
        # The asked figure is visible: the policy and each provider's report carry it.
        assert audit.policy["overfetch"] == 2.0
        assert audit.policy["asked"] == {"high": 400, "low": 400}
        reports = {r.provider_id: r for r in result.providers}
        assert {pid: (r.share, r.max_tokens) for pid, r in reports.items()} == {
            "high": (200, 400),
            "low": (200, 400),
        }
        assert all(r.ok for r in reports.values())
        # Both offered more than the whole budget's worth between them.
        assert sum(r.tokens_accepted for r in reports.values()) > 400
    assert _included(by_score)["high"] > 0
    assert _included(by_score)["low"] == 0
    assert _included(fused)["high"] > 0 and _included(fused)["low"] > 0
    assert await daemon.stop() == 0


async def test_overfetch_one_param_gives_each_provider_its_share_only(start_daemon, marker) -> None:
    daemon = await _contested(start_daemon, marker)  # config default: 2.0
    async with connect(daemon.socket) as client:
        result = await client.compose("contested", budget=400, strategy="score", overfetch=1)
        default = await client.query("contested", budget=400)
    assert result.audit.policy["asked"] == {"high": 200, "low": 200}
    # Each provider offered no more than its share: only the fences of the prompt
    # (which the budget also bounds) are contested now.
    assert sum(r.tokens_accepted for r in result.providers) <= 400
    assert default["overfetch"] == 2.0
    assert {r["provider_id"]: r["max_tokens"] for r in default["providers"]} == {
        "high": 400,
        "low": 400,
    }
    assert await daemon.stop() == 0


@pytest.mark.parametrize("bad", [0.5, 0, -2, "lots", True])
async def test_a_bad_overfetch_param_is_invalid_params_naming_the_field(
    start_daemon, bad: Any
) -> None:
    daemon = await start_daemon(providers={"alpha": {}})
    async with connect(daemon.socket) as client:
        for method in ("context/compose", "context/query"):
            with pytest.raises(RpcError) as info:
                await client.call(method, {"goal": "g", "overfetch": bad})
            assert info.value.rpc_code == -32602
            assert info.value.rpc_data["field"] == "overfetch"
            assert "overfetch" in info.value.message
    assert await daemon.stop() == 0


@pytest.mark.parametrize("bad", ["0.5", "0", "-1", '"two"', "true", "nan", "inf"])
def test_a_bad_overfetch_in_config_names_the_key(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[host]\noverfetch = {bad}\n", source="x.toml", base=tmp_path)
    assert "host.overfetch" in str(info.value)
    assert info.value.data.get("key") == "host.overfetch"


def test_overfetch_defaults_to_two_and_accepts_any_value_from_one(tmp_path: Path) -> None:
    assert parse_config("", base=tmp_path).host.overfetch == 2.0
    assert parse_config("[host]\noverfetch = 1\n", base=tmp_path).host.overfetch == 1.0
    assert parse_config("[host]\noverfetch = 3.5\n", base=tmp_path).host.overfetch == 3.5
