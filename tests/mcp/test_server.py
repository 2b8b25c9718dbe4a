"""``hostd mcp`` driven by the official MCP SDK client over a real stdio child.

Every test starts ``hostd --config … mcp`` as a child process and talks to it
with ``mcp.Client`` (or raw JSON-RPC lines, for the version handshakes), so the
framing, the negotiation and the schemas are the ones real MCP clients meet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from hostd._hints import down_state
from tests.server.conftest import ROOT, marked_processes, provider_table

from ._harness import hostd_mcp, write_config

pytestmark = pytest.mark.anyio


def _files_table(root: Path) -> str:
    return (
        f'[[provider]]\nid = "files"\n'
        f'command = ["python", "-m", "providers.files", "--root", "{root}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\ntrusted_roots = ["{root}"]\n'
    )


def _tool(tools: types.ListToolsResult, name: str) -> types.Tool:
    return next(t for t in tools.tools if t.name == name)


def _texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


async def test_tools_are_listed_in_one_order_read_only_and_idempotent(
    workdir: Path, marker: str
) -> None:
    config = write_config(workdir, marker, {"alpha": {}})
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            first = await client.list_tools(cache_mode="refresh")
            second = await client.list_tools(cache_mode="refresh")
    names = ["compose_context", "list_providers", "report_used_evidence"]
    writes = ["remember", "forget_memory"]
    assert [t.name for t in first.tools] == names + writes
    assert first.model_dump() == second.model_dump()
    for tool in first.tools:
        assert tool.annotations is not None
        # Reporting used evidence writes a record; the others only read.
        reads = tool.name in names[:2]
        assert tool.annotations.read_only_hint is reads
        # A second remember adds a second entry; only forget_memory removes anything.
        assert tool.annotations.idempotent_hint is (tool.name != "remember")
        assert tool.annotations.destructive_hint is (tool.name == "forget_memory")
        assert tool.annotations.open_world_hint is False
        assert tool.output_schema is not None
        if tool.name in writes:  # strict-friendly: closed, its required members named
            assert tool.input_schema["additionalProperties"] is False
    assert not any("consent" in t.name for t in first.tools)  # C1: the model cannot grant it
    assert _tool(first, "compose_context").input_schema["required"] == ["goal"]


async def test_compose_context_conforms_to_its_output_schema_and_links_sources(
    workdir: Path, marker: str, corpus: Path
) -> None:
    config = write_config(workdir, marker, {"alpha": {}}, extra=_files_table(corpus))
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = await client.list_tools()
            result = await client.call_tool(
                "compose_context", {"goal": "how does the cache evict entries", "budget": 2000}
            )
            listed = await client.call_tool("list_providers", {})
    assert result.is_error is False
    structured = result.structured_content
    jsonschema.validate(structured, _tool(tools, "compose_context").output_schema)
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == structured["prompt"]
    links = [b for b in result.content if isinstance(b, types.ResourceLink)]
    cited = {c["label"] for c in structured["citations"]}
    assert links, "a cited file must come back as a resource_link"
    assert {link.name for link in links} <= cited
    # Served by hostd itself (resources/read), naming the file it was read from.
    assert all(link.uri.startswith("hostd://citation/") for link in links)
    assert any((corpus / "cache.md").as_uri() in (link.description or "") for link in links)
    assert {p["provider_id"] for p in structured["providers"]} == {"alpha", "files"}
    assert structured["request_id"]
    assert structured["audit"]["included"] == len(structured["citations"])
    # Each citation says how it ranked; edges puts the best first and the next best last.
    ranks = [c["rank"] for c in structured["citations"]]
    assert sorted(ranks) == list(range(len(ranks))) and len(ranks) >= 2
    assert ranks[0] == 0 and ranks[-1] == 1
    # The one degraded flag: each reason names a provider whose leg was not ok.
    short = {p["provider_id"] for p in structured["providers"] if p["status"] != "ok"}
    assert structured["degraded"] is bool(short)
    assert {d["provider"] for d in structured["degraded_reasons"]} == short
    jsonschema.validate(listed.structured_content, _tool(tools, "list_providers").output_schema)
    assert [p["id"] for p in listed.structured_content["providers"]] == ["alpha", "files"]
    assert listed.structured_content["reranker"] is None  # none configured


async def test_max_frames_and_anchors_reach_every_provider(workdir: Path, marker: str) -> None:
    # Each fixture provider has 3 frames and quotes the anchors and as_of it was asked.
    config = write_config(workdir, marker, {"alpha": {}, "beta": {}})
    focus = ["file:///src/cache.py", "LruCache.evict"]
    asked = {"goal": "why does the cache evict", "budget": 4000}
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = await client.list_tools()
            narrow = await client.call_tool(
                "compose_context",
                {**asked, "max_frames": 1, "anchors": focus, "as_of": "2024-05-01T12:00:00Z"},
            )
            plain = await client.call_tool("compose_context", asked)
            not_a_day = await client.call_tool(
                "compose_context", {**asked, "as_of": "2025-02-30T00:00:00Z"}
            )
    output_schema = _tool(tools, "compose_context").output_schema
    for result in (narrow, plain):
        assert result.is_error is False, _texts(result)
        jsonschema.validate(result.structured_content, output_schema)

    def offered(result: types.CallToolResult) -> dict[str, int]:
        providers = result.structured_content["providers"]
        return {p["provider_id"]: p["frames_offered"] for p in providers}

    assert offered(narrow) == {"alpha": 1, "beta": 1}
    assert offered(plain) == {"alpha": 3, "beta": 3}  # the cap, not the providers, gave one
    prompt = narrow.structured_content["prompt"]
    assert prompt.count("anchors file:///src/cache.py LruCache.evict;") == 2
    assert prompt.count("as_of 2024-05-01T12:00:00Z;") == 2
    assert "anchors" not in plain.structured_content["prompt"]
    # The schema cannot tell a date that does not exist: the API's refusal, in its form.
    assert not_a_day.is_error is True
    assert _texts(not_a_day) == [
        "invalid params: as_of: not a UTC time such as 2026-11-02T09:30:00Z (RFC 3339: date, "
        "'T', time, an optional fraction of a second, then 'Z')"
    ]


async def test_list_providers_shows_the_reranker(workdir: Path, marker: str) -> None:
    from tests.server.test_rerank import reranker_table

    config = write_config(workdir, marker, {"alpha": {}}, extra=reranker_table("reverse", marker))
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = await client.list_tools()
            await client.call_tool("compose_context", {"goal": "x", "strategy": "rerank"})
            listed = await client.call_tool("list_providers", {})
    assert listed.is_error is False
    structured = listed.structured_content
    jsonschema.validate(structured, _tool(tools, "list_providers").output_schema)
    reranker = structured["reranker"]
    assert (reranker["kind"], reranker["asks"], reranker["fallbacks"]) == ("process", 1, 0)
    text = listed.content[0]
    assert isinstance(text, types.TextContent)
    assert text.text.splitlines()[-1].startswith("[reranker]\tprocess\t")


async def test_list_providers_shows_what_a_down_providers_stderr_ended_with(
    workdir: Path, marker: str
) -> None:
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "noisy_start_crash"]
    noisy = f'[[provider]]\nid = "noisy"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
    config = write_config(workdir, marker, {"alpha": {}}, extra=noisy)
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = await client.list_tools()
            composed = await client.call_tool("compose_context", {"goal": "x"})
            listed = await client.call_tool("list_providers", {})
    (leg,) = [p for p in composed.structured_content["providers"] if p["status"] != "ok"]
    # Crashed under the call, or already in a crash loop (its boot start and a restart
    # on its own failed before the call came): not waited for then.
    code = leg["error"]["code"]
    assert (leg["provider_id"], leg["status"], code) in {
        ("noisy", "crashed", "crashed"),
        ("noisy", "crashed", "restarting"),
    }, leg
    assert listed.is_error is False
    jsonschema.validate(listed.structured_content, _tool(tools, "list_providers").output_schema)
    (row,) = [p for p in listed.structured_content["providers"] if p["id"] == "noisy"]
    tail = row["health"]["stderr_tail"]
    assert tail.endswith(" | IndexLocked: the index is locked"), tail
    lines = _texts(listed)[0].splitlines()
    at = lines.index(f"noisy\tjsonrpc\t{row['state']}")
    # Under its row, its failure in `hostd status`'s words (no restart command: nothing
    # restarts a session's own provider), each stderr line said once, below it.
    failure = lines[at + 1]
    assert failure == f"  noisy: {down_state(row, restart=False)}", failure
    assert failure.startswith(f"  noisy: {row['state']} "), failure
    assert "exited with status 1" in failure and "index is locked" not in failure
    assert "hostd providers restart" not in failure
    # Then its stderr's last lines, one a line, as `hostd providers` shows them.
    said = ["  noisy: its stderr ended with:", *(f"      {x}" for x in tail.split(" | "))]
    assert lines[at + 2 : at + 2 + len(said)] == said, lines
    assert lines[0] == "alpha\tjsonrpc\tready"  # a ready one: its row alone
    assert not lines[1].startswith(" "), lines


async def test_a_provider_failing_at_every_start_is_told_as_failing_not_as_warming(
    workdir: Path, marker: str
) -> None:
    """A provider whose process exits at every start, behind ``hostd mcp``'s wait for
    starts (its ``--ready-wait-ms``; ``hostd mcp`` sends one with every call): once its
    restart failed too (a crash loop), a call neither waits for its next restart nor
    calls it warming: its leg is ``crashed``, code ``restarting``, and the text says, as
    ``hostd compose`` does, that asking again will not help."""
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "noisy_start_crash"]
    noisy = f'[[provider]]\nid = "noisy"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
    config = write_config(workdir, marker, {"alpha": {}}, extra=noisy)
    # Its restarts on their own come seconds apart, so no call meets it parked.
    config.write_text(config.read_text().replace("[host]\n", "[host]\nrestart_backoff_s = 2\n"))
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            # Its first start, and the restart after that first failure, are waited for
            # and crash; a later call meets the crash loop (a bound, not a clock).
            for _ in range(4):
                composed = await client.call_tool("compose_context", {"goal": "x"})
                structured = composed.structured_content
                (leg,) = [p for p in structured["providers"] if p["provider_id"] == "noisy"]
                if leg["error"]["code"] != "crashed":
                    break
    assert (leg["status"], leg["error"]["code"]) == ("crashed", "restarting"), leg
    assert {"reason": "provider_failed", "provider": "noisy", "detail": "restarting"} in (
        structured["degraded_reasons"]
    )
    assert [c["frame"]["provider_id"] for c in structured["citations"]][:1] == ["alpha"]
    texts = _texts(composed)
    assert not [t for t in texts if "still warming" in t], texts
    (looping,) = [t for t in texts if t.startswith("hostd: keeps failing: noisy (last failure: ")]
    assert "asking again will not help until its failure is fixed" in looping
    assert not [t for t in texts if "no evidence from noisy" in t], texts  # told once


async def test_report_used_evidence_keeps_what_the_answer_used_beside_its_record(
    workdir: Path, marker: str
) -> None:
    from hostd.quality import ShadowStore

    shadow = "\n[shadow]\nenabled = true\nsample = 0.0\n"
    config = write_config(workdir, marker, {"alpha": {}}, extra=shadow)
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = await client.list_tools()
            composed = await client.call_tool("compose_context", {"goal": "what is cached"})
            structured = composed.structured_content
            label = structured["citations"][0]["label"]
            rid = structured["request_id"]
            reported = await client.call_tool(
                "report_used_evidence", {"request_id": rid, "used": [label], "helpful": True}
            )
            wrong = await client.call_tool(
                "report_used_evidence", {"request_id": rid, "used": ["[made up]"]}
            )
            malformed = await client.call_tool("report_used_evidence", {"used": [label]})
    assert reported.is_error is False
    jsonschema.validate(
        reported.structured_content, _tool(tools, "report_used_evidence").output_schema
    )
    assert reported.structured_content["used"] == [structured["citations"][0]["frame"]]
    assert wrong.is_error is True
    assert isinstance(wrong.content[0], types.TextContent)
    assert "[made up]" in wrong.content[0].text and "unknown_citation" in wrong.content[0].text
    assert malformed.is_error is True and malformed.structured_content is None
    assert _texts(malformed) == [
        "invalid params: request_id: missing; expected a non-empty string of at most 256 characters"
    ]
    (stored,) = ShadowStore(workdir / "state" / "shadow.db").load()
    assert stored.request_id == rid and stored.feedback is not None
    assert stored.feedback.helpful is True and len(stored.feedback.used) == 1


async def test_progress_is_reported_per_leg(workdir: Path, marker: str) -> None:
    config = write_config(workdir, marker, {"alpha": {}, "beta": {}})
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            result = await client.call_tool(
                "compose_context", {"goal": "progress"}, progress_callback=on_progress
            )
    assert result.is_error is False
    legs = [s for s in seen if s[1] == 2]
    assert sorted(p for p, _, _ in legs) == [1.0, 2.0]
    assert {m.split(":")[0] for _, _, m in legs if m} == {"alpha", "beta"}


#: Arguments a model may send, each with words its tool error must carry: the field,
#: what is wrong, what is expected. Both kinds: those the input schema refuses and
#: those only the client API can judge (a strategy, a provider, a blank goal).
_BAD_ARGUMENTS: tuple[tuple[str, dict[str, Any], tuple[str, ...]], ...] = (
    (
        "compose_context",
        {"goal": "x", "strategy": "bm25"},
        ("strategy: unknown strategy 'bm25'; expected ", '"rrf"'),
    ),
    (
        "compose_context",
        {"goal": "x", "providers": ["nope"]},
        ("invalid params: providers: unknown provider 'nope' (configured: alpha)",),
    ),
    (
        "compose_context",
        {"goal": "x", "budget": "600"},
        ("invalid params: budget: got a string '600'; expected an integer from 1 to 10,000,000",),
    ),
    (
        "compose_context",
        {"goal": "x", "budget": 1_000_000_000},  # the schema's maximum, in the same words
        ("invalid params: budget: got 1000000000; expected an integer from 1 to 10,000,000",),
    ),
    (
        "compose_context",
        {"goal": "x", "budget": "9" * 500},  # counted, never echoed at length
        ("invalid params: budget: got a string of 500 characters (not quoted); expected an",),
    ),
    (
        "compose_context",
        {"goal": "x", "placement": "top"},
        ("invalid params: placement: got a string 'top'; expected one of edges, ranked",),
    ),
    (
        "compose_context",
        {"goal": "x", "budgte": 5},
        ("invalid params: arguments: unknown argument 'budgte'; expected goal, budget, strategy",),
    ),
    ("compose_context", {}, ("invalid params: goal: missing; expected a non-empty string",)),
    ("compose_context", {"goal": "   "}, ("goal: must not be empty",)),
    (
        "compose_context",
        {"goal": "x", "grant_consent": True},
        ("unknown argument 'grant_consent'",),
    ),
    (
        "list_providers",
        {"verbose": True},
        ("invalid params: arguments: unknown argument 'verbose'; expected no arguments",),
    ),
    (
        "report_used_evidence",
        {"request_id": "r", "used": "x"},
        ("invalid params: used: got a string 'x'; expected an array of at most 1024 items",),
    ),
)


async def test_a_bad_argument_is_a_tool_error_the_model_reads_and_an_unknown_tool_is_not(
    workdir: Path, marker: str
) -> None:
    # MCP 2025-11-25 (SEP-1303): input validation errors are tool execution errors, so
    # the client hands them to the model; an unknown tool stays a protocol error.
    config = write_config(workdir, marker, {"alpha": {}})
    with anyio.fail_after(120):
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                results = [await session.call_tool(n, a) for n, a, _ in _BAD_ARGUMENTS]
                with pytest.raises(MCPError) as unknown:
                    await session.call_tool("no_such_tool", {"goal": "x"})
                # The session survives each of them. Empty optional arrays mean all, any.
                ok = await session.call_tool(
                    "compose_context", {"goal": "still serving", "providers": [], "kinds": []}
                )
    assert init.protocol_version == "2025-11-25"
    for (name, arguments, words), result in zip(_BAD_ARGUMENTS, results, strict=True):
        assert result.is_error is True, (name, arguments)
        # One text block, one line; no structuredContent (the output schema is a success's).
        (text,) = _texts(result)
        assert len(result.content) == 1 and "\n" not in text, text
        assert all(w in text for w in words), text
        assert result.structured_content is None
    assert unknown.value.error.code == -32602
    assert unknown.value.error.message == "Unknown tool: no_such_tool"
    assert ok.is_error is False and ok.structured_content is not None


async def test_connect_gives_the_daemon_s_refusal_of_an_argument_to_the_model(
    start_daemon: Any, marker: str
) -> None:
    daemon = await start_daemon({"alpha": {}}, args=())
    params = hostd_mcp(daemon.config, "--connect", str(daemon.socket))
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                refused = await session.call_tool(
                    "compose_context", {"goal": "x", "strategy": "bm25"}
                )
                ok = await session.call_tool("compose_context", {"goal": "x"})
    assert refused.is_error is True
    assert _texts(refused)[0].startswith("invalid params: strategy: unknown strategy 'bm25'")
    assert ok.is_error is False
    assert await daemon.stop() == 0


async def test_a_failing_composition_is_a_tool_error_with_the_reason(
    workdir: Path, marker: str
) -> None:
    config = write_config(workdir, marker, {})  # no provider configured: nothing to ask
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            result = await client.call_tool("compose_context", {"goal": "x"})
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert "no_provider_available" in result.content[0].text


async def test_a_composition_needing_consent_names_provider_and_scope(
    workdir: Path, marker: str
) -> None:
    config = write_config(
        workdir, marker, {"alpha": {}, "remote": {"egress_scope": "api.example.com"}}
    )
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            result = await client.call_tool("compose_context", {"goal": "anything"})
    assert result.is_error is False
    assert result.structured_content["consent_required"] == [
        {"provider": "remote", "scopes": ["api.example.com"]}
    ]
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    # The hint names the scope, and the command with the config the operator runs.
    assert any(
        f"hostd --config {config} consent grant remote api.example.com" in t for t in texts[1:]
    )


async def test_the_stateless_revision_is_served_too(workdir: Path, marker: str) -> None:
    config = write_config(workdir, marker, {"alpha": {}})
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="auto") as client:
            version = client.protocol_version
            result = await client.call_tool("compose_context", {"goal": "modern"})
            bad = await client.call_tool("compose_context", {"goal": "modern", "budget": "600"})
    assert version == "2026-07-28"
    assert bad.is_error is True
    assert _texts(bad) == [
        "invalid params: budget: got a string '600'; expected an integer from 1 to 10,000,000"
    ]
    assert result.is_error is False
    assert result.structured_content["prompt"]


async def _exchange(config: Path, lines: list[dict[str, Any]], replies: int) -> list[Any]:
    """Write raw JSON-RPC lines to ``hostd mcp``; read ``replies`` responses from stdout."""
    params = hostd_mcp(config, "--log-level", "debug")
    process = await anyio.open_process(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=params.env,
        cwd=params.cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    out: list[Any] = []
    buf = b""
    async with process:
        for line in lines:
            await process.stdin.send(json.dumps(line).encode() + b"\n")
        while sum(1 for m in out if "id" in m) < replies:
            buf += await process.stdout.receive()
            *done, buf = buf.split(b"\n")
            out.extend(json.loads(raw) for raw in done if raw.strip())
        await process.stdin.aclose()
        rest = b""
        async for chunk in process.stdout:
            rest += chunk
        out.extend(json.loads(raw) for raw in (buf + rest).split(b"\n") if raw.strip())
        assert await process.wait() == 0
    return out


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_initialize_negotiates_the_handshake_revisions_and_stdout_is_only_protocol(
    workdir: Path, marker: str, version: str
) -> None:
    config = write_config(workdir, marker, {"alpha": {}})
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    with anyio.fail_after(120):
        out = await _exchange(
            config,
            [
                init,
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "compose_context", "arguments": {"goal": "raw"}},
                },
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 7}},
                {
                    "jsonrpc": "2.0",
                    "id": 4,
                    "method": "tools/call",
                    "params": {
                        "name": "compose_context",
                        "arguments": {"goal": "raw", "budget": 0},
                    },
                },
            ],
            replies=4,
        )
    # Every stdout line is a JSON-RPC message (the logs went to stderr).
    assert all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in out)
    by_id = {m["id"]: m for m in out if "id" in m}
    assert by_id[1]["result"]["protocolVersion"] == version
    assert by_id[2]["result"]["isError"] is False
    assert by_id[3]["error"]["code"] == -32602  # a malformed request: a protocol error
    # A bad argument is a tool error on every revision served (SEP-1303 clarifies, and
    # the older revisions' words allowed it), with no structuredContent.
    assert by_id[4]["result"] == {
        "content": [
            {
                "type": "text",
                "text": "invalid params: budget: got 0; expected an integer from 1 to 10,000,000",
            }
        ],
        "isError": True,
    }
    assert marked_processes(marker) == []  # stdin closed: it stopped its providers and exited 0


class _Watched(list[dict[str, Any]]):
    """A daemon's collected log that sets ``event`` when ``name`` is logged."""

    def __init__(self, items: list[dict[str, Any]], name: str) -> None:
        super().__init__(items)
        self.name = name
        self.event = anyio.Event()
        if any(e.get("event") == name for e in items):
            self.event.set()

    def append(self, item: dict[str, Any]) -> None:
        super().append(item)
        if item.get("event") == self.name:
            self.event.set()


