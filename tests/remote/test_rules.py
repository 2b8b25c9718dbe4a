"""The HTTP transport's rules, each against a real loopback server: C7 (TLS verified, no
plaintext off loopback, refused before any byte or lookup), C8 (the credential never
shown; no redirect followed), statuses (401/403 unauthorized, other non-2xx transport,
never the body), wire (not one envelope), the response bound and the leg's deadline."""

from __future__ import annotations

import datetime
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import structlog
import trustme

from hostd.engine import Host, LegStatus, ProviderSpec
from tests.engine._helpers import healthy, query
from tests.remote._servers import (
    TOKEN,
    TlsFiles,
    after_handshake,
    consented,
    fixed_reply,
    make_tls,
    provider_app,
    remote_spec,
    replaying,
    serving,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


async def _leg(tmp_path: Path, spec: ProviderSpec, **host: Any) -> Any:
    async with Host([spec], consent=consented(tmp_path, spec.id), **host) as h:
        fan = await h.query_all(query(), 1000)
        rows = h.providers_list()
    return fan.reports[spec.id], rows


# -- C7 --------------------------------------------------------------------------------


async def test_plaintext_off_loopback_is_refused_before_any_lookup_or_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bypassing config load, the transport refuses again: no DNS, no client, no send."""
    touched: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(*args: Any, **kw: Any) -> Any:
        touched.append(f"getaddrinfo {args[0]}")
        return real_getaddrinfo(*args, **kw)

    async def send(*args: Any, **kw: Any) -> Any:
        touched.append("send")
        raise AssertionError("nothing may be sent")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(httpx.AsyncClient, "send", send)
    spec = ProviderSpec("remote", url="http://provider.example:8080/", timeout_ms=30_000)
    report, _ = await _leg(tmp_path, spec)
    assert report.status is LegStatus.ERROR
    assert report.error_code == "insecure_transport"
    assert "C7" in (report.error_message or "")
    assert touched == []


async def test_plaintext_to_loopback_is_allowed(tmp_path: Path) -> None:
    async with serving(provider_app(), None) as (url, rec):
        assert url.startswith("http://127.0.0.1:")
        report, _ = await _leg(tmp_path, remote_spec(url, None))
    assert report.status is LegStatus.OK
    assert rec.kinds() == ["handshake", "query"]


def _expired(directory: Path) -> TlsFiles:
    ca = trustme.CA()
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = ca.issue_cert("127.0.0.1", not_before=past, not_after=past + datetime.timedelta(1))
    files = TlsFiles(ca, directory / "x-ca.pem", directory / "x-cert.pem", directory / "x-key.pem")
    ca.cert_pem.write_to_path(str(files.ca_file))
    cert.private_key_and_cert_chain_pem.write_to_path(str(files.cert_file))
    cert.private_key_pem.write_to_path(str(files.key_file))
    return files


@pytest.mark.parametrize("trust", ["other_ca", "system_store", "expired"])
async def test_a_certificate_not_verified_is_refused(tmp_path: Path, trust: str) -> None:
    served = _expired(tmp_path) if trust == "expired" else make_tls(tmp_path, "served")
    other = make_tls(tmp_path, "other")
    ca_file = {"other_ca": other.ca_file, "system_store": None, "expired": served.ca_file}[trust]
    async with serving(provider_app(), served) as (url, rec):
        spec = remote_spec(url, None, ca_file=ca_file)
        report, _ = await _leg(tmp_path, spec)
    assert report.status is LegStatus.CRASHED
    assert report.error_code == "certificate"
    assert "CERTIFICATE_VERIFY_FAILED" in (report.error_message or "")
    assert rec.seen == []  # the TLS handshake failed: no request reached the server


# -- C8 and statuses -------------------------------------------------------------------


@pytest.mark.parametrize("given", ["wrong-token-4c1d", None])
async def test_a_refused_credential_is_unauthorized_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str | None
) -> None:
    if given is None:
        monkeypatch.delenv("HOSTD_TEST_REMOTE_TOKEN")
        env: dict[str, Any] = {"token_env": None}
    else:
        monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", given)
        env = {}
    tls = make_tls(tmp_path)
    with structlog.testing.capture_logs() as logs:
        async with serving(provider_app(), tls) as (url, rec):
            report, rows = await _leg(tmp_path, remote_spec(url, tls, **env))
    assert report.status is LegStatus.UNAUTHORIZED
    assert report.error_code == "unauthorized"
    assert "401" in (report.error_message or "")
    shown = repr(report) + repr(logs) + orjson.dumps(rows).decode()
    assert TOKEN not in shown
    if given is not None:
        assert given not in shown
        assert rec.seen[0].headers["authorization"] == f"Bearer {given}"
    else:
        assert "authorization" not in rec.seen[0].headers
    assert rec.kinds() == ["handshake"]


async def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (elsewhere, other):
        location = (b"location", elsewhere.encode())
        app = after_handshake(fixed_reply(307, b"", (location,)))
        async with serving(app, tls) as (url, rec):
            report, _ = await _leg(tmp_path, remote_spec(url, tls))
    assert report.status is LegStatus.CRASHED
    assert report.error_code == "transport"
    assert "HTTP 307" in (report.error_message or "")
    assert other.seen == []  # the payload was never re-POSTed
    assert rec.kinds() == ["handshake", "query"]


async def test_an_error_status_is_transport_with_the_status_never_the_body(
    tmp_path: Path,
) -> None:
    tls = make_tls(tmp_path)
    page = b"<html>Internal error while handling Authorization: Bearer leaked</html>"
    with structlog.testing.capture_logs() as logs:
        async with serving(after_handshake(fixed_reply(500, page)), tls) as (url, _):
            report, _ = await _leg(tmp_path, remote_spec(url, tls))
    assert (report.status, report.error_code) == (LegStatus.CRASHED, "transport")
    assert report.error_message == "HTTP 500"
    assert "leaked" not in repr(logs)


@pytest.mark.parametrize(
    "body",
    [b"not json at all", b'{"jsonrpc":"2.0","id":2,"result":{"frames":[]}}\n{"x":1}', b"[]"],
    ids=["garbage", "two_values", "not_a_response"],
)
async def test_a_body_that_is_not_one_reply_is_wire(tmp_path: Path, body: bytes) -> None:
    tls = make_tls(tmp_path)
    async with serving(after_handshake(fixed_reply(200, body)), tls) as (url, _):
        report, _ = await _leg(tmp_path, remote_spec(url, tls))
    assert (report.status, report.error_code) == (LegStatus.ERROR, "wire")


def _first_query_answered(body: Any) -> Any:
    """The provider app, but its first query is answered with ``body(request id)``."""
    provider = provider_app()
    queries = 0

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal queries
        message = await receive()
        queries += 1
        if queries == 1:
            request_id = orjson.loads(message["body"])["id"]
            await fixed_reply(200, body(request_id))(scope, receive, send)
            return
        await provider(scope, replaying(message, receive), send)

    return after_handshake(app)


def _malformed(request_id: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"results": []}})


@pytest.mark.parametrize(
    ("body", "broke"),
    [(_malformed, False), (lambda _: b"not json at all", True)],
    ids=["malformed_result", "not_json"],
)
async def test_a_malformed_reply_fails_its_leg_alone_a_broken_body_the_connection(
    tmp_path: Path, body: Any, broke: bool
) -> None:
    """A reply to the query whose result has the wrong shape is ``wire`` for its leg,
    and the connection goes on: no failure counted, no new handshake. A body that is
    not a reply at all still counts a failure and handshakes again."""
    tls = make_tls(tmp_path)
    async with serving(_first_query_answered(body), tls) as (url, rec):
        spec = remote_spec(url, tls)
        async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
            first = (await host.query_all(query(), 1000)).reports[spec.id]
            second = (await host.query_all(query(), 1000)).reports[spec.id]
            (row,) = host.providers_list()
    assert (first.status, first.error_code) == (LegStatus.ERROR, "wire")
    assert second.status is LegStatus.OK, second
    if broke:
        assert rec.kinds() == ["handshake", "query", "handshake", "query"]
        assert row["health"]["restarts"] == 1
    else:
        assert first.error_message == (
            "malformed query result: result.frames is missing (members sent: results)"
        )
        assert rec.kinds() == ["handshake", "query", "query"]
        assert row["health"]["restarts"] == 0 and row["health"]["last_failure"] is None


def _huge_reply(declare_length: bool, chunks: int = 2048, size: int = 64 * 1024) -> Any:
    """A valid query reply, ``chunks × size`` bytes of padding, streamed chunk by chunk."""
    head = b'{"jsonrpc":"2.0","id":2,"result":{"frames":[],"truncated":false,"pad":"'
    tail = b'"}}'
    pad = b"x" * size

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = []
        if declare_length:
            total = len(head) + chunks * size + len(tail)
            headers.append((b"content-length", str(total).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": head, "more_body": True})
        for _ in range(chunks):
            await send({"type": "http.response.body", "body": pad, "more_body": True})
        await send({"type": "http.response.body", "body": tail})

    return app


@pytest.mark.parametrize("declare_length", [True, False], ids=["declared", "chunked"])
async def test_a_body_over_the_bound_is_wire(tmp_path: Path, declare_length: bool) -> None:
    tls = make_tls(tmp_path)
    async with serving(after_handshake(_huge_reply(declare_length)), tls) as (url, _):
        report, _ = await _leg(tmp_path, remote_spec(url, tls), max_line_bytes=256 * 1024)
    assert (report.status, report.error_code) == (LegStatus.ERROR, "wire")
    assert "over 262144" in (report.error_message or "")


async def test_a_slow_body_past_the_deadline_times_out_and_the_exchange_is_cancelled(
    tmp_path: Path,
) -> None:
    """The server sends half a reply and waits for the client to leave: only the leg's
    deadline can end the leg, and the server must see the client go."""
    tls = make_tls(tmp_path)
    release = anyio.Event()

    async def stall(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b'{"jsonrpc":', "more_body": True})
        with anyio.move_on_after(60):  # a hang guard; the client's departure ends it
            while (await receive())["type"] != "http.disconnect":
                pass
        await release.wait()

    async with serving(after_handshake(stall), tls) as (url, rec):
        spec = remote_spec(url, tls, timeout_ms=500)
        try:
            async with Host([spec], consent=consented(tmp_path, "remote")) as host:
                report = (await host.query_all(query(), 1000)).reports["remote"]
                # Seen while the host and its pooled client still live: the abandoned
                # exchange itself was closed, not merely the client at the end.
                with anyio.fail_after(30):
                    await rec.disconnected.wait()
        finally:
            release.set()
    assert report.status is LegStatus.TIMEOUT
    assert report.error_code == "timeout"


# -- mutual TLS and crash isolation -----------------------------------------------------


@pytest.mark.parametrize("with_client_cert", [True, False])
async def test_mutual_tls_sends_the_configured_client_certificate(
    tmp_path: Path, with_client_cert: bool
) -> None:
    tls = make_tls(tmp_path)
    clients = trustme.CA()
    me = clients.issue_cert("hostd-client@example.test")
    client_ca, cert, key = tmp_path / "clients.pem", tmp_path / "me.pem", tmp_path / "me.key"
    clients.cert_pem.write_to_path(str(client_ca))
    me.cert_chain_pems[0].write_to_path(str(cert))
    me.private_key_pem.write_to_path(str(key))
    extra: dict[str, Any] = {"client_cert": cert, "client_key": key} if with_client_cert else {}
    async with serving(provider_app(), tls, client_ca=client_ca) as (url, rec):
        report, _ = await _leg(tmp_path, remote_spec(url, tls, **extra))
    if with_client_cert:
        assert report.status is LegStatus.OK, report
        assert rec.kinds() == ["handshake", "query"]
    else:
        assert (report.status, report.error_code) == (LegStatus.CRASHED, "transport")
        assert rec.seen == []


async def test_a_remote_that_cannot_be_reached_costs_only_its_own_leg(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: the connection is refused
    specs = [remote_spec(f"http://127.0.0.1:{port}/", None), healthy("local")]
    async with Host(specs, consent=consented(tmp_path, "remote")) as host:
        fan = await host.query_all(query(), 1000)
    assert fan.reports["local"].status is LegStatus.OK
    assert (fan.reports["remote"].status, fan.reports["remote"].error_code) == (
        LegStatus.CRASHED,
        "transport",
    )
    assert {pid for pid, _ in fan.accepted} == {"local"}
