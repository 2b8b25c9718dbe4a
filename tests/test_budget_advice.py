"""A budget too small for any frame is said as such, with the budget that would do,
not as "no evidence for this goal" (the CLI's and ``hostd mcp``'s words over one
real composition: real provider children, the in-process session)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hostd._hints import budget_advice
from hostd.cli._outcome import no_evidence as cli_no_evidence
from hostd.mcp._schema import no_evidence as mcp_no_evidence
from hostd.server import Daemon
from tests.pipeline.test_default_strategy import _config

pytestmark = pytest.mark.anyio


async def _compose(session: Any, budget: int) -> dict[str, Any]:
    result: dict[str, Any] = await session.call(
        "context/compose", {"goal": "frames", "budget": budget}
    )
    return result


async def test_the_advised_budget_includes_evidence(tmp_path: Path) -> None:
    async with Daemon(_config(tmp_path, None)).local() as session:
        small = await _compose(session, 40)
        assert small["citations"] == [] and small["audit"]["entries"]
        advice = budget_advice(small)
        assert advice is not None, small["audit"]
        (needed,) = map(int, re.findall(r"a budget of at least (\d+) includes it", advice))
        assert needed > 40
        # The number is right: that budget includes a frame.
        assert (await _compose(session, needed))["citations"]
    mcp = mcp_no_evidence(small)
    assert mcp is not None and mcp.startswith("hostd: no evidence fit the budget [no_evidence]:")
    assert f"{advice}: pass a larger budget" in mcp
    cli = cli_no_evidence(small)
    assert cli is not None and f"  {advice}: raise --budget" in cli


def test_no_advice_when_nothing_was_offered_or_something_fit() -> None:
    assert budget_advice({"audit": {"entries": [], "global_budget": 10}}) is None
    fitted = {"disposition": "included"}
    priced = {
        "disposition": "excluded",
        "reason": "over_budget",
        "detail": {"cost": 9, "remaining": 1},
    }
    assert budget_advice({"audit": {"entries": [fitted, priced], "global_budget": 10}}) is None
    assert budget_advice({"audit": {"entries": [priced], "global_budget": 10}}) is not None
