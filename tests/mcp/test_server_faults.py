"""``hostd mcp``'s tools when the session under them fails in a way no real daemon can
be made to: a fault of hostd's own while a tool runs.

The server is driven as ``test_wire`` drives it in process: raw JSON-RPC lines into
``serve_mcp`` over a client API session that raises, every line it wrote read back
once its input has ended and every request read is answered (no clock decides).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ._harness import serve_lines

pytestmark = pytest.mark.anyio

#: What the failing session's exception says: it must never reach the wire.
_SECRET = "Bearer sk-not-for-the-model"


class _Crashing:
    """A client API session whose every call fails with a bug's exception."""

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any:
        raise RuntimeError(f"{method} broke: {_SECRET}")


def _line(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


async def _serve(lines: list[bytes]) -> list[Any]:
    """Every message ``hostd mcp`` wrote for ``lines``, once stdin ended."""
    return await serve_lines(_Crashing(), lines)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("compose_context", {"goal": "x"}),
        ("list_providers", {}),
        ("report_used_evidence", {"request_id": "r", "used": []}),
    ],
)
async def test_a_fault_inside_a_tool_is_a_tool_error_that_never_quotes_it(
    tool: str, arguments: dict[str, Any]
) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    out = await _serve(
        [_line(init), _line({"jsonrpc": "2.0", "method": "notifications/initialized"}), _line(call)]
    )
    (answer,) = [m for m in out if m.get("id") == 1]
    # Not a JSON-RPC error (the SDK's own would be code 0 with the exception's text):
    # a result the model reads, naming the tool and no more.
    assert answer["result"]["isError"] is True, answer
    (block,) = answer["result"]["content"]
    assert block["text"] == f"hostd: {tool} failed inside hostd mcp [internal]"
    assert _SECRET not in json.dumps(out)
