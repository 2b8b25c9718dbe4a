"""A remote provider whose handshake outlives its deadline is told which stage stalled.

Against real loopback servers, each stalling at one stage whatever the deadline: a
socket that takes TCP connections and never speaks TLS (the TLS handshake), a server
that reads the request and never answers (the response head), one that sends a head
and never ends the body (the body). The leg, the health, and a later leg that does not
wait for the next check say it; so does check-provider's handshake row. ``Progress``
itself is fed httpcore's trace events.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd._hints import no_remote_handshake
from hostd.cli._checks import Deadlines, check_remote_provider
from hostd.engine import Host, LegStatus
from hostd.transport.remote._stage import STAGES, Progress
from tests.engine._helpers import query
from tests.remote._servers import (
    TOKEN,
    App,
    Scope,
    consented,
    make_tls,
    remote_spec,
    serving,
    silent,
)

pytestmark = pytest.mark.anyio

_TLS = "stalled in the TLS handshake (ConnectTimeout)"
_HEAD = "stalled waiting for the response head, the request sent (ReadTimeout)"
_BODY = "stalled reading the response body, its head come (ReadTimeout)"
#: What to check, named by the test provider's own keys.
_HINT = no_remote_handshake("[[provider]] 'remote' ")


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


@contextmanager
def _no_tls() -> Iterator[str]:
    """An https url to a socket whose backlog takes TCP connections that nothing reads."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/"


async def _endless_body(scope: Scope, receive: Any, send: Any) -> None:
    """A head, a first chunk, and a body that never ends (until the client leaves)."""
    await receive()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"jsonrpc"', "more_body": True})
    with anyio.move_on_after(60):  # a hang guard; the client's departure ends it
        while (await receive())["type"] != "http.disconnect":
            pass


async def _legs(tmp_path: Path, url: str, ca_file: Path) -> tuple[Any, Any, Any]:
    clock = [100.0]  # the test's health clock: the next check is never due
    spec = remote_spec(url, None, ca_file=ca_file, start_timeout_s=0.5)
    async with Host(
        [spec], consent=consented(tmp_path, spec.id), health_clock=lambda: clock[0]
    ) as host:
        first = (await host.query_all(query(), 1000)).reports[spec.id]
        again = (await host.query_all(query(), 1000)).reports[spec.id]
        health = host.health(spec.id)
    return first, again, health


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(
    ("server", "stalled", "found"),
    [
        ("no tls", _TLS, "in the TLS handshake"),
        ("silent", _HEAD, "waiting for the reply"),
        ("endless body", _BODY, "reading the reply"),
    ],
)
async def test_a_handshake_past_its_deadline_says_which_stage_stalled(
    tmp_path: Path, server: str, stalled: str, found: str
) -> None:
    tls = make_tls(tmp_path)
    if server == "no tls":
        with _no_tls() as url:
            first, again, health = await _legs(tmp_path, url, tls.ca_file)
        # httpcore closes a TCP stream whose TLS handshake failed, not one cancelled in
        # it: collected here, its ResourceWarning is this test's (filtered below), never
        # a later test's.
        gc.collect()
    else:
        app: App = silent if server == "silent" else _endless_body
        async with serving(app, tls) as (url, rec):
            first, again, health = await _legs(tmp_path, url, tls.ca_file)
        assert rec.kinds() == ["handshake"]  # it reached the server
    missed = f"no handshake reply within 500 ms: {stalled}; {_HINT}"
    assert (first.status, first.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert first.error_message == missed
    assert health.last_failure == f"timeout: {missed}"
    assert again.error_message == (
        f"not waited for: its last check timed out {found} (timeout: {missed}); "
        "the next check in 500 ms"
    )


async def test_check_providers_handshake_row_says_which_stage_stalled(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(_endless_body, tls) as (url, _):
        spec = remote_spec(url, tls)
        checked = await check_remote_provider(spec, deadlines=Deadlines.of(0.5, start_s=0.5))
    row = checked.results[0]
    assert (row.name, row.passed) == ("handshake", False)
    assert row.detail == (
        f"no answer within 500 ms (the start_timeout_s asked for): {_BODY}; {_HINT}"
    )


async def test_progress_keeps_the_last_stage_httpcore_began() -> None:
    progress = Progress()
    assert progress.stage == "pool"
    said = []
    for event, stage in [
        ("connection.connect_tcp.started", "connect"),
        ("connection.connect_tcp.complete", "connect"),
        ("connection.start_tls.started", "tls"),
        ("connection.start_tls.complete", "tls"),
        ("http11.send_request_headers.started", "send"),
        ("http11.send_request_body.complete", "send"),
        ("http11.receive_response_headers.started", "head"),
        ("http11.receive_response_body.started", "body"),
        ("http11.response_closed.started", "body"),
    ]:
        await progress.trace(event, {})
        said.append(progress.stage == stage)
    assert all(said) and set(STAGES) == {"pool", "connect", "tls", "send", "head", "body"}
