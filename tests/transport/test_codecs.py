"""Both binding codecs fed recorded lines: what they build, what they read, what they refuse.

The CGP codec replays the protocol's published stdio session (tests/vectors, the
upstream transcript: its host lines must be what the codec builds, its provider
lines what it reads) and its reference envelopes; the JSON-RPC codec is fed the
lines the provider runtime writes and hand-made faults. No process, no I/O: a
codec is pure (h11-style), so every case is bytes in, value out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from hostd.config import ProviderSettings
from hostd.engine import ProviderSpec
from hostd.errors import CorrelationMismatch, IncompatibleVersion, ProtocolFault, ProviderError
from hostd.protocol import (
    CgpErrorCode,
    ContextQuery,
    FrameIdentity,
    HostInfo,
    accept_frames,
    parse_frames,
)
from hostd.provider import ProviderServer
from hostd.transport.bindings import (
    UNKEYED,
    CgpCodec,
    Fault,
    JsonRpcCodec,
    Notice,
    Refusal,
    Reply,
    binding_names,
    binding_problem,
    find_binding,
)
from tests.fixtures.healthy_provider import HealthyProvider

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
HOST = HostInfo(name="test", version="0")


def _lines(rel: str) -> list[bytes]:
    return [line for line in (VECTORS / rel).read_bytes().splitlines() if line.strip()]


SESSION = _lines("examples/full-stdio-session.ndjson")
REFERENCE = _lines("schema/reference-vectors.ndjson")


def _json(line: bytes) -> Any:
    return orjson.loads(line)


# -- cgp: the published stdio session ----------------------------------------------------


def test_cgp_replays_the_published_stdio_session() -> None:
    codec = CgpCodec("docs")  # configured as "docs"; the provider calls itself repo-graph
    hello, ack, ask, frames, verify, verified, bye = SESSION

    handshake = codec.handshake(HOST)
    assert _json(handshake.line) == _json(hello) and handshake.key is UNKEYED
    reply = codec.read(ack)
    assert isinstance(reply, Reply) and reply.key is UNKEYED
    learnt = codec.handshake_ack(reply.payload)
    assert learnt.provider.name == "repo-graph" and codec.correlation  # now keyed queries

    query = codec.query(_json(ask)["query"])
    assert _json(query.line) == _json(ask) and query.key == "q1"
    answer = codec.read(frames)
    assert isinstance(answer, Reply) and answer.key == "q1"
    result = codec.query_result(answer.payload)
    assert [f["id"] for f in result.frames] == ["repo-graph:retry-doc", "repo-graph:retry-sym"]

    # The host's identities are under "docs"; the wire's under the handshake name.
    asked = [FrameIdentity.model_validate(f) for f in _json(verify)["request"]["frames"]]
    ours = [a.model_copy(update={"provider_id": "docs"}) for a in asked]
    request = codec.verify(ours)
    assert _json(request.line) == _json(verify) and request.key is UNKEYED
    back = codec.read(verified)
    assert isinstance(back, Reply) and back.key is UNKEYED
    verdicts = codec.verify_response(back.payload).verdicts
    assert [(v.frame.provider_id, v.status) for v in verdicts] == [
        ("docs", "valid"),
        ("docs", "stale"),
    ]
    assert verdicts[1].replacement_digest == "sha256:" + "c" * 64

    shutdown = codec.shutdown()
    assert _json(shutdown.line) == _json(bye) and shutdown.key is None


def test_cgp_reads_the_reference_envelopes() -> None:
    codec = CgpCodec("p")
    minimal = codec.read(REFERENCE[1])
    assert isinstance(minimal, Reply) and minimal.key is UNKEYED
    codec.handshake_ack(minimal.payload)
    assert codec.correlation is False  # every capability false
    empty = codec.read(REFERENCE[5])
    assert isinstance(empty, Reply) and codec.query_result(empty.payload).frames == []
    # Lock-step: a reply's id answers nothing of its own, it is the one in flight's.
    keyed = codec.read(REFERENCE[6])
    assert isinstance(keyed, Reply) and keyed.key is UNKEYED and keyed.raw_key == "req-1"
    assert len(codec.query_result(keyed.payload).frames) == 4
    maximal = codec.read(REFERENCE[2])
    assert isinstance(maximal, Reply)
    assert codec.handshake_ack(maximal.payload).provider.name == "example-docs"
    assert codec.correlation is True  # declared: now the id is the key
    again = codec.read(REFERENCE[6])
    assert isinstance(again, Reply) and again.key == "req-1"

    codes, messages = [], []
    for line in REFERENCE[10:13]:
        refusal = codec.read(line)
        assert isinstance(refusal, Refusal) and isinstance(refusal.error, ProviderError)
        codes.append(refusal.error.cgp_code)
        messages.append(refusal.error.message)
    # X2: no code is internal; X1: an unknown code is internal, never retried.
    assert codes == [CgpErrorCode.INTERNAL, CgpErrorCode.BAD_REQUEST, CgpErrorCode.INTERNAL]
    # The provider's own message is reported by its size, never quoted.
    assert not any(t in m for m in messages for t in ("malformed", "positive", "revision"))


def test_cgp_faults_and_unmatched_replies_are_named_without_quoting() -> None:
    codec = CgpCodec("p")
    garbage = codec.read(b"secret-token not json")
    assert isinstance(garbage, Fault) and "secret" not in garbage.error.message
    host_line = codec.read(REFERENCE[3])  # a provider may not send a query
    assert isinstance(host_line, Fault) and "may not send 'query'" in host_line.error.message
    frames = codec.read(REFERENCE[5])
    assert isinstance(frames, Reply)
    assert codec.unmatched(frames).message == "unsolicited frames envelope"
    codec.correlation = True
    unkeyed = codec.read(REFERENCE[5])
    assert isinstance(unkeyed, Reply)
    assert isinstance(codec.unmatched(unkeyed), CorrelationMismatch)
    stray = codec.read(REFERENCE[6])
    assert isinstance(stray, Reply) and stray.key == "req-1"
    mismatch = codec.unmatched(stray)
    assert isinstance(mismatch, CorrelationMismatch) and "req-1" not in mismatch.message
    with pytest.raises(ProtocolFault, match="expected verified"):
        codec.verify_response(stray.payload)


# -- jsonrpc: the lines the provider runtime writes ---------------------------------------


def _answer(server: ProviderServer, line: bytes) -> bytes:
    reply = asyncio.run(server.handle_line(line))
    assert reply is not None
    return reply


def test_jsonrpc_reads_what_the_provider_runtime_writes() -> None:
    codec = JsonRpcCodec("p")
    server = ProviderServer(HealthyProvider("notes", frames=2))
    handshake = codec.handshake(HOST)
    reply = codec.read(_answer(server, handshake.line))
    assert isinstance(reply, Reply) and reply.key == handshake.key == 1
    assert codec.handshake_ack(reply.payload).provider.name == "notes"

    query = codec.query(ContextQuery(goal="g", max_frames=5, max_tokens=500))
    answer = codec.read(_answer(server, query.line))
    assert isinstance(answer, Reply) and answer.key == query.key == 2
    frames = codec.query_result(answer.payload).frames
    assert len(frames) == 2 and all(isinstance(f, dict) for f in frames)  # raw for the audit

    bad = codec.query({"goal": 5})
    refused = codec.read(_answer(server, bad.line))
    assert isinstance(refused, Refusal) and refused.key == bad.key
    assert isinstance(refused.error, ProviderError)
    assert refused.error.cgp_code is CgpErrorCode.BAD_REQUEST


@pytest.mark.parametrize(
    ("line", "kind", "text"),
    [
        (b'{"jsonrpc":"2.0","id":true,"result":{}}', Reply, "a boolean id"),
        (b'{"jsonrpc":"2.0","id":1.0,"result":{}}', Reply, "a number id"),
        (b'{"jsonrpc":"2.0","id":"7","result":{}}', Reply, "a string id"),
        (b'{"jsonrpc":"2.0","result":{}}', Reply, "reply without an id"),
        (
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}',
            Refusal,
            "error reply without id",
        ),
    ],
)
def test_jsonrpc_ids_other_than_ours_correlate_nothing(line: bytes, kind: type, text: str) -> None:
    codec = JsonRpcCodec("p")
    msg = codec.read(line)
    assert isinstance(msg, kind) and isinstance(msg, Reply | Refusal)
    assert msg.key is None  # H4: true and 1.0 would hash like 1
    assert text in codec.unmatched(msg).message


def test_jsonrpc_notifications_faults_and_error_codes() -> None:
    codec = JsonRpcCodec("p")
    note = codec.read(b'{"jsonrpc":"2.0","method":"context/progress","params":{"state":"ready"}}')
    assert note == Notice("context/progress", {"state": "ready"})
    assert codec.read(b"  ") is None
    assert codec.read(b"") is None and codec.read(b" \t\r\n\x0b\x0c") is None
    assert isinstance(codec.read(b" \x00 "), Fault)  # NUL is not blank
    assert isinstance(codec.read(b"[1,2]"), Fault)
    assert isinstance(codec.read(b'{"half": '), Fault)
    version = codec.read(
        b'{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"m",'
        b'"data":{"cgp_code":"incompatible_version"}}}'
    )
    assert isinstance(version, Refusal) and isinstance(version.error, IncompatibleVersion)
    warming = codec.read(
        b'{"jsonrpc":"2.0","id":4,"error":{"code":-32003,"message":"m",'
        b'"data":{"cgp_code":"unavailable","warming":true}}}'
    )
    assert isinstance(warming, Refusal) and warming.error.data.get("warming") is True
    with pytest.raises(ProtocolFault, match="malformed query result"):
        codec.query_result({"frames": "not a list"})


def test_a_query_result_without_frames_is_malformed_naming_the_members_it_sent() -> None:
    """The schema requires ``frames``: frames under another name are a malformed reply,
    never an answer with no frame. The fault names what the result carried, by name
    only (short tokens, a few), never a value; ``truncated`` absent reads as false."""
    jsonrpc, cgp = JsonRpcCodec("p"), CgpCodec("p")
    with pytest.raises(ProtocolFault) as caught:
        jsonrpc.query_result({"results": [{"id": "SECRET-a"}], "truncated": False})
    assert caught.value.message == (
        "malformed query result: result.frames is missing (members sent: results, truncated)"
    )
    crowd = {f"m{i}": "SECRET" for i in range(10)} | {"SECRET " * 9: 1}
    with pytest.raises(ProtocolFault) as caught:
        jsonrpc.query_result(crowd)
    assert caught.value.message.endswith("(members sent: m0, m1, m2, m3, m4, m5, m6, m7 (+3 more))")
    assert "SECRET" not in caught.value.message
    # The envelope names its request: its result fails that query, in the same words.
    envelope = cgp.read(b'{"type": "frames", "result": {"results": [], "truncated": false}}')
    assert isinstance(envelope, Reply) and envelope.key is UNKEYED
    with pytest.raises(ProtocolFault) as caught:
        cgp.query_result(envelope.payload)
    assert caught.value.message == (
        "malformed query result: result.frames is missing (members sent: results, truncated)"
    )
    assert jsonrpc.query_result({"frames": []}).truncated is False


#: A reply's figures sent as strings or booleans, as recorded from a provider that
#: serialised them by hand: each a JSON number in the schema, refused as the frame's own
#: numbers are (``a string; expected a number``), never read as the number it spells.
_STRING_FIGURES = [
    (b'"dropped_estimate":"3"', "dropped_estimate: a string; expected a number (an integer)"),
    (b'"unindexed_changes":"3"', "unindexed_changes: a string; expected a number (an integer)"),
    (b'"dropped_estimate":true', "dropped_estimate: a boolean; expected a number (an integer)"),
]


@pytest.mark.parametrize(("member", "said"), _STRING_FIGURES)
@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
def test_a_result_figure_sent_as_a_string_is_a_malformed_reply(
    binding: str, member: bytes, said: str
) -> None:
    result = b'{"frames":[],"truncated":true,' + member + b"}"
    if binding == "jsonrpc":
        codec: JsonRpcCodec | CgpCodec = JsonRpcCodec("p")
        line = b'{"jsonrpc":"2.0","id":2,"result":' + result + b"}"
    else:
        codec = CgpCodec("p")
        line = b'{"type":"frames","result":' + result + b"}"
    reply = codec.read(line)
    assert isinstance(reply, Reply)
    with pytest.raises(ProtocolFault) as caught:
        codec.query_result(reply.payload)
    assert caught.value.message == f"malformed query result: result.{said}"


def test_a_result_figure_sent_as_a_json_number_is_read() -> None:
    """JSON has one number type: ``3.0`` is the integer 3, as a frame's token_cost."""
    body = b'{"frames":[],"dropped_estimate":3.0,"unindexed_changes":4}'
    codec = JsonRpcCodec("p")
    reply = codec.read(b'{"jsonrpc":"2.0","id":2,"result":' + body + b"}")
    assert isinstance(reply, Reply)
    result = codec.query_result(reply.payload)
    assert (result.dropped_estimate, result.unindexed_changes) == (3, 4)