async def test_cancelling_a_call_cancels_the_composition_in_the_daemon(
    start_daemon: Any, marker: str
) -> None:
    slow = provider_table("slow", marker, delay_ms=600_000).replace(
        "timeout_ms = 10000", "timeout_ms = 600000"
    )
    daemon = await start_daemon({"fast": {}}, extra=slow, args=())
    watched = _Watched(daemon.log, "request.cancelled")
    daemon.log = watched
    first_leg = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if progress >= 1:
            first_leg.set()

    params = hostd_mcp(daemon.config, "--connect", str(daemon.socket))
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool(
                        "compose_context", {"goal": "wait"}, progress_callback=on_progress
                    )
                    pytest.fail("the composition finished although it was cancelled")

                tg.start_soon(call)
                await first_leg.wait()  # the fast leg is in; the slow one holds the request
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            await watched.event.wait()  # hostd mcp passed it on: the daemon dropped the work
            after = await client.call_tool(
                "compose_context", {"goal": "again", "providers": ["fast"]}
            )
    assert after.is_error is False
    assert await daemon.stop() == 0


async def test_a_cancelled_call_gets_no_more_progress_and_the_next_call_is_served(
    workdir: Path, marker: str
) -> None:
    """MCP: progress "MUST only reference tokens that" were "provided in an active
    request". The held leg answers only after the cancel: nothing of it reaches the
    client under the cancelled call's token."""
    from tests.fixtures.gate import Gate

    progress: list[tuple[str | int, float]] = []  # every progress notification, in order
    first_leg = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append((message.params.progress_token, message.params.progress))
            if message.params.progress >= 1:
                first_leg.set()

    async with Gate() as gate:
        held = {"hold_port": gate.port, "timeout_ms": 600_000}
        config = write_config(workdir, marker, {"alpha": {}, "beta": held})
        with anyio.fail_after(120):
            async with Client(
                hostd_mcp(config), mode="legacy", message_handler=on_message
            ) as client:
                await client.call_tool("compose_context", {"goal": "start them"})  # gate open
                gate.close()
                async with anyio.create_task_group() as tg:

                    async def call() -> None:
                        await client.call_tool(
                            "compose_context", {"goal": "wait"}, progress_callback=_ignore
                        )
                        pytest.fail("the call finished although it was cancelled")

                    tg.start_soon(call)
                    await first_leg.wait()  # alpha's leg is in; beta's holds the call
                    await gate.wait_held(1)
                    tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
                gate.open()  # beta answers the cancelled call's query now
                after = await client.call_tool(
                    "compose_context", {"goal": "again"}, progress_callback=_ignore
                )
    assert after.is_error is False
    structured = after.structured_content or {}
    assert {p["provider_id"]: p["status"] for p in structured["providers"]} == {
        "alpha": "ok",
        "beta": "ok",
    }
    cancelled = progress[0][0]
    # The start and alpha's leg, sent before the cancel; nothing for beta's late answer.
    assert [value for token, value in progress if token == cancelled] == [0.0, 1.0]
    assert [value for token, value in progress if token != cancelled] == [0.0, 1.0, 2.0]


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    """A progress callback: asking for progress puts a token in the request."""


