"""``binding = "mcp"``: MCP servers as context providers, over real stdio children.

The in-test server (``sdk_server``, on the official SDK) serves ``file://`` and
``memo://`` resources and a ``search`` tool; the published ``mcp-server-git``
(PyPI) serves git through its tools. Compositions run through the in-process
daemon, so the consent gate, the leg audit, verification and composition are
the production ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.config import parse_config
from hostd.protocol import sha256_digest
from hostd.server import Daemon
from tests.server.conftest import ROOT, provider_table

from .sdk_server import MEMO_URI

pytestmark = pytest.mark.anyio


def _value(value: Any) -> str:
    """A TOML inline value (tables inline, at any depth)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value)


def mcp_table(pid: str, command: list[str], roots: list[Path], **mcp: Any) -> str:
    lines = [
        "[[provider]]",
        f'id = "{pid}"',
        'binding = "mcp"',
        f"command = {json.dumps(command)}",
        "timeout_ms = 30000",
        f'cwd = "{ROOT}"',
        f"trusted_roots = {json.dumps([str(r) for r in roots])}",
    ]
    if mcp:
        lines.append(f"mcp = {_value(mcp)}")
    return "\n".join(lines) + "\n"


def sdk_server(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(root), *args]


def config_of(workdir: Path, *tables: str) -> Any:
    text = f'[host]\nstate_dir = "{workdir / "state"}"\n\n' + "\n".join(tables)
    return parse_config(text, source="test.toml", base=workdir)


async def compose(cfg: Any, method: str = "context/compose", **params: Any) -> dict[str, Any]:
    with anyio.fail_after(120):
        async with Daemon(cfg).local() as session:
            result: dict[str, Any] = await session.call(method, {"goal": "x", **params})
            return result


def report(result: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in result["providers"] if p["provider_id"] == pid)


def included(result: dict[str, Any], pid: str) -> list[dict[str, Any]]:
    return [
        e
        for e in result["audit"]["entries"]
        if e["provider"] == pid and e["disposition"] == "included"
    ]


async def test_resources_compose_beside_other_providers_with_file_digests_verified(
    workdir: Path, marker: str, corpus: Path
) -> None:
    cfg = config_of(
        workdir,
        mcp_table("docs", sdk_server(corpus), [corpus]),
        provider_table("alpha", marker),
    )
    result = await compose(cfg, goal="how does the cache evict entries", budget=3000)
    assert report(result, "docs")["status"] == "ok"
    assert report(result, "alpha")["frames_accepted"] > 0
    entries = {e["frame"]["frame_id"]: e for e in included(result, "docs")}
    assert entries, result["providers"]
    cited = [c for c in result["citations"] if c["frame"]["provider_id"] == "docs"]
    cache_uri = (corpus / "cache.md").resolve().as_uri()
    cache = next(c for c in cited if any(p.get("uri") == cache_uri for p in c["provenance"]))
    kinds = {p["type"]: p for p in cache["provenance"]}
    assert kinds["mcp"]["by"] == "sdk-test-server"
    assert kinds["file"]["digest"] == sha256_digest((corpus / "cache.md").read_bytes())
    entry = entries[cache["frame"]["frame_id"]]
    assert entry["verification"] == {"state": "source_verified"}
    assert entry["frame"]["content_digest"] == kinds["file"]["digest"]


async def test_a_changed_file_is_caught_by_the_reread(workdir: Path, corpus: Path) -> None:
    cfg = config_of(workdir, mcp_table("docs", sdk_server(corpus), [corpus]))
    async with Daemon(cfg).local() as session:
        first = await session.call("context/compose", {"goal": "cache evicts entries"})
        (corpus / "cache.md").write_text("The cache now never evicts anything at all.\n")
        second = await session.call("context/compose", {"goal": "cache evicts entries"})
    cache_uri = (corpus / "cache.md").resolve().as_uri()
    (frame_id,) = [
        c["frame"]["frame_id"]
        for c in first["citations"]
        if any(p.get("uri") == cache_uri for p in c["provenance"])
    ]
    before = [e for e in first["audit"]["entries"] if e["frame"]["frame_id"] == frame_id]
    after = [e for e in second["audit"]["entries"] if e["frame"]["frame_id"] == frame_id]
    assert before[0]["verification"] == {"state": "source_verified"}
    # The cached read still holds the old text; the host's re-read (F5) catches it.
    assert after[0]["disposition"] == "excluded", after


