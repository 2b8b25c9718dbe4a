"""An MCP server written with the official SDK's lowlevel ``Server``, for the binding tests.

``python -m tests.mcp.sdk_server --root DIR [--mode MODE] [--log FILE]``. It
serves every file under ``DIR`` as a ``file://`` resource, one ``memo://``
resource, and a ``search`` tool that returns the lines containing its
``query`` (text blocks) and the memo as an embedded resource. ``--log`` gets
one line per ``resources/list`` and ``resources/read`` (for the cache tests).
Modes: ``normal``; ``crash`` (exits on the first read); ``hang`` (never answers
a listing); ``junk`` (writes a line that claims to be JSON-RPC but is no valid
message to stdout on the first listing: a line that is no JSON-RPC at all, JSON or
not, would be skipped).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

#: A duplicate of the real stdout, taken before the SDK points fd 1 at stderr.
WIRE_FD = os.dup(1)
MEMO_URI = "memo://notes/retention"
MEMO_TEXT = "Retention policy: cache entries expire after one hour of disuse."


def build(root: Path, mode: str, log: Path | None) -> Server[Any]:
    def record(what: str) -> None:
        if log is not None:
            with log.open("a", encoding="utf-8") as fh:
                fh.write(what + "\n")

    def files() -> list[Path]:
        return sorted(p for p in root.rglob("*") if p.is_file())

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        record("list")
        if mode == "hang":
            await anyio.sleep_forever()
        if mode == "junk":
            # Past the SDK: onto the pipe.
            os.write(WIRE_FD, b'{"jsonrpc": "2.0", "this": "is no message"}\n')
        resources = [
            types.Resource(name=p.name, uri=p.resolve().as_uri(), mime_type="text/plain")
            for p in files()
        ]
        resources.append(types.Resource(name="retention", title="Retention memo", uri=MEMO_URI))
        return types.ListResourcesResult(resources=resources)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        record(f"read {params.uri}")
        if mode == "crash":
            os._exit(3)
        if params.uri == MEMO_URI:
            text = MEMO_TEXT
        else:
            text = await anyio.Path(params.uri.removeprefix("file://")).read_text("utf-8")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=text)]
        )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="search",
                    input_schema={
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                    },
                )
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        query = str((params.arguments or {}).get("query", "")).lower()
        words = [w for w in query.split() if len(w) > 3]
        blocks: list[types.ContentBlock] = []
        for path in files():
            for line in (await anyio.Path(path).read_text("utf-8")).splitlines():
                if any(w in line.lower() for w in words):
                    blocks.append(types.TextContent(text=f"{path.name}: {line}"))
        blocks.append(
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri=MEMO_URI, text=MEMO_TEXT)
            )
        )
        return types.CallToolResult(content=blocks)

    return Server(
        "sdk-test-server",
        version="1.2.3",
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--mode", default="normal", choices=("normal", "crash", "hang", "junk"))
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    server = build(args.root, args.mode, args.log)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
