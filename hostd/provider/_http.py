"""Serving a ``Provider`` over HTTPS: the provider side of a remote provider (docs/remote.md).

One POST endpoint, one request per body, one reply per response, in either
binding: a JSON-RPC 2.0 request (protocol.md §1, answered by the same
``ProviderServer`` that serves stdio) or one CGP envelope (the spec's HTTP
binding; translated to the same methods, so both bindings answer alike). A token,
when given, is required as ``Authorization: Bearer`` (compared in constant time;
a missing or wrong one is ``401`` with no body); a body over ``max_body_bytes`` is
``413``, read incrementally. Plaintext is refused unless the listener is loopback
(C7's mirror on this side). On starlette (routing, request streaming) under
uvicorn (TLS, keep-alive); the access log is off so no request line or header is
ever written (C8). Idle peers are bounded (``_listener_guard``): a connection that
has not sent a complete request head within ``request_timeout_s`` is closed (before
any token is checked), a body must follow within the same bound (else ``408``), at
most ``max_connections`` are open (a newcomer past the cap takes the place of the
one idle longest), and a failed ``accept`` for want of descriptors is one log line
per interval. This module uses only the runtime (``_runtime``), ``hostd.protocol``
and ``hostd.provider._listener_guard`` (which imports nothing of hostd); starlette and
uvicorn load only when it is imported.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import socket
import ssl
import sys
from typing import Any

import anyio
import anyio.abc
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from hostd.protocol import DEFAULT_MAX_LINE_BYTES, is_loopback_host

from ._listener_guard import (
    ConnectionGuard,
    GuardedSocket,
    guarded_protocol,
    install_exhaustion_handler,
)
from ._runtime import Provider, ProviderServer

__all__ = ["make_app", "run_http", "serve_asgi", "serve_http"]

_JSON = "application/json"
_HOST = {"name": "cgp-http-host", "version": "0"}

#: Seconds a connection has to deliver a complete request head (and then its body).
DEFAULT_REQUEST_TIMEOUT_S = 10.0


async def _jsonrpc(server: ProviderServer, method: str, params: Any) -> dict[str, Any]:
    line = orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1})
    reply = await server.handle_line(line)
    out = orjson.loads(reply) if reply is not None else None
    return out if isinstance(out, dict) else {}


async def _envelope(server: ProviderServer, env: dict[str, Any]) -> dict[str, Any] | None:
    """One CGP envelope's reply (``None``: nothing to answer, e.g. ``shutdown``)."""
    kind = env.get("type")
    if kind == "handshake":
        params = {"protocol_version": env.get("protocol_version"), "host": _HOST}
        reply = await _jsonrpc(server, "context/handshake", params)
        if "result" in reply:
            return {"type": "handshake_ack", **reply["result"]}
    elif kind == "query":
        reply = await _jsonrpc(server, "context/query", {"query": env.get("query")})
        if "result" in reply:
            out = {"type": "frames", "result": reply["result"]}
            return {**out, "id": env["id"]} if env.get("id") is not None else out
    elif kind == "verify":
        reply = await _jsonrpc(server, "context/verify", env.get("request") or {})
        if "result" in reply:
            return {"type": "verified", "response": reply["result"]}
    elif kind == "shutdown":
        return None  # ends this exchange only: the server keeps serving other hosts
    else:
        return {"type": "error", "code": "bad_request", "message": f"unknown type {kind!r}"}
    error = reply.get("error")
    error = error if isinstance(error, dict) else {}
    data = error.get("data")
    code = data.get("cgp_code") if isinstance(data, dict) else None
    out = {"type": "error", "message": str(error.get("message") or "error")}
    out["code"] = str(code or "internal")
    if kind == "query" and env.get("id") is not None:
        out["id"] = env["id"]
    return out


def make_app(
    provider: Provider,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_LINE_BYTES,
    body_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
) -> Starlette:
    """The ASGI app: POST one request to any path, get one reply; a body that does not
    arrive within ``body_timeout_s`` is ``408``."""
    server = ProviderServer(provider)
    expected = f"Bearer {token}".encode() if token else None

    async def endpoint(request: Request) -> Response:
        if expected is not None:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return Response(status_code=401, headers={"www-authenticate": "Bearer"})
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(body_timeout_s) as waited:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body_bytes:
                    return Response(status_code=413)
                chunks.append(chunk)
        if waited.cancelled_caught:  # a body trickled in, or never sent
            return Response(status_code=408, headers={"connection": "close"})
        body = b"".join(chunks)
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            message = None
        if isinstance(message, dict) and "type" in message and "jsonrpc" not in message:
            reply = await _envelope(server, message)
            if reply is None:
                return Response(status_code=204)
            return Response(orjson.dumps(reply), media_type=_JSON)
        # JSON-RPC, or garbage: the dispatcher answers a parse or invalid-request error.
        line = await server.handle_line(body)
        if line is None:
            return Response(status_code=204)  # a notification (context/shutdown)
        return Response(line, media_type=_JSON)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["POST"])])


