"""``hostd mcp`` answers every request it reads, once, with the error that fits.

Raw bytes to a real ``hostd mcp`` child over its stdio: malformed JSON, invalid
envelopes, ``params: []``, batches, a line past the bound, a last line without
its newline, and requests still running when stdin closes. The verdict is read
after the child exits (stdin closed: every answer is written by then), so no
test waits on a clock.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.conftest import marked_processes

from ._harness import INITIALIZE, INITIALIZED, hostd_mcp, serve_lines, write_config

pytestmark = pytest.mark.anyio


def _line(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


async def _run(config: Path, data: bytes) -> list[Any]:
    """Write ``data`` to ``hostd mcp``, close its stdin, and read every line it writes."""
    params = hostd_mcp(config)
    process = await anyio.open_process(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=params.env,
        cwd=params.cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    out = b""
    async with process:
        await process.stdin.send(data)
        await process.stdin.aclose()
        async for chunk in process.stdout:
            out += chunk
        assert await process.wait() == 0
    return [json.loads(raw) for raw in out.split(b"\n") if raw.strip()]


def _answers(out: list[Any]) -> list[dict[str, Any]]:
    """Every response written, batch members included."""
    flat: list[dict[str, Any]] = []
    for message in out:
        flat.extend(message if isinstance(message, list) else [message])
    return [m for m in flat if "result" in m or "error" in m]


def _call(id_: Any, goal: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {"name": "compose_context", "arguments": {"goal": goal}},
    }


async def test_every_malformed_request_is_answered_once_with_the_error_that_fits(
    workdir: Path, marker: str
) -> None:
    config = write_config(workdir, marker, {"alpha": {}})
    config.write_text(config.read_text().replace("[host]\n", "[host]\nmax_line_bytes = 4096\n"))
    too_long = {"jsonrpc": "2.0", "id": 90, "method": "ping", "params": {"pad": "x" * 5000}}
    data = b"".join(
        [
            _line(INITIALIZE),
            _line(INITIALIZED),
            _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}),
            b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"\n',  # not JSON
            _line({"jsonrpc": "1.0", "id": 3, "method": "tools/list"}),
            _line({"jsonrpc": "2.0", "id": 4}),  # no method, no result
            _line({"jsonrpc": "2.0", "id": 5, "method": 7}),
            _line({"id": 12, "method": "tools/list"}),  # no jsonrpc
            _line({"jsonrpc": "2.0", "id": None, "method": "ping"}),  # MCP: never null
            _line({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": "x"}),
            _line("just a string"),
            _line(too_long),
            _line([]),
            _line([1, {"jsonrpc": "2.0", "id": "b", "method": "ping"}, INITIALIZED]),
            _line({"jsonrpc": "2.0", "method": "notifications/progress", "params": []}),
            _line({"jsonrpc": "2.0", "id": 7, "method": "no/such/method"}),
            _line({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 7}}),
            _line({"jsonrpc": "2.0", "id": "9", "method": "ping"}),
            _line(_call(10, "read before stdin closed")),
            json.dumps({"jsonrpc": "2.0", "id": 11, "method": "ping"}).encode(),  # no newline
        ]
    )
    with anyio.fail_after(120):
        out = await _run(config, data)
    answers = _answers(out)
    by_id = Counter(json.dumps(a["id"]) for a in answers)
    ids: list[Any] = [0, 1, 3, 4, 5, 12, 6, 90, "b", 7, 8, "9", 10, 11]
    assert by_id == Counter({**{json.dumps(i): 1 for i in ids}, "null": 5}), by_id
    code = {json.dumps(a["id"]): a["error"]["code"] for a in answers if "error" in a}
    assert code[json.dumps(1)] == -32602  # MCP params are an object
    assert code[json.dumps(3)] == code[json.dumps(4)] == code[json.dumps(5)] == -32600
    # In the daemon's words (docs/api.md, "Error -32600"), the member in data.field.
    said = {
        json.dumps(a["id"]): (a["error"]["message"], a["error"]["data"].get("field"))
        for a in answers
        if "error" in a
        and isinstance(a["error"].get("data"), dict)
        and a["error"]["data"].get("field")
    }
    want = "expected the string '2.0'"
    assert said == {
        "1": (
            "invalid params: params: got an array of 0 item(s); expected an object (MCP)",
            "params",
        ),
        "3": (f"Invalid Request: jsonrpc: got a string '1.0'; {want}", "jsonrpc"),
        "4": ("Invalid Request: method: missing; expected a string", "method"),
        "5": ("Invalid Request: method: got 7; expected a string", "method"),
        "12": (f"Invalid Request: jsonrpc: missing; {want}", "jsonrpc"),
        "null": ("Invalid Request: id: got null; expected a string or an integer (MCP)", "id"),
        "6": ("Invalid Request: params: got a string 'x'; expected an object (MCP)", "params"),
    }, said
    assert code[json.dumps(6)] == code[json.dumps("b")] == -32600
    assert code[json.dumps(7)] == -32601
    assert code[json.dumps(8)] == -32602
    nulls = Counter(a["error"]["code"] for a in answers if a["id"] is None)
    # not JSON; then a null id, a string, an empty batch, the batch's 1
    assert nulls == Counter({-32700: 1, -32600: 4})
    # Over-long, never parsed: answered under the id its head names.
    (over,) = [a for a in answers if a["id"] == 90]
    assert over["error"]["code"] == -32600
    assert over["error"]["data"]["reason"] == "line_too_long"
    batch = next(m for m in out if isinstance(m, list))
    assert [m["id"] for m in batch] == [None, "b"]  # one array, notifications unanswered
    results = {json.dumps(a["id"]): a["result"] for a in answers if "result" in a}
    assert set(results) == {json.dumps(i) for i in (0, "9", 10, 11)}
    assert results[json.dumps(10)]["isError"] is False  # served, not cut off by the close


async def test_an_over_long_line_is_answered_under_the_id_its_ends_name(
    workdir: Path, marker: str
) -> None:
    config = write_config(workdir, marker, {})
    config.write_text(config.read_text().replace("[host]\n", "[host]\nmax_line_bytes = 4096\n"))
    pad = "x" * 10_000  # past the bound and past both ends read (4 KiB each)

    def raw(id_: str) -> bytes:  # the id member where it is written, the rest JSON
        return b'{"jsonrpc": "2.0", %s"method": "ping", "params": {"pad": "%s"}%s}' % (
            id_.encode() + b", " if id_.startswith('"id"') else b"",
            pad.encode(),
            b", " + id_[4:].encode() if id_.startswith("tail") else b"",
        )

    data = b"".join(
        [
            _line(INITIALIZE),
            _line(INITIALIZED),
            raw('"id": 31') + b"\n",  # at its head
            raw('tail"id": "t-32"') + b"\n",  # at its tail, after params
            # In the middle, neither end holds it: it cannot be determined, so null.
            b'{"jsonrpc": "2.0", "method": "ping", "params": {"pad": "%s"}, "id": 33, '
            b'"more": "%s"}\n' % (pad.encode(), pad.encode()),
            raw('"id": true') + b"\n",  # no MCP id (a bool): null, never echoed
            raw('tail"id": 35'),  # the last line, no newline: still answered, its id read
        ]
    )
    with anyio.fail_after(120):
        out = await _run(config, data)
    over = [a for a in _answers(out) if "error" in a]
    assert all(a["error"]["data"]["reason"] == "line_too_long" for a in over), over
    assert [a["id"] for a in over] == [31, "t-32", None, None, 35], over


async def test_requests_read_before_stdin_closes_get_their_results(
    workdir: Path, marker: str
) -> None:
    # A composition that is still running when stdin closes (its provider answers late).
    config = write_config(workdir, marker, {"slow": {"delay_ms": 1500}})
    data = b"".join(
        [
            _line(INITIALIZE),
            _line(INITIALIZED),
            *(_line(_call(i, f"goal {i}")) for i in range(1, 4)),
            _line({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        ]
    )
    with anyio.fail_after(120):
        out = await _run(config, data)
    answers = {a["id"]: a for a in _answers(out)}
    assert sorted(answers) == [0, 1, 2, 3, 4]
    for i in (1, 2, 3):
        assert answers[i]["result"]["isError"] is False, answers[i]
        assert answers[i]["result"]["structuredContent"]["citations"]
    assert marked_processes(marker) == []


class _Stuck:
    """A client API session whose composition never finishes."""

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any:
        await anyio.sleep_forever()


async def _serve_stuck(lines: list[bytes], drain_s: float) -> list[Any]:
    """``lines`` read by the edge in front of a session whose compositions never end;
    every message it wrote, once stdin ended and the drain is over."""
    return await serve_lines(_Stuck(), lines, drain_s=drain_s)


async def test_a_request_still_running_past_the_drain_is_answered_shutting_down() -> None:
    lines = [_line(INITIALIZE), _line(INITIALIZED), _line(_call(2, "never ends"))]
    # No time at all to drain: whatever is still owed is answered by the edge, once.
    answers = _answers(await _serve_stuck(lines, drain_s=0))
    assert Counter(a["id"] for a in answers) == Counter({0: 1, 2: 1})
    stuck = next(a for a in answers if a["id"] == 2)
    assert stuck["error"]["data"]["reason"] == "shutting_down"


def _init(revision: str) -> dict[str, Any]:
    return {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": revision}}


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26"])
async def test_a_batch_from_a_session_of_a_revision_with_batches_is_served_as_one_array(
    workdir: Path, marker: str, revision: str
) -> None:
    # 2025-03-26: implementations "MUST support receiving JSON-RPC batches".
    config = write_config(workdir, marker, {"alpha": {}})
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
        INITIALIZED,  # a notification: handed on, never answered
        _call("c", "served inside a batch"),
        1,
        _init(revision) | {"id": "d"},  # "MUST NOT be part of a JSON-RPC batch"
        {"jsonrpc": "2.0", "id": "e", "method": "no/such/method"},
    ]
    data = b"".join(
        [
            _line(_init(revision)),
            _line(INITIALIZED),
            _line(batch),
            _line([INITIALIZED, INITIALIZED]),  # nothing in it to answer: no array
            _line({"jsonrpc": "2.0", "id": "f", "method": "ping"}),
        ]
    )
    with anyio.fail_after(120):
        out = await _run(config, data)
    assert out[0]["id"] == 0 and out[0]["result"]["protocolVersion"] == revision
    arrays = [m for m in out if isinstance(m, list)]
    assert len(arrays) == 1, out
    array = arrays[0]
    assert [m["id"] for m in array] == ["a", "b", "c", None, "d", "e"]  # in the batch's order
    assert array[0]["result"] == {}
    assert [t["name"] for t in array[1]["result"]["tools"]][0] == "compose_context"
    assert array[2]["result"]["isError"] is False
    assert array[2]["result"]["structuredContent"]["citations"]
    assert [m["error"]["code"] for m in array[3:]] == [-32600, -32600, -32601]
    singles = [m for m in out[1:] if isinstance(m, dict) and "id" in m]
    assert [m["id"] for m in singles] == ["f"]  # nothing else answered outside the array


async def test_a_batch_member_cancelled_is_left_out_of_its_array() -> None:
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "changed my mind"},
    }
    batch = [_call(2, "never ends"), cancel, {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    lines = [_line(_init("2025-03-26")), _line(INITIALIZED), _line(batch)]
    # The drain waits for the ping's answer only: the cancelled call is owed nothing.
    out = await _serve_stuck(lines, drain_s=60)
    arrays = [m for m in out if isinstance(m, list)]
    assert len(arrays) == 1, out
    assert [m["id"] for m in arrays[0]] == [3]
    assert Counter(a["id"] for a in _answers(out)) == Counter({0: 1, 3: 1})


async def test_a_batch_still_running_at_the_drain_is_answered_in_its_array() -> None:
    # The second member reuses the id of the first, which is still owed: refused, since
    # its answer could not be told from the first's.
    batch = [_call(2, "never ends"), {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    lines = [_line(_init("2025-03-26")), _line(INITIALIZED), _line(batch)]
    out = await _serve_stuck(lines, drain_s=0)
    arrays = [m for m in out if isinstance(m, list)]
    assert len(arrays) == 1, out
    first, second = arrays[0]
    assert first["id"] == 2 and first["error"]["data"]["reason"] == "shutting_down"
    assert second["id"] == 2 and second["error"]["code"] == -32600
    assert "in use" in second["error"]["message"]


class _Reporting:
    """A client API session whose compositions report one finished leg, then never end."""

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any:
        if on_progress is not None:
            on_progress({"provider": "alpha", "status": "ok", "done": 1, "total": 2})
        await anyio.sleep_forever()


def _progress(message: Any, token: str) -> float | None:
    """The ``progress`` of a progress notification for ``token``, else None."""
    if isinstance(message, dict) and message.get("method") == "notifications/progress":
        params = message["params"]
        return float(params["progress"]) if params["progressToken"] == token else None
    return None


async def test_no_progress_of_a_call_is_written_once_its_cancel_is_read() -> None:
    """A client slow to read its stdout holds hostd's writes back; what a call queued
    meanwhile is not written once its cancel is read (MCP: progress only for an active
    request), while a call still running gets every one of its notifications."""
    from hostd.mcp import serve_mcp

    def call(id_: int, token: str) -> dict[str, Any]:
        request = _call(id_, f"goal {id_}")
        request["params"]["_meta"] = {"progressToken": token}
        return request

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    written: list[Any] = []
    held = anyio.Event()  # a write waits for the client to read again
    reading = anyio.Event()  # the client reads again
    second_leg = anyio.Event()  # call 3's finished leg was written

    async def send(data: bytes) -> None:
        if written and not reading.is_set():  # the client reads only the initialize answer
            held.set()
            await reading.wait()
        message = json.loads(data)
        written.append(message)
        if _progress(message, "b") == 1.0:
            second_leg.set()

    async def hold_then_cancel() -> bytes:
        await held.wait()  # call 2's start is being written
        await anyio.wait_all_tasks_blocked()  # and its finished leg queued behind it
        return _line(cancel)

    async def read_again() -> bytes:
        reading.set()  # the cancel was read (the edge asks for the next line)
        return _line(call(3, "b"))

    async def end() -> bytes:
        await second_leg.wait()
        return b""

    def now(value: Any) -> Callable[[], Awaitable[bytes]]:
        async def line() -> bytes:
            return _line(value)

        return line

    script = [now(INITIALIZE), now(INITIALIZED), now(call(2, "a"))]
    script += [hold_then_cancel, read_again, end]

    async def receive() -> bytes:
        return await script.pop(0)()

    with anyio.fail_after(60):  # a hang guard
        await serve_mcp(_Reporting(), receive, send, drain_s=0)
    # Only the start of call 2, already being written when its cancel was read.
    assert [p for m in written if (p := _progress(m, "a")) is not None] == [0.0]
    assert [p for m in written if (p := _progress(m, "b")) is not None] == [0.0, 1.0]
    assert [a["id"] for a in _answers(written)] == [0, 3]  # 3: shutting_down at the end
