"""A battery of malformed client input over a real socket: every reply is a valid
JSON-RPC error (or, for notifications, nothing), and the daemon keeps serving."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hostd.client import connect
from tests.server.conftest import STUCK

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
        assert_error(await raw.ask(b'{"jsonrpc":"1.0","id":5,"method":"host/status"}\n'), -32600, 5)
        assert_error(await raw.ask(b'{"jsonrpc":"2.0","id":6,"method":7}\n'), -32600, 6)
        assert_error(
            await raw.ask(b'{"jsonrpc":"2.0","id":7,"method":"host/status","params":"s"}\n'),
            -32600,
            7,
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
        # A huge line is the client's fault, answered once (under the id its start names);
        # the connection keeps serving.
        huge = b'{"jsonrpc":"2.0","id":8,"method":"x","params":{"a":"' + b"x" * 400_000 + b'"}}\n'
        err = assert_error(await raw.ask(huge), -32600, 8)
        assert err["data"]["reason"] == "line_too_long"
        await assert_serving(raw)
    assert await daemon.stop() == 0


def _invalid(message: str, id_: Any, reply: Any, **data: Any) -> dict[str, Any]:
    """The exact −32600 reply the daemon owes: ``message``, under ``id_``, ``data``'s
    members besides reason, CGP code and the request's log id (which only it knows)."""
    logged = reply["error"]["data"]["request_id"] if isinstance(reply, dict) else None
    wire = {"reason": "invalid_request", "cgp_code": "bad_request", **data}
    return {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": message, "data": {**wire, "request_id": logged}},
        "id": id_,
    }


async def test_an_invalid_request_is_answered_under_its_id_naming_the_member(
    start_daemon,
) -> None:
    """JSON-RPC 2.0 §5: the reply's id is the request's, null only when it cannot be read;
    the message and ``data.field`` name the member that is wrong."""
    daemon = await start_daemon({"alpha": {}})
    want = "expected the string '2.0'"
    asked: list[tuple[bytes, Any, str, dict[str, Any]]] = [
        (b'{"id":3,"method":"host/status"}', 3, f"jsonrpc: missing; {want}", {"field": "jsonrpc"}),
        (b'{"foo":1}', None, f"jsonrpc: missing; {want}", {"field": "jsonrpc"}),
        (
            b'{"jsonrpc":"1.0","id":"a","method":"host/status"}',
            "a",
            f"jsonrpc: got a string '1.0'; {want}",
            {"field": "jsonrpc"},
        ),
        (
            b'{"jsonrpc":"2.0","id":4}',
            4,
            "method: missing; expected a string",
            {"field": "method"},
        ),
        (
            b'{"jsonrpc":"2.0","id":5,"method":7}',
            5,
            "method: got 7; expected a string",
            {"field": "method"},
        ),
        (
            b'{"jsonrpc":"2.0","id":6,"method":"host/status","params":"s"}',
            6,
            "params: got a string 's'; expected an object or an array",
            {"field": "params"},
        ),
        (
            b'{"jsonrpc":"2.0","id":1e300,"method":"host/status"}',
            None,  # maybe an integer past 64 bits, rounded: it cannot be answered under it
            "id: got 1e+300; expected a string, a number under 2^63 or null",
            {"field": "id"},
        ),
        (
            b'{"jsonrpc":"2.0","id":8,"method":"host/status","extra":1}',
            8,
            "unknown member 'extra'; a request has only jsonrpc, method, params and id",
            {"field": "extra"},
        ),
        (b"42", None, "got 42; expected an object", {}),
    ]
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        for line, id_, message, data in asked:
            reply = await raw.ask(line + b"\n")
            assert reply == _invalid(f"Invalid Request: {message}", id_, reply, **data), line
        # In a batch, each invalid member likewise, beside the valid ones served.
        batch = (
            b'[{"id":10,"method":"host/status"},{"jsonrpc":"2.0","id":11,"method":"host/status"},'
            b'{"jsonrpc":"2.0","method":"host/status"},{"jsonrpc":"2.0","id":12,"method":[]}]\n'
        )
        replies = await raw.ask(batch)
        assert [r["id"] for r in replies] == [10, 11, 12]
        first, served, last = replies
        assert first == _invalid(
            f"Invalid Request: jsonrpc: missing; {want}", 10, first, field="jsonrpc"
        )
        assert served["result"]["state"] == "serving"
        assert last == _invalid(
            "Invalid Request: method: got an array of 0 item(s); expected a string",
            12,
            last,
            field="method",
        )
        await assert_serving(raw)
    assert await daemon.stop() == 0
    # Each refusal is a request that failed, in the log as the others are.
    refused = [e for e in daemon.events("request.done") if e.get("error_code") == -32600]
    assert len(refused) == len(asked) + 2


