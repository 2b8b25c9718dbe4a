"""``HttpReranker``: a standard rerank server (Cohere-style or TEI-style) asked for a verdict.

The process reranker's stand-in when ``[reranker] url`` is set: the same surface
(``rerank`` → ``RerankOutcome``, ``row``, ``start_all``, an async context) over the
remote providers' HTTPS client, made by the same ``Launcher``
(``hostd.transport.RemoteEndpoint``: one pooled client for the daemon's life, C7 on
the URL, the bearer token from ``token_file``/``token_env`` read again when it
changes and never shown, C8, no redirect followed, the body bounded). ``_rerank_api``
owns the two wires; this module does the I/O.

There is no process and no handshake: each composition's candidates are POSTed
(in ``batch_size`` chunks, at once, when set) within the request's ``timeout_ms``.
Every failure is a ``RerankOutcome`` with the process reranker's reason codes, and
the composition falls back to ``round_robin``: ``unavailable`` (no connection, TLS
refused, the credential unreadable), ``certificate`` (the server's certificate failed
verification, or the TLS files cannot be loaded: the detail names ``[reranker]
ca_file`` when it cures it), ``error`` (a non-2xx status, a redirect), ``bad_reply`` (a
body that is not a whole verdict, ``_rerank_api``), ``timeout``. A detail says what
failed in hostd's words: a status code, a size, a position, never the server's text.

Its health follows ``_health``'s decisions for a peer asked per request
(``decide_ask``): a server that gave no answer (``unavailable``, ``timeout``, a 5xx
or 429) ``CoolDownPolicy.after`` times in a row is not asked while it cools down
(the outcome is ``unavailable``, detail ``cooling_down: …``, costing nothing), then
asked once, one request at a time (a ``certificate`` failure cools it down at once, for
the longest cool-down, which does not grow: ``ask_cool_down_s``; its skipped
compositions say ``certificate``, and the TLS files are read again for the try after
it); a verdict forgets its failures, unless its ask was
sent before the latest-sent ask that failed (a server stopped while it finishes the asks
in hand: ``record_answer``). The log tells an outage's turns (``rerank.failed`` as the
failures begin or change words, ``rerank.cooling_down`` as a cool-down begins,
``rerank.recovered``) at warning or info, and its repeats at debug.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from hostd import __version__
from hostd._log import get_logger
from hostd.errors import (
    HostdError,
    InsecureTransport,
    ProviderUnauthorized,
    RemoteCertificate,
    RemoteTransport,
    RemoteWire,
)
from hostd.protocol import HostInfo
from hostd.transport import shown_url

from ._clock import now
from ._health import (
    CoolDownPolicy,
    Health,
    ProviderState,
    StartAction,
    ask_cool_down_s,
    decide_ask,
    failure_text,
    failures_in_a_row,
    record_answer,
    record_down,
    record_leg,
    record_retry,
)
from ._launch import Launcher, PoolSettings
from ._rerank import RERANKER_ID, RerankOutcome, RerankTally
from ._rerank_api import (
    RerankApi,
    Scored,
    document_text,
    order_by_scores,
    rerank_url,
)
from ._spec import ProviderSpec

__all__ = ["HttpReranker", "RerankServer"]

log = get_logger("hostd.engine")


@dataclass(frozen=True, slots=True)
class RerankServer:
    """A configured rerank server: where, which API and model, its credential and TLS."""

    url: str
    api: Literal["cohere", "tei"] = "cohere"
    model: str | None = None
    token_file: str | Path | None = None
    token_env: str | None = None
    ca_file: str | Path | None = None
    client_cert: str | Path | None = None
    client_key: str | Path | None = None
    max_connections: int = 4
    #: Documents per request at most (``None``: all in one).
    batch_size: int | None = None
    #: When a server that gives no answer is left alone (``_health.decide_ask``).
    cool_down: CoolDownPolicy = CoolDownPolicy()


def _batches(n: int, size: int | None) -> list[range]:
    step = n if size is None else max(1, size)
    return [range(i, min(n, i + step)) for i in range(0, n, max(1, step))]


#: Statuses a server answers a request it will not take as sent: a model that does not
#: rerank (an embedding model served instead), another API's path or body.
_REFUSED = frozenset({400, 404, 422})
_REFUSED_HINT = (
    "the server refused the request: check that its model reranks and that "
    "[reranker] model and api match the server (docs/config.md)"
)


def _failure(exc: HostdError) -> tuple[str, str, bool]:
    """The outcome's reason and detail for a failed exchange (hostd's own words: the
    transport never puts the server's text in an error), and whether the server gave
    no answer (counted toward its cool-down) rather than a wrong one."""
    status = exc.data.get("http_status")
    if isinstance(exc, RemoteCertificate):
        # Told by the type under httpx's error (``ssl.SSLCertVerificationError``), never by
        # its words: the server was reached, and no ask cures it until the user fixes
        # ``[reranker] ca_file`` (the message names it) or the certificate is renewed.
        # The word is the reason's: said once (``failure_text``).
        return "certificate", exc.message.removeprefix("certificate "), True
    if isinstance(exc, RemoteWire):
        return "bad_reply", exc.message, False
    if isinstance(exc, ProviderUnauthorized) and isinstance(status, int):
        return "error", f"HTTP {status}: the credential was refused", False
    if isinstance(exc, RemoteTransport) and isinstance(status, int):
        # A 5xx or a 429 is a server failing or shedding load: asking again at once
        # only adds to it. Any other status is its answer to this request.
        detail = exc.message
        if status in _REFUSED:  # what the server said is not quoted: where to look is
            detail += f": {_REFUSED_HINT}"
        return "error", detail, status >= 500 or status == 429
    if isinstance(exc, ProviderUnauthorized | RemoteTransport | InsecureTransport):
        # no connection, TLS refused, no credential to send
        return "unavailable", exc.message, True
    return "error", exc.message, False


#: ``Health`` counts a failed ask under the status a provider's leg would have.
_LEG_STATUS = {"timeout": "timeout", "unavailable": "crashed", "certificate": "crashed"}
#: States after which a verdict is a recovery (``rerank.recovered``).
_DOWN = frozenset({ProviderState.CRASHED, ProviderState.FAILED})


class HttpReranker:
    """``async with HttpReranker(server, settings) as r: await r.rerank(query, cands, t)``.

    Its endpoint is made by the engine's ``Launcher``, as a remote provider's is (the
    same client, token source and redaction point), at the first verdict asked: a TLS
    file that cannot be loaded is that verdict's ``unavailable``, not the daemon's
    failure."""

    def __init__(self, server: RerankServer, settings: PoolSettings) -> None:
        self.server = server
        self.api = RerankApi(server.api, server.model)
        self.url = rerank_url(server.url)
        host = settings.host_info or HostInfo(name="hostd", version=__version__)
        self._launcher = Launcher(settings, host)
        self.spec = ProviderSpec(
            id=RERANKER_ID,
            url=self.url,
            token_file=server.token_file,
            token_env=server.token_env,
            ca_file=server.ca_file,
            client_cert=server.client_cert,
            client_key=server.client_key,
            max_connections=server.max_connections,
        )
        self.health = Health()
        self._now = settings.clock or now
        #: A try after a cool-down is out (``decide_ask``: one at a time).
        self._probing = False
        #: Failures counted toward its cool-down so far: an ask that was already out
        #: when the last one was counted does not double the cool-down (``_count``).
        self._counted = 0
        #: Compositions that did not ask it because it was cooling down.
        self.skipped = 0
        #: Asks sent so far: the last one's place in send order (``record_answer``).
        self._sent = 0
        #: How long the latest verdict took (ms), said when an ask times out.
        self._took_ms: float | None = None
        self.tally = RerankTally()

    def __repr__(self) -> str:
        return f"<HttpReranker {self.server.api} {self.url}>"

    async def __aenter__(self) -> HttpReranker:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._launcher.aclose()

    async def start_all(self) -> None:
        """Nothing to start: a server is reached per composition."""

    def row(self) -> dict[str, Any]:
        """Its state and health, as a ``providers/list`` row (``RerankService.row``): never
        the credential (C8), nor the URL's query (``shown_url``)."""
        s = self.server
        remote = self._launcher.describe_remote(self.spec)
        return {
            "id": RERANKER_ID,
            "kind": "url",
            "binding": "http",
            "api": s.api,
            "model": s.model,
            "info": None,
            "capabilities": None,
            "state": self.health.state.value,
            "health": self._health_row(),
            "remote": {**remote, "url": shown_url(self.url)},
            **self.tally.to_wire(),
        }

    def _health_row(self) -> dict[str, Any]:
        health = self.health.to_wire(self._now())
        health["skipped"] = self.skipped
        wait = ask_cool_down_s(self.health, self.server.cool_down)
        # Cooling down: when it is asked; not once an answer said it is reachable (its
        # cool-down has passed then: it was asked).
        failed = self.health.state is ProviderState.FAILED
        if wait > 0 and failed and self.health.failed_at is not None:
            health["retry_in_s"] = round(max(0.0, self.health.failed_at + wait - self._now()), 3)
        return health

    async def rerank(
        self, query: str, candidates: list[dict[str, Any]], timeout_s: float
    ) -> RerankOutcome:
        """One verdict over ``candidates`` within ``timeout_s``; never an exception. A
        server cooling down is not asked (``decide_ask``)."""
        started = time.perf_counter()
        policy = self.server.cool_down
        counted = self._counted
        decision = decide_ask(self.health, now=self._now(), policy=policy, probing=self._probing)
        if decision.action is StartAction.GIVE_UP:
            # Told once, by ``rerank.cooling_down``: each composition it spares is not.
            self.skipped += 1
            # A certificate that failed is said as such while it is not asked: the fix is
            # the user's (a CA file), not the server's coming back.
            reason = "certificate" if self.health.untrusted else "unavailable"
            outcome = RerankOutcome(reason=reason, detail=self._cooling(decision.delay_s))
            quiet = True
            elapsed = time.perf_counter() - started
        else:
            self._sent += 1
            ask = self._sent  # its place in send order (``record_answer``)
            probe = decision.action is StartAction.START
            if probe:  # its cool-down has passed: this request tries it, alone
                self._probing = True
                self.health = record_retry(self.health)
                # The first try of an outage is told; the next ones, if it stays down, are
                # repeats (each failed try's ``rerank.cooling_down`` says when the next is).
                first = self.health.consecutive_failures <= policy.after
                (log.info if first else log.debug)(
                    "rerank.retry",
                    retries=self.health.retries,
                    consecutive_failures=self.health.consecutive_failures,
                )
            try:
                outcome, down = await self._rerank(query, candidates, timeout_s)
            finally:
                if probe:
                    self._probing = False
            elapsed = time.perf_counter() - started  # one reading: the latency reported
            if outcome.reason is None:
                self._took_ms = round(elapsed * 1000, 3)
            quiet = self._count(outcome, down, counted, ask)
        outcome = outcome.timed(len(candidates), elapsed, quiet=quiet)
        return self.tally.count(outcome)

    def _cooling(self, delay_s: float) -> str:
        """A skipped request's detail: why, and when the server is asked again. Quotes
        the last failure recorded, never a detail like this one: it stays bounded."""
        h = self.health
        when = "a try is under way" if delay_s <= 0 else f"next try in {delay_s:.1f} s"
        if h.untrusted:  # one failure is enough: the count would say nothing
            return f"cooling_down: {h.last_failure}; {when}"
        return (
            f"cooling_down: {failures_in_a_row(h.consecutive_failures)}, the last "
            f"{h.last_failure}; {when}"
        )

    def _count(self, outcome: RerankOutcome, down: bool, counted: int, ask: int) -> bool:
        """Its health after one ask, and whether its failure repeats the one before in the
        same words (the log has told it: ``quiet``). ``counted``: ``_counted`` when the ask
        began; ``ask``: its place in send order. Below ``cool_down.after`` every failure
        counts toward the cool-down (many requests failing at once leave a server alone
        at once); past it, only a failure of an ask made after the last one counted does
        (a try after the cool-down): asks that were out together when a server went down
        double its cool-down once, not once each. An answer to an ask sent before one
        that failed does not clear that failure (``record_answer``)."""
        before = self.health
        reason = outcome.reason
        if reason is None:
            self.health = health = record_answer(before, ask=ask)
            if health.state is ProviderState.READY and before.state in _DOWN:
                log.info(
                    "rerank.recovered",
                    was=before.state.value,
                    failures=before.consecutive_failures,
                    skipped=self.skipped,
                )
            return False
        error = failure_text(reason, outcome.detail or "")
        # Said already: its last ask failed too, in the same words.
        again = before.failing_legs > 0 and before.last_error == error
        status = _LEG_STATUS.get(reason, "error")
        if not down:
            self.health = record_answer(before, status, error=error, ask=ask)
            return again
        policy = self.server.cool_down
        cooling = ask_cool_down_s(before, policy) > 0
        if cooling and counted != self._counted:  # out before the failure counted last
            health = record_leg(before, status, error=error)
            self.health = replace(health, down_ask=max(health.down_ask, ask))
            return again
        self.health = health = record_down(
            before,
            status,
            now=self._now(),
            error=error,
            policy=policy,
            ask=ask,
            untrusted=reason == "certificate",
        )
        self._counted += 1
        wait = ask_cool_down_s(health, policy)
        if wait > 0:
            # Told as it begins, or when the failure's words change; a failed try that
            # doubles it, failing as before, is a repeat.
            said = {
                "consecutive_failures": health.consecutive_failures,
                "retry_in_s": round(wait, 3),
                "last_failure": health.last_failure,
            }
            if cooling and before.last_failure == health.last_failure:
                log.debug("rerank.cooling_down", **said)
            else:
                log.warning("rerank.cooling_down", **said)
        return again

    async def _rerank(
        self, query: str, candidates: list[dict[str, Any]], timeout_s: float
    ) -> tuple[RerankOutcome, bool]:
        """The outcome, and whether the server gave no answer (``_failure``)."""
        texts = [document_text(c) for c in candidates]
        batches = _batches(len(texts), self.server.batch_size)
        replies: list[Scored | HostdError | None] = [None] * len(batches)
        with anyio.move_on_after(timeout_s) as waited:
            try:
                # made once; its log line names the API, not a CGP binding it never speaks
                endpoint = self._launcher.endpoint(
                    self.spec, wire=f"rerank-http:{self.api.name}", section="[reranker] "
                )
            except RemoteCertificate as exc:  # the TLS files: what to fix (``_failure``)
                reason, detail, _ = _failure(exc)
                return RerankOutcome(reason=reason, detail=detail), True
            except HostdError as exc:  # the URL (C7)
                return RerankOutcome(reason="unavailable", detail=exc.message), True

            async def score(k: int) -> None:
                batch = [texts[i] for i in batches[k]]
                try:
                    body = await endpoint.post(self.api.body(query, batch))
                    replies[k] = self.api.read(body, len(batch))
                except HostdError as exc:  # a value: its siblings run on
                    replies[k] = endpoint.redactor.error(exc)

            if len(batches) == 1:
                await score(0)
            else:
                async with anyio.create_task_group() as tg:
                    for k in range(len(batches)):
                        tg.start_soon(score, k)
        if waited.cancelled_caught:
            ms = f"{timeout_s * 1000:.0f} ms"
            took = self._took_ms
            # How long it takes when it answers, if it did: what to raise the deadline to.
            known = "" if took is None else f"; its latest verdict took {took:.0f} ms"
            detail = f"no verdict within {ms}{known} (raise [reranker] timeout_ms)"
            return RerankOutcome(reason="timeout", detail=detail), True
        scores: list[float] = []
        model = self.server.model
        for k, reply in enumerate(replies):
            if isinstance(reply, HostdError):
                reason, detail, down = _failure(reply)
                if len(batches) > 1:
                    detail = f"batch {k + 1} of {len(batches)}: {detail}"
                return RerankOutcome(reason=reason, detail=detail), down
            assert reply is not None  # every batch ran to its end: no timeout
            scores.extend(reply.scores)
            model = model or reply.model
        order = tuple(candidates[i]["key"] for i in order_by_scores(scores))
        return RerankOutcome(order, model), False
