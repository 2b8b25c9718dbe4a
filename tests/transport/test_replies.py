"""How both bindings read a query reply (JSON-RPC ``result``, CGP ``frames`` envelope):
one path for every reply; the frames reach the leg audit raw, so one malformed frame
costs only itself; errors and ids are judged whatever the result holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hostd.engine import audit_leg
from hostd.errors import CorrelationMismatch, ProtocolFault, ProviderError
from hostd.protocol import ContextFrame, HostInfo
from hostd.provider import make_frame
from hostd.transport.bindings import JsonRpcCodec
from tests.transport.test_bindings import ACK, HOST, QUERY, cgp, jsonrpc, line, run_client

pytestmark = pytest.mark.anyio


def _frames(n: int) -> list[dict[str, Any]]:
    return [
        make_frame(
            id=f"f{i}", kind="snippet", title=f"t{i}", content=f"c{i}", citation_label=f"L{i}"
        ).to_wire()
        for i in range(n)
    ]


def _answer(result: Any = None, **reply: Any) -> Any:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        body = {"jsonrpc": "2.0", "id": msg["id"], **reply}
        if result is not None:
            body["result"] = result
        return [line(body)]

    return respond


async def test_a_well_formed_reply_reaches_the_audit_whole_and_in_order() -> None:
    client, _ = jsonrpc(_answer({"frames": _frames(3), "truncated": True, "dropped_estimate": 4}))
    result = await run_client(client, lambda: client.query(QUERY))
    assert result.truncated is True and result.dropped_estimate == 4
    audit = audit_leg("p", QUERY, result.frames)
    assert [f.id for f in audit.accepted] == ["f0", "f1", "f2"]
    assert all(type(f) is ContextFrame for f in audit.accepted)


async def test_one_malformed_frame_costs_only_itself() -> None:
    frames: list[Any] = _frames(3)
    frames[1] = {"id": "bad", "kind": "snippet"}  # no title, score, token_cost
    client, _ = jsonrpc(_answer({"frames": frames}))
    result = await run_client(client, lambda: client.query(QUERY))
    # The reply is not refused: the leg audit drops that frame alone.
    audit = audit_leg("p", QUERY, result.frames)
    assert [f.id for f in audit.accepted] == ["f0", "f2"]
    assert [(e[0].frame_id, e[1]) for e in audit.excluded] == [("bad", "invalid_frame")]


async def test_a_reply_carrying_an_error_is_an_error_even_with_frames() -> None:
    error = {"code": -32000, "message": "nope", "data": {"cgp_code": "bad_request"}}
    client, _ = jsonrpc(_answer({"frames": _frames(1)}, error=error))
    with pytest.raises(ProviderError):
        await run_client(client, lambda: client.query(QUERY))


async def test_a_null_error_member_beside_the_result_is_an_error() -> None:
    # An error member, even null, makes the reply an error (X2: a malformed one still is).
    client, _ = jsonrpc(_answer({"frames": _frames(1)}, error=None))
    with pytest.raises(ProviderError):
        await run_client(client, lambda: client.query(QUERY))


async def test_a_string_id_for_an_integer_request_is_still_a_correlation_fault() -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        reply = {"jsonrpc": "2.0", "id": str(msg["id"]), "result": {"frames": _frames(1)}}
        return [json.dumps(reply).encode() + b"\n"]

    client, _ = jsonrpc(respond)
    with pytest.raises(CorrelationMismatch):
        await run_client(client, lambda: client.query(QUERY))


@pytest.mark.parametrize("reply_id", [True, 1.0])
async def test_an_id_that_only_hashes_like_ours_is_a_correlation_fault(reply_id: Any) -> None:
    # Python has True == 1.0 == 1; JSON-RPC ids are compared as sent (H4).
    def respond(msg: dict[str, Any]) -> list[bytes]:
        assert msg["id"] == 1
        return [line({"jsonrpc": "2.0", "id": reply_id, "result": {"frames": _frames(1)}})]

    client, _ = jsonrpc(respond)
    with pytest.raises(CorrelationMismatch):
        await run_client(client, lambda: client.query(QUERY))


async def test_a_frames_shaped_reply_to_a_handshake_is_not_taken_for_a_query() -> None:
    # A reply is read by the model of what was asked (here: a handshake ack missing its
    # members is a protocol fault).
    client, _ = jsonrpc(_answer({"frames": _frames(1)}))
    with pytest.raises(ProtocolFault):
        await run_client(client, lambda: client.handshake(HostInfo(name="h", version="0")))


def _cgp_answer(frames: list[Any], *, correlation: bool) -> Any:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            caps = {"correlation": correlation}
            return [line({"type": "handshake_ack", **ACK, "capabilities": caps})]
        out: dict[str, Any] = {"type": "frames", "result": {"frames": frames}}
        if "id" in msg:
            out["id"] = msg["id"]
        return [line(out)]

    return respond


@pytest.mark.parametrize("correlation", [True, False])
async def test_cgp_a_well_formed_frames_envelope_reaches_the_audit_whole(
    correlation: bool,
) -> None:
    client, _ = cgp(_cgp_answer(_frames(3), correlation=correlation))

    async def body() -> Any:
        await client.handshake(HOST)
        return await client.query(QUERY)

    result = await run_client(client, body)
    assert [f.id for f in audit_leg("p", QUERY, result.frames).accepted] == ["f0", "f1", "f2"]


async def test_cgp_one_malformed_frame_costs_only_itself() -> None:
    frames: list[Any] = _frames(3)
    frames[2] = {"id": "bad", "kind": "snippet", "score": "high"}
    client, _ = cgp(_cgp_answer(frames, correlation=True))

    async def body() -> Any:
        await client.handshake(HOST)
        return await client.query(QUERY)

    result = await run_client(client, body)
    audit = audit_leg("p", QUERY, result.frames)
    assert [f.id for f in audit.accepted] == ["f0", "f1"]
    assert [(e[0].frame_id, e[1]) for e in audit.excluded] == [("bad", "invalid_frame")]


async def test_cgp_a_frames_envelope_with_an_unknown_id_is_still_h4() -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            return [line({"type": "handshake_ack", **ACK})]
        return [line({"type": "frames", "id": "zzz", "result": {"frames": _frames(1)}})]

    client, _ = cgp(respond)

    async def body() -> Any:
        await client.handshake(HOST)
        return await client.query(QUERY)

    with pytest.raises(CorrelationMismatch):
        await run_client(client, body)


@pytest.mark.parametrize("correlation", [True, False])
async def test_cgp_a_frames_envelope_without_frames_fails_its_query_alone(
    correlation: bool,
) -> None:
    """A ``frames`` envelope that names its request (its id, or the lock-step request in
    flight) but whose result has no ``frames`` fails that query with the JSON-RPC
    binding's words for the same result; the stream goes on and the next query is
    answered."""
    bad = {"results": [], "truncated": False}
    answers = iter([bad, {"frames": _frames(1)}])

    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            return [
                line({"type": "handshake_ack", **ACK, "capabilities": {"correlation": correlation}})
            ]
        out: dict[str, Any] = {"type": "frames", "result": next(answers)}
        if "id" in msg:
            out["id"] = msg["id"]
        return [line(out)]

    client, _ = cgp(respond)

    async def body() -> tuple[ProtocolFault, Any]:
        await client.handshake(HOST)
        with pytest.raises(ProtocolFault) as caught:
            await client.query(QUERY)
        return caught.value, await client.query(QUERY)

    fault, result = await run_client(client, body)
    with pytest.raises(ProtocolFault) as jsonrpc_said:
        JsonRpcCodec("p").query_result(bad)
    assert fault.message == jsonrpc_said.value.message
    assert [f["id"] for f in result.frames] == ["f0"]
    assert client.failure is None


# --- a provider's text is never quoted in a fault (logs C8) ----------------------------

SECRET = "SECRET-4f1c"

#: (what the provider writes back to a query, words the fault must carry instead).
_JSONRPC_HOSTILE = [
    (b'{"content": "SECRET-4f1c and more', ["33 bytes", "position 33", "unexpected end"]),
    (b'{"content": "SECRET-4f1c"}', ["26 bytes", "JSON object"]),
    (b'["SECRET-4f1c"]', ["15 bytes", "JSON array"]),
    (b'{"jsonrpc": "2.0", "id": "SECRET-4f1c", "result": {}}', ["string id (11 chars"]),
    (
        b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no SECRET-4f1c",'
        b' "data": {"cgp_code": "bad_request"}}}',
        ["bad_request", "14 chars"],
    ),
    (b'{"jsonrpc": "2.0", "id": 1, "result": {"frames": "SECRET-4f1c"}}', ["frames"]),
    (b'{"jsonrpc": "2.0", "id": null, "error": {"message": "SECRET-4f1c"}}', ["without id"]),
]
_CGP_HOSTILE = [
    (b'{"type": "frames", "result": {"SECRET-4f1c', ["42 bytes", "not JSON"]),
    # A type that is no string (a string one outside the vocabulary is ignored, §2.1):
    # pydantic's message would quote it, so only the error's type is given.
    (b'{"type": ["SECRET-4f1c"], "result": {}}', ["union_tag_invalid"]),
    (b'{"type": "frames", "id": "ID", "result": {"frames": "SECRET-4f1c"}}', ["malformed"]),
    (
        b'{"type": "error", "id": "ID", "code": "unavailable", "message": "SECRET-4f1c"}',
        ["unavailable", "11 chars"],
    ),
    (b'{"type": "frames", "id": "SECRET-4f1c", "result": {"frames": []}}', ["string id"]),
]


def _unquoting(exc: BaseException, words: list[str]) -> None:
    from hostd.errors import HostdError, error_to_wire

    assert isinstance(exc, HostdError), exc
    text = json.dumps(error_to_wire(exc))
    assert SECRET not in text and SECRET not in repr(exc), text
    for word in words:
        assert word in exc.message, exc.message


@pytest.mark.parametrize(("reply", "words"), _JSONRPC_HOSTILE)
async def test_a_jsonrpc_fault_reports_sizes_and_positions_never_the_provider_text(
    reply: bytes, words: list[str]
) -> None:
    client, _ = jsonrpc(lambda m: [reply.replace(b'"id": 1', f'"id": {m["id"]}'.encode()) + b"\n"])
    with pytest.raises(Exception) as caught:
        await run_client(client, lambda: client.query(QUERY))
    _unquoting(caught.value, words)


@pytest.mark.parametrize(("reply", "words"), _CGP_HOSTILE)
async def test_a_cgp_fault_reports_sizes_and_positions_never_the_provider_text(
    reply: bytes, words: list[str]
) -> None:
    def respond(msg: dict[str, Any]) -> list[bytes]:
        if msg["type"] == "handshake":
            return [line({"type": "handshake_ack", **ACK})]  # correlation: ids are checked
        return [reply.replace(b'"ID"', json.dumps(msg.get("id")).encode()) + b"\n"]

    client, _ = cgp(respond)

    async def body() -> Any:
        await client.handshake(HOST)
        return await client.query(QUERY)

    with pytest.raises(Exception) as caught:
        await run_client(client, body)
    _unquoting(caught.value, words)
