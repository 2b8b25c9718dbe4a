"""A session across goals: each turn's evidence is its own goal's. A held frame stands
in for its provider only when that provider gave no answer this turn; one that
answered without it has moved on (real ``files`` provider children, in process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.config import parse_config
from hostd.server import Daemon
from tests.fixtures.procs import ROOT

pytestmark = pytest.mark.anyio

CONFIG_GOAL = "how is the configuration file loaded and validated"
SOCKET_GOAL = "where does the daemon put its unix socket path"


def _config(tmp_path: Path) -> Any:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"config{i}.md").write_text(
            f"# Configuration {i}\n\nThe configuration file is loaded and validated, "
            f"then its keys are checked, step {i}.\n"
        )
        (docs / f"socket{i}.md").write_text(
            f"# Socket {i}\n\nThe daemon puts its unix socket path under the runtime "
            f"directory, daemon socket unix path unix socket, note {i}.\n"
        )
    files = ["python", "-m", "providers.files", "--root", str(docs), "--no-cache"]
    text = (
        f'[host]\nstate_dir = "{tmp_path / "state"}"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\ncwd = "{ROOT}"\n'
        f'trusted_roots = ["{docs}"]\n'
    )
    return parse_config(text, source="<test>", base=tmp_path)


def _cited(result: dict[str, Any]) -> list[str]:
    return sorted(c["label"] for c in result["citations"])


async def test_a_session_turn_quotes_its_own_goal_not_the_last_ones(tmp_path: Path) -> None:
    async with Daemon(_config(tmp_path)).local() as session:

        async def compose(goal: str, **more: Any) -> dict[str, Any]:
            params = {"goal": goal, "budget": 600, **more}
            result: dict[str, Any] = await session.call("context/compose", params)
            return result

        alone = await compose(CONFIG_GOAL)
        first = await compose(CONFIG_GOAL, session="agent")
        second = await compose(SOCKET_GOAL, session="agent")
        third = await compose(CONFIG_GOAL, session="agent")
    assert _cited(first) == _cited(alone)
    assert all(label.startswith("socket") for label in _cited(second)), _cited(second)
    # Back on the first goal: its evidence, not the socket notes held from turn two.
    assert _cited(third) == _cited(alone), _cited(third)
    assert third["verification"]["not_offered_again"] > 0