async def test_a_fractional_id_is_served_and_answered_under_that_id(start_daemon) -> None:
    """JSON-RPC 2.0 §4: an id is a string, a number or null (a fraction "SHOULD NOT" be in
    it, yet it is an id), and §5: the reply's id "MUST be the same". A refusal of the
    request names it too."""
    daemon = await start_daemon({"alpha": {}})
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        served = await raw.ask(b'{"jsonrpc":"2.0","id":1.5,"method":"host/status"}\n')
        assert served["id"] == 1.5 and served["result"]["state"] == "serving", served
        refused = await raw.ask(b'{"jsonrpc":"2.0","id":-2.25,"method":"host/status","x":1}\n')
        assert_error(refused, -32600, -2.25)
        unknown = await raw.ask(b'{"jsonrpc":"2.0","id":0.5,"method":"no/such"}\n')
        assert_error(unknown, -32601, 0.5)
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
    daemon = await start_daemon({"slow": STUCK})
    # Half a line, then disconnect.
    async with await anyio.connect_unix(daemon.socket) as stream:
        await stream.send(b'{"jsonrpc":"2.0","id":9,"meth')
    # A request in service, then disconnect: its work is cancelled.
    async with connect(daemon.socket) as watcher:
        async with await anyio.connect_unix(daemon.socket) as stream:
            await stream.send(
                b'{"jsonrpc":"2.0","id":1,"method":"context/compose",'
                b'"params":{"goal":"wait","timeout_ms":600000}}\n'
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
    daemon = await start_daemon({"slow": STUCK}, max_in_flight=2)
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        for i in range(2):
            await raw.send(
                b'{"jsonrpc":"2.0","id":%d,"method":"context/compose",'
                b'"params":{"goal":"wait","timeout_ms":600000}}\n' % i
            )
        err = assert_error(await raw.ask(STATUS), None, "s")
        assert err["data"]["reason"] == "overloaded"
    assert await daemon.stop() == 0


def _compose(id_: int, **params: Any) -> bytes:
    msg = {"jsonrpc": "2.0", "id": id_, "method": "context/compose", "params": params}
    return json.dumps(msg).encode() + b"\n"


async def test_input_edges_get_typed_errors_and_the_daemon_keeps_serving(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}, "beta": {}})
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        # Ids that are not JSON (NaN, Infinity) or past a double (1e400): refused with
        # id null; ``Infinity`` or ``NaN`` is never echoed (it is not JSON either).
        for bad_id in (b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity"):
            await raw.send(b'{"jsonrpc":"2.0","id":' + bad_id + b',"method":"host/status"}\n')
            with anyio.fail_after(30):
                while b"\n" not in raw.buf:
                    raw.buf += await stream.receive()
            line = raw.buf.split(b"\n", 1)[0]
            assert b"Infinity" not in line and b"NaN" not in line, line
            assert_error(await raw.line(), -32700, None)
        # Strict types: a budget must be a JSON integer, named when it is not, with what
        # was sent and the range, in the words hostd mcp's tool uses.
        for budget, sent in (
            (True, "true"),
            ("100", "a string '100'"),
            (1.5, "1.5"),
            (100.0, "100.0"),
        ):
            err = assert_error(await raw.ask(_compose(1, goal="g", budget=budget)), -32602, 1)
            assert err["data"]["field"] == "budget", (budget, err)
            assert err["message"] == (
                f"invalid params: budget: got {sent}; expected an integer from 1 to 10,000,000"
            )
        # So are compose's other numbers and choices.
        for param, value, said in (
            ("max_frames", 0, "got 0; expected an integer from 1 to 10,000"),
            ("timeout_ms", "5000", "got a string '5000'; expected an integer from 1 to 600,000"),
            ("overfetch", 0.5, "got 0.5; expected a number from 1 to 1,000"),
            ("caps", {"alpha": 2}, "got 2; expected a number from 0 to 1"),
            ("record", "yes", "got a string 'yes'; expected true or false"),
            ("placement", "middle", "got a string 'middle'; expected one of edges, ranked, "),
        ):
            err = assert_error(await raw.ask(_compose(1, goal="g", **{param: value})), -32602, 1)
            assert err["message"].startswith(f"invalid params: {param}"), err
            assert said in err["message"], err
        # A goal with nothing but whitespace asks for nothing.
        err = assert_error(await raw.ask(_compose(2, goal=" \t\n ")), -32602, 2)
        assert err["data"]["field"] == "goal"
        # In our words: "must not be empty …", without pydantic's "Value error, ".
        assert err["message"] == "invalid params: goal: must not be empty or only whitespace"
        # A goal past its bound is told in characters (not as a collection's "items").
        err = assert_error(await raw.ask(_compose(2, goal="g" * (64 * 1024 + 1))), -32602, 2)
        assert err["data"]["field"] == "goal" and "65536 characters" in err["message"], err
        # Provider ids in caps and in rrf weights must be configured providers.
        err = assert_error(await raw.ask(_compose(3, goal="g", caps={"nope": 0.5})), -32602, 3)
        assert err["data"]["reason"] == "unknown_provider" and err["data"]["provider"] == "nope"
        rrf = {"rrf": {"k": 60, "weights": {"alpha": 1.0, "ghost": 2.0}}}
        err = assert_error(await raw.ask(_compose(4, goal="g", strategy=rrf)), -32602, 4)
        assert err["data"]["reason"] == "unknown_provider" and err["data"]["provider"] == "ghost"
        ok = await raw.ask(_compose(5, goal="g", budget=200, caps={"alpha": 0.5, "*": 0.5}))
        assert ok["id"] == 5 and "result" in ok, ok
        # Invalid UTF-8 is a parse error, and the connection keeps serving.
        bad_utf8 = (
            b'{"jsonrpc":"2.0","id":6,"method":"context/compose","params":{"goal":"\xc3("}}\n'
        )
        assert_error(await raw.ask(bad_utf8), -32700, None)
        await assert_serving(raw)
        # consent/*: a bad string param is the client's error (-32602), never internal.
        for method in ("consent/grant", "consent/revoke"):
            for params in (
                {"provider": "alpha", "scope": "   "},
                {"provider": "alpha", "scope": "s", "grantor": " "},
                {"provider": " ", "scope": "s"},
                {"provider": "alpha", "scope": 5},
            ):
                msg = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
                err = assert_error(await raw.ask(json.dumps(msg).encode() + b"\n"), -32602, 7)
                assert err["data"]["cgp_code"] == "bad_request", (method, params, err)
        await assert_serving(raw)
    assert await daemon.stop() == 0


async def test_every_bad_compose_param_is_listed_in_one_reply(start_daemon) -> None:
    """``data.errors`` lists each problem the params have, the placement's too: a client
    learns of all three from one reply, not of one more per call."""
    daemon = await start_daemon({"alpha": {}})
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        reply = await raw.ask(_compose(1, goal="   ", budget=-5, placement="middle"))
        logged = reply["error"]["data"]["request_id"]
        assert reply == {
            "jsonrpc": "2.0",
            "error": {
                "code": -32602,
                "message": "invalid params: goal: must not be empty or only whitespace",
                "data": {
                    "reason": "invalid_params",
                    "cgp_code": "bad_request",
                    "field": "goal",
                    "errors": [
                        {"field": "goal", "problem": "must not be empty or only whitespace"},
                        {"field": "budget", "problem": "Input should be greater than 0"},
                        {
                            "field": "placement",
                            "problem": "Input should be 'edges', 'ranked', 'grouped' or "
                            "'canonical'",
                        },
                    ],
                    "request_id": logged,
                },
            },
            "id": 1,
        }
        await assert_serving(raw)
    assert await daemon.stop() == 0


async def test_an_unknown_provider_to_restart_is_refused_as_every_unknown_provider(
    start_daemon,
) -> None:
    """``providers/restart`` (and ``consent/grant``) refuse an id not configured as compose
    does: the ``invalid params: provider:`` prefix, ``data.provider`` and ``data.field``."""
    daemon = await start_daemon({"alpha": {}, "beta": {}})
    said = "invalid params: provider: unknown provider 'alpah' (configured: alpha, beta); "
    said += "did you mean 'alpha'?"
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        asked: list[tuple[str, dict[str, str], dict[str, Any]]] = [
            ("providers/restart", {"provider": "alpah"}, {"providers": ["alpah"]}),
            ("consent/grant", {"provider": "alpah", "scope": "egress"}, {}),
        ]
        for method, params, more in asked:
            msg = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
            reply = await raw.ask(json.dumps(msg).encode() + b"\n")
            logged = reply["error"]["data"]["request_id"]
            data: dict[str, Any] = {"reason": "unknown_provider", "cgp_code": "bad_request"}
            data |= {"provider": "alpah", "field": "provider", **more, "request_id": logged}
            assert reply == {
                "jsonrpc": "2.0",
                "error": {"code": -32602, "message": said, "data": data},
                "id": 9,
            }, method
        await assert_serving(raw)
    assert await daemon.stop() == 0
