"""Batches at the connection edge: an element that is not a request object (an inner
array above all) is refused on its own and nothing in it runs, over stdio and the socket."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.server.conftest import marked_processes, write_config
from tests.server.test_malformed import Raw, assert_error
from tests.server.test_stdio import stdio_pipes

pytestmark = pytest.mark.anyio

#: The line from the hostile-input audit: a grant wrapped in a batch inside a batch.
NESTED_GRANT = (
    b'[[{"jsonrpc":"2.0","id":8,"method":"consent/grant",'
    b'"params":{"provider":"memory","scope":"nested"}}]]\n'
)
LIST = b'{"jsonrpc":"2.0","id":"l","method":"consent/list","params":{}}\n'


def _one_refusal(replies: Any) -> None:
    """``[{-32600, id null}]``: one error for the one element, and no inner array."""
    assert isinstance(replies, list) and len(replies) == 1, replies
    err = assert_error(replies[0], -32600, None)
    assert err["data"]["reason"] == "invalid_request"
    assert "result" not in replies[0]


async def _refuses_nested(ask: Any) -> None:
    _one_refusal(await ask(NESTED_GRANT))
    listed = await ask(LIST)
    assert listed["id"] == "l" and listed["result"]["receipts"] == [], listed
    # Beside real requests: each element answered on its own, the inner ones never run.
    grant = {"jsonrpc": "2.0", "id": 9, "method": "consent/grant"}
    grant["params"] = {"provider": "memory", "scope": "inner"}
    status = {"jsonrpc": "2.0", "id": "s", "method": "host/status"}
    replies = await ask(json.dumps([[grant], status, [], 7, None]).encode() + b"\n")
    assert isinstance(replies, list) and len(replies) == 5, replies
    by_id: dict[str, list[Any]] = {}
    for reply in replies:
        by_id.setdefault(json.dumps(reply["id"]), []).append(reply)
    assert by_id['"s"'][0]["result"]["state"] == "serving"
    assert len(by_id["null"]) == 4
    for reply in by_id["null"]:
        assert_error(reply, -32600, None)
    listed = await ask(LIST)
    assert listed["result"]["receipts"] == [], listed


async def test_a_nested_batch_over_the_socket_is_refused_and_runs_nothing(start_daemon) -> None:
    daemon = await start_daemon({"memory": {}})
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        await _refuses_nested(raw.ask)
    assert await daemon.stop() == 0
    assert not daemon.events("consent.granted")


async def test_a_nested_batch_over_stdio_is_refused_and_runs_nothing(workdir, marker) -> None:
    config = workdir / "hostd.toml"
    config.write_text(write_config(workdir, marker, {"memory": {}}))
    async with stdio_pipes(config) as pipes:
        await _refuses_nested(pipes.ask)
    assert not marked_processes(marker)


async def test_an_inner_array_cannot_carry_requests_past_the_limits(start_daemon) -> None:
    daemon = await start_daemon({"memory": {}}, max_batch=4, max_in_flight=2)
    inner = [
        {"jsonrpc": "2.0", "id": i, "method": "consent/grant",
         "params": {"provider": "memory", "scope": f"s{i}"}}
        for i in range(5000)
    ]  # fmt: skip
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        # 5,000 requests in one element of a batch of one: one refusal, nothing run.
        _one_refusal(await raw.ask(json.dumps([inner]).encode() + b"\n"))
        # As many inner arrays as the batch may hold: each refused on its own.
        replies = await raw.ask(json.dumps([inner[:3]] * 4).encode() + b"\n")
        assert len(replies) == 4 and all(r["id"] is None for r in replies)
        assert (await raw.ask(LIST))["result"]["receipts"] == []
        status = await raw.ask(b'{"jsonrpc":"2.0","id":"s","method":"host/status"}\n')
    assert await daemon.stop() == 0
    # Before the status, only the consent/list ran: no inner array reached a method.
    assert status["result"]["counters"]["requests_total"] == 1
    assert not daemon.events("consent.granted")
