"""Remote providers over HTTPS: one more end of a leg, beside the child process.

``RemoteEndpoint`` is one configured remote provider for the daemon's life: its
URL (checked by C7 before anything is built, again here and not only at config
load), its credential (C8: ``<redacted>`` in every rendering, sent only as
``Authorization: Bearer`` to the configured URL; its ``TokenSource`` reads a token
file again when the file changes, at each handshake, once after a 401, when a
changed token is sent once more, and at each request while a refusal parks the
provider), and one pooled
``httpx.AsyncClient`` (keep-alive connections reused across requests, a bound on
how many are open). Each exchange is one POST of the binding's codec's request
(the registry's, the same codec a child's pipes drive; ``_body``) whose response is
read incrementally and bounded by ``max_body_bytes``. Redirects are never followed
(a 3xx fails the exchange: a payload is never re-POSTed elsewhere or over
plaintext); proxies and ``.netrc`` from the environment are not used
(``trust_env=False``), so a query goes to the configured origin and nowhere else.

``RemoteConnection`` is what the engine's pool holds: a handshaken endpoint with
the ``ProviderConnection`` surface the fan-out uses (``info``, ``capabilities``,
``alive``, ``start_query``, ``query``, ``verify``, ``aclose``). Its handshake's
``data_flow`` is forced to ``egress: true`` (C4: the transport knows the query
leaves the machine, whatever the provider claims). A broken exchange (no
connection, TLS refused, a non-2xx status, a bad body) marks it not alive, so the
pool records the failure and handshakes again after its backoff; there is no
process to restart. A malformed reply (one reply to the request, its content of the
wrong shape: ``RemoteWire.breaks_connection`` is false) fails its call alone, as over
a pipe: the connection stays alive. A non-2xx status whose body is the binding's error
reply to the request (a CGP SDK's server answers a query that threw with ``500`` and
an ``error`` envelope) is that error reply, as a pipe's error line is (X1, X2): the
provider answered, nothing broke. A refused credential (HTTP 401/403, or none could be read) is
kept as the connection's ``refusal`` instead: no restart cures it, so the pool parks
the provider until the credential changes (``RemoteEndpoint.credential_changed``).
A cancelled exchange (an abandoned leg) closes its HTTP connection mid-flight. A read
(a handshake, a query, a verify, a rerank: ``_READS``) whose kept-alive connection the
peer closed under it before answering is sent once more through the same pool
(``HttpPool.exchange``); a write (``memory/remember``, ``memory/forget``) never is.

The words for what the user must fix are made here, once, for every caller of an
endpoint (a provider's leg, the reranker): a refusal names where the token comes
from (``$VAR`` or the token file, never the token), a certificate no trusted CA
signed names ``ca_file``, a handshake that got no reply at all what to check
(``hostd._hints.no_remote_handshake``: the url, TLS, the token, its start deadline, a
proxy, each named by its provider's own keys), after the stage it stalled in
(``handshake_missed``, within a health's ``MAX_ERROR_CHARS``): httpx's
errors are translated in ``_httpx``, the one module that imports httpx. This module
imports only ``hostd.protocol``, ``hostd.errors`` and those words of hostd.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import anyio

from hostd._hints import FLAGS, key_named, no_remote_handshake
from hostd._log import get_logger
from hostd.errors import (
    CredentialUnavailable,
    HostdError,
    InsecureTransport,
    ProviderTimeout,
    ProviderUnauthorized,
    RemoteTransport,
    RemoteWire,
)
from hostd.protocol import (
    DEFAULT_MAX_LINE_BYTES,
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
)

from .._ack import Acked
from .._readiness import Readiness
from .._redact import REDACTED
from ..bindings import Codec, Request, check_ack, find_binding
from ._body import error_reply, other_binding, read_as, read_reply
from ._stage import Progress, stalled_words
from ._url import Credential, TokenSource, remote_url_problem, shown_url

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_REMOTE_CONNECTIONS", "RemoteConnection", "RemoteEndpoint"]

log = get_logger("hostd.transport")

#: Connections one remote provider may hold open at once (requests beyond wait for one).
DEFAULT_REMOTE_CONNECTIONS = 16

T = TypeVar("T")
E = TypeVar("E", bound=HostdError)

#: The codec's request kinds that only read what the provider holds: sent once more when
#: the connection broke before a byte of their response came (``HttpPool.exchange``).
_READS = frozenset({"handshake", "query", "verify"})


def _refusal_text(status: int, tokens: TokenSource, section: str) -> str:
    """What a 401/403 tells the user to fix: where the token comes from (the variable's
    name or the file's path, never the token; C8), by the flag that gave it for a
    provider given by flags (``--token-file PATH``, as ``hostd check-provider --help``
    spells it). The server's body is never quoted. With none configured, the keys to
    set, named after ``section`` (``key_named``: the flags that give them for a provider
    given by flags)."""
    where = tokens.named_in(section)
    if where is None:
        env, file = (key_named(section, key) for key in ("token_env", "token_file"))
        if section == FLAGS:
            env, file = f"{env} NAME", f"{file} PATH"
        return (
            f"remote provider refused the request (HTTP {status}): it wants a credential; "
            f"set {env} or {file}"
        )
    return f"remote provider refused the credential (HTTP {status}): check the token in {where}"


class RemoteEndpoint:
    """One remote provider's URL, credential and pooled HTTP client. ``aclose()`` once.

    ``wire``: the peer speaks no CGP binding but this (a rerank server:
    ``rerank-http:cohere``); it is reached by ``post`` only and the log names it.
    ``section``: what its TLS keys are named after in its errors (``[reranker] ``), when
    they are not in a provider's own section."""

    def __init__(
        self,
        provider_id: str,
        url: str,
        *,
        binding: str = "jsonrpc",
        wire: str | None = None,
        tokens: TokenSource | None = None,
        ca_file: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        max_body_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_connections: int = DEFAULT_REMOTE_CONNECTIONS,
        user_agent: str = "hostd",
        section: str = "",
    ) -> None:
        problem = remote_url_problem(url)
        if problem is not None:  # C7, before a client (or a DNS lookup) exists
            raise InsecureTransport(f"refused {provider_id!r}: {problem}")
        self.provider_id = provider_id
        self.url = url
        row = find_binding(binding)
        if not row.remote or row.codec is None:
            raise ValueError(f"binding {binding!r} cannot reach a remote provider")
        self.codec: Codec = row.codec(provider_id)
        self.binding = binding
        self.wire = wire or binding
        self.max_body_bytes = max_body_bytes
        self.tokens = tokens or TokenSource()
        #: The one redaction point of this provider (C8): every token the source reads.
        self.redactor = self.tokens.redactor
        self._base_headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": user_agent,
        }
        self._sent_credential: Credential | None = None
        #: The credential the last refusal was for (``None``: none configured, or none
        #: could be read); ``credential_changed`` compares the source's with it.
        self._refused_with: Credential | None = None
        self.ca_file = ca_file
        #: What its keys are named after in what it says (``key_named``).
        self.section = section
        # httpx is loaded by the first remote endpoint built, not with the transport: a
        # daemon or command with no remote provider (nor HTTP reranker) never needs it.
        from ._httpx import HttpPool

        self.client: HttpPool = HttpPool(
            url,
            ca_file=ca_file,
            client_cert=client_cert,
            client_key=client_key,
            max_connections=max_connections,
            section=section,
        )
        self._headers = self.client.headers(self._base_headers)
        self.exchanges = 0
        log.debug(
            "provider.remote.opened", provider=provider_id, url=shown_url(url), binding=self.wire
        )

    def __repr__(self) -> str:
        credential = REDACTED if self.tokens.configured else None
        return f"<RemoteEndpoint {self.provider_id} {shown_url(self.url)} credential={credential}>"

    def describe(self) -> dict[str, Any]:
        """``providers/list``'s ``remote`` member: never the credential itself (C8)."""
        return {
            "url": shown_url(self.url),  # never its query, where a server may take a key
            "credential": REDACTED if self.tokens.configured else None,
            "exchanges": self.exchanges,
        }

    async def exchange(
        self, request: Request, read: Callable[[Any], T], progress: Progress | None = None
    ) -> T:
        """POST one request body; the one reply in the response, read by ``read`` (the
        codec's model of what was asked) and checked. Every error leaves through the
        redactor: no token, even one the peer echoed (C8). ``progress``: told the stage
        the request is in (``_stage``), for a caller whose deadline may end it."""
        try:
            body = await self._post(request.body, request, progress)
            return read_as(read, read_reply(self.codec, request, body))
        except HostdError as exc:
            self.redactor.error(exc)
            raise

    async def post(self, body: bytes) -> bytes:
        """POST ``body`` as it is; the response body, bounded and checked as an exchange's
        (a 2xx status, no redirect, the credential's 401 rule), for a peer on no CGP
        binding (a rerank server). Errors leave through the redactor, as ``exchange``'s."""
        try:
            return await self._post(body)
        except HostdError as exc:
            self.redactor.error(exc)
            raise

    def reload_credential(self) -> Credential | None:
        """Read the credential again, whatever its file's stat says (a (re)start)."""
        try:
            return self.tokens.reload()
        except CredentialUnavailable:
            self._refused_with = None
            raise

    def credential_changed(self) -> bool:
        """Whether the source now gives a credential other than the one last refused: a
        token file rewritten (read whatever its stat says: asked only while the provider
        is parked, so no hot path pays the read), or back after it could not be read."""
        try:
            credential = self.tokens.reload()
        except CredentialUnavailable:
            return False
        return credential is not None and credential != self._refused_with

    def _refused(self, status: int, sent: Credential | None) -> ProviderUnauthorized:
        self._refused_with = sent
        return ProviderUnauthorized(
            _refusal_text(status, self.tokens, self.section), http_status=status
        )

    def _headers_for(self, credential: Credential | None) -> httpx.Headers:
        """The request headers, made again only when the credential is another one."""
        if credential is not self._sent_credential:
            headers = dict(self._base_headers)
            if credential is not None:
                headers["authorization"] = credential.authorization()
            if self._sent_credential is not None:
                log.info("provider.remote.credential.renewed", provider=self.provider_id)
            self._headers, self._sent_credential = self.client.headers(headers), credential
        return self._headers

    def _send(
        self,
        body: bytes,
        credential: Credential | None,
        request: Request | None,
        progress: Progress | None = None,
    ) -> AbstractAsyncContextManager[httpx.Response]:
        """The exchange of ``body`` (``HttpPool.exchange``): its response within the block."""
        self.exchanges += 1
        headers = self._headers_for(credential)
        # A body posted as it is (``post``) is a rerank request, a read as well.
        kind = "rerank" if request is None else request.kind
        if kind not in {"rerank", *_READS}:
            return self.client.exchange(body, headers, progress=progress)

        def retried(error: str) -> None:
            self.exchanges += 1
            log.info("provider.remote.resent", provider=self.provider_id, kind=kind, error=error)

        return self.client.exchange(body, headers, retry=retried, progress=progress)

    async def _post(
        self, body: bytes, request: Request | None = None, progress: Progress | None = None
    ) -> bytes:
        """POST ``body``; the 2xx response's body. ``request``: the codec's request the
        body is, so that a non-2xx response carrying its error reply is read as one."""
        try:
            sent = self.tokens.current()  # a stat of the token file, read only if it changed
        except CredentialUnavailable:
            self._refused_with = None
            raise
        async with self._send(body, sent, request, progress) as response:
            if response.status_code != 401 or not self.tokens.configured:
                return await self._read(response, sent, request)
        # The token may have been rotated under a stat that cannot show it (a rewrite
        # within one clock tick): read it again, and send once more only if it is
        # another token; a second 401 fails the exchange.
        fresh = self.reload_credential()
        if fresh == sent:
            raise self._refused(401, sent)
        async with self._send(body, fresh, request, progress) as response:
            return await self._read(response, fresh, request)

    async def _read(
        self, response: httpx.Response, sent: Credential | None, request: Request | None
    ) -> bytes:
        """The body of a 2xx ``response``; any other status, the exchange's error."""
        status = response.status_code
        if status in (401, 403):
            raise self._refused(status, sent)
        if 300 <= status < 400:
            raise RemoteTransport(
                f"HTTP {status}: redirect not followed (a payload goes to the configured URL only)",
                http_status=status,
            )
        if not 200 <= status < 300:
            raise await self._status_error(response, request)
        body = await self.client.read_bounded(response, self.max_body_bytes)
        if _html(response) and body.lstrip()[:1] == b"<":  # labelled and shaped as a page
            raise RemoteWire(html_page(status))
        return body

    async def _status_error(self, response: httpx.Response, request: Request | None) -> HostdError:
        """What a non-2xx status (not 401/403, not a redirect) fails the exchange with: the
        provider's error reply to ``request`` when the body, read as bounded as a 2xx
        one, is one (its code, X1/X2: the provider answered, nothing broke); otherwise
        ``HTTP <status>``, a transport failure, with the binding to set when the body
        is the other binding's reply. Never the body: an error page may echo the
        request, headers and all."""
        status = response.status_code
        said = f"HTTP {status}"
        if status == 404:  # the server is there; the url names a path it does not serve
            path = urlsplit(self.url).path or "/"
            said = f"HTTP 404: the server has no such path: check the url's path ({path})"
        failed = RemoteTransport(said, http_status=status)
        if request is None:  # a peer on no CGP binding (``post``): the status says it
            return failed
        try:
            body = await self.client.read_bounded(response, self.max_body_bytes)
        except (RemoteWire, RemoteTransport):
            return failed  # over the bound or cut off: no error reply to read
        answered = error_reply(self.codec, request, body)
        if answered is not None:
            log.debug(
                "provider.remote.error_status",
                provider=self.provider_id,
                status=status,
                code=answered.data.get("cgp_code", answered.cgp.value),
            )
            return answered
        hint = other_binding(self.codec, body) if body.strip() else None
        if hint is not None:
            return RemoteTransport(f"HTTP {status}; {hint}", http_status=status)
        if status != 404 and _html(response):  # a 404's page says less than its path
            return RemoteTransport(html_page(status), http_status=status)
        return failed

    async def aclose(self) -> None:
        await self.client.aclose()


