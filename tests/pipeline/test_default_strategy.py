"""``host.strategy``: the ranking policy of a composition that names none, over real
provider children; a request's own ``strategy`` overrides it, and a bad one is a
config error naming the key before anything starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.config import parse_config
from hostd.errors import ConfigError
from hostd.server import Daemon
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, strategy: str | None) -> Any:
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in marked_env().items()) + " }"
    lines = ["[host]", f'state_dir = "{tmp_path / "state"}"']
    if strategy is not None:
        lines.append(f"strategy = {json.dumps(strategy)}")
    for pid in ("alpha", "beta"):
        command = python("tests.fixtures.healthy_provider", "--name", pid)
        lines += [
            "",
            "[[provider]]",
            f'id = "{pid}"',
            f"command = {json.dumps(command)}",
            f'cwd = "{ROOT}"',
            f"env = {env}",
        ]
    return parse_config("\n".join(lines) + "\n", source="<test>", base=tmp_path)


async def _policy(cfg: Any, **params: Any) -> str:
    async with Daemon(cfg).local() as session:
        result = await session.call("context/compose", {"goal": "frames", **params})
    return str(result["audit"]["policy"]["strategy"])


async def test_a_composition_naming_no_strategy_ranks_by_the_configured_one(
    tmp_path: Path,
) -> None:
    assert await _policy(_config(tmp_path, None)) == "score"  # the built-in default
    configured = _config(tmp_path, "rrf:k=30,alpha=2")
    assert await _policy(configured) == "rrf"
    assert await _policy(configured, strategy="round_robin") == "round_robin"


@pytest.mark.parametrize(
    ("strategy", "said"),
    [
        ("fancy", "host.strategy: unknown strategy 'fancy'"),
        ("rrf:gamma=2", "host.strategy: weights name ['gamma'], not configured providers"),
    ],
)
def test_a_bad_default_strategy_is_a_config_error(tmp_path: Path, strategy: str, said: str) -> None:
    with pytest.raises(ConfigError) as exc:
        _config(tmp_path, strategy)
    assert said in str(exc.value)
