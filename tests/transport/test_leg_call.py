"""One call per leg: ``start_query`` with a deadline and ``on_settled``.

The reply is read, matched and validated in the read callback, which settles the
call (its ``value`` or ``error``) and tells ``on_settled`` once; the deadline's timer fails it with
``TimeoutError`` and abandons its id, so a late reply is counted, not a fault. The
settled outcome must equal what the awaited path (``query``) gives for the same reply.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostd.errors import ProtocolFault
from hostd.protocol import ContextQuery, ContextQueryResult
from hostd.transport import JsonRpcClient, StartedCall
from tests.transport._memory import _PEERS, ScriptedPeer, holding
from tests.transport.test_bindings import frames_result, line, run_client

pytestmark = pytest.mark.anyio

QUERY = ContextQuery(goal="g", max_frames=5, max_tokens=100)


def _held() -> tuple[JsonRpcClient, ScriptedPeer, list[dict[str, Any]]]:
    held: list[dict[str, Any]] = []
    peer = ScriptedPeer(holding(held))
    return peer.client(JsonRpcClient, nowait=True), peer, held


def _reply(msg: dict[str, Any], result: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": msg["id"], "result": result})


async def test_past_its_deadline_a_call_times_out_once_and_its_late_reply_is_counted() -> None:
    client, peer, held = _held()
    told: list[StartedCall] = []
    settled = anyio.Event()

    def on_settled(call: StartedCall) -> None:
        told.append(call)
        settled.set()

    async def body() -> Any:
        # A deadline already past: the timer fires on the loop's next turn.
        call = client.start_query(QUERY, deadline=anyio.current_time() - 1, on_settled=on_settled)
        assert call is not None
        await settled.wait()
        assert told == [call]
        assert isinstance(call.error, TimeoutError) and not call.open
        assert client.in_flight == 0  # abandoned, not pending
        await peer.to_client.send(_reply(held[0], frames_result("late")))
        later = client.start_query(QUERY)
        assert later is not None
        await peer.to_client.send(_reply(held[1], frames_result("f")))
        result = await later.result()
        return told, result

    try:
        told_after, result = await run_client(client, body)
    finally:
        peer.close()
    assert len(told_after) == 1  # the late reply told nobody
    assert client.late_replies == 1 and client.failure is None  # slow, not a fault
    assert isinstance(result, ContextQueryResult) and result.frames == [{"id": "f"}]


async def test_a_reply_is_validated_in_the_read_callback_and_a_bad_one_costs_its_call_only() -> (
    None
):
    client, peer, held = _held()
    seen: list[tuple[bool, Any]] = []
    both = anyio.Event()

    def on_settled(call: StartedCall) -> None:
        # Told from the read callback with a finished value: no task woke in between.
        seen.append((not call.open, call.error or call.value))
        if len(seen) == 2:
            both.set()

    async def body() -> None:
        far = anyio.current_time() + 3600  # a hang guard, never reached
        good = client.start_query(QUERY, deadline=far, on_settled=on_settled)
        bad = client.start_query(QUERY, deadline=far, on_settled=on_settled)
        assert good is not None and bad is not None
        await peer.to_client.send(_reply(held[1], {"frames": "not a list"}))
        await peer.to_client.send(_reply(held[0], frames_result("ok")))
        await both.wait()

    try:
        await run_client(client, body)
    finally:
        peer.close()
    (done_bad, bad_outcome), (done_good, good_outcome) = seen
    assert done_bad and isinstance(bad_outcome, ProtocolFault)
    assert done_good and isinstance(good_outcome, ContextQueryResult)
    assert good_outcome.frames == [{"id": "ok"}]
    assert client.failure is None  # the stream goes on


async def test_a_deadline_passing_after_the_reply_changes_nothing() -> None:
    """The timer is left to fire (never cancelled): it finds the call gone from the
    table and fails nothing, abandons nothing, tells nobody again."""
    client, peer, held = _held()
    told: list[StartedCall] = []
    timers_ran = anyio.Event()

    async def body() -> StartedCall:
        loop = asyncio.get_running_loop()
        deadline = loop.time() - 1  # past: its timer runs on the loop's next turn
        call = client.start_query(QUERY, deadline=deadline, on_settled=told.append)
        assert call is not None
        # Answered in this same turn, before the timer can run.
        assert client.on_line(_reply(held[0], frames_result("f")))
        assert told == [call] and call.error is None
        loop.call_at(deadline + 0.5, timers_ran.set)  # past too: runs after the deadline's
        await timers_ran.wait()
        return call

    try:
        call = await run_client(client, body)
    finally:
        peer.close()
    assert len(told) == 1 and call.error is None and not call.open
    assert isinstance(call.value, ContextQueryResult) and call.value.frames == [{"id": "f"}]
    assert client.in_flight == 0 and client.late_replies == 0 and client.failure is None
    assert not client._table.was_abandoned(held[0]["id"])


async def test_a_caller_cancelled_before_the_reply_abandons_the_id() -> None:
    client, peer, held = _held()

    async def body() -> None:
        call = client.start_query(QUERY, deadline=anyio.current_time() + 3600)
        assert call is not None
        with anyio.CancelScope() as scope:
            scope.cancel()
            await call.result()
        assert client.in_flight == 0 and not call.open
        await peer.to_client.send(_reply(held[0], frames_result("late")))
        later = client.start_query(QUERY)
        assert later is not None
        await peer.to_client.send(_reply(held[1], frames_result("f")))
        await later.result()

    try:
        await run_client(client, body)
    finally:
        peer.close()
    assert client.late_replies == 1 and client.failure is None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_FRAME = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=4)},
    optional={"kind": st.sampled_from(["snippet", "doc", 3]), "score": st.floats(-1, 2)},
)
#: A reply's body: a result (valid, of the wrong shape, or anything) or an error.
_REPLY = st.one_of(
    st.builds(
        lambda frames, truncated: {"result": {"frames": frames, "truncated": truncated}},
        st.lists(_FRAME, max_size=3),
        st.booleans(),
    ),
    st.builds(lambda junk: {"result": junk}, _JSON),
    st.builds(lambda frames: {"result": {"frames": frames}}, _JSON),
    st.builds(
        lambda code, message: {"error": {"code": code, "message": message}},
        st.sampled_from([-32000, -32001, -32602, -32603, 7]),
        st.text(max_size=8),
    ),
)


def _outcome(value: Any) -> tuple[str, str]:
    if isinstance(value, BaseException):
        data = json.dumps(getattr(value, "data", None), default=str, sort_keys=True)
        return type(value).__name__, f"{value} {data}"
    return "ok", json.dumps(value.model_dump(mode="json"), sort_keys=True)


async def _both_paths(body: dict[str, Any]) -> tuple[tuple[str, str], tuple[str, str]]:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        return [line({"jsonrpc": "2.0", "id": msg["id"], **body})]

    fast_peer, slow_peer = ScriptedPeer(respond), ScriptedPeer(respond)
    fast = fast_peer.client(JsonRpcClient, nowait=True)
    slow = slow_peer.client(JsonRpcClient)
    landed = anyio.Event()

    async def fast_body() -> Any:
        call = fast.start_query(
            QUERY, deadline=anyio.current_time() + 3600, on_settled=lambda _c: landed.set()
        )
        assert call is not None
        await landed.wait()
        return call.error if call.error is not None else call.value

    async def slow_body() -> Any:
        try:
            return await slow.query(QUERY)
        except Exception as exc:
            return exc

    try:
        got_fast = await run_client(fast, fast_body)
        got_slow = await run_client(slow, slow_body)
    finally:
        fast_peer.close()
        slow_peer.close()
    return _outcome(got_fast), _outcome(got_slow)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_REPLY)
async def test_the_settled_outcome_equals_the_awaited_one(body: dict[str, Any]) -> None:
    fast, slow = await _both_paths(body)
    assert fast == slow


async def test_an_awaited_call_is_written_at_once_when_the_pipe_takes_it_whole() -> None:
    # A verify or a reranker call: written by send_nowait, with no lock and no turn,
    # and only when the pipe refuses it (full) through the awaited send.
    peer = ScriptedPeer(lambda msg: [_reply(msg, {"ok": msg["id"]})])
    awaited: list[bytes] = []

    async def send(data: bytes) -> None:
        awaited.append(data)
        await peer.send(data)

    client = JsonRpcClient(send, provider_id="p", send_nowait=peer.send_nowait)
    _PEERS[client] = peer  # what run_client pipes the peer's replies from

    async def body() -> list[Any]:
        first = await client.call("m", {})
        peer.refuse = True  # a full pipe: the awaited path writes it
        second = await client.call("m", {})
        return [first, second]

    try:
        got = await run_client(client, body)
    finally:
        peer.close()
    assert got == [{"ok": 1}, {"ok": 2}]
    assert [json.loads(line)["id"] for line in awaited] == [2]
