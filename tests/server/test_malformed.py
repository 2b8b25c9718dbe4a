"""A battery of malformed client input over a real socket: every reply is a valid
JSON-RPC error (or, for notifications, nothing), and the daemon keeps serving."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hostd.client import connect

pytestmark = pytest.mark.anyio


class Raw:
    """Bytes in, parsed lines out: no client library between the test and the wire."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buf = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def line(self) -> Any:
        with anyio.fail_after(30):
            while b"\n" not in self.buf:
                chunk = await self.stream.receive()
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        return json.loads(raw)

    async def ask(self, data: bytes) -> Any:
        await self.send(data)
        return await self.line()


def assert_error(reply: Any, code: int | None = None, id_: Any = "any") -> dict[str, Any]:
    assert isinstance(reply, dict) and reply.get("jsonrpc") == "2.0", reply
    assert "result" not in reply and "id" in reply, reply
    err = reply["error"]
    assert isinstance(err["code"], int) and isinstance(err["message"], str), reply
    if code is not None:
        assert err["code"] == code, reply
    if id_ != "any":
        assert reply["id"] == id_, reply
    return err


STATUS = b'{"jsonrpc":"2.0","id":"s","method":"host/status"}\n'


async def assert_serving(raw: Raw) -> None:
    reply = await raw.ask(STATUS)
    assert reply["id"] == "s" and reply["result"]["state"] == "serving", reply


async def test_malformed_input_gets_errors_and_the_daemon_keeps_serving(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, max_line_bytes=300_000)
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        assert_error(await raw.ask(b"this is not json\n"), -32700, None)
        assert_error(await raw.ask(b"\xff\xfe{}\n"), -32700, None)
        await raw.send(b'{"jsonrpc":"2.0","id":1,"method":')
        assert_error(await raw.ask(b"\n"), -32700, None)  # a line cut short
        await assert_serving(raw)
        err = assert_error(
            await raw.ask(
                b'{"jsonrpc":"2.0","id":2,"method":"context/compose","params":{"goal":["x"]}}\n'
            ),
            -32602,
            2,
        )
        assert "goal" in err["message"] and err["data"]["field"] == "goal"
        err = assert_error(
            await raw.ask(
                b'{"jsonrpc":"2.0","id":3,"method":"context/compose",'
                b'"params":{"goal":"x","max_frames":"many"}}\n'
            ),
            -32602,
            3,
        )
        assert err["data"]["field"] == "max_frames"
        assert_error(await raw.ask(b'{"jsonrpc":"2.0","id":4,"method":"no/such"}\n'), -32601, 4)
        assert_error(await raw.ask(b'{"jsonrpc":"1.0","id":5,"method":"host/status"}\n'), -32600)
        assert_error(await raw.ask(b'{"jsonrpc":"2.0","id":6,"method":7}\n'), -32600)
        assert_error(
            await raw.ask(b'{"jsonrpc":"2.0","id":7,"method":"host/status","params":"s"}\n'),
            -32600,
        )
        assert_error(await raw.ask(b"42\n"), -32600, None)
        assert_error(await raw.ask(b"[]\n"), -32600, None)
        replies = await raw.ask(b"[1, 2, 3]\n")
        assert isinstance(replies, list) and len(replies) == 3
        for reply in replies:
            assert_error(reply, -32600, None)
        # A lone surrogate has no UTF-8 form: the line is not text, a parse error, and
        # no reply ever echoes it.
        assert_error(
            await raw.ask(
                b'{"jsonrpc":"2.0","id":"\\ud800","method":"context/compose",'
                b'"params":{"goal":"\\ud800","budget":"x"}}\n'
            ),
            -32700,
            None,
        )
        # Nesting deep enough to exhaust the parser's recursion is a parse error too.
        assert_error(await raw.ask(b"[" * 100_000 + b"]" * 100_000 + b"\n"), -32700, None)
        await assert_serving(raw)
        # A huge line is the client's fault, answered once; the connection keeps serving.
        huge = b'{"jsonrpc":"2.0","id":8,"method":"x","params":{"a":"' + b"x" * 400_000 + b'"}}\n'
        err = assert_error(await raw.ask(huge), -32600, None)
        assert err["data"]["reason"] == "line_too_long"
        await assert_serving(raw)
    assert await daemon.stop() == 0


async def test_a_thousand_requests_in_one_batch_all_get_their_error(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}})
    batch = [{"jsonrpc": "2.0", "id": i, "method": "no/such/method"} for i in range(1000)]
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        replies = await raw.ask(json.dumps(batch).encode() + b"\n")
        assert isinstance(replies, list) and len(replies) == 1000
        assert sorted(r["id"] for r in replies) == list(range(1000))
        for reply in replies:
            assert_error(reply, -32601)
        await assert_serving(raw)
    assert await daemon.stop() == 0


async def test_notifications_get_no_reply_and_batches_mix_per_the_spec(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}})
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        # A notification (even of an unknown method) and a batch of notifications: no reply.
        await raw.send(b'{"jsonrpc":"2.0","method":"host/status"}\n')
        await raw.send(b'{"jsonrpc":"2.0","method":"no/such"}\n')
        await raw.send(b'[{"jsonrpc":"2.0","method":"host/status"}]\n')
        await assert_serving(raw)  # the next line is the status reply, nothing before it
        mixed = [
            {"jsonrpc": "2.0", "id": "a", "method": "host/status"},
            {"jsonrpc": "2.0", "method": "host/status"},
            {"jsonrpc": "2.0", "id": "b", "method": "no/such"},
            "garbage",
        ]
        replies = await raw.ask(json.dumps(mixed).encode() + b"\n")
        assert len(replies) == 3
        by_id = {json.dumps(r["id"]): r for r in replies}
        assert by_id['"a"']["result"]["state"] == "serving"
        assert_error(by_id['"b"'], -32601)
        assert_error(by_id["null"], -32600)
    assert await daemon.stop() == 0


async def test_half_lines_and_vanishing_clients_cost_nothing(start_daemon) -> None:
    daemon = await start_daemon({"slow": {"delay_ms": 20000}})
    # Half a line, then disconnect.
    async with await anyio.connect_unix(daemon.socket) as stream:
        await stream.send(b'{"jsonrpc":"2.0","id":9,"meth')
    # A request in service, then disconnect: its work is cancelled.
    async with connect(daemon.socket) as watcher:
        async with await anyio.connect_unix(daemon.socket) as stream:
            await stream.send(
                b'{"jsonrpc":"2.0","id":1,"method":"context/compose",'
                b'"params":{"goal":"wait","timeout_ms":60000}}\n'
            )
            with anyio.fail_after(30):
                while (await watcher.status())["in_flight"] < 2:
                    pass
        with anyio.fail_after(30):
            while (await watcher.status())["in_flight"] > 1:
                pass
        assert (await watcher.status())["counters"]["connections_open"] == 1
    assert await daemon.stop() == 0


async def test_a_client_over_its_in_flight_limit_is_told_so(start_daemon) -> None:
    daemon = await start_daemon({"slow": {"delay_ms": 20000}}, max_in_flight=2)
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        for i in range(2):
            await raw.send(
                b'{"jsonrpc":"2.0","id":%d,"method":"context/compose",'
                b'"params":{"goal":"wait","timeout_ms":60000}}\n' % i
            )
        err = assert_error(await raw.ask(STATUS), None, "s")
        assert err["data"]["reason"] == "overloaded"
    assert await daemon.stop() == 0
