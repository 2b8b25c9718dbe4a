"""httpx at the edge: one remote provider's pooled client, and its errors in hostd's words.

Imported by the first ``RemoteEndpoint`` built (``_http``), not with the transport:
a daemon or a command with no remote provider, nor an HTTP reranker, never loads
httpx. ``HttpPool`` holds one ``httpx.AsyncClient`` to one URL: verification
always on (C7; ``ca_file`` replaces the system's CAs), redirects never followed,
proxies and ``.netrc`` from the environment not used (``trust_env=False``), a
bound on the connections open; every httpx error leaves it as ``RemoteTransport``
saying what to check, never quoting the peer's bytes. A read sent on a kept-alive
connection the peer had just closed (``exchange(retry=...)``) is sent once more, through
the same pool and its bound, when the connection ended before a whole response head
came (``_unanswered``). A certificate that failed verification (``RemoteCertificate``)
has the TLS files read again, into a new client, by the next request (``exchange``): a
``ca_file`` fixed in place is used by the next check, with no restart. A request still
out on the old client (its response's body being read, a write) ends on it: the old
client is closed once its last request ends (``_Client``), never under one.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import h11
import httpx

from hostd._hints import FLAGS, key_named
from hostd.errors import RemoteCertificate, RemoteTransport, RemoteWire

from ._stage import Progress

__all__ = ["HttpPool"]

_MAX_ERROR_TEXT = 200
#: Seconds a kept-alive connection may idle before the pool closes it; a later request
#: opens another. httpx's default, named so docs/remote.md can say it: the cap is on
#: connections open at once, not on how many are opened over a daemon's life.
KEEPALIVE_EXPIRY_S = 5.0

X = TypeVar("X", bound=BaseException)


def _tls_context(
    ca_file: str | Path | None,
    client_cert: str | Path | None,
    client_key: str | Path | None,
    section: str = "",
) -> ssl.SSLContext:
    """Verification always on (C7); ``ca_file`` replaces the system's CAs, it never adds
    a way around them. ``client_cert``/``client_key``: mutual TLS. ``section``: what the
    keys are named after (``[reranker] ``; ``FLAGS``: the flags that give them), when not
    a provider's own section (``key_named``).

    A file that cannot be loaded (missing, unreadable, holding no certificate) is
    ``RemoteCertificate`` naming the key, the file and the problem: a config error no
    check cures until the file is fixed, parked as a certificate that failed
    verification is, never checked again every few seconds as a server not reached."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    except (OSError, ssl.SSLError) as exc:
        ca = key_named(section, "ca_file")
        raise RemoteCertificate(_tls_file_text(f"{ca} {ca_file}", exc)) from exc
    if client_cert is not None:
        try:
            ctx.load_cert_chain(str(client_cert), str(client_key) if client_key else None)
        except (OSError, ssl.SSLError) as exc:
            files = f"{key_named(section, 'client_cert')} {client_cert}"
            if client_key:
                files += f" ({key_named(section, 'client_key')} {client_key})"
            raise RemoteCertificate(_tls_file_text(files, exc)) from exc
    return ctx


def _tls_file_text(files: str, exc: OSError) -> str:
    """``cannot load ca_file PATH: No such file or directory``: the OS's words for a file
    that cannot be read, OpenSSL's reason for one it cannot parse."""
    problem = (exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else exc.strerror) or str(
        exc
    )
    return f"cannot load {files}: {problem}"[:_MAX_ERROR_TEXT]


#: OpenSSL's verify codes for a chain no trusted CA signed (x509_vfy.h: unable to get
#: the issuer's certificate, self-signed leaf or chain, unable to verify the leaf):
#: what ``ca_file`` cures. An expired certificate or another host's is not.
_UNKNOWN_ISSUER = frozenset({2, 18, 19, 20, 21})
#: X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH.
_OTHER_HOST = frozenset({62, 64})
#: Enough of OpenSSL's reason ("unable to get local issuer certificate").
_MAX_REASON = 120


