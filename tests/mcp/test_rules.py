"""``hostd mcp`` keeps MCP's rules, as the official SDK's ``ClientSession`` sees them.

Each test runs a real ``hostd mcp`` child over stdio (``stdio_client``) and a real
``ClientSession``: progress values only increase, a composition with no evidence is
a tool error naming each provider and why, and every citation link resolves
through ``resources/read`` to the text the prompt cites.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.server.conftest import ROOT

from ._harness import hostd_mcp, write_config

pytestmark = pytest.mark.anyio


def _files_table(root: Path) -> str:
    return (
        f'[[provider]]\nid = "files"\n'
        f'command = ["python", "-m", "providers.files", "--root", "{root}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\ntrusted_roots = ["{root}"]\n'
    )


def _warming_table(gate: Path) -> str:
    return (
        f'[[provider]]\nid = "slow"\n'
        f'command = ["python", "-m", "tests.fixtures.warming_provider", '
        f'"--warm-gate", "{gate}", "--steps", "4"]\n'
        f'timeout_ms = 120000\nstart_timeout_s = 120\ncwd = "{ROOT}"\n'
    )


async def test_progress_values_only_increase_while_a_provider_warms_up(
    workdir: Path, marker: str
) -> None:
    gate = workdir / "warm-gate"
    config = write_config(workdir, marker, {"alpha": {}}, extra=_warming_table(gate))
    # Providers start on their first query, so the warm-up runs inside the composition.
    lazy = config.read_text().replace("[host]\n", '[host]\nstart_providers = "lazy"\n', 1)
    config.write_text(lazy)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        if message and "warming" in message:
            gate.touch()  # the warm-up may end once it has been reported

    with anyio.fail_after(180):
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(
                    "compose_context", {"goal": "warm"}, progress_callback=on_progress
                )
    assert isinstance(result, types.CallToolResult) and result.is_error is False
    values = [p for p, _, _ in seen]
    assert values == sorted(set(values)), f"progress must increase: {values}"
    assert any(m and m.startswith("slow: warming") for _, _, m in seen)
    assert seen[-1][:2] == (2.0, 2.0)  # both legs done, out of two
    legs = [m.split(":")[0] for p, _, m in seen if m and p == int(p) and p >= 1]
    assert sorted(legs) == ["alpha", "slow"]


async def test_the_first_call_of_a_cold_hostd_mcp_says_a_model_is_loading_before_it_is(
    workdir: Path, marker: str
) -> None:
    """Providers start at boot, before the first call; one loads its model, which it
    reports once and then says nothing until it is loaded (the bundled ``semantic``). The
    call hears that at once: the test lets the load end only when the call has said so."""
    gate = workdir / "model-gate"
    table = (
        f'[[provider]]\nid = "slow"\n'
        f'command = ["python", "-m", "tests.fixtures.warming_provider", "--warm-gate", '
        f'"{gate}", "--steps", "1", "--phase", "load model", "--quiet"]\n'
        f'start_timeout_s = 60\ncwd = "{ROOT}"\n'
    )
    config = write_config(workdir, marker, {}, extra=table)
    said: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        said.append(message or "")
        if (message or "").startswith("slow: warming"):
            gate.touch()

    with anyio.fail_after(120):  # a hang guard
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(
                    "compose_context", {"goal": "warm"}, progress_callback=on_progress
                )
    assert isinstance(result, types.CallToolResult) and result.is_error is False, result
    slow = [m for m in said if m.startswith("slow:")]
    # The step as reported, and how long it has run once it was said again (a call
    # that began two seconds or more into the load hears that first).
    assert re.fullmatch(r"slow: warming, loading its model 0/1( \(\d+ s\))?", slow[0]), said
    assert slow[-1] == "slow: ok, 1 frames", said


async def test_a_client_hears_a_long_model_load_again_and_again_while_it_runs(
    workdir: Path, marker: str
) -> None:
    """A model load reports once, then nothing until it is loaded; an MCP client resets
    its timeout on each progress note, so the provider says the step again while it
    runs, with its seconds. The test lets the load end only once three such notes have
    reached the client (the provider's beat set short: the notes are counted, not timed)."""
    gate = workdir / "model-gate"
    table = (
        f'[[provider]]\nid = "slow"\n'
        f'command = ["python", "-m", "tests.fixtures.warming_provider", "--warm-gate", '
        f'"{gate}", "--steps", "1", "--phase", "load model", "--quiet", "--beat-s", "0.05"]\n'
        f'start_timeout_s = 120\ncwd = "{ROOT}"\n'
    )
    config = write_config(workdir, marker, {}, extra=table)
    again: list[str] = []
    said: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        said.append(message or "")
        if re.fullmatch(r"slow: warming, loading its model 0/1 \(\d+ s\)", message or ""):
            again.append(message or "")
            if len(again) == 3:
                gate.touch()  # the load may end: it was heard three times meanwhile

    with anyio.fail_after(120):  # a hang guard
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(
                    "compose_context", {"goal": "warm"}, progress_callback=on_progress
                )
    assert isinstance(result, types.CallToolResult) and result.is_error is False, result
    assert len(again) >= 3, said
    assert said[-1] == "slow: ok, 1 frames", said


async def test_a_composition_with_no_evidence_is_a_tool_error_naming_each_provider(
    workdir: Path, marker: str
) -> None:
    missing = workdir / "no-such-program"
    broken = f'[[provider]]\nid = "broken"\ncommand = ["{missing}"]\ntimeout_ms = 60000\n'
    config = write_config(workdir, marker, {"quiet": {"frames": 0}}, extra=broken)
    with anyio.fail_after(120):
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("compose_context", {"goal": "anything"})
    assert isinstance(result, types.CallToolResult)
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    text = result.content[0].text
    assert "no_evidence" in text
    lines = text.splitlines()[1:]
    assert [line.split(":")[0] for line in lines] == ["- broken", "- quiet"]
    assert "ok, no frames matched" in lines[1]
    assert "broken: ok" not in text  # the broken one says how it failed
    assert result.structured_content is not None
    assert result.structured_content["citations"] == []


async def test_every_citation_link_resolves_to_the_cited_text(
    workdir: Path, marker: str, corpus: Path
) -> None:
    (corpus / "cache.md").write_text(
        "# Cache eviction\n\nThe cache evicts the least recently used entry when it is full.\n"
        "Eviction runs before every insert into a full cache.\n",
        encoding="utf-8",
    )
    config = write_config(workdir, marker, {"alpha": {}}, extra=_files_table(corpus))
    with anyio.fail_after(120):
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                result = await session.call_tool(
                    "compose_context", {"goal": "how does the cache evict entries", "budget": 4000}
                )
                assert isinstance(result, types.CallToolResult)
                links = [b for b in result.content if isinstance(b, types.ResourceLink)]
                reads = {link.uri: await session.read_resource(link.uri) for link in links}
                listed = await session.list_resources()
                templates = await session.list_resource_templates()
                with pytest.raises(MCPError) as unknown:
                    await session.read_resource("hostd://citation/none/1")
                with pytest.raises(MCPError) as foreign:
                    await session.read_resource("file:///etc/passwd")
    assert init.capabilities.resources is not None  # declared, as MCP requires
    assert templates.resource_templates == []  # listed, though none is made from one
    assert result.is_error is False
    structured = result.structured_content
    assert structured is not None
    citations = structured["citations"]
    # Every citation (the fixture's frames have no URI: each is its own source) is linked once.
    assert len(links) == len(citations) == len({link.uri for link in links})
    assert [link.name for link in links] == [c["label"] for c in citations]
    for link in links:
        assert link.uri.startswith("hostd://citation/")
        (content,) = reads[link.uri].contents
        assert isinstance(content, types.TextResourceContents)
        assert content.mime_type == link.mime_type
        # Exactly the text the prompt quotes under this label (after any title it shows),
        # and the newline the content ended with, which the block does not show.
        fence_end = re.escape(f'cite="{link.name}"') + r'(?: (?:in|section|title)="[^"\n]*")?>\n'
        block = fence_end + re.escape(f"{content.text.rstrip(chr(10))}\n</frame>\n")
        assert re.search(block, structured["prompt"])
        assert link.size == len(content.text.encode())
    (cache,) = [link for link in links if link.description and "cache.md" in link.description]
    (cache_text,) = reads[cache.uri].contents
    assert isinstance(cache_text, types.TextResourceContents)
    assert cache_text.mime_type == "text/markdown"
    assert cache_text.text == (corpus / "cache.md").read_text()  # the whole file: L1-4
    assert {r.uri for r in listed.resources} == {link.uri for link in links}
    # Resource not found (2025 revisions), naming the URI whatever its scheme.
    assert unknown.value.code == foreign.value.code == -32002
    assert unknown.value.error.data == {"uri": "hostd://citation/none/1"}
    assert foreign.value.error.data == {"uri": "file:///etc/passwd"}
    assert "serves only hostd://citation/ URIs" in foreign.value.error.message