async def test_uri_prefixes_choose_the_resources(workdir: Path, corpus: Path) -> None:
    cfg = config_of(
        workdir, mcp_table("memo", sdk_server(corpus), [corpus], uri_prefixes=["memo://"])
    )
    result = await compose(cfg, "context/query", goal="cache retention policy")
    frames = result["frames"]["memo"]
    assert [f["uri"] for f in frames] == [MEMO_URI]
    assert [p["type"] for p in frames[0]["provenance"]] == ["mcp"]
    assert frames[0]["kind"] == "doc"


async def test_a_tool_result_becomes_frames(workdir: Path, corpus: Path) -> None:
    cfg = config_of(
        workdir,
        mcp_table(
            "search",
            sdk_server(corpus),
            [corpus],
            resources=False,
            tool="search",
            arguments={"query": "{query}"},
            kind="snippet",
        ),
    )
    result = await compose(cfg, "context/query", goal="x", query_text="evicts entries")
    frames = result["frames"]["search"]
    texts = [f["content"] for f in frames]
    assert any(t.startswith("cache.md: The cache evicts") for t in texts)
    assert any(f.get("uri") == MEMO_URI for f in frames)  # the embedded resource
    assert {f["kind"] for f in frames} == {"snippet"}
    assert all(p["method"] == "tools/call:search" for f in frames for p in f["provenance"])
    assert report(result, "search")["violations"] == []


async def test_budgets_and_kinds_are_enforced_by_the_adapter(workdir: Path, corpus: Path) -> None:
    for i in range(20):
        (corpus / f"cache{i:02}.md").write_text(f"cache note {i}: " + "evict " * 40 + "\n")
    cfg = config_of(workdir, mcp_table("docs", sdk_server(corpus), [corpus]))
    async with Daemon(cfg).local() as session:
        small = await session.call(
            "context/query", {"goal": "cache evict", "budget": 200, "overfetch": 1.0}
        )
        few = await session.call("context/query", {"goal": "cache evict", "max_frames": 2})
        other = await session.call("context/query", {"goal": "cache evict", "kinds": ["symbol"]})
    leg = report(small, "docs")
    assert 0 < leg["tokens_accepted"] <= 200 and leg["violations"] == []
    assert len(few["frames"]["docs"]) == 2
    assert other["frames"]["docs"] == [] and report(other, "docs")["violations"] == []


async def test_listings_and_reads_are_cached(workdir: Path, corpus: Path) -> None:
    log = workdir / "server.log"
    cfg = config_of(
        workdir,
        mcp_table("docs", sdk_server(corpus, "--log", str(log)), [corpus], cache_ttl_s=3600),
    )
    async with Daemon(cfg).local() as session:
        for _ in range(3):
            await session.call("context/query", {"goal": "cache"})
    calls = log.read_text().splitlines()
    assert calls.count("list") == 1
    reads = [c for c in calls if c.startswith("read ")]
    assert len(reads) == len(set(reads)) == 3  # two files and the memo, each read once


async def test_an_egress_server_needs_consent(workdir: Path, corpus: Path) -> None:
    cfg = config_of(workdir, mcp_table("remote", sdk_server(corpus), [corpus], egress=True))
    result = await compose(cfg, goal="cache")
    leg = report(result, "remote")
    assert leg["status"] == "no_consent"
    assert leg["missing_scopes"] == ["egress"]
    assert leg["frames_offered"] == 0


@pytest.mark.parametrize(
    ("mode", "status"), [("crash", "crashed"), ("hang", "timeout"), ("junk", "error")]
)
async def test_a_broken_server_costs_only_its_own_leg(
    workdir: Path, marker: str, corpus: Path, mode: str, status: str
) -> None:
    table = mcp_table("bad", sdk_server(corpus, "--mode", mode), [corpus]).replace(
        "timeout_ms = 30000", "timeout_ms = 3000"
    )
    cfg = config_of(workdir, table, provider_table("alpha", marker))
    result = await compose(cfg, goal="cache")
    assert report(result, "bad")["status"] == status, report(result, "bad")
    assert report(result, "alpha")["status"] == "ok"
    assert included(result, "alpha")


@pytest.fixture
def repo(workdir: Path) -> Iterator[Path]:
    path = workdir / "repo"
    path.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    (path / "cache.py").write_text("def evict():\n    pass\n")
    git("add", ".")
    git("commit", "-qm", "Evict the least recently used cache entry")
    (path / "parser.py").write_text("def parse():\n    pass\n")
    git("add", ".")
    git("commit", "-qm", "Add a line parser")
    yield path


