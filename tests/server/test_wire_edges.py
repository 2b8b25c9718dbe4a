"""A client of its own over a raw socket (no hostd library between the test and the wire):
the edges a JSON-RPC client author meets. Every error carries the request id of the log
lines that tell it; an over-long line is answered under the id its start names; params
are objects; ``$/cancel`` sent as a request is answered."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.server.conftest import STUCK
from tests.server.flood import TOKEN
from tests.server.test_malformed import Raw, assert_error

pytestmark = pytest.mark.anyio

TCP = f'\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = 0\ntoken = "{TOKEN}"\n'


def _line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def _stuck(id_: Any) -> bytes:
    params = {"goal": "wait", "providers": ["slow"], "timeout_ms": 600_000}
    return _line({"jsonrpc": "2.0", "id": id_, "method": "context/compose", "params": params})


def _status(id_: Any, **more: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": id_, "method": "host/status", **more})


def _request_id(reply: Any) -> str:
    data = assert_error(reply)["data"]
    assert isinstance(data.get("request_id"), str) and data["request_id"], reply
    return str(data["request_id"])


async def test_every_error_the_daemon_answers_carries_a_request_id(start_daemon) -> None:
    """docs/api.md: each error carries ``data.request_id``, the refusals the connection
    answers itself (``id_in_use``, ``overloaded``, ``line_too_long``, a parse error, a
    batch element that is not an object) as much as a method's; a refusal that is logged
    is logged with that id."""
    daemon = await start_daemon(
        {"slow": STUCK}, max_in_flight=2, max_batch=3, max_line_bytes=2048, extra=TCP
    )
    replies: dict[str, Any] = {}
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        replies["parse_error"] = await raw.ask(b"{nope\n")
        replies["invalid_request"] = await raw.ask(b'{"id":3,"method":"host/status"}\n')
        replies["empty_batch"] = await raw.ask(b"[]\n")
        replies["batch_over_max"] = await raw.ask(_line([{"x": i} for i in range(4)]))
        (replies["not_an_object"],) = await raw.ask(b"[7]\n")
        replies["method_not_found"] = await raw.ask(b'{"jsonrpc":"2.0","id":4,"method":"no/x"}\n')
        replies["invalid_params"] = await raw.ask(_status(5, params={"x": 1}))
        replies["line_too_long"] = await raw.ask(_status(6, params={"a": "x" * 3000}))
        # One request in flight, then its id again: alone and in a batch.
        await raw.send(_stuck("held"))
        replies["id_in_use"] = await raw.ask(_stuck("held"))
        (replies["id_in_use_in_batch"],) = await raw.ask(_line([json.loads(_stuck("held"))]))
        # Two in flight: the limit.
        await raw.send(_stuck("second"))
        with anyio.fail_after(60):  # hang guard: until the second is in flight
            while "overloaded" not in replies:
                reply = await raw.ask(_status("full"))
                if "error" in reply:
                    replies["overloaded"] = reply
        (replies["overloaded_in_batch"],) = await raw.ask(_line([json.loads(_status("b"))]))
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with await anyio.connect_tcp(host, port) as stream:
        raw = Raw(stream)
        bad = {"jsonrpc": "2.0", "id": 1, "method": "$/authenticate", "params": {"token": "x"}}
        replies["unauthorized"] = await raw.ask(_line(bad))
    assert await daemon.stop() == 0
    said = {key: _request_id(reply) for key, reply in replies.items()}
    assert len(set(said.values())) == len(said), said  # each its own
    reasons = {key: reply["error"]["data"]["reason"] for key, reply in replies.items()}
    assert reasons["id_in_use"] == reasons["id_in_use_in_batch"] == "id_in_use"
    assert reasons["overloaded"] == reasons["overloaded_in_batch"] == "overloaded"
    assert reasons["unauthorized"] == "unauthorized"
    # The refusals the connection logs carry the id the client was given.
    for event, key in (
        ("client.id_in_use", "id_in_use"),
        ("client.id_in_use", "id_in_use_in_batch"),
        ("client.line_too_long", "line_too_long"),
        ("client.unauthorized", "unauthorized"),
    ):
        assert daemon.events(event), event
        assert [e for e in daemon.events(event) if e.get("request_id") == said[key]], (event, key)


async def test_an_over_long_line_is_answered_under_the_id_its_start_names(start_daemon) -> None:
    """A line too long to parse is answered under the id of its first top-level ``id``
    member when its first 4 KiB hold it whole, or of its last member when that is ``id``
    and its last 4 KiB hold it (a client's pending call 1 is settled), and under null
    when neither is so, or it is not a request's: never a guess."""
    daemon = await start_daemon({"alpha": {}}, max_line_bytes=8192)
    pad = "x" * 9000

    def request(**members: Any) -> bytes:
        return _line({"jsonrpc": "2.0", **members})

    asked: list[tuple[bytes, Any]] = [
        (request(id=1, method="host/status", params={"a": pad}), 1),
        # As jsonrpcclient (and hostd's own client) write a request: the id last.
        (request(method="host/status", params={"a": pad}, id=12), 12),
        (request(method="host/status", params={"a": pad}, id="last"), "last"),
        (request(method="host/status", id="call-2", params={"a": pad}), "call-2"),
        (b'{"jsonrpc":"2.0","id":2.5 , "method":"x","params":["' + pad.encode() + b'"]}\n', 2.5),
        # A member named id inside params is not the request's.
        (request(method="x", params={"id": 7, "a": pad}, id=8), 8),
        (request(method="x", params={"a": pad, "id": 7}), None),
        # The id past the first 4 KiB and before the last: not read.
        (request(method="x", params={"a": "y" * 5000}, id=9, more=pad), None),
        # An id at each end that disagree (a member twice): neither.
        (
            request(id=13, method="x", params={"a": pad}, **{"ID": 0}).replace(b'"ID"', b'"id"'),
            None,
        ),
        # Not JSON before the id: the line could never have been a request.
        (b'{"jsonrpc":2.0.0,"id":10,"params":"' + pad.encode() + b'"}\n', None),
        # A batch has no one id; an id no reply can carry is not echoed.
        (_line([{"jsonrpc": "2.0", "id": 11, "method": "x", "params": {"a": pad}}]), None),
        (request(id=True, params={"a": pad}), None),
        (b'{"id":1e400,"params":"' + pad.encode() + b'"}\n', None),
    ]
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        for line, id_ in asked:
            reply = await raw.ask(line)
            assert assert_error(reply, -32600, id_)["data"]["reason"] == "line_too_long", line[:80]
        # Sent in pieces, the line is answered at its end, under its id.
        await raw.send(b'{"jsonrpc":"2.0","method":"x","params":{"a":"')
        for _ in range(3):
            await raw.send(b"z" * 4000)
        reply = await raw.ask(b'"},"id":"split"}\n')
        assert assert_error(reply, -32600, "split")["data"]["max_line_bytes"] == 8192
        reply = await raw.ask(_status("after"))
        assert reply["id"] == "after" and reply["result"]["state"] == "serving", reply
    assert await daemon.stop() == 0


async def test_params_in_an_array_are_refused_naming_the_rule(start_daemon) -> None:
    """docs/api.md: params are objects (by name). An array, even an empty one, is −32602
    for a method there is; an unknown method is −32601 first; a notification gets none."""
    daemon = await start_daemon({"alpha": {}})
    rule = "invalid params: params must be an object (by name), not an array"
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        for params in ([], ["x"]):
            err = assert_error(await raw.ask(_status(1, params=params)), -32602, 1)
            assert err["message"] == rule and err["data"]["field"] == "params", err
            assert err["data"]["reason"] == "invalid_params" and err["data"]["request_id"]
        unknown = {"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": []}
        assert_error(await raw.ask(_line(unknown)), -32601, 2)
        await raw.send(_line({"jsonrpc": "2.0", "method": "host/status", "params": []}))
        batch = [
            {"jsonrpc": "2.0", "id": 3, "method": "host/status", "params": []},
            {"jsonrpc": "2.0", "method": "host/status", "params": []},
            {"jsonrpc": "2.0", "id": 4, "method": "host/status", "params": {}},
        ]
        refused, served = await raw.ask(_line(batch))
        assert assert_error(refused, -32602, 3)["message"] == rule
        assert served["id"] == 4 and served["result"]["state"] == "serving", served
        # The notification got nothing: the next line is this reply.
        reply = await raw.ask(_status(5, params={}))
        assert reply["id"] == 5 and "result" in reply, reply
    assert await daemon.stop() == 0


async def test_a_cancel_sent_as_a_request_is_answered_null_once_done(start_daemon) -> None:
    """docs/api.md: ``$/cancel`` is a notification; sent as a request (with an id) it does
    the same, and is answered ``result: null`` once the named request is cancelled."""
    daemon = await start_daemon({"slow": STUCK})
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        await raw.send(_stuck("work"))
        cancel = {"jsonrpc": "2.0", "id": "c", "method": "$/cancel", "params": {"id": "work"}}
        assert await raw.ask(_line(cancel)) == {"jsonrpc": "2.0", "result": None, "id": "c"}
        await daemon.logged("request.cancelled")
        # The work got no reply, and its id is free again.
        reply = await raw.ask(_status("work"))
        assert reply["id"] == "work" and "result" in reply, reply
    assert await daemon.stop() == 0
