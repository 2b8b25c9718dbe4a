"""Both bindings against scripted in-memory peers: correlation, errors, faults.

Replies reach the client as a child's stdout does (``_memory``: the production feed
into ``on_line``, the end of file as its ``on_end``)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hostd.errors import (
    CorrelationMismatch,
    IncompatibleVersion,
    LineTooLong,
    ProtocolFault,
    ProviderCrashed,
    ProviderError,
)
from hostd.protocol import CgpErrorCode, ContextQuery, HostInfo
from hostd.transport import CgpClient, JsonRpcClient
from tests.transport._memory import ScriptedPeer, peer_of

pytestmark = pytest.mark.anyio

HOST = HostInfo(name="test", version="0")
QUERY = ContextQuery(goal="g", max_frames=5, max_tokens=100)
ACK = {
    "protocol_version": "contextgraph/1.0",
    "provider": {"name": "p", "version": "1"},
    "capabilities": {"correlation": True},
}


def line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def frames_result(tag: str) -> dict[str, Any]:
    return {"frames": [{"id": tag}], "truncated": False}


async def run_client(client: Any, body: Any) -> Any:
    """Pipe the peer's replies to the client beside ``body``; re-raise the body's error
    unwrapped."""
    peer = peer_of(client)
    outcome: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.pipe, client, client.provider_id)
        try:
            with anyio.fail_after(5):
                outcome["value"] = await body()
        except Exception as exc:
            outcome["error"] = exc
        finally:
            tg.cancel_scope.cancel()
    peer.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def jsonrpc(respond: Any, limit: int = 1 << 20) -> tuple[JsonRpcClient, ScriptedPeer]:
    peer = ScriptedPeer(respond, limit)
    return peer.client(JsonRpcClient), peer


async def test_jsonrpc_replies_out_of_order_reach_their_callers() -> None:
    held: list[dict[str, Any]] = []

    def respond(msg: dict[str, Any]) -> list[bytes]:
        held.append(msg)
        if len(held) < 3:
            return []
        # Answer all three in reverse order.
        return [
            line(
                {
                    "jsonrpc": "2.0",
                    "id": m["id"],
                    "result": frames_result(m["params"]["query"]["goal"]),
                }
            )
            for m in reversed(held)
        ]

    client, _ = jsonrpc(respond)

    async def body() -> dict[str, str]:
        got: dict[str, str] = {}

        async def one(goal: str) -> None:
            result = await client.query(QUERY.model_copy(update={"goal": goal}))
            got[goal] = result.frames[0]["id"]

        async with anyio.create_task_group() as tg:
            for goal in ("a", "b", "c"):
                tg.start_soon(one, goal)
        return got

    assert await run_client(client, body) == {"a": "a", "b": "b", "c": "c"}


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"jsonrpc": "2.0", "id": 999, "result": {}}, CorrelationMismatch),
        ({"jsonrpc": "2.0", "result": {}}, CorrelationMismatch),
        ("not json at all", ProtocolFault),
        ({"jsonrpc": "2.0", "id": 1, "result": {"frames": "nope"}}, ProtocolFault),
    ],
    ids=["unknown-id", "missing-id", "garbage", "bad-shape"],
)
async def test_jsonrpc_faults_are_typed(reply: Any, error: type[Exception]) -> None:
    raw = reply.encode() + b"\n" if isinstance(reply, str) else line(reply)
    client, _ = jsonrpc(lambda _m: [raw])
    with pytest.raises(error):
        await run_client(client, lambda: client.query(QUERY))


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"cgp_code": "unsupported_kind"}, CgpErrorCode.UNSUPPORTED_KIND),
        ({"cgp_code": "made_up_code"}, CgpErrorCode.INTERNAL),  # X1
        (None, CgpErrorCode.INTERNAL),  # X2
    ],
)
async def test_jsonrpc_error_codes_are_read_per_x1_x2(
    data: dict[str, Any] | None, code: CgpErrorCode
) -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        err: dict[str, Any] = {"code": -32001, "message": "no"}
        if data is not None:
            err["data"] = data
        return [line({"jsonrpc": "2.0", "id": msg["id"], "error": err})]

    client, _ = jsonrpc(respond)
    with pytest.raises(ProviderError) as info:
        await run_client(client, lambda: client.query(QUERY))
    assert info.value.cgp_code is code


async def test_jsonrpc_incompatible_version_error_is_named() -> None:
    err = {"code": -32003, "message": "v2 only", "data": {"cgp_code": "incompatible_version"}}
    client, _ = jsonrpc(lambda m: [line({"jsonrpc": "2.0", "id": m["id"], "error": err})])
    with pytest.raises(IncompatibleVersion):
        await run_client(client, lambda: client.handshake(HOST))


async def test_jsonrpc_eof_wakes_every_waiter_with_crashed() -> None:
    client, peer = jsonrpc(lambda _m: [])

    async def body() -> list[type]:
        errors: list[type] = []

        async def one() -> None:
            try:
                await client.query(QUERY)
            except ProviderCrashed as exc:
                errors.append(type(exc))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            await peer.to_client.aclose()
        return errors

    assert await run_client(client, body) == [ProviderCrashed] * 3


async def test_jsonrpc_a_late_reply_to_an_abandoned_request_is_dropped_quietly() -> None:
    pending: list[dict[str, Any]] = []

    def respond(msg: dict[str, Any]) -> list[bytes]:
        pending.append(msg)
        if len(pending) == 1:
            return []
        first, second = pending
        return [
            line({"jsonrpc": "2.0", "id": first["id"], "result": frames_result("late")}),
            line({"jsonrpc": "2.0", "id": second["id"], "result": frames_result("second")}),
        ]

    client, _ = jsonrpc(respond)

    async def body() -> str:
        with anyio.move_on_after(0.01):
            await client.query(QUERY)  # abandoned: no reply yet
        result = await client.query(QUERY)
        assert client.failure is None
        return result.frames[0]["id"]

    assert await run_client(client, body) == "second"


async def test_jsonrpc_over_long_reply_fails_the_call() -> None:
    client, _ = jsonrpc(
        lambda m: [line({"jsonrpc": "2.0", "id": m["id"], "result": "x" * 500})], 100
    )
    with pytest.raises(LineTooLong):
        await run_client(client, lambda: client.query(QUERY))


# --- CGP envelopes ---------------------------------------------------------------------


def cgp(respond: Any) -> tuple[CgpClient, ScriptedPeer]:
    peer = ScriptedPeer(respond)
    return peer.client(CgpClient), peer


def cgp_peer(correlation: bool, *, echo: str = "id") -> Any:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            return [
                line({"type": "handshake_ack", **ACK, "capabilities": {"correlation": correlation}})
            ]
        if msg["type"] == "query":
            out: dict[str, Any] = {"type": "frames", "result": frames_result(msg["query"]["goal"])}
            if echo == "id" and "id" in msg:
                out["id"] = msg["id"]
            elif echo == "wrong":
                out["id"] = "zzz"
            return [line(out)]
        if msg["type"] == "verify":
            verdicts = [{"frame": f, "status": "valid"} for f in msg["request"]["frames"]]
            return [line({"type": "verified", "response": {"verdicts": verdicts}})]
        return []

    return respond


@pytest.mark.parametrize("correlation", [True, False])
async def test_cgp_sends_ids_only_to_a_correlating_provider(correlation: bool) -> None:
    client, peer = cgp(cgp_peer(correlation))

    async def body() -> str:
        await client.handshake(HOST)
        return (await client.query(QUERY)).frames[0]["id"]

    assert await run_client(client, body) == "g"
    sent = [m for m in peer.received if m["type"] == "query"]
    assert ("id" in sent[0]) is correlation
    assert peer.received[0] == {"type": "handshake", "protocol_version": "contextgraph/1.0-draft"}


@pytest.mark.parametrize("echo", ["wrong", "none"])
async def test_cgp_a_correlating_provider_that_drops_or_changes_the_id_is_h4(echo: str) -> None:
    client, _ = cgp(cgp_peer(True, echo=echo))

    async def body() -> None:
        await client.handshake(HOST)
        await client.query(QUERY)

    with pytest.raises(CorrelationMismatch):
        await run_client(client, body)


async def test_cgp_error_envelope_codes_are_read_per_x1() -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            return [line({"type": "handshake_ack", **ACK, "capabilities": {}})]
        return [line({"type": "error", "message": "nope", "code": "brand_new_code"})]

    client, _ = cgp(respond)

    async def body() -> None:
        await client.handshake(HOST)
        await client.query(QUERY)

    with pytest.raises(ProviderError) as info:
        await run_client(client, body)
    assert info.value.cgp_code is CgpErrorCode.INTERNAL


async def test_cgp_lockstep_keeps_one_request_in_flight() -> None:
    in_flight = 0
    peak = 0
    peer_holder: list[ScriptedPeer] = []

    def respond(msg: dict[str, Any]) -> list[bytes]:
        nonlocal in_flight, peak
        if msg["type"] == "handshake":
            return [line({"type": "handshake_ack", **ACK, "capabilities": {"correlation": False}})]
        in_flight += 1
        peak = max(peak, in_flight)
        in_flight -= 1  # answered at once, before the next request can be written
        return [line({"type": "frames", "result": frames_result(msg["query"]["goal"])})]

    client, peer = cgp(respond)
    peer_holder.append(peer)

    async def body() -> list[str]:
        await client.handshake(HOST)
        got: list[str] = []

        async def one(goal: str) -> None:
            got.append(
                (await client.query(QUERY.model_copy(update={"goal": goal}))).frames[0]["id"]
            )

        async with anyio.create_task_group() as tg:
            for goal in "abcde":
                tg.start_soon(one, goal)
        return sorted(got)

    assert await run_client(client, body) == list("abcde")
    assert peak == 1


async def test_cgp_an_abandoned_lockstep_request_desynchronises_the_stream() -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            return [line({"type": "handshake_ack", **ACK, "capabilities": {"correlation": False}})]
        return []  # never answers

    client, _ = cgp(respond)

    async def body() -> None:
        await client.handshake(HOST)
        with anyio.move_on_after(0.01):
            await client.query(QUERY)
        assert client.desynchronised
        await client.query(QUERY)

    with pytest.raises(ProtocolFault):
        await run_client(client, body)


async def test_cgp_verify_returns_the_verified_envelope() -> None:
    from hostd.protocol import FrameIdentity

    client, _ = cgp(cgp_peer(True))

    async def body() -> list[str]:
        await client.handshake(HOST)
        response = await client.verify([FrameIdentity(provider_id="p", frame_id="f")])
        return [v.status for v in response.verdicts]

    assert await run_client(client, body) == ["valid"]
