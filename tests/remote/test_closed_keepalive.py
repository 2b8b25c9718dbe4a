"""A read whose kept-alive connection the peer closed under it is sent once more.

Stock uvicorn closes a connection idle for 5 s, httpx's keep-alive expiry too: a
request that takes such a connection at that moment meets a closed socket. A read (the
handshake, a query, a verify, a rerank) that got no byte of a response is sent again,
once, through the same pool (a new connection, within ``max_connections``); a write is
not; a peer that closes every connection gives one error after that one retry. Against
a real server process (``tests.fixtures.closing_http_server``) that answers a
connection's first request and closes it on its second, unanswered: decided by what the
server says it saw, never by timing.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import h11
import httpx
import pytest
import structlog
from anyio.abc import Process

from hostd.engine import Host, HttpReranker, LegStatus, PoolSettings, ProviderSpec, RerankServer
from hostd.errors import RemoteTransport
from hostd.protocol import HostInfo, RememberRequest
from hostd.transport import RemoteEndpoint
from hostd.transport.remote._httpx import _unanswered
from tests.engine._helpers import query
from tests.fixtures.procs import ROOT
from tests.remote._servers import consented

pytestmark = pytest.mark.anyio

#: What a connection closed unanswered under an http:// url adds.
_PLAIN = "the url is http://: if the server speaks TLS on that port, use https://"


@dataclass
class Peer:
    """The fixture server's port, and the lines it printed (read when it has stopped)."""

    url: str
    said: list[str] = field(default_factory=list)

    @property
    def connections(self) -> int:
        return sum(line.startswith("connection ") for line in self.said)

    @property
    def most_open(self) -> int:
        """The most connections the server had open at once."""
        return max(int(line.split()[1]) for line in self.said if line.startswith("open "))

    def requests(self) -> list[str]:
        return [line for line in self.said if line in ("answered", "dropped", "broken", "cut")]


async def _read_line(process: Process) -> str:
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        line += await process.stdout.receive(1)
    return line.decode().strip()


@contextlib.asynccontextmanager
async def _closing_server(mode: str) -> AsyncIterator[Peer]:
    """``closing_http_server MODE``; once the block ends, what it said it saw."""
    cmd = [sys.executable, "-m", "tests.fixtures.closing_http_server", mode]
    process = await anyio.open_process(
        cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with anyio.fail_after(60):  # hang guard: the line comes once its socket listens
            port = int((await _read_line(process)).split()[1])
        peer = Peer(f"http://127.0.0.1:{port}")
        yield peer
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
    assert process.stdout is not None
    rest = b""
    with anyio.fail_after(60):  # hang guard: it has exited, its stdout ends
        async for chunk in process.stdout:
            rest += chunk
    peer.said = [line for line in rest.decode().splitlines() if line]


async def test_a_query_on_a_connection_the_peer_closed_is_answered_on_a_new_one(
    tmp_path: Path,
) -> None:
    async with _closing_server("reused") as peer:
        # the deadlines are hang guards: no leg here waits on one
        spec = ProviderSpec("remote", url=peer.url, timeout_ms=30_000, start_timeout_s=30.0)
        with structlog.testing.capture_logs() as logs:
            async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
                fan = await host.query_all(query(), 1000)
                (row,) = host.providers_list()
    report = fan.reports[spec.id]
    assert report.status is LegStatus.OK, report
    assert report.frames_offered == 3
    assert row["health"]["consecutive_failures"] == 0
    # The handshake on the first connection; the query on it was dropped, then answered
    # on a second one: two connections, not a loop.
    assert peer.requests() == ["answered", "dropped", "answered"]
    assert peer.connections == 2
    (resent,) = [e for e in logs if e["event"] == "provider.remote.resent"]
    assert (resent["provider"], resent["kind"], resent["error"]) == (
        "remote",
        "query",
        "RemoteProtocolError",
    )


async def test_a_peer_that_closes_every_connection_unanswered_fails_after_one_retry() -> None:
    async with _closing_server("never") as peer:
        endpoint = RemoteEndpoint("remote", peer.url)
        try:
            codec = endpoint.codec
            handshake = codec.handshake(HostInfo(name="t", version="0"))
            with pytest.raises(RemoteTransport) as caught:
                await endpoint.exchange(handshake, codec.handshake_ack)
        finally:
            await endpoint.aclose()
    # A plain-HTTP url: the server may be a TLS one reading the request as a bad handshake.
    assert caught.value.message == (
        f"RemoteProtocolError: the server closed the connection without answering, twice; {_PLAIN}"
    )
    assert (peer.requests(), peer.connections) == (["dropped", "dropped"], 2)


async def test_a_resent_read_waits_for_a_connection_within_max_connections() -> None:
    """With ``max_connections`` 1, a query dropped on the kept-alive connection while
    another query waits for one is sent again through the same bound: the server never
    has two connections open at once, and both queries are answered."""
    async with _closing_server("once") as peer:
        endpoint = RemoteEndpoint("remote", peer.url, max_connections=1)
        codec = endpoint.codec
        results = []

        async def ask() -> None:
            results.append(
                await endpoint.exchange(codec.query(query(max_tokens=1000)), codec.query_result)
            )

        try:
            with structlog.testing.capture_logs() as logs:
                await endpoint.exchange(
                    codec.handshake(HostInfo(name="t", version="0")), codec.handshake_ack
                )
                # Both queries want the one connection: one takes it and is dropped, the
                # other waits in the pool; the dropped one is sent again behind it.
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ask)
                    tg.start_soon(ask)
        finally:
            await endpoint.aclose()
    assert [len(r.frames) for r in results] == [3, 3]
    assert [e["event"] for e in logs if e["event"].startswith("provider.remote.")] == [
        "provider.remote.resent"
    ]
    assert peer.requests() == ["answered", "dropped", "answered", "answered"]
    assert (peer.connections, peer.most_open) == (2, 1)