_FRAME = (
    b'{"id":"f0","kind":"snippet","title":"A title","content":"abcdefgh","score":0.5,'
    b'"token_cost":2,"citation_label":"a.py L1-2","embedding":{"fingerprint":"bow-1",'
    b'"vector":[0.25,VALUE]}}'
)


@pytest.mark.parametrize(
    ("value", "said"),
    [(b'"0.5"', "a string; expected a number"), (b"true", "a boolean; expected a number")],
)
def test_an_embedding_item_sent_as_a_string_costs_its_frame_as_a_schema_violation(
    value: bytes, said: str
) -> None:
    """The reply is read (one bad frame costs only itself); the frame is refused by the
    fast path and the exact one, naming the item, never what it held."""
    bad = _FRAME.replace(b"VALUE", value)
    line = b'{"jsonrpc":"2.0","id":2,"result":{"frames":[' + bad + b"]}}"
    codec = JsonRpcCodec("p")
    reply = codec.read(line)
    assert isinstance(reply, Reply)
    frames = codec.query_result(reply.payload).frames
    assert accept_frames(frames) is None
    [(got, found)] = parse_frames(frames)
    assert got is None
    assert [(v.rule, v.field, v.message) for v in found] == [("schema", "embedding.vector.1", said)]
    good = orjson.loads(_FRAME.replace(b"VALUE", b"1"))
    [(kept, none)] = parse_frames([good])
    assert kept is not None and none == [] and kept.embedding is not None
    assert kept.embedding.vector == [0.25, 1.0]


# -- the registry ----------------------------------------------------------------------


def test_the_registry_names_each_binding_once_with_its_carrier() -> None:
    assert binding_names()[:3] == ("jsonrpc", "cgp", "mcp")
    assert find_binding("jsonrpc").remote and find_binding("cgp").remote
    mcp = find_binding("mcp")  # the lazy row, completed by the module it names
    assert mcp.carrier == "sdk-session" and not mcp.remote and mcp.session is not None
    with pytest.raises(ValueError, match="binding must be 'jsonrpc', 'cgp' or 'mcp'"):
        find_binding("grpc")


def test_the_registry_says_which_binding_may_be_remote() -> None:
    # Read by config and ProviderSpec alike: an sdk-session binding starts a local child.
    assert binding_problem("cgp", remote=True) is None
    assert "give command, not url" in (binding_problem("mcp", remote=True) or "")
    with pytest.raises(ValueError, match="give command, not url"):
        ProviderSpec("m", url="https://example.com/", binding="mcp")
    with pytest.raises(ValidationError, match="give command, not url"):
        ProviderSettings(id="m", url="https://example.com/", binding="mcp")
