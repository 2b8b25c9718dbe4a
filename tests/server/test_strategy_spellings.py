"""One spelling for strategies: the CLI's text forms work over JSON-RPC and the client too."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from hostd.client import RpcError, connect
from tests.server.conftest import ROOT, provider_table

pytestmark = pytest.mark.anyio

# (spelling sent, what the audit records as strategy_params)
SPELLINGS: list[tuple[str | dict[str, Any], str | dict[str, Any]]] = [
    ("score", "score"),
    ("round_robin", "round_robin"),
    ("quota:2", {"quota": 2}),
    ({"quota": 2}, {"quota": 2}),
    ("rrf", {"rrf": {"k": 60}}),
    ("rrf:k=10,alpha=2", {"rrf": {"k": 10, "weights": {"alpha": 2.0}}}),
    ({"rrf": {"k": 10, "weights": {"alpha": 2}}}, {"rrf": {"k": 10, "weights": {"alpha": 2.0}}}),
    ("margin", {"margin": {"k": 60}}),
    ("margin:beta=0.5", {"margin": {"k": 60, "weights": {"beta": 0.5}}}),
]


async def test_every_spelling_is_taken_over_json_rpc(start_daemon: Any) -> None:
    daemon = await start_daemon(providers={"alpha": {}, "beta": {}})
    async with connect(daemon.socket) as client:
        for sent, params in SPELLINGS:
            result = await client.compose("spellings", budget=300, strategy=sent)
            assert result.audit.policy["strategy_params"] == params, sent
        for bad, message in [
            ("quota:x", "strategy quota needs an integer k"),
            ("margin:k=-1", "margin k must be finite and >= 0"),
            ("best", "unknown strategy 'best'"),
        ]:
            with pytest.raises(RpcError) as info:
                await client.compose("spellings", budget=300, strategy=bad)
            assert info.value.rpc_code == -32602
            assert info.value.rpc_data["field"] == "strategy"
            assert message in info.value.message
    assert await daemon.stop() == 0


def _hostd_compose(config: str, strategy: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostd", "--config", config, "compose", "x", "--json"]
        + ["--strategy", strategy],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=90,
        check=False,
    )


def test_the_cli_takes_the_same_spellings_and_names_a_bad_one(tmp_path: Any, marker: str) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        + provider_table("alpha", marker)
        + provider_table("beta", marker),
        encoding="utf-8",
    )
    for sent, params in [
        ("quota:2", {"quota": 2}),
        ("margin:k=10,alpha=2", {"margin": {"k": 10, "weights": {"alpha": 2.0}}}),
        ('{"rrf": {"k": 5}}', {"rrf": {"k": 5}}),
    ]:
        done = _hostd_compose(str(config), sent)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["audit"]["policy"]["strategy_params"] == params
    # A value that names no policy is a usage error naming the option, before any start.
    for bad, said in [
        ("quota:two", "--strategy: strategy quota needs an integer k"),
        ("round-robin", "--strategy: unknown strategy 'round-robin' (did you mean round_robin?)"),
        ('{"rrf":{"k":60}', '--strategy: {"rrf":{"k":60} is not valid JSON (unexpected end'),
    ]:
        done = _hostd_compose(str(config), bad)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"hostd: {said}"), done.stderr
        assert done.stderr.endswith(" [usage]\n") and done.stderr.count("\n") == 1


def test_rerank_is_spelt_alike_by_the_cli_the_client_and_the_wire(
    tmp_path: Any, marker: str
) -> None:
    from hostd.client import Client
    from tests.server.test_rerank import reranker_table

    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        + provider_table("alpha", marker)
        + reranker_table("reverse", marker),
        encoding="utf-8",
    )
    done = _hostd_compose(str(config), "rerank")
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)["audit"]["policy"]["strategy_params"]["rerank"]
    assert (cli["model"], cli["reason"]) == ("fixture@1", None)
    with Client.spawn(config=str(config)) as client:  # the sync client over stdio
        result = client.compose("x", strategy="rerank")
        params = result.audit.policy["strategy_params"]
        assert params["rerank"]["model"] == "fixture@1"
        assert client.compose("x", strategy=params).prompt == result.prompt
    assert "strategy 'rerank' takes no parameters" in _hostd_compose(str(config), "rerank:x").stderr