async def test_timeout_ms_returns_without_waiting_for_a_cold_provider(
    workdir: Path, marker: str
) -> None:
    """An agent that cannot wait for a provider's index to build passes ``timeout_ms``:
    the call returns with what the others gave, the cold one reported ``warming``
    (without it, the call would wait up to that provider's ``start_timeout_s``)."""
    gate = workdir / "gate"  # touched only once the call has returned
    cold = ["python", "-m", "tests.fixtures.warming_provider", "--warm-gate", str(gate)]
    extra = (
        f'[[provider]]\nid = "cold"\ncommand = {json.dumps(cold)}\ncwd = "{ROOT}"\n'
        "start_timeout_s = 3600\n"
    )
    config = write_config(workdir, marker, {"alpha": {}}, extra=extra)
    try:
        with anyio.fail_after(120):
            async with Client(hostd_mcp(config), mode="legacy") as client:
                arguments = {"goal": "frames", "timeout_ms": 300}
                result = await client.call_tool("compose_context", arguments)
    finally:
        gate.touch()
    assert result.is_error is False, _texts(result)
    structured = result.structured_content or {}
    status = {p["provider_id"]: p["status"] for p in structured["providers"]}
    assert status == {"alpha": "ok", "cold": "warming"}
    assert structured["citations"]


