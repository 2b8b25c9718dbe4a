"""An MCP server on the official SDK's ``MCPServer``, built to stress the binding.

``python -m tests.mcp.mcpserver_app MODE [options]``:

- ``big --count N --mib S``: N text resources (``big://doc/<i>``) of S MiB each,
  lines of words, so reading them is cheap and cutting and scoring them is not;
- ``secret --secret S``: a server that echoes ``S`` wherever it writes text of its
  own: a resource whose read fails with ``S`` in the error, a tool whose ``isError``
  result and a tool whose protocol error carry ``S``; one good resource beside them;
- ``junk --secret S``: writes a line that is not JSON and then one that claims to be
  JSON-RPC (a ``jsonrpc`` member) but is no valid message, both holding ``S``, to
  stdout on the first listing (past the SDK, straight onto the pipe): the first is
  skipped, the second a fault;
- ``tools [--fifo F] [--started S]``: a ``hang`` tool that never answers (it writes
  ``started`` to the FIFO ``S`` when called, then waits on an event that never comes;
  cancelled, it writes its name to the FIFO ``F``), a ``notes`` tool that
  answers three text items at once, an ``always_fails`` tool (``isError``, echoing a
  credential), and a ``stray`` tool that writes a line of log and then a JSON log
  record onto stdout before its answer, as a server printing a banner, a debug line or
  structured logs does;
- ``reads [--fifo F] [--hang read|list]``: a ``cache notes`` resource and a ``lookup``
  tool that answer at once (its text names what hangs), beside a resource whose read
  never answers (it waits on an event that never comes; cancelled, it writes ``read``
  to the FIFO ``F``), or, with ``--hang list``, a ``resources/list`` that never
  answers (``list`` on the FIFO);
- ``growing --kib K``: every ``resources/list`` names resources never named before
  (``grow://<listing>/<i>``, K KiB each), like a server whose listing keeps changing;
- ``log``: one ``log`` tool returning a ``git log``-shaped text (many commits), a
  ``show`` tool returning a unified diff, and a ``plain`` tool returning one long line
  of prose (about 7 KB);
- ``runbook``: one markdown text served twice, as a resource (``docs://runbook``) and
  by a ``runbook`` tool;
- ``stale --root DIR``: every file under DIR as a ``file://`` resource, served with
  its text upper-cased (a server serving a copy that is not the file);
- ``orders``: a ``recent_orders`` tool returning a dict of order objects, which the SDK
  serves as JSON indented by 2, as it serves every Python tool's dict or list;
- ``design``: a ``get_design_notes`` tool returning a design document (``DESIGN``:
  billing sections, and one about cache eviction too long for a small ask), and two
  tools that find nothing: ``search_nodes`` (an empty knowledge graph, as JSON) and
  ``search_files`` (``No matches found``);
- ``handbook``: a ``team_notes`` tool returning a team's click handbook (``HANDBOOK``:
  seven markdown sections, several saying "click", one "we use", one "working
  directory"), whatever the topic, as the walkthrough's notes server did;
- ``env``: one tool, named by the ``CHECK_TOOL`` variable, requiring ``query``; without
  that variable it exits at start, as a server missing its configuration does;
- ``empty``: a ``search_nodes`` tool (``query`` required) that finds nothing, answering
  ``{"entities": [], "relations": []}`` as the npm memory server does.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resources import FunctionResource, TextResource
from mcp.shared.exceptions import MCPError
from mcp_types import Resource as WireResource
from mcp_types import TextContent

from tests.mcp._design import EVICTION, FILLER, HANDBOOK

#: The modes above, in the order they are described.
MODES = (
    "big",
    "secret",
    "junk",
    "tools",
    "reads",
    "growing",
    "log",
    "stale",
    "runbook",
    "orders",
    "design",
    "handbook",
    "env",
    "empty",
)
#: A duplicate of the real stdout, taken before the SDK points fd 1 elsewhere.
WIRE_FD = os.dup(1)

WORDS = (
    "cache evict entry lease retry backoff parser token frame budget index shard replica "
    "commit branch merge rebase socket buffer queue worker thread deadline cancel scope"
).split()


def big_text(seed: int, mib: float) -> str:
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while size < mib * (1 << 20):
        line = f"{seed}.{len(lines)} " + " ".join(rng.choices(WORDS, k=12))
        lines.append(line)
        size += len(line) + 1
        if len(lines) % 9 == 0:
            lines.append("")
            size += 1
    return "\n".join(lines) + "\n"


#: A markdown runbook: headings right after text, sections that end in blank lines, one
#: long enough to be cut into parts.
RUNBOOK = (
    "# Runbook\n"
    "Who deploys, how, and what to do when it goes wrong.\n"
    "## Deploy\n\n"
    + "".join(f"Deploy step {i}: build, push, roll one node at a time.\n" for i in range(12))
    + "\nA deploy during an incident waits for the go (see key rotation)\n\n\n"
    "## Database migrations\n\n"
    + "\n".join(
        f"Migration rule {i}: it runs before the new code, backwards compatible, with a"
        " tested down step; a table lock waits for the maintenance window.\n"
        for i in range(9)
    )
    + "\n\n"
)


def log_text(commits: int) -> str:
    """``mcp-server-git``'s ``git_log`` layout: one block per commit, blank-line apart."""
    blocks = []
    for i in range(commits):
        sha = f"{i:04x}" + "ab" * 18
        blocks.append(
            f"Commit: {sha}\nAuthor: Dev {i} <dev{i}@example.com>\n"
            f"Date: 2025-01-{1 + i % 28:02d} 10:00:00+00:00\n"
            f"Message: cache eviction change number {i}: " + " ".join(WORDS[: 4 + i % 8]) + "\n"
        )
    return "Commit history:\n" + "\n".join(blocks)


