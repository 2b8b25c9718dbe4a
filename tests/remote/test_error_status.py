"""An error reply behind an HTTP error status is the provider's answer, not a broken exchange.

A server may send its binding's error reply (a cgp ``error`` envelope, a JSON-RPC
error object for the request's id) with a 4xx or 5xx status. Read by the binding's
own codec, it is the same leg as that reply behind ``200`` (and as the same line
from a child's pipe): an ``error`` leg with the provider's code (``warming`` for a
JSON-RPC ``unavailable`` that says so), no failure counted, no handshake again. A
status whose body is no such reply stays what it was: ``crashed``, ``transport``,
``HTTP <status>``; 401/403 stay a refused credential. A body that is the other
binding's reply names the binding to set. The peer's text is never quoted. Against
the loopback servers of ``_servers`` (uvicorn, a real socket) and ``Host``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from hostd.engine import Host, LegStatus, RestartPolicy
from tests.engine._helpers import query
from tests.remote._servers import (
    TOKEN,
    App,
    after_handshake,
    consented,
    make_tls,
    remote_spec,
    serving,
)

pytestmark = pytest.mark.anyio

#: In every message the server writes; never in anything hostd shows.
SECRET = "peer-words-4c1d7a"
_CGP_HINT = (
    "a provider built with a CGP SDK (contextgraph-sdk) speaks the envelope wire: "
    'set binding = "cgp" (check-provider: --binding cgp)'
)
_JSONRPC_HINT = (
    'the body is a JSON-RPC response: set binding = "jsonrpc" (check-provider: --binding jsonrpc)'
)

#: What a reply is built from: the request the server read (a dict).
Build = Callable[[dict[str, Any]], Any]


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


def error_reply(code: str, *, warming: bool = False, id_: Any = "echo", size: int = 0) -> Build:
    """The error reply of the request's binding, with ``code``; ``id_``: the id it names
    (``"echo"``: the request's own), ``size``: its message padded to that many chars."""

    def build(request: dict[str, Any]) -> Any:
        message = f"it failed for {TOKEN} ({SECRET})".ljust(size, "x")
        named = request.get("id") if id_ == "echo" else id_
        if "jsonrpc" in request:
            data: dict[str, Any] = {"cgp_code": code}
            if warming:
                data["warming"] = True
            error = {"code": -32000, "message": message, "data": data}
            return {"jsonrpc": "2.0", "id": named, "error": error}
        envelope: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if named is not None:
            envelope["id"] = named
        return envelope

    return build


def answering(answer: dict[str, Any]) -> App:
    """The provider app answers the handshake; every later request gets
    ``answer["status"]`` and the body ``answer["build"](request)`` (JSON; bytes as they
    are), both read when the request comes."""

    async def rest(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        request = orjson.loads(message.get("body", b""))
        built = answer["build"](request)
        body = built if isinstance(built, bytes) else orjson.dumps(built)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": answer["status"], "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return after_handshake(rest)


CODES = ["internal", "unavailable", "budget_unsatisfiable", "unsupported_kind", "bad_request"]
STATUSES = [200, 400, 404, 422, 429, 500, 503]


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_an_error_reply_behind_any_error_status_is_the_leg_it_is_behind_200(
    tmp_path: Path, binding: str
) -> None:
    tls = make_tls(tmp_path)
    answer: dict[str, Any] = {}
    cases = [(code, False) for code in CODES]
    if binding == "jsonrpc":
        cases.append(("unavailable", True))  # "not ready yet": a warming leg, never a fault
    seen: dict[tuple[str, bool], dict[int, tuple[Any, ...]]] = {}
    async with serving(answering(answer), tls) as (url, rec):
        spec = remote_spec(url, tls, binding=binding)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            for code, warming in cases:
                for status in STATUSES:
                    answer.update(status=status, build=error_reply(code, warming=warming))
                    report = (await host.query_all(query(), 1000)).reports["remote"]
                    legs = seen.setdefault((code, warming), {})
                    legs[status] = (report.status, report.error_code, report.error_message)
            health = host.health("remote")
    for (code, warming), legs in seen.items():
        behind_200 = legs[200]
        expected = (LegStatus.WARMING, "warming") if warming else (LegStatus.ERROR, code)
        assert behind_200[:2] == expected, (code, behind_200)
        for status, leg in legs.items():
            assert leg == behind_200, (code, status, leg)
            assert TOKEN not in str(leg[2]) and SECRET not in str(leg[2])
            # A server's own failure is in its log: hostd reads no stderr of a remote one.
            assert "stderr" not in str(leg[2]), leg
    said = seen[("internal", False)][200][2]
    assert str(said).endswith("; the server's own log may say why)"), said
    assert (health.consecutive_failures, health.crashes) == (0, 0), health
    assert rec.kinds().count("handshake") == 1  # nothing broke: never handshaken again


async def test_a_correlated_cgp_error_envelope_without_an_id_is_still_its_answer(
    tmp_path: Path,
) -> None:
    """As behind 200: each exchange is its own request, so an envelope naming none
    answers it (a server's ``400 bad_request`` names no id)."""
    tls = make_tls(tmp_path)
    answer = {"status": 400, "build": error_reply("bad_request", id_=None)}
    async with serving(answering(answer), tls) as (url, _):
        spec = remote_spec(url, tls, binding="cgp")
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
            health = host.health("remote")
    assert (report.status, report.error_code) == (LegStatus.ERROR, "bad_request"), report
    assert health.consecutive_failures == 0


def _result(request: dict[str, Any]) -> Any:
    if "jsonrpc" in request:
        return {"jsonrpc": "2.0", "id": request["id"], "result": {"frames": []}}
    return {"type": "frames", "id": request.get("id"), "result": {"frames": []}}


NOT_AN_ERROR_REPLY: dict[str, tuple[str, int, Build]] = {
    "an error page echoing the token": ("cgp", 500, lambda r: f"<h1>{TOKEN}</h1>".encode()),
    "no body": ("jsonrpc", 503, lambda r: b""),
    "a success reply": ("jsonrpc", 500, _result),
    "a success envelope": ("cgp", 429, _result),
    "an error for another id": ("jsonrpc", 500, error_reply("internal", id_=999)),
    "an error for no id": ("jsonrpc", 500, error_reply("internal", id_=None)),
    "an envelope for another id": ("cgp", 502, error_reply("internal", id_="q999")),
    "an error over the body bound": ("cgp", 500, error_reply("internal", size=8000)),
}


@pytest.mark.parametrize("case", sorted(NOT_AN_ERROR_REPLY))
async def test_a_status_without_an_error_reply_is_still_a_transport_failure(
    tmp_path: Path, case: str
) -> None:
    binding, status, build = NOT_AN_ERROR_REPLY[case]
    tls = make_tls(tmp_path)
    answer = {"status": status, "build": build}
    async with serving(answering(answer), tls) as (url, _):
        spec = remote_spec(url, tls, binding=binding)
        consent = consented(tmp_path, "remote")
        async with Host([spec], consent=consent, max_line_bytes=4096) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
            health = host.health("remote")
    assert report.status is LegStatus.CRASHED, report
    assert (report.error_code, report.error_message) == ("transport", f"HTTP {status}")
    assert health.consecutive_failures == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refusal_with_an_error_envelope_is_still_a_refused_credential(
    tmp_path: Path, status: int
) -> None:
    tls = make_tls(tmp_path)
    answer = {"status": status, "build": error_reply("internal")}
    policy = RestartPolicy(retry_failed_after_s=3600)
    async with serving(answering(answer), tls) as (url, _):
        spec = remote_spec(url, tls, binding="cgp")
        consent = consented(tmp_path, "remote")
        async with Host([spec], consent=consent, restart_policy=policy) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
            health = host.health("remote")
    assert report.status is LegStatus.UNAUTHORIZED, report
    assert report.error_message is not None
    assert report.error_message.startswith(
        f"remote provider refused the credential (HTTP {status})"
    )
    assert health.refused and health.consecutive_failures == 0


OTHER_BINDING: dict[str, tuple[str, int, Build, LegStatus, str, str]] = {
    # binding, status, reply, leg status, code, what the message starts with
    "a frames envelope under jsonrpc": (
        "jsonrpc", 200, _result, LegStatus.ERROR, "wire", "reply without an id (H4)"
    ),
    "an error envelope under jsonrpc": (
        "jsonrpc", 200, error_reply("internal"), LegStatus.ERROR, "wire", "response body ("
    ),
    "an empty 2xx body under jsonrpc": (
        "jsonrpc", 200, lambda r: b"", LegStatus.ERROR, "wire", "empty response body"
    ),
    "a JSON-RPC reply under cgp": (
        "cgp", 200, _result, LegStatus.ERROR, "wire", "response body ("
    ),
    "a bad_request envelope behind 400 under jsonrpc": (
        "jsonrpc", 400, error_reply("bad_request"), LegStatus.CRASHED, "transport", "HTTP 400; "
    ),
    "a JSON-RPC error behind 500 under cgp": (
        "cgp", 500, error_reply("internal"), LegStatus.CRASHED, "transport", "HTTP 500; "
    ),
}  # fmt: skip


def _other(request: dict[str, Any], build: Build) -> Any:
    """``build``'s reply in the other binding's shape: a JSON-RPC request read as an
    envelope's (no ``jsonrpc``), an envelope as a JSON-RPC request's."""
    if "jsonrpc" in request:
        return build({"type": "query"})
    return build({"jsonrpc": "2.0", "id": 1, "method": "context/query"})


@pytest.mark.parametrize("case", sorted(OTHER_BINDING))
async def test_the_other_bindings_reply_names_the_binding_to_set(tmp_path: Path, case: str) -> None:
    binding, status, build, leg_status, code, starts = OTHER_BINDING[case]
    tls = make_tls(tmp_path)
    answer = {"status": status, "build": lambda r: _other(r, build)}
    async with serving(answering(answer), tls) as (url, _):
        spec = remote_spec(url, tls, binding=binding)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
    hint = _CGP_HINT if binding == "jsonrpc" else _JSONRPC_HINT
    message = report.error_message or ""
    assert (report.status, report.error_code) == (leg_status, code), report
    assert message.startswith(starts) and message.endswith(f"; {hint}"), message
    assert "\n" not in message and TOKEN not in message and SECRET not in message


async def test_a_connection_never_made_says_where_and_what_to_check(tmp_path: Path) -> None:
    """Nothing listening, or a plain-HTTP server behind an https url: the leg names the
    host and port and the likely cause, not the HTTP library's bare words."""
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tls = make_tls(tmp_path)
    consent = consented(tmp_path, "remote")
    async with serving(answering({"status": 200, "build": _result}), None) as (plain, _):
        specs = [
            remote_spec(f"https://127.0.0.1:{port}/cgp", tls),
            remote_spec(plain.replace("http://", "https://"), tls, pid="plain"),
        ]
        consent.grant("plain", "egress", "test")
        async with Host(specs, consent=consent) as host:
            reports = (await host.query_all(query(), 1000)).reports
    refused, plain_http = reports["remote"], reports["plain"]
    assert refused.status is LegStatus.CRASHED
    assert refused.error_message == (
        f"ConnectError: connection refused at 127.0.0.1:{port}: "
        "is the server running, on that port?"
    )
    where = plain.removeprefix("http://").split("/")[0]
    assert plain_http.error_message == (
        f"ConnectError: the server at {where} does not speak TLS (a plain-HTTP port?)"
    )
