"""MCP servers as providers give evidence, not blobs: pieces with ranges and labels.

Against real peers: the published ``mcp-server-git`` (its ``git_log`` and
``git_show`` tools over a repository made here) and ``mcpserver_app`` (the SDK's
``MCPServer``), composed through the in-process daemon; and, at the transport,
a server whose listing keeps naming new resources, against the bounded cache.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.config import McpSettings
from hostd.mcp import McpBindingClient
from hostd.protocol import ContextQuery, address_line_range, sha256_digest
from hostd.transport import ProviderConnection
from tests.server.conftest import ROOT

from .test_binding import compose, config_of, included, mcp_table, report

pytestmark = pytest.mark.anyio

_LABEL = re.compile(r"^commits? ([0-9a-f]{7})(?:, [0-9a-f]{7})*(?: \+\d+)?$")


@pytest.fixture
def history(workdir: Path) -> Iterator[Path]:
    """A repository of 24 commits: ``git_log`` of 20 is about 1,500 tokens (as the
    1,576-token log that gave nothing at a budget of 1,200 when it was one frame)."""
    pytest.importorskip("mcp_server_git", reason="mcp-server-git (the dev extra) is not installed")
    path = workdir / "history"
    path.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    for i in range(24):
        (path / f"module{i % 5}.py").write_text(f"def step_{i}():\n    return {i}\n" * (i + 1))
        git("add", ".")
        body = (
            "Entries are evicted least recently used first; the retry backoff is unchanged,"
            " and a cold entry older than its lease is dropped before any warm one is."
        )
        git("commit", "-qm", f"Tune the cache eviction order, step {i}", "-m", body)
    ids = subprocess.run(
        ["git", "log", "--format=%H"], cwd=path, capture_output=True, text=True, check=True
    )
    (path / "ids").write_text(ids.stdout)  # untracked: the log is what the commits say
    yield path


def _git(repo: Path, **mcp: Any) -> str:
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    return mcp_table("git", command, [repo], resources=False, kind="episode", **mcp)


async def test_a_long_git_log_gives_the_commits_that_fit(workdir: Path, history: Path) -> None:
    table = _git(history, tool="git_log", arguments={"repo_path": str(history), "max_count": 20})
    result = await compose(config_of(workdir, table), goal="cache eviction order", budget=1200)
    leg = report(result, "git")
    assert leg["status"] == "ok" and leg["violations"] == [], leg
    cited = [c for c in result["citations"] if c["frame"]["provider_id"] == "git"]
    assert len(cited) >= 3, leg  # several commits, not all-or-nothing
    assert result["audit"]["tokens_used"] <= 1200
    log = (history / "ids").read_text().split()
    for citation in cited:
        match = _LABEL.match(citation["label"])
        assert match, citation["label"]  # a commit id, not the tool's name
        (mcp,) = citation["provenance"]
        assert mcp["method"] == "tools/call:git_log" and re.fullmatch(r"L\d+-\d+", mcp["range"])
    entries = {e["frame"]["frame_id"]: e for e in included(result, "git")}
    for entry in entries.values():
        assert entry["frame"]["content_digest"].startswith("sha256:")
    # Each label's commit is one of the repository's and its full id is in the prompt.
    for citation in cited:
        short = citation["label"].split()[1].rstrip(",")
        full = next(h for h in log if h.startswith(short))
        assert f"Commit: {full}" in result["prompt"]


async def test_one_provider_entry_calls_several_tools(workdir: Path, history: Path) -> None:
    tools = [
        {"name": "git_log", "arguments": {"repo_path": str(history), "max_count": 3}},
        {"name": "git_show", "arguments": {"repo_path": str(history), "revision": "HEAD"}},
    ]
    result = await compose(
        config_of(workdir, _git(history, tools=tools)), "context/query", goal="cache eviction"
    )
    frames = result["frames"]["git"]
    methods = {p["method"] for f in frames for p in f["provenance"]}
    assert methods == {"tools/call:git_log", "tools/call:git_show"}
    labels = [f["citation_label"] for f in frames]
    # git_show's one commit is one record: each part is that commit's, and a part of
    # its diff names the file it shows.
    assert any(re.fullmatch(r"commit \w{7} \(\d+/\d+\): module\d+\.py", x) for x in labels), labels
    assert all(label not in ("git_log", "git_show") for label in labels), labels


async def test_a_leg_whose_every_frame_is_over_its_share_says_so(workdir: Path) -> None:
    """Every commit is over 10 tokens, and so is each of its lines that names the cache
    (the part of a commit that would be offered in its place)."""
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "log"]
    table = mcp_table("one", command, [], resources=False, tool="log")
    result = await compose(config_of(workdir, table), goal="cache", budget=10)
    leg = report(result, "one")
    assert leg["status"] == "ok" and leg["frames_offered"] == 0
    assert leg["note"].startswith("nothing fit: no frame within its share of 10 tokens"), leg


async def test_a_tool_answer_of_one_long_line_is_quoted_in_parts(workdir: Path) -> None:
    """A line longer than a piece may hold is cut within it: a small share still
    quotes some of it, each part cited by its line and its place on it."""
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "log"]
    table = mcp_table("one", command, [], resources=False, tool="plain")
    result = await compose(config_of(workdir, table), goal="cache lease", budget=700)
    leg = report(result, "one")
    assert leg["status"] == "ok" and leg["frames_accepted"] >= 1 and "note" not in leg, leg
    labels = [c["label"] for c in result["citations"]]
    parts = [re.fullmatch(r"plain L1-1 \((\d+)/(\d+)\)", label) for label in labels]
    assert all(parts) and len({m[2] for m in parts if m}) == 1, labels
    assert all(p["range"] == "L1-1" for c in result["citations"] for p in c["provenance"])


async def test_the_same_text_from_a_tool_and_a_resource_is_quoted_once(workdir: Path) -> None:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "runbook"]
    table = mcp_table("docs", command, [], tools=[{"name": "runbook"}])
    result = await compose(config_of(workdir, table), goal="deploy migration rule", budget=4000)
    entries = [e for e in result["audit"]["entries"] if e["provider"] == "docs"]
    quoted = [e["frame"]["content_digest"] for e in entries if e["disposition"] == "included"]
    twins = [e["frame"]["content_digest"] for e in entries if e.get("reason") == "duplicate"]
    assert quoted and len(set(quoted)) == len(quoted), entries
    # The resource's pieces that matched are the tool's, digest for digest: quoted once.
    assert twins and set(twins) <= set(quoted), entries


async def test_a_resource_is_cut_into_ranges_its_digests_address(
    workdir: Path, corpus: Path
) -> None:
    long = corpus / "guide.md"
    long.write_text(
        "".join(
            f"## Part {i}\n\nThe cache evicts entry {i} when it is cold.\n\n" for i in range(60)
        )
    )
    cfg = config_of(workdir, mcp_table("docs", _sdk(corpus), [corpus]))
    result = await compose(cfg, "context/query", goal="cache evicts entry", budget=4000)
    frames = [f for f in result["frames"]["docs"] if f["uri"] == long.resolve().as_uri()]
    assert len(frames) > 1
    data = long.read_bytes()
    for frame in frames:
        file = next(p for p in frame["provenance"] if p["type"] == "file")
        addressed = address_line_range(data, file["range"])
        assert file["digest"] == sha256_digest(addressed) == frame["content_digest"]
        assert frame["citation_label"].startswith("guide.md § Part ")


async def test_a_tools_indented_json_gives_each_object_whole_as_a_frame(workdir: Path) -> None:
    """The SDK serves a tool's dict as JSON indented by 2: each order is one frame,
    named by its id, with its status; its evidence has the lines it was cut from. The
    short orders are the answer: "order" is in every one (its label says
    ``recent_orders``), so an order that holds only that is no match beside them."""
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "orders"]
    table = mcp_table(
        "shop", command, [], resources=False, tools=[{"name": "recent_orders"}], kind="doc"
    )
    cfg = config_of(workdir, table)
    result = await compose(cfg, goal="which orders are short", budget=4000, include_content=True)
    assert report(result, "shop")["status"] == "ok", result["providers"]
    evidence = [e for e in result["evidence"] if e["provider_id"] == "shop"]
    assert sorted(e["label"] for e in evidence) == sorted(
        f"recent_orders § o-{n}" for n in range(2, 13, 2)
    )
    provenance = {c["label"]: c["provenance"] for c in result["citations"]}
    for item in evidence:
        n = item["label"].removeprefix("recent_orders § o-")
        content = item["content"]
        assert content.count('"id": ') == 1 and f'"id": "o-{n}"' in content, content
        assert content.count('"status": ') == 1, content
        (mcp,) = provenance[item["label"]]
        assert mcp["method"] == "tools/call:recent_orders" and "uri" not in mcp
        assert item["range"] == mcp["range"] and re.fullmatch(r"L\d+-\d+", item["range"])
        assert item["uri"] is None


def _sdk(root: Path) -> list[str]:
    return [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(root)]


async def test_the_read_cache_stays_bounded_while_the_listing_keeps_growing(marker: str) -> None:
    options = McpSettings(cache_ttl_s=0, cache_max_entries=6, cache_max_bytes=200_000)
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "growing", "--kib", "24"]
    query = ContextQuery(goal="cache entry", max_frames=20, max_tokens=100_000)
    async with anyio.create_task_group() as tg:
        conn = await ProviderConnection.open(
            "grow",
            [*command, "--marker", marker],
            task_group=tg,
            binding="mcp",
            cwd=ROOT,
            handshake_timeout=60,
            options=options.model_dump(),  # the binding registry's mcp row builds it
        )
        try:
            assert isinstance(conn.client, McpBindingClient)
            cache = conn.client.cache
            for _ in range(10):  # 4 resources never named before, each time
                with anyio.fail_after(120):
                    result = await conn.query(query)
                assert result.frames
                assert len(cache) <= 6 and cache.bytes <= 200_000, cache
            assert cache.evicted >= 30, cache
        finally:
            await conn.aclose()
        tg.cancel_scope.cancel()
