"""Loopback HTTPS servers for the remote-provider tests: a CA made in the test (trustme),
uvicorn serving any ASGI app, and a recorder counting what reached the server.

``Recorder`` wraps an app and keeps, per request, its path, headers and body, and the
connections the server accepted (``Connections``: counted in uvicorn's protocol as each
is made and lost, so a connection is counted once however many requests it carries, and
the most open at once is known). Nothing here binds anything but 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import trustme
from uvicorn.protocols.http.h11_impl import H11Protocol

from hostd.engine import ConsentStore, ProviderSpec, consent_destination
from hostd.provider import Provider
from hostd.provider._http import make_app, serve_asgi
from tests.fixtures.healthy_provider import HealthyProvider

TOKEN = "s3cret-token-value-7f3a9c"

Scope = dict[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


@dataclass
class TlsFiles:
    ca: trustme.CA
    ca_file: Path
    cert_file: Path
    key_file: Path


def make_tls(directory: Path, name: str = "server") -> TlsFiles:
    """A fresh CA and a certificate for 127.0.0.1 and localhost signed by it."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_file = directory / f"{name}-ca.pem"
    cert_file = directory / f"{name}-cert.pem"
    key_file = directory / f"{name}-key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    return TlsFiles(ca, ca_file, cert_file, key_file)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def kind(self) -> str:
        """``handshake``, ``query``, ``verify``, … in either binding."""
        try:
            msg = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return "?"
        if not isinstance(msg, dict):
            return "?"
        method = msg.get("method") or msg.get("type") or "?"
        return str(method).removeprefix("context/")


@dataclass
class Connections:
    """The server's connections: how many were opened over the test, how many are open
    now, and the most that were open at once (a TLS connection counts once its
    handshake is done, until uvicorn's protocol hears it lost)."""

    opened: int = 0
    open: int = 0
    most_open: int = 0

    def made(self) -> None:
        self.opened += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)

    def lost(self) -> None:
        self.open -= 1


@dataclass
class Recorder:
    """Wraps an ASGI app; records every request and counts accepted connections."""

    app: App
    seen: list[Seen] = field(default_factory=list)
    connections: Connections = field(default_factory=Connections)
    disconnected: anyio.Event = field(default_factory=anyio.Event)

    def kinds(self) -> list[str]:
        return [s.kind for s in self.seen]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected.set()
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.seen.append(Seen(scope["path"], headers, body))
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected.set()
            return message

        await self.app(scope, replay, send)

    def protocol(self) -> type[H11Protocol]:
        counter = self.connections

        class Counting(H11Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                counter.made()
                # uvicorn narrows the parameter to Transport, which a stream always gets
                super().connection_made(transport)  # type: ignore[arg-type]  # see above

            def connection_lost(self, exc: Exception | None) -> None:
                counter.lost()
                super().connection_lost(exc)

        return Counting


@asynccontextmanager
async def serving(
    app: App, tls: TlsFiles | None, *, client_ca: Path | None = None
) -> AsyncIterator[tuple[str, Recorder]]:
    """Serve ``app`` on 127.0.0.1 (HTTPS with ``tls``); yields its URL and recorder."""
    rec = Recorder(app)
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            lambda task_status: serve_asgi(
                rec,
                host="127.0.0.1",
                certfile=tls.cert_file if tls else None,
                keyfile=tls.key_file if tls else None,
                client_ca=client_ca,
                http=rec.protocol(),
                task_status=task_status,
            )
        )
        try:
            yield url, rec
        finally:
            tg.cancel_scope.cancel()


def provider_app(provider: Provider | None = None, token: str | None = TOKEN) -> App:
    return make_app(provider or HealthyProvider("remote", frames=3), token=token)


def remote_spec(url: str, tls: TlsFiles | None, pid: str = "remote", **kw: Any) -> ProviderSpec:
    kw.setdefault("timeout_ms", 30_000)  # a hang guard; no test times a healthy leg
    kw.setdefault("token_env", "HOSTD_TEST_REMOTE_TOKEN")
    kw.setdefault("ca_file", tls.ca_file if tls else None)
    return ProviderSpec(pid, url=url, **kw)


def consented(directory: Path, *pids: str, url: str | None = None) -> ConsentStore:
    """A ledger granting ``egress`` to each of ``pids``: for the remote provider at ``url``
    (a daemon's ledger names each remote provider's origin), else for a store given to a
    ``Host`` as its gate, which names none."""
    where = {pid: consent_destination(url) for pid in pids} if url else None
    store = ConsentStore(directory, destinations=where)
    for pid in pids:
        store.grant(pid, "egress", "test")
    return store


def fixed_reply(
    status: int, body: bytes = b"", headers: tuple[tuple[bytes, bytes], ...] = ()
) -> App:
    """An ASGI app answering every request with ``status`` and ``body``."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})
        await send({"type": "http.response.body", "body": body})

    return app


async def silent(scope: Scope, receive: Any, send: Any) -> None:
    """An ASGI app that reads every request and answers none: it returns when the client
    leaves (a hang guard bounds the wait), so a handshake sent to it never gets a reply."""
    with anyio.move_on_after(60):  # a hang guard; the client's departure ends it
        while (await receive())["type"] != "http.disconnect":
            pass


def replaying(message: dict[str, Any], receive: Any) -> Callable[[], Awaitable[Any]]:
    """An ASGI ``receive`` that gives ``message`` (read already, to look at it) first,
    then what ``receive`` gives: an app that peeked at a request hands it on whole."""
    replayed = False

    async def again() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return message
        return await receive()

    return again


def after_handshake(rest: App, token: str | None = TOKEN) -> App:
    """The provider app answers the handshake; ``rest`` answers everything after it."""
    provider = provider_app(token=token)

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        message = await receive()
        body = message.get("body", b"")
        is_handshake = b'"context/handshake"' in body or b'"type":"handshake"' in body
        await (provider if is_handshake else rest)(scope, replaying(message, receive), send)

    return app
