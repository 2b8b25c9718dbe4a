"""What an MCP server offers, said so a user can fix a config without an SDK client.

``describe_tools`` names the tools a server lists and each one's required
arguments (its ``inputSchema``'s ``required``): what a ``[provider.mcp] tools``
entry needs. Names are the server's text, so only identifier-shaped ones are shown
(``_NAME``), the others counted, and at most ``MAX_TOOLS`` tools; nothing else it
wrote (descriptions, schemas) is quoted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import mcp_types as types

__all__ = ["MAX_TOOLS", "describe_tools", "unmet_arguments"]

#: A name shown as it is: short, and of characters that cannot carry a sentence.
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
#: Tools named at most; the rest are counted.
MAX_TOOLS = 20


def describe_tools(tools: Sequence[types.Tool]) -> str:
    """``it offers 2 tools: convert_time (requires source_timezone, time), get_time
    (nothing required)``, by name; ``it offers no tool`` for none."""
    if not tools:
        return "it offers no tool"
    shown = sorted((t for t in tools if _NAME.fullmatch(t.name)), key=lambda t: t.name)
    said = [_tool(t) for t in shown[:MAX_TOOLS]]
    if len(shown) > MAX_TOOLS:
        said.append(f"…and {len(shown) - MAX_TOOLS} more")
    unnamed = len(tools) - len(shown)
    if unnamed:
        names = f"name{_s(unnamed)} {'is' if unnamed == 1 else 'are'}"
        said.append(f"{unnamed} whose {names} not shown (not identifier-shaped)")
    return f"it offers {len(tools)} tool{_s(len(tools))}: {', '.join(said)}"


def unmet_arguments(tool: types.Tool, arguments: object) -> str | None:
    """What a configured call of ``tool`` with ``arguments`` lacks, said with its fix, or
    None: the required arguments (its ``inputSchema``'s ``required``) the configured ones
    do not give. Such a call can only be refused (MCP servers check arguments against
    the schema), so it is the config's error, found at the handshake instead of as an
    ``isError`` no query could ever avoid. Only identifier-shaped names are shown (the
    rest counted); with one required argument missing and no argument carrying the goal,
    the fix names ``{query}`` for it."""
    given = arguments if isinstance(arguments, dict) else {}
    lacking = [r for r in _required(tool) if r not in given]
    if not lacking:
        return None
    names = [r for r in lacking if isinstance(r, str) and _NAME.fullmatch(r)]
    unnamed = len(lacking) - len(names)
    said = ", ".join(names + ([f"{unnamed} more not shown"] if unnamed else []))
    who = f"MCP tool {tool.name!r}" if _NAME.fullmatch(tool.name) else "a configured MCP tool"
    said = f"{who} requires {said}, which its configured arguments do not give"
    if len(names) == 1 and not unnamed and not given:
        said += f'; e.g. {names[0]} = "{{query}}" gives it the query text'
    return said


def _required(tool: types.Tool) -> list[object]:
    required = tool.input_schema.get("required")
    return required if isinstance(required, list) else []


def _tool(tool: types.Tool) -> str:
    listed = _required(tool)
    names = [r for r in listed if isinstance(r, str) and _NAME.fullmatch(r)]
    if not listed:
        return f"{tool.name} (nothing required)"
    unnamed = len(listed) - len(names)
    said = names + ([f"{unnamed} more not shown"] if unnamed else [])
    return f"{tool.name} (requires {', '.join(said)})"


def _s(n: int) -> str:
    return "" if n == 1 else "s"
