"""The MCP faces of hostd, on the official MCP Python SDK (the ``mcp`` extra).

``serve_mcp``: ``hostd mcp``, an MCP server on stdio whose tools call the
client API (``compose_context`` → ``context/compose``, ``list_providers`` →
``providers/list``), whose citations are resources it serves (``CitationStore``),
and which answers every request it reads once (``screen``); ``reconnecting``
keeps ``--connect`` across daemon restarts. ``mcp_client_factory``: the
``binding = "mcp"`` end of the transport, an MCP server child whose resources
and tool results are cut into frames (``cut``, ``rank``: the chunker of
``hostd.chunking``, BM25, budget packing; ``_binding`` registers it in the
transport's binding registry, which imports that module by name when an mcp
provider starts). Importing this package needs the SDK; the CLI imports it only
when an MCP face is used, the engine never.
"""

from ._binding import McpBindingClient, mcp_client_factory
from ._cache import ReadCache
from ._citations import (
    DEFAULT_MAX_CITED_BYTES,
    DEFAULT_MAX_CITED_TEXTS,
    CitationStore,
    CitedText,
    cited_texts,
)
from ._frames import Cut, Document, Piece, cut, frames_for, rank, render_arguments
from ._reconnect import Reconnecting, reconnecting
from ._schema import (
    COMPOSE_INPUT_SCHEMA,
    COMPOSE_OUTPUT_SCHEMA,
    PROVIDERS_INPUT_SCHEMA,
    PROVIDERS_OUTPUT_SCHEMA,
    structured_compose,
)
from ._server import TOOLS, Backend, build_server, serve_mcp
from ._wire import DRAIN_S, screen

__all__ = [
    "COMPOSE_INPUT_SCHEMA",
    "COMPOSE_OUTPUT_SCHEMA",
    "DEFAULT_MAX_CITED_BYTES",
    "DEFAULT_MAX_CITED_TEXTS",
    "DRAIN_S",
    "PROVIDERS_INPUT_SCHEMA",
    "PROVIDERS_OUTPUT_SCHEMA",
    "TOOLS",
    "Backend",
    "CitationStore",
    "CitedText",
    "Cut",
    "Document",
    "McpBindingClient",
    "Piece",
    "ReadCache",
    "Reconnecting",
    "build_server",
    "cited_texts",
    "cut",
    "frames_for",
    "mcp_client_factory",
    "rank",
    "reconnecting",
    "render_arguments",
    "screen",
    "serve_mcp",
    "structured_compose",
]
