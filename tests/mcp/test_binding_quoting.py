"""The MCP binding quotes nothing a server writes: sizes, positions and codes only.

A real ``hostd serve`` composes real MCP servers (``mcpserver_app``, on the SDK's
``MCPServer``) that echo a credential wherever they write text of their own: in a
resource's read error, a tool's ``isError`` text, a tool's protocol error, a line
that is not JSON (skipped) and one that claims JSON-RPC but is no message (a fault). The
credential must reach none of the daemon's log (JSON and stdlib alike), the
composition reply, ``providers/list``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from hostd.client import connect
from hostd.mcp._served import withhold_sdk_logs
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio

SECRET = "sk-live-0123456789abcdefSECRET"


def toml_value(value: Any) -> str:
    """A TOML inline value (tables inline, at any depth)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def _table(pid: str, mode: str, marker: str, **mcp: Any) -> str:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", mode, "--secret", SECRET]
    command += ["--marker", marker]
    inline = ", ".join(f"{k} = {toml_value(v)}" for k, v in mcp.items())
    return (
        f'[[provider]]\nid = "{pid}"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n' + (f"mcp = {{{inline}}}\n" if inline else "")
    )


async def test_nothing_a_server_echoes_reaches_the_log_or_the_reply(
    start_daemon: Any, marker: str
) -> None:
    tables = [
        # resources (one unreadable) beside a failing tool: the leg is ok, the failures told
        _table("mixed", "secret", marker, tools=[{"name": "leak", "arguments": {"query": "q"}}]),
        # the only source fails: the leg's error says how, in hostd's words
        _table("leaky", "secret", marker, resources=False, tool="leak", arguments={"query": "x"}),
        _table(
            "refusing", "secret", marker, resources=False, tool="refuse", arguments={"query": "x"}
        ),
        _table("junk", "junk", marker),
    ]
    daemon = await start_daemon({"alpha": {}}, extra="".join(tables))
    async with connect(daemon.socket) as client:
        result = (await client.compose("how does the cache evict entries", budget=2000)).to_wire()
        listed = await client.providers()
    assert await daemon.stop() == 0
    legs = {p["provider_id"]: p for p in result["providers"]}
    assert legs["mixed"]["status"] == "ok" and legs["mixed"]["frames_accepted"] == 1
    assert legs["leaky"]["status"] == "error"
    assert "answered isError" in legs["leaky"]["error"]["message"]
    assert legs["refusing"]["status"] == "error"
    assert "answered error -32050" in legs["refusing"]["error"]["message"]
    assert legs["junk"]["status"] == "error"
    assert "no valid MCP message" in legs["junk"]["error"]["message"]
    (unreadable,) = daemon.events("mcp.resource.failed")
    assert unreadable["lost"] == 1 and unreadable["reasons"] == ["error"]
    assert sorted(e["tool"] for e in daemon.events("mcp.tool.failed")) == ["leak", "leak", "refuse"]
    (skipped,) = daemon.events("mcp.stdout.not_jsonrpc")  # the line before, not JSON at all
    assert skipped["bytes"] == len(f"not json {SECRET}")
    # The verdict: the credential is nowhere.
    assert SECRET not in json.dumps(result)
    assert SECRET not in json.dumps(listed)
    assert SECRET not in "\n".join(daemon.log_text)


def test_the_sdk_loggers_keep_their_words_and_drop_the_peer_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    withhold_sdk_logs()
    with caplog.at_level(logging.DEBUG):
        try:
            raise ValueError(f"input_value={SECRET!r}")
        except ValueError:
            logging.getLogger("client").warning(
                "Failed to validate notification: %s", f"notifications/{SECRET}", exc_info=True
            )
        logging.getLogger("mcp.shared.tool_name_validation").warning(f'bad "{SECRET}":')
    assert [r.getMessage() for r in caplog.records] == [
        "Failed to validate notification: … (peer text withheld)",
        "tool name validation warning (peer text withheld)",
    ]
    assert SECRET not in caplog.text