async def test_a_first_call_returns_within_hostd_mcps_wait_with_the_cold_provider_warming(
    workdir: Path, marker: str
) -> None:
    """A call that names no timeout_ms gets ``hostd mcp``'s own readiness wait (3 s,
    under an MCP client's usual 5 s timeout): it returns with what the ready provider
    gave, the cold one said warming, instead of waiting up to its start_timeout_s (an
    hour here: the hang guard would end the test first). Its warm-up gate stays shut
    throughout; alpha's start is waited for first (``ready_wait_ms``, the call's own)."""
    gate = workdir / "gate"  # touched only once the calls have returned
    cold = ["python", "-m", "tests.fixtures.warming_provider", "--warm-gate", str(gate)]
    extra = (
        f'[[provider]]\nid = "cold"\ncommand = {json.dumps(cold)}\ncwd = "{ROOT}"\n'
        "start_timeout_s = 3600\n"
    )
    config = write_config(workdir, marker, {"alpha": {}}, extra=extra)
    alpha = {"goal": "frames", "providers": ["alpha"], "ready_wait_ms": 600_000}
    try:
        with anyio.fail_after(120):  # a hang guard
            async with Client(hostd_mcp(config, ready_wait_ms=None), mode="legacy") as client:
                ready = await client.call_tool("compose_context", alpha)
                result = await client.call_tool("compose_context", {"goal": "frames"})
    finally:
        gate.touch()
    assert ready.is_error is False, _texts(ready)
    assert result.is_error is False, _texts(result)
    structured = result.structured_content or {}
    legs = {p["provider_id"]: p for p in structured["providers"]}
    assert {pid: leg["status"] for pid, leg in legs.items()} == {"alpha": "ok", "cold": "warming"}
    assert "not ready within 3000 ms" in legs["cold"]["error"]["message"], legs["cold"]
    assert {c["frame"]["provider_id"] for c in structured["citations"]} == {"alpha"}
    # The model reads that it may call again for the rest.
    assert any("still warming: cold" in text for text in _texts(result)), _texts(result)