def _verify_failure(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error under an httpx error (httpx wraps httpcore's,
    which chains OpenSSL's), or ``None``."""
    return _chained(exc, ssl.SSLCertVerificationError)


def _certificate_text(
    failure: ssl.SSLCertVerificationError, ca_file: str | Path | None, section: str = ""
) -> str:
    """The server's certificate failed verification: why (OpenSSL's reason, which names
    nothing the peer wrote), and the config key that cures it when one does (named after
    ``section``, ``[reranker] ``, when it is not a provider's own; ``FLAGS``: the flag,
    ``--ca-file PATH``, for a provider given by flags)."""
    reason = (failure.verify_message or failure.reason or "verify failed")[:_MAX_REASON]
    why = f"({reason}; CERTIFICATE_VERIFY_FAILED)"
    if failure.verify_code in _UNKNOWN_ISSUER:
        ca = key_named(section, "ca_file")
        if ca_file is None and section == FLAGS:
            return f"certificate not trusted {why}: give the CA that signed it with {ca} PATH"
        if ca_file is None:
            return f"certificate not trusted {why}: set {ca} to the CA that signed it"
        return f"certificate not trusted {why}: the CA that signed it is not in {ca} {ca_file}"
    if failure.verify_code in _OTHER_HOST:
        return f"certificate rejected {why}: it does not name the url's host"
    return f"certificate rejected {why}"


def _unanswered(exc: httpx.HTTPError) -> bool:
    """Whether ``exc`` is a connection that ended under a request before a response's
    head came: the peer closed it (a ``RemoteProtocolError`` that no HTTP parser raised:
    h11 read no head to reject), or the socket failed sending the request or reading
    the response's first bytes (``WriteError``, ``ReadError``). What a server closing an
    idle kept-alive connection (uvicorn's 5 s, httpx's ``KEEPALIVE_EXPIRY_S`` too) does
    to a request that took that connection at that moment. Never a head that broke
    HTTP/1.1 (h11's error under httpx's: the peer answered, wrongly), a timeout (the
    caller's deadline bounds a request, and none is set here), a refused connection,
    TLS, or a status: those say something about the peer that asking again would not
    change. The send returns at the head (``stream=True``): a body cut short fails
    later, in ``read_bounded``, and is never sent again."""
    if isinstance(exc, httpx.RemoteProtocolError):
        return _chained(exc, h11.RemoteProtocolError) is None
    return isinstance(exc, httpx.ReadError | httpx.WriteError)


def _transport_error(
    exc: httpx.HTTPError, ca_file: str | Path | None, section: str = ""
) -> RemoteTransport:
    name = type(exc).__name__
    if isinstance(exc, httpx.ProtocolError | httpx.DecodingError):
        # h11 and the decoders quote what the peer sent (a header name, a status line):
        # the peer's bytes are never quoted, only the kind of breakage.
        return RemoteTransport(f"{name}: the response broke HTTP/1.1 or its encoding")
    # Told by the type OpenSSL's verify failure has (``ssl.SSLCertVerificationError``,
    # chained under httpx's and httpcore's), never by its words.
    failure = _verify_failure(exc)
    if failure is not None:
        return RemoteCertificate(_certificate_text(failure, ca_file, section))
    if isinstance(exc, httpx.ConnectError):
        said = _connect_text(exc)
        if said is not None:
            return RemoteTransport(f"{name}: {said}"[:_MAX_ERROR_TEXT])
    # Otherwise the message names the failure (refused, a TLS alert, reset), from the OS
    # or OpenSSL, not from the peer; bounded, and scrubbed at the edge all the same.
    text = str(exc) or name
    return RemoteTransport(f"{name}: {text}"[:_MAX_ERROR_TEXT])


def _chained(exc: BaseException, kind: type[X]) -> X | None:
    """The first ``kind`` in ``exc``'s chain of causes, or ``None``."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _connect_text(exc: httpx.ConnectError) -> str | None:
    """A connection that was never made, said with where it went and what to check:
    nothing answers there, the name does not resolve, or the server there speaks no
    TLS. ``None`` when the chain holds none of those (the OS's own words then)."""
    try:
        url = exc.request.url
        where = f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"
    except RuntimeError:  # no request attached
        return None
    if _chained(exc, ConnectionRefusedError) is not None:
        return f"connection refused at {where}: is the server running, on that port?"
    if _chained(exc, socket.gaierror) is not None:
        return f"cannot resolve {url.host}: check the url's host name"
    tls = _chained(exc, ssl.SSLError)
    if tls is not None and tls.reason == "WRONG_VERSION_NUMBER":
        return f"the server at {where} does not speak TLS (a plain-HTTP port?)"
    error = _chained(exc, OSError)
    if error is not None and error.strerror:
        return f"cannot connect to {where}: {error.strerror}"
    return None


class _Client:
    """One ``httpx.AsyncClient`` and the requests out on it (``users``): once replaced
    (``retired``, by ``HttpPool._reload_trust``) it is closed when the last one ends."""

    __slots__ = ("http", "retired", "users")

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.users = 0
        self.retired = False

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.http.aclose()


class HttpPool:
    """One pooled ``httpx.AsyncClient`` to one URL (keep-alive connections reused across
    requests, at most ``max_connections`` open at once, one idle for
    ``KEEPALIVE_EXPIRY_S`` closed). ``aclose()`` once.

    A read sent again (``exchange``) goes through the same client: it waits for one of the
    ``max_connections`` as any request does, and the pool gives it a new connection or
    one it found still open (httpcore drops an idle connection whose socket shows the
    peer's close), never the one that just broke (closed with its error)."""

    def __init__(
        self,
        url: str,
        *,
        ca_file: str | Path | None,
        client_cert: str | Path | None,
        client_key: str | Path | None,
        max_connections: int,
        section: str = "",
    ) -> None:
        # Parsed once: a request is built from the URL and headers directly (no cookies,
        # no merging with client defaults), about a quarter of what build_request costs.
        self.url = httpx.URL(url)
        self.ca_file = ca_file
        #: What its TLS keys are named after in what it says (``[reranker] ``), when they
        #: are not in a provider's own section.
        self.section = section
        self._tls_files = (ca_file, client_cert, client_key)
        self._max_connections = max_connections
        #: The last request met a certificate that failed verification: the next one
        #: reads the TLS files again first (``_reload_trust``).
        self._trust_failed = False
        self._current = _Client(self._client())
        #: Replaced clients with requests still out on them: each closed as its last ends.
        self._retiring: set[_Client] = set()

    def __repr__(self) -> str:
        return (
            f"<HttpPool {self.url} requests={self._current.users} retiring={len(self._retiring)}>"
        )

    @property
    def client(self) -> httpx.AsyncClient:
        """The client new requests go out on."""
        return self._current.http

    def _client(self) -> httpx.AsyncClient:
        """A client with the TLS files as they are now (verification always on, C7)."""
        verify: ssl.SSLContext | bool = True
        if self.url.scheme == "https":
            verify = _tls_context(*self._tls_files, self.section)
        max_connections = self._max_connections
        return httpx.AsyncClient(
            verify=verify,
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(None),  # the leg's deadline bounds every exchange
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            ),
        )

    async def _reload_trust(self) -> None:
        """After a certificate failure, before the next request: the TLS files read again
        into a new client, so a ``ca_file`` fixed in place is used by the next check
        with no restart. The old one takes no new request (its connections were made
        under the trust that failed) and is closed now if none is out on it, else when
        the last one ends (``exchange``): a request whose response is being read, or a
        write, is never cut off by it. Files that cannot be read now fail this request,
        and the next tries again; the old client serves meanwhile."""
        fresh = _Client(self._client())
        self._trust_failed = False
        old, self._current = self._current, fresh
        old.retired = True
        if old.users == 0:
            await old.aclose()
        else:
            self._retiring.add(old)

    async def _release(self, lease: _Client) -> None:
        """A request on ``lease`` ended: a replaced client is closed with its last one."""
        lease.users -= 1
        if lease.retired and lease.users == 0:
            self._retiring.discard(lease)
            await lease.aclose()

    def _error(self, exc: httpx.HTTPError) -> RemoteTransport:
        error = _transport_error(exc, self.ca_file, self.section)
        if isinstance(error, RemoteCertificate):
            self._trust_failed = True
        return error

    @staticmethod
    def headers(values: Mapping[str, str]) -> httpx.Headers:
        """Request headers, made once per credential by the endpoint."""
        return httpx.Headers(dict(values))

    @asynccontextmanager
    async def exchange(
        self,
        body: bytes,
        headers: httpx.Headers,
        *,
        retry: Callable[[str], None] | None = None,
        progress: Progress | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """``async with pool.exchange(body, headers) as response``: ``_send``'s response,
        its body read within the block (``read_bounded``), closed as it ends. The whole
        exchange is on one client: one replaced meanwhile (``_reload_trust``) is closed
        once the block ends, not under it. ``progress``: told each stage the request
        begins (httpcore's trace), so a deadline that ends it can say where it stalled."""
        if self._trust_failed:
            await self._reload_trust()
        lease = self._current
        lease.users += 1
        try:
            response = await self._send(lease.http, body, headers, retry, progress)
            try:
                yield response
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        finally:
            await self._release(lease)

    async def _send(
        self,
        client: httpx.AsyncClient,
        body: bytes,
        headers: httpx.Headers,
        retry: Callable[[str], None] | None,
        progress: Progress | None = None,
    ) -> httpx.Response:
        """POST ``body`` on ``client``; the response, its body not read yet.

        ``retry``: the request is a read (a handshake, a query, a verify, a rerank), so
        when the connection ended under it before a whole response head came
        (``_unanswered``) it is sent once more, through the same pool (within its
        ``max_connections``), after ``retry`` is told the error's name. A peer that got
        it and closed without answering may have run it already: running a read twice
        changes nothing. A write is never sent twice. The caller's deadline bounds both
        tries; the second one's failure is the request's."""
        try:
            return await self._post(client, body, headers, progress)
        except httpx.HTTPError as exc:
            if not _unanswered(exc):
                raise self._error(exc) from exc
            if retry is None:
                raise RemoteTransport(
                    f"{type(exc).__name__}: the server closed the connection without "
                    f"answering (a write is not sent twice){self._plain_hint()}"
                ) from exc
            retry(type(exc).__name__)
        try:
            return await self._post(client, body, headers, progress)
        except httpx.HTTPError as exc:
            if not _unanswered(exc):
                raise self._error(exc) from exc
            # one clear error, said once: asking a third time would be a loop
            raise RemoteTransport(
                f"{type(exc).__name__}: the server closed the connection without answering, "
                f"twice{self._plain_hint()}"
            ) from exc

    def _plain_hint(self) -> str:
        """After a connection closed unanswered: a TLS server reads a plain request as a
        broken handshake and closes, so an ``http://`` url may be the cause."""
        if self.url.scheme != "http":
            return ""
        return "; the url is http://: if the server speaks TLS on that port, use https://"

    async def _post(
        self,
        client: httpx.AsyncClient,
        body: bytes,
        headers: httpx.Headers,
        progress: Progress | None = None,
    ) -> httpx.Response:
        traced = {} if progress is None else {"trace": progress.trace}
        request = httpx.Request("POST", self.url, content=body, headers=headers, extensions=traced)
        return await client.send(request, stream=True)

    async def read_bounded(self, response: httpx.Response, limit: int) -> bytes:
        """The response's body, read incrementally: over ``limit`` bytes is ``RemoteWire``."""
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RemoteWire(f"response body of {declared} bytes is over {limit}")
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise RemoteWire(f"response body over {limit} bytes")
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self.ca_file, self.section) from exc
        return b"".join(chunks)

    async def aclose(self) -> None:
        """Close every client, a replaced one with requests still out on it too (the
        endpoint is done: they end with it)."""
        for old in list(self._retiring):
            await old.aclose()
        self._retiring.clear()
        await self._current.aclose()
