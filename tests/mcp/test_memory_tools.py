"""``remember`` and ``forget_memory``: a model keeps what it learns, through a real
``hostd mcp`` child driven by the official MCP SDK client, into a real
``providers.memory`` child."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server.conftest import ROOT

from ._harness import hostd_mcp, write_config

pytestmark = pytest.mark.anyio

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-02-01T00:00:00Z"
BETWEEN = "2026-01-15T00:00:00Z"
GOAL = "when do deploys happen"


def _memory_table(db: Path) -> str:
    return (
        f'\n[[provider]]\nid = "memory"\n'
        f'command = ["python", "-m", "providers.memory", "--db", "{db}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def _cited(client: Any, **arguments: Any) -> list[str]:
    result = await client.call_tool(
        "compose_context", {"goal": GOAL, "providers": ["memory"], **arguments}
    )
    if result.is_error:  # nothing to cite: a tool error saying so
        return []
    return sorted(c["frame"]["frame_id"] for c in result.structured_content["citations"])


async def test_a_model_remembers_supersedes_and_forgets(workdir: Path, marker: str) -> None:
    db = workdir / f"memory-{marker}.db"
    # alpha stores nothing: remember goes to the one provider that does.
    config = write_config(workdir, marker, {"alpha": {}}, extra=_memory_table(db))
    with anyio.fail_after(180):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            first = await client.call_tool(
                "remember",
                {
                    "kind": "fact",
                    "title": "deploys",
                    "content": "Deploys happen on Tuesdays.",
                    "valid_from": T0,
                },
            )
            cited_first = await _cited(client)
            second = await client.call_tool(
                "remember",
                {
                    "kind": "fact",
                    "title": "deploys",
                    "content": "Deploys happen on Wednesdays.",
                    "valid_from": T1,
                    "supersedes": "mem-1",
                },
            )
            cited_now = await _cited(client)
            cited_then = await _cited(client, as_of=BETWEEN)
            linked = await client.call_tool(
                "compose_context", {"goal": GOAL, "providers": ["memory"]}
            )
            links = [b.uri for b in linked.content if isinstance(b, types.ResourceLink)]
            readable = [await client.read_resource(uri) for uri in links]
            forgot = await client.call_tool("forget_memory", {"id": "mem-2"})
            # A forgotten memory's cited text is served no more, nor listed.
            listed = [r.uri for r in (await client.list_resources()).resources]
            refused = []
            for uri in links:
                with pytest.raises(MCPError) as caught:
                    await client.read_resource(uri)
                refused.append(caught.value)
            cited_after = await _cited(client)
            again = await client.call_tool("forget_memory", {"id": "mem-2"})
            never = await client.call_tool("forget_memory", {"id": "mem-3"})
    assert first.is_error is False and second.is_error is False, (_text(first), _text(second))
    jsonschema.validate(first.structured_content, tools["remember"].output_schema)
    assert first.structured_content["id"] == "mem-1"
    assert _text(first) == f"remembered mem-1 (fact, valid from {T0}) in memory"
    assert (
        _text(second)
        == f"remembered mem-2 (fact, valid from {T1}) in memory; mem-1 now holds until then"
    )
    assert (cited_first, cited_now, cited_then) == (["mem-1"], ["mem-2"], ["mem-1"])
    assert forgot.is_error is False
    jsonschema.validate(forgot.structured_content, tools["forget_memory"].output_schema)
    assert _text(forgot) == (
        "forgot mem-2 (deleted from memory); mem-1, which it had superseded, is valid again"
    )
    assert forgot.structured_content["reopened"] == "mem-1"
    assert len(links) == len(readable) == len(refused) == 1
    assert not set(links) & set(listed)
    assert cited_after == ["mem-1"]
    # A retried forget is safe: said, never an error; an id never given out is one.
    assert again.is_error is False, _text(again)
    assert _text(again) == (
        "mem-2 was already forgotten (in memory); "
        "mem-1, which it had superseded, was made valid again"
    )
    assert again.structured_content["already"] is True
    assert again.structured_content["reopened"] == "mem-1"  # as the first reply said
    jsonschema.validate(again.structured_content, tools["forget_memory"].output_schema)
    assert never.is_error is True
    assert _text(never) == "invalid params: id: provider 'memory' refused the write: no such entry"


async def test_a_write_nothing_can_store_is_a_tool_error_the_model_reads(
    workdir: Path, marker: str
) -> None:
    config = write_config(workdir, marker, {"alpha": {}})
    entry = {"kind": "fact", "title": "t", "content": "c"}
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            named = await client.call_tool("remember", {**entry, "provider": "alpha"})
            unnamed = await client.call_tool("remember", entry)
            stray = await client.call_tool("remember", {**entry, "colour": "red"})
    assert named.is_error is True and unnamed.is_error is True and stray.is_error is True
    assert "provider 'alpha' does not store memories" in _text(named)
    assert "no configured provider stores memories" in _text(unnamed)
    assert "colour" in _text(stray)
