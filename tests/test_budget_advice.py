"""A budget too small for any frame is said as such, with the budget that would do,
not as "no evidence for this goal" (the CLI's and ``hostd mcp``'s words over real
compositions: the files provider's child over a small tree, the in-process session)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hostd._hints import budget_advice
from hostd.cli._outcome import no_evidence as cli_no_evidence
from hostd.config import parse_config
from hostd.mcp._schema import no_evidence as mcp_no_evidence
from hostd.server import Daemon
from tests.fixtures.procs import ROOT

pytestmark = pytest.mark.anyio

GOAL = "how does the retry loop give up"


def _config(tmp_path: Path) -> Any:
    """The files provider over one file of about 70 tokens, and a second provider of
    twice its weight (the split halves files' share of any budget)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "retry.md").write_text(
        "# Retries\n\nThe retry loop gives up after three attempts, waiting twice as long "
        "each time; the last error is raised to the caller with every attempt's cause.\n"
        "A caller that wants more attempts passes attempts=N; zero disables retries.\n"
    )
    files = ["python", "-m", "providers.files", "--root", str(tree), "--no-cache"]
    memory = ["python", "-m", "providers.memory", "--db", str(tmp_path / "memory.db")]
    return parse_config(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n\n"
        f'[[provider]]\nid = "memory"\ncommand = {json.dumps(memory)}\ncwd = "{ROOT}"\n'
        "weight = 2\ntimeout_ms = 60000\n",
        source="<test>",
        base=tmp_path,
    )


def _advised(result: dict[str, Any]) -> int:
    advice = budget_advice(result)
    assert advice is not None, result["audit"]
    (needed,) = map(int, re.findall(r"a budget of at least (\d+)", advice))
    return needed


async def test_following_the_advised_budget_composes_evidence(tmp_path: Path) -> None:
    async with Daemon(_config(tmp_path)).local() as session:

        async def compose(budget: int) -> dict[str, Any]:
            result: dict[str, Any] = await session.call(
                "context/compose", {"goal": GOAL, "budget": budget}
            )
            return result

        # Too small for files' one frame: it says it left it out; the budget is named.
        tiny = await compose(10)
        assert tiny["citations"] == [] and tiny["audit"]["entries"] == []
        files = next(p for p in tiny["providers"] if p["provider_id"] == "files")
        assert "nothing fit" in files["note"]
        first = _advised(tiny)
        assert first > 10
        mcp = mcp_no_evidence(tiny)
        assert mcp is not None and mcp.startswith("hostd: no evidence fit the budget")
        cli = cli_no_evidence(tiny)
        assert cli is not None and f"  {budget_advice(tiny)}: raise --budget" in cli
        # The least budget one could fit: at it files offers its frame, and the frame's
        # hint, passed back, includes it (one step for the frame named).
        offered = await compose(first)
        (entry,) = offered["audit"]["entries"]
        assert entry["reason"] == "over_budget", offered["audit"]
        assert f"{budget_advice(offered)}: pass a larger budget" in str(mcp_no_evidence(offered))
        named = _advised(offered)
        assert named > first
        assert (await compose(named))["citations"]


def test_no_advice_when_nothing_was_offered_or_something_fit() -> None:
    assert budget_advice({"audit": {"entries": [], "global_budget": 10}}) is None
    hint = {"budget": 150, "provider": "files", "cost": 55, "fixed": 87, "asked": 150}
    assert budget_advice({"audit": {"global_budget": 10, "budget_hint": hint}}) is not None
