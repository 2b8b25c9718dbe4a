"""A client rebuilt after a certificate failure leaves the requests still on the old one.

After a certificate that failed verification, the next request reads the TLS files
again into a new client (a ``ca_file`` fixed in place is taken with no restart). A
request already out on the old client, on a connection made under the trust that
held, ends as it would have: the old client is closed once its last request ends,
not under it (a read whose response had begun would fail; a write would be lost).
Against real loopback HTTPS servers behind a relay that sends the
second connection to a server whose certificate no configured CA signed; the held
request is released by the test, after the rebuild: decided by events, never by time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream, SocketAttribute, SocketStream

from hostd.errors import HostdError, RemoteCertificate
from hostd.transport import RemoteEndpoint
from tests.remote._servers import Scope, fixed_reply, make_tls, serving

pytestmark = pytest.mark.anyio


async def _pipe(source: ByteStream, sink: SocketStream) -> None:
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        async for chunk in source:
            await sink.send(chunk)
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await sink.send_eof()


@asynccontextmanager
async def _relay(ports: list[int]) -> AsyncIterator[int]:
    """A TCP relay on 127.0.0.1: its n-th connection goes to ``ports[n]`` (the last port
    for every later one). Yields its own port."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    accepted = 0

    async def relay(client: SocketStream) -> None:
        nonlocal accepted
        port = ports[min(accepted, len(ports) - 1)]
        accepted += 1
        async with client, await anyio.connect_tcp("127.0.0.1", port) as server:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pipe, client, server)
                tg.start_soon(_pipe, server, client)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, relay)
        yield listener.extra(SocketAttribute.local_port)
        tg.cancel_scope.cancel()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def test_a_request_in_flight_ends_on_its_client_when_the_trust_is_read_again(
    tmp_path: Path,
) -> None:
    served, other = make_tls(tmp_path, "served"), make_tls(tmp_path, "other")
    arrived, release = anyio.Event(), anyio.Event()

    async def held(scope: Scope, receive: Any, send: Any) -> None:
        body = (await receive()).get("body", b"")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if body == b"held":  # its head and half its body now, the rest once the test lets it
            await send({"type": "http.response.body", "body": b"answer ", "more_body": True})
            arrived.set()
            await release.wait()
            await send({"type": "http.response.body", "body": b"to held"})
            return
        await send({"type": "http.response.body", "body": b"answer to " + body})

    outcome: list[bytes | HostdError] = []
    with anyio.fail_after(60):  # a hang guard
        async with (
            serving(held, served) as (good, rec_good),
            serving(fixed_reply(200, b"never trusted"), other) as (bad, rec_bad),
            _relay([_port(good), _port(bad), _port(good)]) as port,
        ):
            endpoint = RemoteEndpoint(
                "remote", f"https://127.0.0.1:{port}", ca_file=served.ca_file, max_connections=4
            )
            try:
                async with anyio.create_task_group() as tg:

                    async def ask_held() -> None:
                        try:
                            outcome.append(await endpoint.post(b"held"))
                        except HostdError as exc:
                            outcome.append(exc)

                    tg.start_soon(ask_held)
                    # Its head came, on the first client's first connection: its body is
                    # read on that connection, never sent again.
                    await arrived.wait()
                    # The second connection meets a certificate no CA in ca_file signed.
                    with pytest.raises(RemoteCertificate):
                        await endpoint.post(b"second")
                    # The next request rebuilds the client (the TLS files read again) and
                    # is answered on a connection of its own.
                    third = await endpoint.post(b"third")
                    retiring = repr(endpoint.client)
                    release.set()
                after = repr(endpoint.client)
            finally:
                await endpoint.aclose()
    assert rec_bad.seen == []  # its TLS handshake failed: nothing reached that server
    assert third == b"answer to third"
    # The request held across the rebuild got its answer: its client was not closed
    # under it, only once it ended.
    assert outcome == [b"answer to held"]
    assert [seen.body for seen in rec_good.seen] == [b"held", b"third"]
    assert "retiring=1" in retiring
    assert "retiring=0" in after