async def test_a_provider_whose_leg_failed_is_named_in_the_text_a_model_reads(
    workdir: Path, marker: str
) -> None:
    # slow answers no query within its leg's deadline: its leg is a timeout each time.
    config = write_config(
        workdir, marker, {"alpha": {}, "slow": {"delay_ms": 600000, "timeout_ms": 1000}}
    )
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            status = None
            while status != "timeout":  # its first leg may still be its start (warming)
                result = await client.call_tool("compose_context", {"goal": "anything"})
                structured = result.structured_content
                assert structured is not None
                status = {p["provider_id"]: p["status"] for p in structured["providers"]}["slow"]
    assert result.is_error is False and structured["citations"]  # alpha's evidence served
    hints = [t for t in _texts(result) if t.startswith("hostd: no evidence from")]
    # No daemon serves this session's providers (``status`` would find none): the
    # command named runs the provider alone.
    assert hints == [
        "hostd: no evidence from slow (timeout) this time: the evidence above lacks what it "
        f"holds; `hostd --config {config} check-provider --provider slow` runs it alone and "
        "says why"
    ]


async def test_a_provider_whose_every_frame_was_invalid_is_named_in_the_text_a_model_reads(
    workdir: Path, marker: str
) -> None:
    # untitled answers, yet its two frames have no title: both dropped (schema), none kept.
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "untitled", marker]
    untitled = f'[[provider]]\nid = "adv"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
    config = write_config(workdir, marker, {"alpha": {}}, extra=untitled)
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            result = await client.call_tool("compose_context", {"goal": "anything"})
    assert result.is_error is False, _texts(result)
    structured = result.structured_content or {}
    legs = {p["provider_id"]: p for p in structured["providers"]}
    assert (legs["adv"]["status"], legs["adv"]["frames_accepted"]) == ("ok", 0), legs["adv"]
    assert {"reason": "frames_invalid", "provider": "adv", "detail": "schema"} in structured[
        "degraded_reasons"
    ]
    hints = [t for t in _texts(result) if t.startswith("hostd: no evidence from")]
    # Counts and rule ids, as the compose summary counts them: never a field it sent.
    assert hints == [
        "hostd: no evidence from adv (ok, but 2 frame(s) dropped: invalid_frame 2 (schema)) "
        "this time: the evidence above lacks what it holds; "
        f"`hostd --config {config} check-provider --provider adv` runs it alone and says why"
    ]


