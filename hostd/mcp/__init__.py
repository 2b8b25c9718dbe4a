"""The MCP faces of hostd, on the official MCP Python SDK (the ``mcp`` extra).

``serve_mcp``: ``hostd mcp``, an MCP server on stdio whose tools call the
client API (``compose_context`` → ``context/compose``, ``list_providers`` →
``providers/list``). ``mcp_client_factory``: the ``binding = "mcp"`` end of the
transport, an MCP server child whose resources and tool results are cut into
frames (``cut``, ``rank``: the chunker of ``hostd.chunk``, BM25, budget packing).
Importing this package needs the SDK; the CLI and the engine import it only
when an MCP face is used.
"""

from ._binding import McpBindingClient, mcp_client_factory
from ._cache import ReadCache
from ._frames import Cut, Document, Piece, cut, frames_for, rank, render_arguments
from ._schema import (
    COMPOSE_INPUT_SCHEMA,
    COMPOSE_OUTPUT_SCHEMA,
    PROVIDERS_INPUT_SCHEMA,
    PROVIDERS_OUTPUT_SCHEMA,
    structured_compose,
)
from ._server import TOOLS, Backend, build_server, serve_mcp

__all__ = [
    "COMPOSE_INPUT_SCHEMA",
    "COMPOSE_OUTPUT_SCHEMA",
    "PROVIDERS_INPUT_SCHEMA",
    "PROVIDERS_OUTPUT_SCHEMA",
    "TOOLS",
    "Backend",
    "Cut",
    "Document",
    "McpBindingClient",
    "Piece",
    "ReadCache",
    "build_server",
    "cut",
    "frames_for",
    "mcp_client_factory",
    "rank",
    "render_arguments",
    "serve_mcp",
    "structured_compose",
]
