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
provider starts); ``describe_tools`` names the tools a server offers, with their
required arguments (its start's error, check-provider's ``tools`` row). Importing
this package needs the SDK; the CLI imports it only
when an MCP face is used, the engine never.

The names below are loaded on first use (a module ``__getattr__``, PEP 562): the
engine's binding row imports ``hostd.mcp._binding``, which runs this ``__init__``,
and that must not load the ``hostd mcp`` server face with it.
"""

# Private spellings: this package's public surface is exactly ``__all__``.
import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
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
    from ._offered import describe_tools
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

#: Each public name -> the module that defines it.
_WHERE = {
    "Backend": "._server",
    "COMPOSE_INPUT_SCHEMA": "._schema",
    "COMPOSE_OUTPUT_SCHEMA": "._schema",
    "CitationStore": "._citations",
    "CitedText": "._citations",
    "Cut": "._frames",
    "DEFAULT_MAX_CITED_BYTES": "._citations",
    "DEFAULT_MAX_CITED_TEXTS": "._citations",
    "DRAIN_S": "._wire",
    "Document": "._frames",
    "McpBindingClient": "._binding",
    "PROVIDERS_INPUT_SCHEMA": "._schema",
    "PROVIDERS_OUTPUT_SCHEMA": "._schema",
    "Piece": "._frames",
    "ReadCache": "._cache",
    "Reconnecting": "._reconnect",
    "TOOLS": "._server",
    "build_server": "._server",
    "cited_texts": "._citations",
    "cut": "._frames",
    "describe_tools": "._offered",
    "frames_for": "._frames",
    "mcp_client_factory": "._binding",
    "rank": "._frames",
    "reconnecting": "._reconnect",
    "render_arguments": "._frames",
    "screen": "._wire",
    "serve_mcp": "._server",
    "structured_compose": "._schema",
}


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
    "describe_tools",
    "frames_for",
    "mcp_client_factory",
    "rank",
    "reconnecting",
    "render_arguments",
    "screen",
    "serve_mcp",
    "structured_compose",
]


def __getattr__(name: str) -> _Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(where, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