DIFF = """\
diff --git a/src/cache.py b/src/cache.py
index 1111111..2222222 100644
--- a/src/cache.py
+++ b/src/cache.py
@@ -1,3 +1,4 @@
 def evict(cache):
-    cache.pop()
+    # least recently used first
+    cache.popitem(last=False)
"""


#: A design document of the walkthrough's shape (``_design``).
DESIGN = (
    "# Platform design notes\n\n"
    + "".join(f"## {i}. Billing notes\n\n{FILLER}\n" for i in range(1, 4))
    + EVICTION
    + "\n"
    + "".join(f"## {i}. Billing notes\n\n{FILLER}\n" for i in range(4, 6))
)


class GrowingServer(MCPServer[Any]):
    """Every listing names resources no earlier listing named."""

    def __init__(self, kib: int) -> None:
        super().__init__("growing-server", version="1.0")
        self._kib = kib
        self._listings = itertools.count()

    async def list_resources(self) -> list[WireResource]:
        n = next(self._listings)
        out = []
        for i in range(4):
            uri = f"grow://{n}/{i}"
            text = f"cache entry {n}.{i}\n" + big_text(n * 10 + i, self._kib / 1024)
            self.add_resource(TextResource(uri=uri, name=f"grow {n}.{i}", text=text))
            out.append(WireResource(uri=uri, name=f"grow {n}.{i}"))
        return out


