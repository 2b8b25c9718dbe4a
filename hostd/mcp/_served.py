"""What an MCP server served, as documents; and what the SDK may say of it, withheld.

``document`` and ``tool_documents`` turn a read's contents and a tool result's blocks
into ``Document`` values (text, and binary contents that are UTF-8). ``tool_calls``
reads the configured tools (``tool``/``arguments``, the older keys, and ``tools``).
``withhold_sdk_logs`` gives the SDK's client-side loggers hostd's rule: nothing a
peer writes is quoted (their own words stay, their arguments and tracebacks go).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import mcp_types as types

from ._frames import Document, takes_goal

__all__ = ["ToolCall", "document", "tool_calls", "tool_documents", "withhold_sdk_logs"]

#: The SDK's client-side loggers: they quote what the server sent (method names,
#: payloads in validation tracebacks, tool names).
_SDK_LOGGERS = (
    "client",  # mcp.client.session's logger
    "mcp.client.caching",
    "mcp.shared.dispatcher",
    "mcp.shared.direct_dispatcher",
    "mcp.shared.jsonrpc_dispatcher",
    "mcp.shared.tool_name_validation",
)
_PLACEHOLDER_RE = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfix]")


class _Withhold(logging.Filter):
    """Keeps the SDK's own words and drops what it would quote: arguments, tracebacks,
    and any message not a constant (f-strings carry the peer's text inline)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args or "%" in str(record.msg):
            record.msg = _PLACEHOLDER_RE.sub("…", str(record.msg)) + " (peer text withheld)"
        elif record.name.endswith("tool_name_validation"):
            record.msg = "tool name validation warning (peer text withheld)"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def withhold_sdk_logs() -> None:
    """Install the filter once on each of the SDK's client-side loggers."""
    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Withhold) for f in logger.filters):
            logger.addFilter(_Withhold())


class ToolCall(NamedTuple):
    """One configured tool: its name, its argument template, and whether its answer is
    offered (its head) when none of it matches the goal (``Document.always``)."""

    name: str
    arguments: Any
    always: bool


def tool_calls(options: Mapping[str, Any]) -> list[ToolCall]:
    """The configured tools and their argument templates: ``tool``/``arguments`` (one
    tool, the older keys) first, then ``tools``. A tool's answer is offered when it
    matches nothing of the goal only if the server chose it for the goal (its arguments
    carry ``{query}`` or ``{goal}``: a search that may find a record in other words) or
    its entry says ``always = true``: the same ``git_show HEAD`` whatever is asked is
    no evidence about a goal it shares no word with."""
    calls: list[ToolCall] = []
    if options.get("tool"):
        arguments = options.get("arguments") or {}
        calls.append(ToolCall(str(options["tool"]), arguments, takes_goal(arguments)))
    for entry in options.get("tools") or ():
        arguments = entry.get("arguments") or {}
        always = bool(entry.get("always")) or takes_goal(arguments)
        calls.append(ToolCall(str(entry["name"]), arguments, always))
    return calls


def tool_documents(
    name: str, content: list[types.ContentBlock], *, always: bool = True
) -> list[Document]:
    """A tool result's blocks as documents, in the result's order; its text items, when
    there are several, numbered in that order (``Document.item``), so their labels say
    where each sits, never the rank their scores give them. ``always``: its head is
    offered when none of it matches (``ToolCall.always``)."""
    method = f"tools/call:{name}"
    texts = sum(1 for b in content if isinstance(b, types.TextContent) and b.text.strip())
    docs: list[Document] = []
    seen = 0
    for block in content:
        if isinstance(block, types.TextContent) and block.text.strip():
            seen += 1
            item = (seen, texts) if texts > 1 else None
            docs.append(Document(method=method, text=block.text, always=always, item=item))
        elif isinstance(block, types.EmbeddedResource):
            doc = document(block.resource, None, method=method, always=always)
            if doc is not None:
                docs.append(doc)
    return docs


def document(
    contents: types.TextResourceContents | types.BlobResourceContents,
    title: str | None,
    *,
    method: str = "resources/read",
    always: bool = True,
) -> Document | None:
    """One resource content as a document; binary contents that are not UTF-8 are
    skipped. ``always``: of a tool's embedded resource, as ``tool_documents``."""
    if isinstance(contents, types.TextResourceContents):
        text = contents.text
    else:
        try:
            text = base64.b64decode(contents.blob, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
    if not text.strip():
        return None
    return Document(
        method=method,
        text=text,
        uri=str(contents.uri),
        title=title,
        always=always and method != "resources/read",
    )