async def test_a_provider_that_lost_some_of_its_frames_is_named_in_the_text_a_model_reads(
    workdir: Path, marker: str
) -> None:
    # invalid_frames answers six frames, five of them invalid (F1, F3, F5, F4, schema):
    # its one valid frame is cited, and the model reads that the rest were dropped.
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "invalid_frames", marker]
    adv = f'[[provider]]\nid = "adv"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
    config = write_config(workdir, marker, {"alpha": {}}, extra=adv)
    with anyio.fail_after(120):  # a hang guard
        async with Client(hostd_mcp(config), mode="legacy") as client:
            result = await client.call_tool("compose_context", {"goal": "anything"})
    assert result.is_error is False, _texts(result)
    structured = result.structured_content or {}
    legs = {p["provider_id"]: p for p in structured["providers"]}
    assert (legs["adv"]["status"], legs["adv"]["frames_offered"]) == ("ok", 6), legs["adv"]
    assert "adv" in {c["frame"]["provider_id"] for c in structured["citations"]}
    hints = [t for t in _texts(result) if t.startswith("hostd: ") and "evidence from" in t]
    # Counts and rule ids, as for a leg that lost them all: never a field it sent.
    assert hints == [
        "hostd: only part of the evidence from adv (ok, but 5 frame(s) dropped: invalid_frame "
        "5 (F1, F3, F4, F5, schema)) this time: the evidence above lacks what it holds; "
        f"`hostd --config {config} check-provider --provider adv` runs it alone and says why"
    ]


