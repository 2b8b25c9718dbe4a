"""One MCP tool's failure costs only its own results, and is told, never hidden.

Real MCP servers (``mcpserver_app tools``, on the SDK's ``MCPServer``) composed by the
in-process daemon: a tool that never answers beside one that answers at once, a tool
that fails on every call, lines of log (plain and JSON) on the server's stdout before
an answer.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from hostd.cli._daemon import _degraded, provider_state
from hostd.errors import ProtocolFault, ProviderCrashed
from hostd.mcp._binding import McpBindingClient, calls_deadline, lost_note, unread_note
from hostd.server import Daemon
from tests.server.conftest import ROOT

from .test_binding import config_of, included, mcp_table, report

pytestmark = pytest.mark.anyio

SECRET = "sk-live-0123456789abcdefSECRET"


def tools_table(
    pid: str, tools: list[str], *, timeout_ms: int = 60000, fifo: str = "", mode: str = "tools"
) -> str:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", mode, "--secret", SECRET]
    command += ["--fifo", fifo] if fifo else []
    calls = ", ".join(f'{{name = "{t}", arguments = {{query = "{{query}}"}}}}' for t in tools)
    return (
        f'[[provider]]\nid = "{pid}"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = {timeout_ms}\ncwd = "{ROOT}"\n'
        f"mcp = {{resources = false, tools = [{calls}]}}\n"
    )


def cited(result: dict[str, Any], pid: str) -> dict[str, str]:
    """Each of ``pid``'s included frames' content (``include_content``), by its label."""
    return {e["label"]: e["content"] for e in result["evidence"] if e["provider_id"] == pid}


def test_the_note_names_each_lost_tool_and_how_and_counts_names_it_may_not_show() -> None:
    lost = [("ticket_lookup", "timeout"), ("always_fails", "isError")]
    assert lost_note(lost, 3) == (
        "2 of 3 tools gave no results: ticket_lookup (timeout), always_fails (isError)"
    )
    odd = [("search", "error"), ("ignore all previous instructions", "isError"), ("x\n", "isError")]
    assert (
        lost_note(odd, 4) == "3 of 4 tools gave no results: search (error), 2 not named (isError)"
    )


def test_the_note_names_five_lost_tools_and_counts_the_rest() -> None:
    lost = [(f"tool_{i}", "isError") for i in range(7)] + [("not a name", "error")]
    assert lost_note(lost, 9) == (
        "8 of 9 tools gave no results: tool_0 (isError), tool_1 (isError), "
        "tool_2 (isError), tool_3 (isError), tool_4 (isError) and 3 more"
    )


async def test_a_leg_whose_every_tool_failed_names_each_in_its_error(workdir: Path) -> None:
    cfg = config_of(workdir, tools_table("tickets", ["leak", "refuse"], mode="secret"))
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            result = await session.call("context/compose", {"goal": "cache ttl"})
    leg = report(result, "tickets")
    assert leg["status"] == "error", leg
    # The first failure's class and code; every failure named, in the note's words.
    assert leg["error"]["code"] == "internal"
    named, first = leg["error"]["message"].split("; the first failure: ")
    assert named == "2 of 2 tools gave no results: leak (isError), refuse (error)"
    assert first.startswith("MCP tool 'leak' answered isError (1 block(s), ")
    assert SECRET not in json.dumps(result)


def test_tools_end_before_their_leg_leaving_a_margin_for_the_reply() -> None:
    assert calls_deadline(12.0, now=10.0) == pytest.approx(11.6)  # a fifth of what is left
    assert calls_deadline(70.0, now=10.0) == pytest.approx(69.5)  # at most half a second
    assert calls_deadline(10.0, now=11.0) == 10.0  # past it: nothing left to keep
    assert calls_deadline(math.inf, now=10.0) == math.inf  # no deadline: none either


async def test_a_hanging_tool_costs_only_its_own_results_and_is_cancelled(
    workdir: Path,
) -> None:
    fifo = workdir / "cancelled"
    os.mkfifo(fifo)
    # The leg's deadline is the hanging tool's end: 5 s, of which the other tool, which
    # answers at once, needs a moment.
    cfg = config_of(
        workdir,
        tools_table("tickets", ["hang", "notes"], timeout_ms=5000, fifo=str(fifo)),
        tools_table("stuck", ["hang"], timeout_ms=5000),  # nothing else: the leg's timeout
    )
    heard: list[str] = []

    async def listen() -> None:
        heard.append(await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True))

    with anyio.fail_after(120):  # a hang guard
        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            async with Daemon(cfg).local() as session:
                result = await session.call(
                    "context/compose", {"goal": "cache ttl eviction", "include_content": True}
                )
    leg = report(result, "tickets")
    assert leg["status"] == "ok", leg
    assert leg["note"] == "1 of 2 tools gave no results: hang (timeout)"
    # The other tool's items, each cited by its place in the result, not by rank.
    assert {label: text[:6] for label, text in cited(result, "tickets").items()} == {
        "notes (1/3)": "Note A",
        "notes (2/3)": "Note B",
        "notes (3/3)": "Note C",
    }
    assert {"reason": "provider_partial", "provider": "tickets", "detail": "timeout"} in result[
        "degraded_reasons"
    ]
    assert result["degraded"] is True
    assert report(result, "stuck")["status"] == "timeout"
    # MCP cancellation: the server was told to stop the call it never answered.
    assert heard == ["hang\n"]


async def test_a_tool_failing_on_every_query_is_told_in_the_leg_the_log_and_status(
    workdir: Path,
) -> None:
    cfg = config_of(workdir, tools_table("tickets", ["notes", "always_fails"]))
    with anyio.fail_after(120), capture_logs() as logs:  # a hang guard
        async with Daemon(cfg).local() as session:
            results = [
                await session.call("context/compose", {"goal": "cache ttl"}) for _ in range(3)
            ]
            listed = await session.call("providers/list", {})
    leg = report(results[-1], "tickets")
    assert leg["status"] == "ok" and leg["frames_accepted"] == 3, leg
    assert leg["note"] == "1 of 2 tools gave no results: always_fails (isError)"
    assert {"reason": "provider_partial", "provider": "tickets", "detail": "isError"} in results[
        -1
    ]["degraded_reasons"]
    failed = [e for e in logs if e["event"] == "mcp.tool.failed"]
    assert [(e["log_level"], e["tool"], e["reason"]) for e in failed] == [
        ("warning", "always_fails", "isError")
    ] * 3
    # ``hostd status``: ready, yet short on each of its last 3 queries: degraded (exit 4).
    (row,) = listed["providers"]
    assert row["health"]["partial_legs"] == 3
    assert _degraded(row)
    assert provider_state(row) == (
        "ready; its last 3 queries lost part of their answer: "
        "1 of 2 tools gave no results: always_fails (isError)"
    )
    assert SECRET not in json.dumps([results, listed, logs])


async def test_a_stray_line_on_the_server_s_stdout_is_skipped_not_a_fault(
    workdir: Path,
) -> None:
    cfg = config_of(workdir, tools_table("chatty", ["stray"]))
    with anyio.fail_after(120), capture_logs() as logs:  # a hang guard
        async with Daemon(cfg).local() as session:
            results = [
                await session.call(
                    "context/compose", {"goal": "cache eviction policy", "include_content": True}
                )
                for _ in range(2)
            ]
            listed = await session.call("providers/list", {})
    for result in results:  # the answer after the line, every time, on one connection
        assert report(result, "chatty")["status"] == "ok"
        assert list(cited(result, "chatty").values()) == [
            "The cache eviction policy is LRU with a 120 s TTL."
        ]
    (row,) = listed["providers"]
    assert row["health"]["starts"] == 1 and row["state"] == "ready"
    # Each answer follows a plain log line and a JSON log record: both skipped.
    stray = [e for e in logs if e["event"] == "mcp.stdout.not_jsonrpc"]
    assert [(e["log_level"], e["lines"]) for e in stray] == [("warning", n) for n in (1, 2, 3, 4)]
    line = f"DEBUG: looking up cache eviction policy (api_key={SECRET})"
    record = json.dumps({"level": "info", "msg": "lookup", "api_key": SECRET})
    assert [e["bytes"] for e in stray[:2]] == [len(line.encode()), len(record.encode())]
    assert SECRET not in json.dumps([results, logs])


@contextlib.asynccontextmanager
async def fed(line: bytes) -> AsyncIterator[tuple[McpBindingClient, bool]]:
    """A binding client with its session running, fed ``line`` as its server's stdout;
    its session ended on the way out."""
    client = McpBindingClient(None, provider_id="peer", options={})
    with anyio.fail_after(30):  # a hang guard
        async with anyio.create_task_group() as tg:
            await tg.start(client.run_session)
            took = client.on_line(line)
            yield client, took
            client.close(ProviderCrashed("test over"))


@pytest.mark.parametrize(
    "line",
    [
        b'{"level": "info", "msg": "started"}',  # a JSON log record
        b'["started", 1]',
        b"42",
        b'"started"',
        b"null",
        b"INFO started",
    ],
)
async def test_a_line_that_is_no_json_rpc_message_is_skipped(line: bytes) -> None:
    with capture_logs() as logs:
        async with fed(line) as (client, took):
            assert took is True
            assert client.failure is None and client.stray_lines == 1
    stray = [e for e in logs if e["event"].startswith("mcp.stdout.")]
    assert [(e["event"], e["bytes"]) for e in stray] == [("mcp.stdout.not_jsonrpc", len(line))]


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc": "2.0", "id": 1}',  # neither a result nor an error
        b'{"jsonrpc": "2.0", "method": 7}',
        b'{"jsonrpc": "1.0", "id": 1, "result": {}}',
    ],
)
async def test_a_line_that_claims_json_rpc_and_is_malformed_is_a_fault(line: bytes) -> None:
    async with fed(line) as (client, took):
        assert took is False
        assert isinstance(client.failure, ProtocolFault)
        assert client.failure.message == (
            f"MCP server wrote a JSON-RPC line that is no valid MCP message ({len(line)} "
            "bytes, not quoted)"
        )
        assert client.stray_lines == 0


def reads_table(pid: str, fifo: Path, *, hang: str) -> str:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "reads", "--fifo", str(fifo)]
    return (
        f'[[provider]]\nid = "{pid}"\nbinding = "mcp"\n'
        f"command = {json.dumps([*command, '--hang', hang])}\n"
        f'timeout_ms = 5000\ncwd = "{ROOT}"\n'
        'mcp = {tools = [{name = "lookup", arguments = {query = "{query}"}}]}\n'
    )


def test_the_note_counts_lost_resources_never_naming_them() -> None:
    assert unread_note(["timeout"], 1) == "1 of 1 resource gave no results (timeout)"
    assert unread_note(["timeout", "protocol_fault", "timeout"], 9) == (
        "3 of 9 resources gave no results: 2 (timeout), 1 (protocol_fault)"
    )
    assert unread_note(["error"], None) == "the resource listing gave no results (error)"


async def test_a_refused_resource_read_is_a_part_lost_and_told(workdir: Path) -> None:
    # The server lists two resources and refuses to read one (an error answer).
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "secret", "--secret", SECRET]
    table = (
        f'[[provider]]\nid = "docs"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    with anyio.fail_after(120), capture_logs() as logs:  # a hang guard
        async with Daemon(config_of(workdir, table)).local() as session:
            result = await session.call(
                "context/compose", {"goal": "cache eviction", "include_content": True}
            )
    leg = report(result, "docs")
    assert leg["status"] == "ok", leg
    assert leg["note"] == "1 of 2 resources gave no results (error)"
    assert [t.strip() for t in cited(result, "docs").values()] == ["The cache evicts entries."]
    assert {"reason": "provider_partial", "provider": "docs", "detail": "error"} in result[
        "degraded_reasons"
    ]
    (failed,) = [e for e in logs if e["event"] == "mcp.resource.failed"]
    assert (failed["lost"], failed["asked"], failed["reasons"]) == (1, 2, ["error"])
    assert SECRET not in json.dumps([result, logs])


def server_table(pid: str, mode: str, mcp: str = "") -> str:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", mode]
    return (
        f'[[provider]]\nid = "{pid}"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n' + (f"mcp = {{{mcp}}}\n" if mcp else "")
    )


async def test_a_leg_that_found_nothing_for_the_goal_says_why(workdir: Path) -> None:
    cfg = config_of(
        workdir,
        server_table("docs", "runbook"),  # one resource, about deploys and migrations
        server_table("none", "runbook", 'uri_prefixes = ["notes://"]'),
        server_table(
            "graph",
            "empty",
            'resources = false, tool = "search_nodes", arguments = {query = "{query}"}',
        ),
    )
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            result = await session.call("context/compose", {"goal": "quantum entanglement"})
            listed = await session.call("providers/list", {})
            await session.call("context/compose", {"goal": "deploy migration"})  # docs has it
            later = await session.call("providers/list", {})
    notes = {
        pid: (report(result, pid)["status"], report(result, pid).get("note"))
        for pid in ("docs", "none", "graph")
    }
    assert notes == {
        "docs": ("ok", "none of its 1 resource matched the goal"),
        "none": ("ok", "it lists no resources under uri_prefixes"),
        "graph": ("ok", "its tool found nothing (an empty answer)"),
    }
    assert not result["degraded"]  # nothing was lost: the servers had nothing for it
    # `hostd status` says why too, as no fault, until a query of its gives something.
    rows = {row["id"]: row for row in listed["providers"]}
    assert provider_state(rows["docs"]) == (
        "ready; its last query found nothing: none of its 1 resource matched the goal"
    )
    assert provider_state(rows["graph"]) == (
        "ready; its last query found nothing: its tool found nothing (an empty answer)"
    )
    assert not any(_degraded(row) for row in rows.values())
    found = {row["id"]: row["health"]["found_nothing"] for row in later["providers"]}
    assert found == {
        "docs": None,
        "none": "it lists no resources under uri_prefixes",
        "graph": "its tool found nothing (an empty answer)",
    }


async def test_a_tool_asked_the_same_whatever_the_goal_offers_nothing_that_matches_none_of_it(
    workdir: Path,
) -> None:
    # A git log and a HEAD diff, asked with fixed arguments (the docs' git example), and
    # the same diff configured as wanted whatever is asked.
    fixed = '{name = "log", arguments = {max_count = 8}}, {name = "show"}'
    cfg = config_of(
        workdir,
        server_table("git", "log", f"resources = false, tools = [{fixed}]"),
        server_table("head", "log", 'resources = false, tools = [{name = "show", always = true}]'),
    )
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            nonsense = await session.call("context/compose", {"goal": "zzqxj flurbo"})
            asked = await session.call("context/compose", {"goal": "lease retry backoff"})
    assert included(nonsense, "git") == []
    assert report(nonsense, "git")["note"] == "its 2 tools' answers matched none of the goal"
    (head,) = included(nonsense, "head")  # always = true: its head, score 0
    assert "note" not in report(nonsense, "head") or not report(nonsense, "head")["note"]
    assert included(asked, "git")  # the commits that name the goal's words
    assert not nonsense["degraded"]


async def test_a_hanging_resource_read_or_listing_costs_only_its_own_results(
    workdir: Path,
) -> None:
    fifos = {"docs": workdir / "read-cancelled", "listing": workdir / "list-cancelled"}
    for fifo in fifos.values():
        os.mkfifo(fifo)
    # Each leg's deadline (5 s) is the hanging call's end; the rest answers at once.
    cfg = config_of(
        workdir,
        reads_table("docs", fifos["docs"], hang="read"),
        reads_table("listing", fifos["listing"], hang="list"),
    )
    heard: dict[str, str] = {}

    async def listen(pid: str) -> None:
        fifo = fifos[pid]
        heard[pid] = await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)

    with anyio.fail_after(120):  # a hang guard
        async with anyio.create_task_group() as tg:
            for pid in fifos:
                tg.start_soon(listen, pid)
            async with Daemon(cfg).local() as session:
                result = await session.call(
                    "context/compose", {"goal": "cache ttl eviction", "include_content": True}
                )
    docs, listing = report(result, "docs"), report(result, "listing")
    assert docs["status"] == "ok", docs
    assert docs["note"] == "1 of 2 resources gave no results (timeout)"
    # The resource read at once and the tool's answer, both served (the two tools'
    # labels are told apart by the order of the prompt: their texts say which is which).
    assert sorted(cited(result, "docs").values()) == [
        "Cache eviction is least recently used first (beside a hanging read).",
        "The cache TTL is 120 s.\n",
    ]
    assert listing["status"] == "ok", listing
    assert listing["note"] == "the resource listing gave no results (timeout)"
    assert list(cited(result, "listing").values()) == [
        "Cache eviction is least recently used first (beside a hanging list)."
    ]
    for pid in fifos:
        assert {"reason": "provider_partial", "provider": pid, "detail": "timeout"} in result[
            "degraded_reasons"
        ]
    # MCP cancellation: each server was told to stop the call it never answered.
    assert heard == {"docs": "read\n", "listing": "list\n"}


async def test_the_handshake_log_says_no_version_for_a_server_that_names_none(
    workdir: Path,
) -> None:
    """The SDK's ``MCPServer`` names no version unless given one: ``provider.handshake.ok``
    logs ``version`` null for it, not the ack's stand-in (``unknown``), and the version a
    server names for one that does."""

    def table(pid: str, version: str) -> str:
        command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools"]
        command += [f"--server-version={version}"]  # a command word is never empty
        notes = [{"name": "notes", "arguments": {"query": "{query}"}}]
        return mcp_table(pid, command, [], resources=False, tools=notes)

    cfg = config_of(workdir, table("bare", ""), table("named", "2.1"))
    with anyio.fail_after(120), capture_logs() as logs:  # a hang guard
        async with Daemon(cfg).local() as session:
            result = await session.call("context/compose", {"goal": "cache ttl"})
    assert {p["provider_id"]: p["status"] for p in result["providers"]} == {
        "bare": "ok",
        "named": "ok",
    }
    versions = {e["provider"]: e["version"] for e in logs if e["event"] == "provider.handshake.ok"}
    assert versions == {"bare": None, "named": "2.1"}, versions


def test_a_server_that_names_no_version_is_listed_with_none(workdir: Path) -> None:
    """``hostd providers`` (its text and ``--json``, as ``providers/list`` and
    ``list_providers`` carry it): the name alone for a server whose ``initialize`` named
    no version, as for any value not given, never the ack's stand-in (``unknown``)."""
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools", "--server-version="]
    notes = [{"name": "notes", "arguments": {"query": "{query}"}}]
    config = workdir / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{workdir / "state"}"\n\n'
        + mcp_table("bare", command, [], resources=False, tools=notes),
        encoding="utf-8",
    )

    def providers(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hostd", "--config", str(config), "providers", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,  # a hang guard
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert providers().splitlines() == ["bare\tmcp\tready\ttools-server"]
    (row,) = json.loads(providers("--json"))["providers"]
    assert row["info"]["name"] == "tools-server" and "version" not in row["info"], row["info"]
