"""A response body read through the binding's codec, fed recorded bytes (no I/O).

``error_reply``: the typed error of a body that is one error reply to the request,
else ``None`` (what a non-2xx status is read with). ``other_binding``: the binding to
set when a body is the other binding's reply (or empty under ``jsonrpc``).
``read_reply``: the messages a 2xx body fails with carry that hint. The peer's text
is never in a message.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.errors import HostdError, ProviderError, RemoteWire
from hostd.protocol import CgpErrorCode, ContextQuery
from hostd.transport.bindings import CgpCodec, JsonRpcCodec
from hostd.transport.remote._body import error_reply, other_binding, read_reply

SECRET = "SECRET-77a0"
QUERY = ContextQuery(goal="g", max_frames=3, max_tokens=100)
CGP_HINT = (
    "a provider built with a CGP SDK (contextgraph-sdk) speaks the envelope wire: "
    'set binding = "cgp" (check-provider: --binding cgp)'
)
JSONRPC_HINT = (
    'the body is a JSON-RPC response: set binding = "jsonrpc" (check-provider: --binding jsonrpc)'
)
JSONRPC_EMPTY_HINT = (
    "an empty body is a JSON-RPC server's answer to what it reads as a notification: "
    'set binding = "jsonrpc" (check-provider: --binding jsonrpc)'
)


#: A CGP SDK's handshake reply (its envelope, whole).
ACK = orjson.dumps(
    {
        "type": "handshake_ack",
        "protocol_version": "contextgraph/1.0-draft",
        "provider": {
            "name": "sdk-docs",
            "version": "0.1.0",
            "data_flow": {"reads": True, "writes": False, "egress": False},
        },
        "capabilities": {"query": {"kinds": ["doc"]}},
    }
)


def _jsonrpc_error(id_: object, code: str = "unavailable") -> bytes:
    error = {"code": -32000, "message": SECRET, "data": {"cgp_code": code}}
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": error})


def _envelope(**members: object) -> bytes:
    return orjson.dumps({"type": "error", "message": SECRET, **members})


def test_a_jsonrpc_error_for_the_requests_id_is_its_error() -> None:
    codec = JsonRpcCodec("p")
    request = codec.query(QUERY)
    error = error_reply(codec, request, _jsonrpc_error(request.key) + b"\n")
    assert isinstance(error, ProviderError) and error.cgp_code is CgpErrorCode.UNAVAILABLE
    assert SECRET not in error.message


@pytest.mark.parametrize("id_", [None, 999, "1", True])
def test_a_jsonrpc_error_for_another_id_is_none(id_: object) -> None:
    codec = JsonRpcCodec("p")
    request = codec.query(QUERY)
    assert error_reply(codec, request, _jsonrpc_error(id_)) is None


@pytest.mark.parametrize(
    ("correlation", "members", "answers"),
    [
        (False, {"code": "internal"}, True),
        (True, {"code": "internal"}, True),  # no id: each exchange is its own request
        (True, {"code": "internal", "id": "q1"}, True),
        (True, {"code": "internal", "id": "q9"}, False),  # another request's (H4)
    ],
)
def test_a_cgp_error_envelope_is_its_error_unless_it_names_another_request(
    correlation: bool, members: dict[str, object], answers: bool
) -> None:
    codec = CgpCodec("p")
    codec.correlation = correlation
    request = codec.query(QUERY)
    error = error_reply(codec, request, _envelope(**members))
    assert (error is not None) is answers
    if error is not None:
        assert isinstance(error, ProviderError) and error.cgp_code is CgpErrorCode.INTERNAL


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\n",
        b"<html>" + SECRET.encode() + b"</html>",
        b'{"jsonrpc": "2.0", "id": 1, "result": {}}',
        b'{"type": "frames", "result": {"frames": []}}',
        b"[1, 2]",
    ],
)
def test_anything_but_an_error_reply_is_none(body: bytes) -> None:
    for codec in (JsonRpcCodec("p"), CgpCodec("p")):
        assert error_reply(codec, codec.query(QUERY), body) is None


@pytest.mark.parametrize(
    ("binding", "body", "hint"),
    [
        ("jsonrpc", b"", CGP_HINT),
        ("jsonrpc", b"\n", CGP_HINT),
        ("jsonrpc", b'{"type": "frames", "result": {"frames": []}}', CGP_HINT),
        ("jsonrpc", b'{"type": "error", "code": "internal", "message": "m"}', CGP_HINT),
        ("jsonrpc", b'{"jsonrpc": "2.0", "id": 1, "result": {}}', None),
        ("jsonrpc", b"<html>oops</html>", None),
        ("cgp", b'{"jsonrpc": "2.0", "id": 1, "result": {}}', JSONRPC_HINT),
        ("cgp", _jsonrpc_error(1), JSONRPC_HINT),
        ("cgp", b'{"type": "frames", "result": {"frames": []}}', None),  # its own reply
        ("cgp", b"", JSONRPC_EMPTY_HINT),
        ("cgp", b"<html>oops</html>", None),
    ],
)
def test_the_other_bindings_reply_names_the_binding_to_set(
    binding: str, body: bytes, hint: str | None
) -> None:
    codec = JsonRpcCodec("p") if binding == "jsonrpc" else CgpCodec("p")
    assert other_binding(codec, body) == hint


@pytest.mark.parametrize(
    ("binding", "body", "starts"),
    [
        ("jsonrpc", b"", "empty response body where a reply was expected; "),
        ("jsonrpc", ACK, "response body ("),
        ("jsonrpc", b'{"type": "frames", "result": {"frames": []}}', "reply without an id"),
        ("cgp", b'{"jsonrpc": "2.0", "id": 1, "result": {}}', "response body (41 bytes"),
    ],
)
def test_a_2xx_body_of_the_other_binding_fails_naming_the_binding(
    binding: str, body: bytes, starts: str
) -> None:
    codec = JsonRpcCodec("p") if binding == "jsonrpc" else CgpCodec("p")
    with pytest.raises(RemoteWire) as caught:
        read_reply(codec, codec.query(QUERY), body)
    message = caught.value.message
    hint = CGP_HINT if binding == "jsonrpc" else JSONRPC_HINT
    assert message.startswith(starts) and message.endswith(f"; {hint}"), message
    assert "\n" not in message


@given(st.binary(max_size=200) | st.from_regex(rb'\A\{"(type|jsonrpc|id|error)".{0,80}\}\Z'))
def test_no_body_raises_or_is_quoted_where_an_error_status_is_read(body: bytes) -> None:
    for codec in (JsonRpcCodec("p"), CgpCodec("p")):
        error = error_reply(codec, codec.query(QUERY), body)
        assert error is None or isinstance(error, HostdError)
        assert other_binding(codec, body) in (None, CGP_HINT, JSONRPC_HINT, JSONRPC_EMPTY_HINT)