async def test_a_provider_that_lost_part_of_its_answer_is_named_in_the_text_a_model_reads(
    workdir: Path, marker: str
) -> None:
    # Its hang tool never answers, beside notes, which answers at once: its leg is ok,
    # short of hang's results, once hang's deadline (within the 3 s leg) has passed.
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools"]
    calls = ", ".join(
        f'{{name = "{t}", arguments = {{query = "{{query}}"}}}}' for t in ("hang", "notes")
    )
    extra = (
        f'[[provider]]\nid = "tickets"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 3000\ncwd = "{ROOT}"\nmcp = {{resources = false, tools = [{calls}]}}\n'
    )
    config = write_config(workdir, marker, {}, extra=extra)
    with anyio.fail_after(120):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = await client.list_tools()
            status = "warming"
            while status == "warming":  # its first leg may still be its start
                result = await client.call_tool("compose_context", {"goal": "cache ttl eviction"})
                structured = result.structured_content
                assert structured is not None, _texts(result)
                status = structured["providers"][0]["status"]
    assert result.is_error is False, _texts(result)
    jsonschema.validate(structured, _tool(tools, "compose_context").output_schema)
    (leg,) = structured["providers"]
    assert leg["status"] == "ok" and structured["citations"]  # notes' evidence served
    note = "1 of 2 tools gave no results: hang (timeout)"
    assert leg["note"] == note
    hints = [t for t in _texts(result) if t.startswith("hostd: ") and "evidence from" in t]
    # The note's words, as the structured result says them, in the text a model reads.
    assert hints == [
        f"hostd: only part of the evidence from tickets ({note}) this time: the evidence "
        f"above lacks what it holds; `hostd --config {config} check-provider --provider "
        "tickets` runs it alone and says why"
    ]