async def test_the_published_git_server_serves_frames_through_its_tool(
    workdir: Path, repo: Path
) -> None:
    pytest.importorskip("mcp_server_git", reason="mcp-server-git (the dev extra) is not installed")
    table = mcp_table(
        "git",
        [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)],
        [repo],
        resources=False,
        tool="git_log",
        arguments={"repo_path": str(repo), "max_count": 10},
        kind="episode",
    )
    result = await compose(workdir_cfg := config_of(workdir, table), goal="cache eviction")
    del workdir_cfg
    assert report(result, "git")["status"] == "ok", report(result, "git")
    assert "Evict the least recently used cache entry" in result["prompt"]
    assert any(c["frame"]["provider_id"] == "git" for c in result["citations"])


def _everything() -> list[str] | None:
    """The npm ``@modelcontextprotocol/server-everything`` binary, if installed
    (``$MCP_SERVER_EVERYTHING`` or ``mcp-server-everything`` on PATH)."""
    found = os.environ.get("MCP_SERVER_EVERYTHING") or shutil.which("mcp-server-everything")
    return [found, "stdio"] if found else None


async def test_the_published_everything_server_serves_its_resources(workdir: Path) -> None:
    command = _everything()
    if command is None:
        pytest.skip(
            "@modelcontextprotocol/server-everything is not installed: "
            "npm install -g @modelcontextprotocol/server-everything (or set MCP_SERVER_EVERYTHING)"
        )
    prefix = "demo://resource/static/document/"
    table = mcp_table("everything", command, [], uri_prefixes=[prefix])
    result = await compose(config_of(workdir, table), goal="how does the server start up")
    leg = report(result, "everything")
    assert leg["status"] == "ok" and leg["violations"] == [], leg
    cited = [c for c in result["citations"] if c["frame"]["provider_id"] == "everything"]
    assert cited
    for citation in cited:
        (prov,) = citation["provenance"]
        assert prov["type"] == "mcp" and prov["uri"].startswith(prefix)
        assert prov["by"] == "mcp-servers/everything"


async def test_a_tool_called_without_its_required_argument_fails_at_the_handshake(
    workdir: Path, marker: str, corpus: Path
) -> None:
    """A configured tool whose required argument the config does not give could only be
    refused at every query (``isError``, its text never quoted, so no reason shown):
    the handshake says which argument and how to give it, and the provider is
    ``failed`` at its first start, as for a tool the server lacks."""
    table = mcp_table("notes", sdk_server(corpus), [corpus], tools=[{"name": "search"}])
    cfg = config_of(workdir, table, provider_table("alpha", marker))
    why = (
        "MCP tool 'search' requires query, which its configured arguments do not give; "
        'e.g. query = "{query}" gives it the query text'
    )
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            result = await session.call("context/compose", {"goal": "cache"})
            (row,) = [
                p for p in (await session.call("providers/list"))["providers"] if p["id"] == "notes"
            ]
    assert report(result, "alpha")["status"] == "ok"
    assert row["state"] == "failed", row
    assert row["health"]["last_failure"] == f"handshake_failed: {why}"
    error = report(result, "notes")["error"]
    assert error["code"] == "handshake_failed", error


async def test_a_tool_the_server_does_not_offer_parks_the_provider_at_once(
    workdir: Path, marker: str, corpus: Path
) -> None:
    """A config naming a tool the server lacks is no crash: no restart cures it, so the
    provider is ``failed`` at its first start, saying which tools the server offers,
    and the next request does not start it again."""
    table = mcp_table("notes", sdk_server(corpus), [corpus], tools=[{"name": "serach"}])
    cfg = config_of(workdir, table, provider_table("alpha", marker))
    why = "MCP server offers no tool 'serach'; it offers 1 tool: search (requires query)"
    with anyio.fail_after(120):  # a hang guard
        async with Daemon(cfg).local() as session:
            first = await session.call("context/compose", {"goal": "cache"})
            (row,) = [
                p for p in (await session.call("providers/list"))["providers"] if p["id"] == "notes"
            ]
            second = await session.call("context/compose", {"goal": "cache"})
    assert report(first, "alpha")["status"] == "ok"
    assert row["state"] == "failed", row
    assert row["health"]["last_failure"] == f"handshake_failed: {why}"
    assert row["health"]["retry_in_s"] > 0
    for result in (first, second):
        error = report(result, "notes")["error"]
        assert error["code"] == "handshake_failed", error
        assert error["message"] == f"{why} (not run again until providers/restart, or in 60 s)"