def _html(response: httpx.Response) -> bool:
    """Whether the response says it is an HTML page (its ``Content-Type``): a proxy's or
    a web server's error page, not the provider's JSON. Any other type is read as the
    body it is (docs/remote.md: ``application/json`` expected, ``text/plain`` read too)."""
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return media in ("text/html", "application/xhtml+xml")


def html_page(status: int) -> str:
    """What an HTML page where a reply was expected is told as (never its text: a page
    may echo the request, its credential included)."""
    return f"the server answered an HTML page (status {status}), not JSON"


def handshake_missed(timeout_s: float, stage: str, section: str) -> str:
    """A handshake past its deadline: the deadline, where it stalled (``stalled_words``),
    then what to check, named after ``section`` (``no_remote_handshake``). In that
    order, the most telling first: a health keeps ``MAX_ERROR_CHARS`` of it, which hold
    it whole for a provider id of up to 64 characters and any ``start_timeout_s``."""
    return (
        f"no handshake reply within {timeout_s * 1000:.0f} ms: {stalled_words(stage)}; "
        f"{no_remote_handshake(section)}"
    )


def _left(deadline: float | None) -> float | None:
    """The seconds from now to ``deadline`` (the event loop's clock); ``None``: no bound."""
    return None if deadline is None else max(0.0, deadline - anyio.current_time())