async def serve_http(
    provider: Provider,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    certfile: str | os.PathLike[str] | None = None,
    keyfile: str | os.PathLike[str] | None = None,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_LINE_BYTES,
    client_ca: str | os.PathLike[str] | None = None,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    max_connections: int | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``provider`` until cancelled; ``task_status.started`` gets the URL."""
    app = make_app(
        provider, token=token, max_body_bytes=max_body_bytes, body_timeout_s=request_timeout_s
    )
    await serve_asgi(
        app,
        host=host,
        port=port,
        certfile=certfile,
        keyfile=keyfile,
        client_ca=client_ca,
        request_timeout_s=request_timeout_s,
        max_connections=max_connections,
        task_status=task_status,
    )


async def serve_asgi(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    certfile: str | os.PathLike[str] | None = None,
    keyfile: str | os.PathLike[str] | None = None,
    client_ca: str | os.PathLike[str] | None = None,
    http: type[H11Protocol] = H11Protocol,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    max_connections: int | None = None,
    exhaustion_log_interval_s: float = 60.0,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve any ASGI ``app`` on uvicorn until cancelled; ``task_status.started`` gets the
    URL with the real port (``port=0``: any free one). ``client_ca``: mutual TLS, a client
    certificate signed by it is required. ``http``: uvicorn's h11 protocol or a subclass.
    ``request_timeout_s``, ``max_connections`` (default: below the descriptor limit) and
    ``exhaustion_log_interval_s`` bound idle peers (``_listener_guard``)."""
    if certfile is None and not is_loopback_host(host):
        raise ValueError(f"plaintext HTTP on {host!r} is not loopback: give certfile and keyfile")
    if (certfile is None) != (keyfile is None):
        raise ValueError("certfile and keyfile go together")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    guard = ConnectionGuard(max_connections=max_connections, request_timeout_s=request_timeout_s)
    sock = GuardedSocket.listen_on(family, host.strip("[]"), port, guard)
    config = uvicorn.Config(
        app,
        ssl_certfile=str(certfile) if certfile is not None else None,
        ssl_keyfile=str(keyfile) if keyfile is not None else None,
        ssl_ca_certs=str(client_ca) if client_ca is not None else None,
        ssl_cert_reqs=ssl.CERT_REQUIRED if client_ca is not None else ssl.CERT_NONE,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http=guarded_protocol(http, guard),
        timeout_graceful_shutdown=5,
        # A kept-alive connection idles no longer than a new one may wait for its request.
        timeout_keep_alive=max(1, round(request_timeout_s)),
    )
    server = uvicorn.Server(config)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    url = f"{'https' if certfile is not None else 'http'}://{shown}:{bound}/"

    async def run() -> None:
        # Shielded: a cancelled caller stops the server by uvicorn's own graceful path
        # (listener closed, idle keep-alives closed, in-flight requests given a bound).
        with anyio.CancelScope(shield=True):
            await server.serve([sock])

    restore = install_exhaustion_handler(asyncio.get_running_loop(), exhaustion_log_interval_s)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            tg.start_soon(guard.run_sweeps)
            # The socket already listens: a client's connect waits in its backlog.
            task_status.started(url)
            try:
                await anyio.sleep_forever()
            finally:
                server.should_exit = True
                tg.cancel_scope.cancel()  # the sweeps; the server's run is shielded
    finally:
        restore()
        sock.close()


def run_http(
    provider: Provider,
    host: str = "127.0.0.1",
    port: int = 0,
    certfile: str | os.PathLike[str] | None = None,
    keyfile: str | os.PathLike[str] | None = None,
    token: str | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_LINE_BYTES,
    client_ca: str | os.PathLike[str] | None = None,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    max_connections: int | None = None,
) -> None:
    """Serve ``provider`` over HTTPS until interrupted; the URL goes to stderr once bound."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            url = await tg.start(
                lambda task_status: serve_http(
                    provider,
                    host=host,
                    port=port,
                    certfile=certfile,
                    keyfile=keyfile,
                    token=token,
                    max_body_bytes=max_body_bytes,
                    client_ca=client_ca,
                    request_timeout_s=request_timeout_s,
                    max_connections=max_connections,
                    task_status=task_status,
                )
            )
            print(f"serving {url}", file=sys.stderr, flush=True)

    try:
        anyio.run(main, backend="asyncio")
    except KeyboardInterrupt:
        pass
