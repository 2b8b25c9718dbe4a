"""The runtime's direct path for one well-formed ``context/query`` answers exactly as the
general dispatcher does (the general path is taken for ``str`` input)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import hostd.provider as runtime
from hostd.provider import ProviderServer
from tests.fixtures.healthy_provider import HealthyProvider

pytestmark = pytest.mark.anyio

QUERY = {"goal": "g", "max_frames": 3, "max_tokens": 1000}


@pytest.mark.parametrize(
    "request_",
    [
        {"jsonrpc": "2.0", "method": "context/query", "params": {"query": QUERY}, "id": 1},
        {"jsonrpc": "2.0", "method": "context/query", "params": {"query": QUERY}, "id": "s"},
        {"jsonrpc": "2.0", "method": "context/query", "params": {"query": {"goal": "refuse",
         "max_frames": 1, "max_tokens": 10}}, "id": 2},
        {"jsonrpc": "2.0", "method": "context/query", "params": {"query": {"goal": 5}}, "id": 3},
        {"jsonrpc": "2.0", "method": "context/query", "params": {}, "id": 4},
        {"jsonrpc": "2.0", "method": "context/query", "id": 5},
        {"jsonrpc": "2.0", "method": "context/query", "params": {"query": QUERY, "x": 1}, "id": 6},
    ],
    ids=["ok", "string-id", "refusal", "bad-query", "no-query", "no-params", "extra-param"],
)  # fmt: skip
async def test_the_direct_path_answers_as_the_dispatcher_does(
    request_: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ProviderServer(HealthyProvider("p", frames=3))
    line = json.dumps(request_)
    with monkeypatch.context() as patch:

        async def not_here(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the general dispatcher was used")

        patch.setattr(runtime, "async_dispatch_to_serializable", not_here)
        fast = await server.handle_line(line.encode())
    general = await server.handle_line(line)
    assert fast is not None and general is not None
    assert json.loads(fast) == json.loads(general)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc": "2.0", "method": "context/query", "params": {"query": {}}}',  # notification
        b'[{"jsonrpc": "2.0", "method": "context/query", "params": {}, "id": 1}]',  # batch
        b'{"jsonrpc": "1.0", "method": "context/query", "params": {}, "id": 1}',
        b'{"jsonrpc": "2.0", "method": "context/query", "params": [], "id": 1}',
        b'{"jsonrpc": "2.0", "method": "context/query", "params": {}, "id": true}',
        b'{"jsonrpc": "2.0", "method": "context/query", "params": {}, "id": 1',  # cut short
    ],
)
async def test_anything_else_takes_the_general_path(line: bytes) -> None:
    server = ProviderServer(HealthyProvider("p", frames=1))
    assert await server.handle_line(line) == await server.handle_line(line.decode())
