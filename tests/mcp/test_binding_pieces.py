"""At a small budget, a real ``hostd compose`` quotes what matches of an MCP server's
answers: the part of the eviction section that fits, not a billing section, and not
the empty answers of the tools that found nothing; an answer that matches nothing is
offered as its first section alone.

The server is ``mcpserver_app design`` (the SDK's ``MCPServer``), a child of a
``hostd compose`` child, as the walkthrough ran it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from hostd.server import Daemon
from tests.fixtures.cli import run_hostd

from .test_binding import config_of, mcp_table, report
from .test_binding_tools import cited


def test_a_small_budget_quotes_the_part_that_matches_and_no_empty_answer(
    workdir: Path,
) -> None:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "design"]
    notes = [
        {"name": "get_design_notes", "arguments": {"topic": "{query}"}},
        {"name": "search_files", "arguments": {"pattern": "{query}"}},
    ]
    graph = [{"name": "search_nodes", "arguments": {"query": "{query}"}}]
    config = workdir / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{workdir / "state"}"\n\n'
        + mcp_table("notes", command, [], resources=False, tools=notes)
        + mcp_table("graph", command, [], resources=False, tools=graph),
        encoding="utf-8",
    )
    # Each leg is asked for 125 tokens (half of 250, not overfetched): the eviction
    # section, 139, is over its ask, and a part of it fits beside the prompt's own lines.
    done = run_hostd(
        "compose", "--config", str(config), "--budget", "250", "--overfetch", "1",
        "--json", "how does cache eviction work?",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    legs = {p["provider_id"]: p for p in result["providers"]}
    assert legs["notes"]["status"] == "ok" and legs["notes"]["max_tokens"] == 125, legs
    labels = [c["label"] for c in result["citations"]]
    assert labels == ["get_design_notes § Storage: cache eviction (part)"], labels
    assert "eviction" in result["prompt"] and "Billing" not in result["prompt"]
    # The tools that found nothing offered nothing: neither "No matches found" nor an
    # empty graph reached the host.
    assert legs["notes"]["frames_offered"] == 1, legs
    assert legs["graph"]["status"] == "ok" and legs["graph"]["frames_offered"] == 0, legs


@pytest.mark.anyio
async def test_an_answer_that_matches_nothing_is_one_frame_and_a_match_its_sections(
    workdir: Path,
) -> None:
    """The walkthrough's handbook tool: it answers its whole document whatever it is
    asked. Asked something it holds nothing of, its first section alone is offered (one
    rank in an ``rrf`` fusion, not one per section); asked about its billing, every
    billing section and not the eviction one."""
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "design"]
    notes = [{"name": "get_design_notes", "arguments": {"topic": "{query}"}}]
    cfg = config_of(workdir, mcp_table("notes", command, [], resources=False, tools=notes))
    asked = {"budget": 2000, "include_content": True, "strategy": "rrf"}
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            unrelated = await session.call(
                "context/compose",
                {"goal": "how does prompt hide the input when asking for a password", **asked},
            )
            billing = await session.call(
                "context/compose", {"goal": "how are disputed invoices credited", **asked}
            )
    leg = report(unrelated, "notes")
    assert leg["status"] == "ok" and leg["frames_offered"] == 1, leg
    (head,) = cited(unrelated, "notes")
    assert head == "get_design_notes § 1. Billing notes"
    assert cited(unrelated, "notes")[head].startswith("# Platform design notes\n")
    assert not unrelated["degraded"], unrelated["degraded_reasons"]
    sections = cited(billing, "notes")
    assert sorted(sections) == [f"get_design_notes § {i}. Billing notes" for i in range(1, 6)]
    assert report(billing, "notes")["frames_offered"] == 5


@pytest.mark.anyio
async def test_a_section_that_shares_only_stop_words_or_common_words_is_no_match(
    workdir: Path,
) -> None:
    """The walkthrough's click handbook, asked what its sections share only in the words
    a question is worded with ("we use", "may", "work" in "working directory") or in a
    word most of them say ("click"): only the section the goal's real terms are in is
    offered; a goal of nothing but such words matches none, and the handbook's head
    alone is offered."""
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "handbook"]
    notes = [{"name": "team_notes", "arguments": {"topic": "{query}"}}]
    cfg = config_of(workdir, mcp_table("notes", command, [], resources=False, tools=notes))
    asked = {"budget": 2000, "include_content": True, "strategy": "rrf"}
    goals = {
        "worded": "how do we use shell completion and how does it work",
        "licence": "may plugins be GPL",
        "common": "click shell completion",
        "only": "how may we use it and does it work",
    }
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            results = {
                name: await session.call("context/compose", {"goal": goal, **asked})
                for name, goal in goals.items()
            }
    labels = {name: sorted(cited(result, "notes")) for name, result in results.items()}
    assert labels == {
        "worded": ["team_notes § Shell completion"],
        "licence": ["team_notes § Billing and licences"],
        "common": ["team_notes § Shell completion"],
        "only": ["team_notes § Click maintenance handbook"],
    }, labels
    assert report(results["only"], "notes")["frames_offered"] == 1