def _as_egress(ack: HandshakeAck) -> HandshakeAck:
    """C4: a remote provider is egress whatever its handshake says."""
    flow = ack.provider.data_flow
    if flow.egress:
        return ack
    info = ack.provider.model_copy(update={"data_flow": flow.model_copy(update={"egress": True})})
    return ack.model_copy(update={"provider": info})


class RemoteConnection(Acked):
    """A handshaken remote provider, as the pool holds it. Create with ``open``."""

    def __init__(self, endpoint: RemoteEndpoint, ack: HandshakeAck) -> None:
        self.endpoint = endpoint
        self.provider_id = endpoint.provider_id
        self.ack = ack
        self.closed = False
        self.failure: HostdError | None = None
        #: Neither closed nor broken (a plain attribute, as a process connection's).
        self.alive = True
        #: The last refusal of its credential (HTTP 401/403, or none could be read): not
        #: a broken exchange, so it stays alive; the pool takes it when it counts the
        #: refused leg and parks the provider (no restart cures a credential).
        self.refusal: ProviderUnauthorized | None = None
        #: Ready at its handshake: HTTP carries no ``context/progress``, so a remote
        #: provider that is still warming says so per query (``unavailable``, ``warming``).
        self.readiness = Readiness(self.provider_id)
        self.readiness.handshake(None)

    def __repr__(self) -> str:
        return f"<RemoteConnection {self.provider_id} alive={self.alive} {self.endpoint!r}>"

    @classmethod
    async def open(
        cls, endpoint: RemoteEndpoint, *, host: HostInfo, handshake_timeout: float = 5.0
    ) -> RemoteConnection:
        """Handshake (H1–H3, H2, C5 checked as for a child) and force egress (C4). The
        credential is read again first: a (re)start takes a rotated token whatever the
        token file's stat says."""
        endpoint.reload_credential()
        progress = Progress()
        try:
            with anyio.fail_after(handshake_timeout):
                codec = endpoint.codec
                handshake = codec.handshake(host)
                ack = await endpoint.exchange(handshake, codec.handshake_ack, progress)
        except TimeoutError:
            # No pipe to flush here: where it stalled and what to check instead, in
            # hostd's words only (the peer said nothing), so the leg, the status and the
            # log event all say it; ``stalled`` for a later leg (the pool's words).
            raise ProviderTimeout(
                handshake_missed(handshake_timeout, progress.stage, endpoint.section),
                stage="handshake",
                stalled=progress.stage,
            ) from None
        try:
            check_ack(ack)
        except HostdError as exc:  # the rules quote a version or scope the peer wrote
            raise endpoint.redactor.error(exc) from None
        log.info(
            "provider.handshake.ok",
            provider=endpoint.provider_id,
            name=ack.provider.name,
            version=ack.provider.version,
            protocol_version=ack.protocol_version,
            remote=True,
        )
        return cls(endpoint, _as_egress(ack))

    async def _call(self, request: Request, read: Callable[[Any], T]) -> T:
        if self.closed:
            raise RemoteTransport("remote provider connection closed")
        try:
            return await self.endpoint.exchange(request, read)
        except RemoteTransport as exc:
            self.failure = exc  # the pool handshakes again, after its backoff
            self.alive = False
            raise
        except RemoteWire as exc:
            if exc.breaks_connection:  # a malformed reply fails its own call alone
                self.failure = exc
                self.alive = False
            raise
        except ProviderUnauthorized as exc:
            self.refusal = exc
            raise

    async def explain(self, exc: E, deadline: float | None = None) -> E:
        """``exc`` as it leaves the transport: scrubbed of every token (C8). There is no
        process to ask why (``ProviderConnection.explain``); the status says it."""
        return self.endpoint.redactor.error(exc)

    def start_query(self, query: ContextQuery | dict[str, Any], **_: Any) -> None:
        """Always ``None``: an HTTP exchange is awaited, there is no line to write now."""
        return None

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        codec = self.endpoint.codec
        return await self._call(codec.query(query), codec.query_result)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        codec = self.endpoint.codec
        return await self._call(codec.verify(frames), codec.verify_response)

    async def remember(
        self, request: RememberRequest, *, deadline: float | None = None
    ) -> RememberResult:
        """``memory/remember`` in one POST, given up (``TimeoutError``) at ``deadline``."""
        codec = self.endpoint.codec
        sent = codec.remember(request)
        with anyio.fail_after(_left(deadline)):
            return await self._call(sent, codec.remember_result)

    async def forget(
        self, request: ForgetRequest, *, deadline: float | None = None
    ) -> ForgetResult:
        codec = self.endpoint.codec
        sent = codec.forget(request)
        with anyio.fail_after(_left(deadline)):
            return await self._call(sent, codec.forget_result)

    async def aclose(self) -> int | None:
        """Nothing to tear down: the endpoint's pooled client outlives its connections."""
        self.closed = True
        self.alive = False
        return None