@pytest.mark.parametrize("mode", ["broken", "cut"])
async def test_a_read_answered_in_part_is_not_sent_again(mode: str) -> None:
    """A head that breaks HTTP/1.1, or a body cut short: the server answered (badly),
    and the query fails on its first try."""
    async with _closing_server(mode) as peer:
        endpoint = RemoteEndpoint("remote", peer.url)
        codec = endpoint.codec
        try:
            with structlog.testing.capture_logs() as logs:
                await endpoint.exchange(
                    codec.handshake(HostInfo(name="t", version="0")), codec.handshake_ack
                )
                with pytest.raises(RemoteTransport) as caught:
                    await endpoint.exchange(codec.query(query(max_tokens=1000)), codec.query_result)
        finally:
            await endpoint.aclose()
    assert caught.value.message == (
        "RemoteProtocolError: the response broke HTTP/1.1 or its encoding"
    )
    assert "provider.remote.resent" not in [e["event"] for e in logs]
    assert (peer.requests(), peer.connections) == (["answered", mode], 1)


def test_a_connection_closed_unanswered_is_told_by_the_errors_not_their_words() -> None:
    """httpx's ``RemoteProtocolError`` with no HTTP parser's error under it is a
    connection that ended before a head came, whatever httpcore's message says; one
    over h11's error is a head that broke HTTP/1.1."""
    try:
        try:
            raise h11.RemoteProtocolError("illegal header line", 400)
        except h11.RemoteProtocolError as parse:
            raise httpx.RemoteProtocolError("illegal header line") from parse
    except httpx.RemoteProtocolError as exc:
        broken = exc
    assert _unanswered(httpx.RemoteProtocolError("the server hung up"))
    assert not _unanswered(broken)
    assert _unanswered(httpx.ReadError("reset")) and _unanswered(httpx.WriteError("pipe"))
    assert not _unanswered(httpx.ReadTimeout("slow"))


async def test_a_write_the_peer_closed_its_connection_under_is_not_sent_again() -> None:
    async with _closing_server("never") as peer:
        endpoint = RemoteEndpoint("remote", peer.url)
        try:
            codec = endpoint.codec
            write = codec.remember(RememberRequest(kind="note", title="t", content="c"))
            with pytest.raises(RemoteTransport) as caught:
                await endpoint.exchange(write, codec.remember_result)
        finally:
            await endpoint.aclose()
    assert caught.value.message == (
        "RemoteProtocolError: the server closed the connection without answering "
        f"(a write is not sent twice); {_PLAIN}"
    )
    assert (peer.requests(), peer.connections) == (["dropped"], 1)


async def test_a_rerank_on_a_connection_the_server_closed_is_answered_on_a_new_one() -> None:
    candidates = [{"key": str(k), "title": f"t{k}", "content": "c"} for k in range(3)]
    async with _closing_server("reused") as peer:
        async with HttpReranker(RerankServer(peer.url), PoolSettings()) as reranker:
            outcomes = [await reranker.rerank("why", candidates, 60.0) for _ in range(2)]
            row = reranker.row()
    assert [(o.reason, o.order) for o in outcomes] == [(None, ("0", "1", "2"))] * 2
    assert row["health"]["consecutive_failures"] == 0
    assert (peer.requests(), peer.connections) == (["answered", "dropped", "answered"], 2)