def build(args: argparse.Namespace) -> MCPServer[Any]:
    if args.mode == "growing":
        return GrowingServer(args.kib)
    # Quiet: what the server logs is its own stderr, not what the binding reports.
    server: MCPServer[Any] = MCPServer(
        f"{args.mode}-server", version=args.server_version, log_level="CRITICAL"
    )
    if args.mode == "big":
        for i in range(args.count):
            server.add_resource(
                TextResource(uri=f"big://doc/{i}", name=f"doc {i}", text=big_text(i, args.mib))
            )
    elif args.mode in ("secret", "junk"):
        secret = args.secret
        server.add_resource(
            TextResource(uri="ok://cache", name="cache notes", text="The cache evicts entries.\n")
        )

        def unreadable() -> str:
            raise ResourceError(f"cannot read: token {secret}")

        server.add_resource(FunctionResource(uri="bad://secret", name="locked", fn=unreadable))

        @server.tool()
        def leak(query: str) -> str:
            """Fails, echoing a credential in its error text."""
            raise ToolError(f"denied for Authorization: Bearer {secret}")

        @server.tool()
        def refuse(query: str) -> str:
            """Fails at the protocol level, echoing a credential."""
            raise MCPError(code=-32050, message=f"refused: Bearer {secret}")

        if args.mode == "junk":
            original = server.list_resources

            async def junk_listing() -> list[WireResource]:
                os.write(WIRE_FD, f"not json {secret}\n".encode())
                junk = {"jsonrpc": "2.0", "log": f"token {secret}"}
                os.write(WIRE_FD, json.dumps(junk).encode() + b"\n")
                return await original()

            server.list_resources = junk_listing  # type: ignore[method-assign]  # test fixture

    elif args.mode == "tools":
        fifo = args.fifo

        started = args.started

        @server.tool()
        async def hang(query: str) -> str:
            """Never answers; cancelled, says so on the FIFO."""
            if started:  # the call is here: a test may now cancel it
                await anyio.to_thread.run_sync(Path(started).write_text, "started\n")
            try:
                await anyio.Event().wait()
            except anyio.get_cancelled_exc_class():
                if fifo:
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(Path(fifo).write_text, "hang\n")
                raise
            return "unreachable"

        @server.tool()
        def notes(query: str) -> list[TextContent]:
            """Three text items, in this order."""
            return [
                TextContent(text="Note A: the cache TTL is 120 seconds in production."),
                TextContent(text="Note B: billing runs at 02:00 UTC, after the cache warms."),
                TextContent(text="Note C: cache eviction is logged at debug level."),
            ]

        @server.tool()
        def always_fails(query: str) -> str:
            """Fails on every call, echoing a credential in its error text."""
            raise ToolError(f"ticket backend unreachable (token={args.secret})")

        @server.tool()
        def stray(query: str) -> str:
            """Writes a log line onto the protocol stream, then answers."""
            os.write(WIRE_FD, f"DEBUG: looking up {query} (api_key={args.secret})\n".encode())
            record = {"level": "info", "msg": "lookup", "api_key": args.secret}
            os.write(WIRE_FD, json.dumps(record).encode() + b"\n")
            return "The cache eviction policy is LRU with a 120 s TTL."

    elif args.mode == "reads":
        fifo = args.fifo

        async def never(what: str) -> None:
            """Waits for an event that never comes; cancelled, says ``what`` on the FIFO."""
            try:
                await anyio.Event().wait()
            except anyio.get_cancelled_exc_class():
                if fifo:
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(Path(fifo).write_text, f"{what}\n")
                raise

        server.add_resource(
            TextResource(uri="ok://cache", name="cache notes", text="The cache TTL is 120 s.\n")
        )
        if args.hang == "list":

            async def hanging_listing() -> list[WireResource]:
                await never("list")
                return []

            server.list_resources = hanging_listing  # type: ignore[method-assign]  # test fixture
        else:

            async def hanging_read() -> str:
                await never("read")
                return "unreachable"

            server.add_resource(FunctionResource(uri="slow://read", name="slow", fn=hanging_read))

        @server.tool()
        def lookup(query: str) -> str:
            """Answers at once (naming what hangs, so two such servers answer apart)."""
            return f"Cache eviction is least recently used first (beside a hanging {args.hang})."

    elif args.mode == "stale":
        for path in sorted(p for p in Path(args.root).rglob("*") if p.is_file()):
            text = path.read_text("utf-8").upper()
            uri = path.resolve().as_uri()
            server.add_resource(TextResource(uri=uri, name=path.name, text=text))
    elif args.mode == "log":

        @server.tool()
        def log(max_count: int = 40) -> str:
            """A git log."""
            return log_text(max_count)

        @server.tool()
        def show(revision: str = "HEAD") -> str:
            """A diff."""
            return DIFF

        @server.tool()
        def plain(query: str = "") -> str:
            """One long line of prose, no structure."""
            return " ".join(
                f"Entry {i} is evicted from the cache once its lease of {i} seconds ends."
                for i in range(100)
            )

    elif args.mode == "runbook":
        server.add_resource(
            TextResource(
                uri="docs://runbook", name="runbook", text=RUNBOOK, mime_type="text/markdown"
            )
        )

        @server.tool()
        def runbook() -> str:
            """The runbook, as a tool's answer."""
            return RUNBOOK

    elif args.mode == "orders":

        @server.tool()
        def recent_orders(limit: int = 12) -> dict[str, Any]:
            """Recent orders, as a dict: the SDK serves it as indented JSON."""
            return {
                "orders": [
                    {
                        "id": f"o-{n}",
                        "sku": f"SKU-{n % 4}",
                        "qty": n % 3 + 1,
                        "status": "reserved" if n % 2 else "short",
                        "note": "ok" if n % 2 else "stock short; reservation failed",
                    }
                    for n in range(1, limit + 1)
                ]
            }

    elif args.mode == "design":

        @server.tool()
        def get_design_notes(topic: str = "") -> str:
            """The whole design document, whatever the topic."""
            return DESIGN

        @server.tool()
        def search_nodes(query: str) -> dict[str, Any]:
            """A knowledge graph that holds nothing."""
            return {"entities": [], "relations": []}

        @server.tool()
        def search_files(pattern: str) -> str:
            """A file search that finds nothing."""
            return "No matches found"

    elif args.mode == "handbook":

        @server.tool()
        def team_notes(topic: str = "") -> str:
            """The team's whole click handbook, whatever the topic."""
            return HANDBOOK

    elif args.mode == "env":
        name = os.environ.get("CHECK_TOOL")
        if not name:
            sys.exit("CHECK_TOOL is not set: name the tool to serve")

        def lookup(query: str) -> str:
            return "The cache evicts the least recently used entry."

        server.tool(name=name)(lookup)

    elif args.mode == "empty":

        @server.tool()
        def search_nodes(query: str) -> dict[str, list[Any]]:
            """A knowledge-graph search that matches nothing."""
            return {"entities": [], "relations": []}

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "mode",
        choices=MODES,
    )
    parser.add_argument("--root", default=".")
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--kib", type=int, default=64)
    parser.add_argument("--secret", default="")
    parser.add_argument("--fifo", default="")
    parser.add_argument("--started", default="", help="tools: a FIFO hang writes to when called")
    parser.add_argument("--hang", choices=("read", "list"), default="read")
    parser.add_argument("--marker", default="", help="ignored: names the process for the test")
    parser.add_argument(
        "--server-version", default="1.0", help="what initialize names ('': none, the default)"
    )
    args = parser.parse_args()
    build(args).run("stdio")


if __name__ == "__main__":
    main()
