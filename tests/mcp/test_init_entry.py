"""The MCP client entry ``hostd init`` prints runs as a desktop client runs it: from
``/``, with a bare ``PATH`` that holds no ``hostd``, the project's config by path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.fixtures.home import fresh_home, hostd_in

pytestmark = pytest.mark.anyio


async def test_the_entry_init_prints_serves_mcp_from_anywhere(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = tmp_path / "myproject"
    project.mkdir()
    (project / "notes.md").write_text("Deploys happen on Tuesdays.\n", encoding="utf-8")
    made = hostd_in(project, env, "init", "--providers", "files")
    assert made.returncode == 0, made.stderr
    (line,) = [x for x in made.stdout.splitlines() if x.startswith("an MCP client: ")]
    entry = json.loads(line.removeprefix("an MCP client: "))
    assert Path(entry["command"]).is_absolute(), entry
    assert entry["args"][-3:] == ["--config", str(project / "hostd.toml"), "mcp"]
    lines = made.stdout.splitlines()
    after = lines[lines.index(line) + 1]  # beside a running `hostd serve`: how to share it
    assert 'add "--connect" to its args' in after, after
    # A desktop client's environment: no virtualenv on PATH, its own directory.
    bare = {"PATH": "/usr/bin:/bin", "HOME": env["HOME"], "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=bare, cwd="/")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
    assert "compose_context" in [t.name for t in tools.tools]
