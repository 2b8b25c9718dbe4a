"""A new binding is one module plus one registry row: this file is both, and its provider.

The ``tuple`` wire (made up here, in no spec) sends each message as one JSON array
per line: ``[op, key, body]`` from the host, ``["ok", key, payload]``,
``["err", key, {code, message}]`` or ``["note", method, params]`` back. Its codec
below is all a binding is; registered at test time, the daemon's engine runs a
fan-out and a verify over it against a real provider child process (this file run
as ``python -m tests.transport.test_new_binding``), and check-provider drives the
same child through the same codec, with no other file touched.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import orjson
import pytest
from pydantic import ValidationError

from hostd.cli._checks import check_provider
from hostd.config import ProviderSettings
from hostd.engine import Host, LegStatus, ProviderSpec
from hostd.errors import (
    CorrelationMismatch,
    HostdError,
    NotSupported,
    ProtocolFault,
    ProviderError,
)
from hostd.protocol import (
    PROTOCOL_VERSION,
    ContextQuery,
    ContextQueryResult,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    RememberRequest,
    RememberResult,
    VerifyResponse,
    WireModel,
    read_cgp_code,
)
from hostd.transport.bindings import (
    BindingRow,
    Fault,
    Message,
    Notice,
    Refusal,
    Reply,
    Request,
    binding_problem,
    query_wire,
    register_binding,
    unregister_binding,
)
from tests.engine._helpers import query
from tests.fixtures.procs import ROOT, marked_env, python

# -- the binding: one codec ------------------------------------------------------------


def _model(model: type[WireModel], payload: Any) -> Any:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ProtocolFault(f"malformed {model.__name__}: {exc.error_count()} error(s)") from None


class TupleCodec:
    """The ``tuple`` wire for one provider: integer keys, every call correlated."""

    name = "tuple"
    correlation = True

    def __init__(self, provider_id: str = "?") -> None:
        self.provider_id = provider_id
        self._ids = itertools.count(1)

    def _request(self, op: str, body: Any) -> Request:
        key = next(self._ids)
        return Request(orjson.dumps([op, key, body]) + b"\n", key, op)

    def handshake(self, host: HostInfo) -> Request:
        return self._request("handshake", {"protocol_version": PROTOCOL_VERSION})

    def query(self, query: ContextQuery | dict[str, Any]) -> Request:
        return self._request("query", query_wire(query))

    def verify(self, frames: list[FrameIdentity]) -> Request:
        return self._request("verify", {"frames": [f.to_wire() for f in frames]})

    def shutdown(self) -> Request:
        return Request(b'["shutdown",null,null]\n', None, "shutdown")

    def _no_writes(self) -> NotSupported:
        return NotSupported(f"provider {self.provider_id!r}: the tuple wire carries no write")

    def remember(self, request: RememberRequest) -> Request:
        raise self._no_writes()

    def forget(self, request: ForgetRequest) -> Request:
        raise self._no_writes()

    def remember_result(self, payload: Any) -> RememberResult:
        raise self._no_writes()

    def forget_result(self, payload: Any) -> ForgetResult:
        raise self._no_writes()

    def read(self, data: bytes) -> Message | None:
        if not data.strip():
            return None
        try:
            msg = orjson.loads(data)
        except orjson.JSONDecodeError:
            return Fault(ProtocolFault(f"not JSON ({len(data)} bytes)"))
        if not (isinstance(msg, list) and len(msg) == 3 and isinstance(msg[0], str)):
            return Fault(ProtocolFault("not a tuple message"))
        tag, raw, body = msg
        if tag == "note" and isinstance(raw, str):
            return Notice(raw, body)
        key = raw if type(raw) is int else None
        if tag == "ok":
            return Reply(key, body, raw)
        if tag == "err":
            code = read_cgp_code(body.get("code") if isinstance(body, dict) else None)
            return Refusal(
                key, ProviderError(f"provider answered {code.value}", cgp_code=code), raw
            )
        return Fault(ProtocolFault("unknown tuple tag"))

    def unmatched(self, message: Reply | Refusal) -> HostdError:
        return CorrelationMismatch("a tuple reply for no request (H4)")

    def handshake_ack(self, payload: Any) -> HandshakeAck:
        ack: HandshakeAck = _model(HandshakeAck, payload)
        return ack

    def query_result(self, payload: Any) -> ContextQueryResult:
        result: ContextQueryResult = _model(ContextQueryResult, payload)
        return result

    def verify_response(self, payload: Any) -> VerifyResponse:
        response: VerifyResponse = _model(VerifyResponse, payload)
        return response


# -- the one registry row, at test time --------------------------------------------------

pytestmark = pytest.mark.anyio


@pytest.fixture
def tuple_binding() -> Iterator[BindingRow]:
    assert binding_problem("tuple") is not None  # unknown until registered
    row = register_binding(BindingRow("tuple", codec=TupleCodec))
    try:
        yield row
    finally:
        unregister_binding("tuple")


COMMAND = python("tests.transport.test_new_binding")


async def test_the_engine_runs_a_fan_out_and_verify_over_a_registered_binding(
    tuple_binding: BindingRow,
) -> None:
    ProviderSettings(id="tup", command=COMMAND, binding="tuple")  # config reads the registry
    spec = ProviderSpec(
        "tup", COMMAND, binding="tuple", env=marked_env(), cwd=str(ROOT), timeout_ms=15_000
    )
    async with Host([spec], start="boot") as host:
        with anyio.fail_after(60):
            first = await host.query_all(query(), 1000, session="s")
            second = await host.query_all(query(), 1000, session="s")
        listed = {p["id"]: p for p in host.providers_list()}
    assert first.reports["tup"].status is LegStatus.OK, first.reports["tup"]
    assert sorted(f.id for _, f in first.accepted) == ["t:0", "t:1", "t:2"]
    assert second.figures["verify_requested"] == 3 and second.figures["reused"] == 3
    assert listed["tup"]["binding"] == "tuple" and listed["tup"]["info"]["name"] == "tuple-notes"


async def test_check_provider_drives_a_registered_binding(tuple_binding: BindingRow) -> None:
    with anyio.fail_after(120):
        checked = await check_provider(
            COMMAND, binding="tuple", cwd=str(ROOT), env=marked_env(), timeout_s=30
        )
    results = checked.results
    assert [(r.name, r.passed) for r in results] == [
        ("handshake", True),
        ("query", True),
        ("budget honesty", True),
        ("kinds filter", True),
        ("malformed input", True),
        ("verify honesty", True),
        ("shutdown", True),
    ], [r.to_wire() for r in results]


async def test_an_unregistered_binding_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="binding must be"):
        ProviderSpec("tup", COMMAND, binding="tuple")


# -- the provider: this file run as a program ---------------------------------------------


def _serve() -> None:
    """An honest provider on the ``tuple`` wire: three doc frames, verify by digest."""
    from hostd.protocol import Capabilities, ProviderInfo, QueryCapability
    from hostd.provider import make_frame

    frames = [
        make_frame(
            id=f"t:{i}",
            kind="doc",
            title=f"note {i}",
            content=f"note {i} " * 4,
            citation_label=f"note {i}",
            score=0.9 - i / 10,
        )
        for i in range(3)
    ]
    served = {f.id: f.content_digest for f in frames}
    ack = HandshakeAck(
        protocol_version=PROTOCOL_VERSION,
        provider=ProviderInfo(name="tuple-notes", version="1"),
        capabilities=Capabilities(query=QueryCapability(kinds=["doc"]), verify=True),
    ).to_wire()

    def answer(op: Any, body: Any) -> Any:
        if op == "handshake":
            return ack
        if op == "query":
            q = ContextQuery.model_validate(body)
            out: list[dict[str, Any]] = []
            spent = 0
            for f in frames if not q.kinds or "doc" in q.kinds else []:
                if len(out) == q.max_frames or spent + f.token_cost > q.max_tokens:
                    break
                out.append(f.to_wire())
                spent += f.token_cost
            return {"frames": out, "truncated": False}
        if op == "verify":
            asked = [FrameIdentity.model_validate(f) for f in body["frames"]]
            verdicts = [
                {
                    "frame": f.to_wire(),
                    "status": "valid"
                    if served.get(f.frame_id) == f.content_digest and f.content_digest
                    else "stale",
                }
                for f in asked
            ]
            return {"verdicts": verdicts}
        raise ValueError(op)

    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            op, key, body = orjson.loads(line)
        except (ValueError, TypeError):
            out.write(b'["err",null,{"code":"bad_request","message":"not a message"}]\n')
            out.flush()
            continue
        if op == "shutdown":
            return
        try:
            reply = ["ok", key, answer(op, body)]
        except (ValueError, TypeError, KeyError):  # pydantic's ValidationError is a ValueError
            reply = ["err", key, {"code": "bad_request", "message": "bad request"}]
        out.write(orjson.dumps(reply) + b"\n")
        out.flush()


if __name__ == "__main__":
    _serve()
