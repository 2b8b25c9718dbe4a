"""``start_query``: a request written at once (no event-loop turn), its reply awaited later."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hostd.errors import ProtocolFault
from hostd.protocol import ContextQuery, ContextQueryResult, HostInfo
from hostd.transport import CgpClient, JsonRpcClient
from tests.transport._memory import ScriptedPeer, holding
from tests.transport.test_bindings import cgp_peer, frames_result, line, run_client

pytestmark = pytest.mark.anyio

QUERY = ContextQuery(goal="g", max_frames=5, max_tokens=100)


def _answer(msg: dict[str, Any]) -> list[bytes]:
    return [line({"jsonrpc": "2.0", "id": msg["id"], "result": frames_result("f")})]


def _jsonrpc(respond: Any, *, nowait: bool = True) -> tuple[JsonRpcClient, ScriptedPeer]:
    peer = ScriptedPeer(respond)
    return peer.client(JsonRpcClient, nowait=nowait), peer


async def test_the_request_is_written_before_any_await_and_its_reply_arrives_later() -> None:
    client, peer = _jsonrpc(_answer)
    started = client.start_query(QUERY)
    assert started is not None
    assert peer.received == [  # already written: no await happened yet
        {"jsonrpc": "2.0", "method": "context/query", "params": {"query": QUERY.to_wire()}, "id": 1}
    ]

    async def body() -> Any:
        return await started.result()

    try:
        result = await run_client(client, body)
    finally:
        peer.close()
    assert isinstance(result, ContextQueryResult)
    assert result.frames == [{"id": "f"}]


async def test_the_wire_form_writes_the_same_request_as_the_model() -> None:
    client, peer = _jsonrpc(lambda msg: [])
    assert client.start_query(QUERY) is not None
    assert client.start_query({**QUERY.to_wire()}) is not None
    first, second = peer.received
    assert json.dumps(first["params"]) == json.dumps(second["params"])
    peer.close()


async def test_without_an_immediate_write_nothing_is_sent_or_registered() -> None:
    client, peer = _jsonrpc(_answer, nowait=False)
    assert client.start_query(QUERY) is None
    peer_full, full = _jsonrpc(_answer)
    full.refuse = True  # a full pipe
    assert peer_full.start_query(QUERY) is None
    for c, p in ((client, peer), (peer_full, full)):
        assert p.received == [] and c.in_flight == 0
        p.close()


async def test_a_caller_that_gives_up_abandons_its_id_and_the_late_reply_is_dropped() -> None:
    held: list[dict[str, Any]] = []
    client, peer = _jsonrpc(holding(held))
    started = client.start_query(QUERY)
    assert started is not None

    async def body() -> Any:
        with anyio.move_on_after(0.05):
            await started.result()
        assert client.in_flight == 0  # abandoned, not pending
        await peer.to_client.send(
            line({"jsonrpc": "2.0", "id": held[0]["id"], "result": {"frames": []}})
        )
        # Replies are read in order: once a later call's reply is in, the late one was
        # handled before it.
        later = client.start_query(QUERY)
        assert later is not None
        await peer.to_client.send(
            line({"jsonrpc": "2.0", "id": held[1]["id"], "result": {"frames": []}})
        )
        await later.result()
        return client.failure

    try:
        assert await run_client(client, body) is None  # dropped quietly, no H4 fault
    finally:
        peer.close()


async def test_cgp_starts_a_query_only_when_the_provider_correlates() -> None:
    for correlation in (False, True):
        peer = ScriptedPeer(cgp_peer(correlation))
        client = peer.client(CgpClient, nowait=True)

        async def body(client: CgpClient = client, correlation: bool = correlation) -> Any:
            await client.handshake(HostInfo(name="h", version="0"))
            started = client.start_query(QUERY)
            if not correlation:
                return started
            assert started is not None
            return await started.result()

        try:
            out = await run_client(client, body)
        finally:
            peer.close()
        if correlation:
            assert isinstance(out, ContextQueryResult) and out.frames == [{"id": "g"}]
        else:
            assert out is None  # lock-step: the leg sends it itself, one at a time


async def test_an_exchange_past_its_deadline_times_out_and_its_late_reply_is_counted() -> None:
    """``exchange(request, deadline=…)``: one call, its deadline the transport's timer
    (as ``start_query``'s): ``TimeoutError`` then, the id abandoned, so the reply that
    comes later is dropped quietly and counted, and the stream stays usable."""
    held: list[dict[str, Any]] = []
    client, peer = _jsonrpc(holding(held))

    async def body() -> Any:
        request = client.codec.request("rerank", {"query": "q"})
        with pytest.raises(TimeoutError):
            await client.exchange(request, deadline=anyio.current_time() + 0.05)
        assert client.in_flight == 0 and client.late_replies == 0
        await peer.to_client.send(
            line({"jsonrpc": "2.0", "id": held[0]["id"], "result": {"frames": []}})
        )
        pending = client.start_query(QUERY)
        assert pending is not None
        await peer.to_client.send(
            line({"jsonrpc": "2.0", "id": held[1]["id"], "result": {"frames": []}})
        )
        await pending.result()  # read after the late reply: that one was handled first
        return client.late_replies, client.failure

    try:
        assert await run_client(client, body) == (1, None)
    finally:
        peer.close()


async def test_a_lock_step_exchange_past_its_deadline_leaves_the_stream_unusable() -> None:
    """A CGP provider without correlation answers in order: a request given up at its
    deadline would have its late reply read as the next one's, so the stream is
    ``desynchronised`` and refuses the next exchange."""
    answer = cgp_peer(False)

    def respond(msg: dict[str, Any]) -> list[bytes]:
        return [] if msg["type"] == "query" else answer(msg)

    peer = ScriptedPeer(respond)
    client = peer.client(CgpClient, nowait=True)

    async def body() -> Any:
        await client.handshake(HostInfo(name="h", version="0"))
        request = client.codec.query(QUERY)
        with pytest.raises(TimeoutError):
            await client.exchange(request, deadline=anyio.current_time() + 0.05)
        return client.desynchronised

    try:
        assert await run_client(client, body) is True
    finally:
        peer.close()


async def test_a_method_called_by_name_needs_a_binding_that_names_methods() -> None:
    """``call`` (a reranker's ``rerank``) is JSON-RPC's: a CGP client refuses it, typed,
    with nothing written."""
    peer = ScriptedPeer(cgp_peer(True))
    client = peer.client(CgpClient, nowait=True)
    try:
        with pytest.raises(ProtocolFault):
            await client.call("rerank", {"query": "q"})
        assert peer.received == []
    finally:
        peer.close()


async def test_a_method_called_by_name_returns_its_raw_result() -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        return [line({"jsonrpc": "2.0", "id": msg["id"], "result": {"order": [msg["method"]]}})]

    client, peer = _jsonrpc(respond)

    async def body() -> Any:
        return await client.call("rerank", {"query": "q"}, deadline=anyio.current_time() + 60)

    try:
        assert await run_client(client, body) == {"order": ["rerank"]}
    finally:
        peer.close()
