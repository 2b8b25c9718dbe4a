"""The client API: the methods dict and the one error boundary (params in ``_params``).

Owns what each client method (protocol.md §4) accepts and returns. Every
method validates its params into a pydantic model first (−32602 naming the
field), then calls the engine and the composition library; each method is
wrapped once in ``hostd.rpc``'s error boundary, so every exception leaves
through ``hostd.errors.error_to_wire``. ``dispatch_one`` is what a connection
is given to dispatch with; methods see the daemon only through ``DaemonState``
and their connection through ``Peer``, so this module imports neither. Ranking and
rendering live in ``hostd.compose``; fan-out, consent and verification in
``hostd.engine`` — this module only wires them to the wire.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.to_thread
from pydantic import ValidationError

from hostd import compose as c
from hostd._tokenizer import load_tokenizer
from hostd.compose import ComposedPrompt
from hostd.config import Config
from hostd.engine import ConsentStore, Engine, FanOut, LegReport
from hostd.errors import (
    HostdError,
    InvalidParam,
    NoProviderAvailable,
    ShuttingDown,
    UnknownProvider,
    UnknownRequest,
)
from hostd.logs import bind_request, flush_logs, get_logger, log_audit, log_legs
from hostd.protocol import ContextFrame, ContextQuery, check_timestamp
from hostd.rpc import Dispatcher, Method, error_reply, reply_id

from ._params import (
    CancelParams,
    ComposeParams,
    ConsentListParams,
    ConsentParams,
    ContextQueryParams,
    FeedbackParams,
    NoParams,
    QueryParams,
    RestartParams,
    UsageParams,
)
from ._rerank import asks_rerank

__all__ = [
    "DISPATCHER",
    "METHODS",
    "DaemonState",
    "Peer",
    "RequestContext",
    "dispatch_one",
]

log = get_logger("hostd.server")


class DaemonState(Protocol):
    """What the client methods read and change of the daemon (``_daemon.Daemon``)."""

    config: Config
    counters: Counter[str]
    stopping: bool

    @property
    def host(self) -> Engine: ...  # the engine the methods call directly (``Host``)

    def new_request_id(self) -> str: ...

    def provider_ids(self) -> frozenset[str]: ...

    def remember_usage(self, request_id: str, usage: dict[str, Any]) -> None: ...

    async def rerank(
        self,
        query: str,
        frames: Sequence[tuple[str, ContextFrame]],
        requested: c.PrecomputedOrder | None = None,
    ) -> c.PrecomputedOrder: ...

    async def record_shadow(
        self,
        request_id: str,
        params: ComposeParams,
        contested: int,
        accepted: Sequence[tuple[str, ContextFrame]],
        composed: ComposedPrompt,
    ) -> bool: ...

    def require_shadow(self, why: str) -> None: ...

    def usage_of(self, request_id: str) -> Any: ...

    async def shadow_feedback(
        self, request_id: str, used: Any, helpful: bool | None, note: str | None
    ) -> Any: ...

    def status(self) -> dict[str, Any]: ...

    def request_stop(self, reason: str) -> None: ...


class Peer(Protocol):
    """The connection a request came on (``_connection.Connection``, or none in-process)."""

    name: str

    def send(self, obj: Any) -> Awaitable[None]: ...

    def cancel(self, id_: Any) -> None: ...


class RequestContext:
    """What a method sees of the world: the daemon, its request id, and its connection."""

    __slots__ = ("connection", "daemon", "request_id")

    def __init__(self, daemon: DaemonState, connection: Peer, request_id: str) -> None:
        self.daemon = daemon
        self.connection = connection
        self.request_id = request_id

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.connection.send({"jsonrpc": "2.0", "method": method, "params": params})

    def cancel_request(self, id_: Any) -> None:
        self.connection.cancel(id_)


# -- fan-out shared by context/query and context/compose ------------------------------


def _check_providers(ctx: RequestContext, wanted: list[str] | None) -> list[str]:
    known = ctx.daemon.provider_ids()
    if wanted is not None:
        for pid in wanted:
            if pid not in known:
                raise UnknownProvider(f"unknown provider {pid!r}", provider=pid)
        chosen = sorted(set(wanted))
    else:
        chosen = sorted(known)
    if not known:  # the config has none: name it, where else was looked, and `hostd init`
        raise NoProviderAvailable(ctx.daemon.config.no_providers())
    if not chosen:
        raise NoProviderAvailable("no provider available: none is selected")
    return chosen


def _check_named_providers(ctx: RequestContext, field: str, shares: Mapping[str, Any]) -> None:
    """Provider ids a policy names (caps, rrf weights) are configured ones ("*": the rest)."""
    known = ctx.daemon.provider_ids()
    for pid in sorted(shares):
        if pid != "*" and pid not in known:
            raise UnknownProvider(f"{field}: unknown provider {pid!r}", provider=pid, field=field)


async def _fan_out(ctx: RequestContext, p: QueryParams, budget: int) -> FanOut:
    """Ask the providers for ``budget`` tokens (what the floors left, for compose)."""
    bad_time = check_timestamp(p.as_of, "as_of")
    if bad_time:
        # Q2/F4: a window the providers could not read is the client's error, not theirs.
        raise InvalidParam(f"invalid params: as_of: {bad_time[0].message}", field="as_of")
    chosen = _check_providers(ctx, p.providers)
    query = ContextQuery(
        goal=p.goal,
        query_text=p.query_text,
        kinds=list(p.kinds),
        anchors=list(p.anchors),
        max_frames=p.max_frames,
        max_tokens=budget,
        as_of=p.as_of,
    )
    on_leg_done = None
    if p.progress_token is not None:
        total = len(chosen)
        done = 0
        token = p.progress_token

        async def on_leg_done(report: LegReport) -> None:
            nonlocal done
            done += 1
            await ctx.notify(
                "$/progress",
                {
                    "progress_token": token,
                    "provider": report.provider_id,
                    "status": str(report.status),
                    "frames_accepted": report.frames_accepted,
                    "latency_ms": report.latency_ms,
                    "done": done,
                    "total": total,
                },
            )

    more: dict[str, Any] = {}
    if p.progress_token is not None:
        token = p.progress_token

        async def on_progress(provider_id: str, progress: dict[str, Any]) -> None:
            # A provider warming up: its own figures, apart from the legs' done/total.
            params = {"progress_token": token, "provider": provider_id, "status": "warming"}
            await ctx.notify("$/progress", {**params, "warming": progress})

        more["on_progress"] = on_progress

    ctx.daemon.counters["fanouts"] += 1
    fan = await ctx.daemon.host.query_all(
        query,
        budget,
        providers=p.providers,
        session=p.session,
        timeout_ms=p.timeout_ms,
        on_leg_done=on_leg_done,
        overfetch=_overfetch(ctx, p),
        **more,
    )
    log_legs(log, fan.reports)
    return fan


def _overfetch(ctx: RequestContext, p: QueryParams) -> float:
    if p.overfetch is not None:
        return p.overfetch
    reranked = ctx.daemon.config.reranker.overfetch
    if reranked is not None and asks_rerank(getattr(p, "strategy", None)):
        return float(reranked)  # [reranker] overfetch: a larger pool for the reranker
    return float(ctx.daemon.config.host.overfetch)


def _reports(fan: FanOut) -> list[dict[str, Any]]:
    return [fan.reports[pid].to_wire() for pid in sorted(fan.reports)]


# -- methods ---------------------------------------------------------------------------


async def context_compose(ctx: RequestContext, p: ComposeParams) -> dict[str, Any]:
    budget = p.budget or ctx.daemon.config.host.default_budget
    try:
        strategy = c.strategy_from_wire(p.strategy) if p.strategy is not None else None
    except (ValueError, TypeError) as exc:
        raise InvalidParam(f"invalid params: strategy: {exc}", field="strategy") from None
    if isinstance(strategy, c.Calibrated):  # its maps live in the state directory
        from hostd.shadow import bind_calibration, calibration_path

        strategy = bind_calibration(strategy, calibration_path(ctx.daemon.config.state_path))
    if p.record:  # refused before any provider is asked: nowhere to keep the record
        ctx.daemon.require_shadow("record: the composition's record is kept in the shadow store")
    _check_named_providers(ctx, "caps", p.caps or {})
    _check_named_providers(ctx, "strategy", getattr(strategy, "weights", None) or {})
    placement = p.placement or "edges"
    if placement not in c.PLACEMENTS:
        raise InvalidParam(
            f"invalid params: placement: must be one of {', '.join(c.PLACEMENTS)}",
            field="placement",
        )
    host = ctx.daemon.config.host
    tokenizer = load_tokenizer(host.tokenizer) if host.tokenizer is not None else None
    # Counting in a model's tokens, or MMR's similarities, is work in proportion to what
    # was offered: it runs in a worker thread, never on the event loop.
    offload = tokenizer is not None or isinstance(strategy, c.MaximalMarginalRelevance)
    # Floors are admitted before ranking: priced once, they fail before any provider
    # is asked (FloorsExceedBudget, no silent drop) and the providers split what is left.
    given = [c.Floor(label=f.label, content=f.content, position=f.position) for f in p.floors]
    check = functools.partial(c.check_floors, given, budget, tokenizer=tokenizer)
    floors = await anyio.to_thread.run_sync(check) if offload else check()
    # With a tokenizer the providers are still asked in CGP units (B3), one per model
    # token of what the floors leave (docs/api.md: tokenizers average 3 to 4.5 bytes a
    # token on code, prose and CJK, and overfetch covers the rest).
    fan = await _fan_out(ctx, p, floors.contested)
    if isinstance(strategy, c.PrecomputedOrder):  # the rerank stage, before composition
        strategy = await ctx.daemon.rerank(p.query_text or p.goal, fan.accepted, strategy)
    compose = functools.partial(
        c.compose_for_prompt,
        fan.accepted,
        budget,
        strategy=strategy,
        placement=placement,
        floors=floors,
        caps=p.caps,
        excluded=fan.excluded,
        verification=fan.verification,
        overfetch=fan.overfetch,
        asked=fan.asked,
        sources=fan.sources,
        merge_max_ratio=host.merge_max_ratio,
        tokenizer=tokenizer,
    )
    composed = await anyio.to_thread.run_sync(compose) if offload else compose()
    # With record: true the reply waits for the record's commit (acknowledged means written).
    recorded = await ctx.daemon.record_shadow(
        ctx.request_id, p, floors.contested, fan.accepted, composed
    )
    result = composed.to_wire(include_content=p.include_content)
    if p.record:
        result["recorded"] = recorded
    audit = result["audit"]
    log_audit(log, audit["entries"], _reports(fan))
    # UR1's figures, and the prompt's size both ways (bytes, canonical and model tokens)
    usage = {**fan.usage_report(), "prompt": composed.prompt_usage()}
    ctx.daemon.remember_usage(ctx.request_id, usage)
    result["providers"] = _reports(fan)
    result["usage"] = usage
    if fan.figures:
        # Reuse and verification figures of the verify stage (sessions, V1–V4).
        result["verification"] = fan.figures
    result["request_id"] = ctx.request_id
    log.info(
        "compose.done",
        frames_offered=len(audit["entries"]),
        citations=len(result["citations"]),
        tokens_used=audit["tokens_used"],
        global_budget=budget,
        prompt_bytes=len(composed.prompt.encode()),
    )
    return result


def _rank_key(frame: dict[str, Any]) -> tuple[float, str, str]:
    return (-frame["score"], frame["id"], frame.get("content_digest") or "")


async def context_query(ctx: RequestContext, p: ContextQueryParams) -> dict[str, Any]:
    budget = p.budget or ctx.daemon.config.host.default_budget
    fan = await _fan_out(ctx, p, budget)
    result: dict[str, Any] = fan.to_wire()
    if p.rerank:  # the verdict as a strategy value: {"rerank": {order, model, …}}
        result["rerank"] = (await ctx.daemon.rerank(p.query_text or p.goal, fan.accepted)).to_wire()
    result["providers"] = _reports(fan)
    # ``frames`` lists each provider's frames by FrameId; ``rank`` gives their ids in that
    # provider's own order, score descending (ordinal, F10), ties by FrameId: the order
    # every ranking policy reads a provider's list in.
    result["rank"] = {
        pid: [f["id"] for f in sorted(frames, key=_rank_key)]
        for pid, frames in result["frames"].items()
    }
    ctx.daemon.remember_usage(ctx.request_id, result["usage"])
    result["request_id"] = ctx.request_id
    return result


async def providers_list(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    return {"providers": ctx.daemon.host.providers_list()}


async def providers_restart(ctx: RequestContext, p: RestartParams) -> dict[str, Any]:
    """Stop the provider if running, forget its failures, start it now (docs/api.md)."""
    return {"provider": await ctx.daemon.host.restart_provider(p.provider)}


async def consent_grant(ctx: RequestContext, p: ConsentParams) -> dict[str, Any]:
    _check_providers(ctx, [p.provider])
    receipt = _ledger(ctx).grant(p.provider, p.scope, p.grantor)
    log.info("consent.granted", provider=p.provider, scope=p.scope, grantor=p.grantor)
    return {"receipt": receipt.to_wire()}


async def consent_revoke(ctx: RequestContext, p: ConsentParams) -> dict[str, Any]:
    receipts = _ledger(ctx).revoke(p.provider, p.scope, p.grantor)
    log.info("consent.revoked", provider=p.provider, scope=p.scope, grantor=p.grantor)
    return {"revoked": [r.to_wire() for r in receipts]}


async def consent_list(ctx: RequestContext, p: ConsentListParams) -> dict[str, Any]:
    return {"receipts": [r.to_wire() for r in _ledger(ctx).list(p.provider)]}


def _ledger(ctx: RequestContext) -> ConsentStore:
    store = ctx.daemon.host.consent  # the ledger the gate reads (the daemon keeps one)
    if not isinstance(store, ConsentStore):
        raise HostdError("no consent ledger: the host runs without a state directory")
    return store


async def usage_report(ctx: RequestContext, p: UsageParams) -> dict[str, Any]:
    usage = ctx.daemon.usage_of(p.request_id)
    if usage is None:
        raise UnknownRequest(
            f"no usage report for request {p.request_id!r} (unknown or expired)",
            request_id=p.request_id,
        )
    return {"request_id": p.request_id, "usage": usage}


async def usage_feedback(ctx: RequestContext, p: FeedbackParams) -> dict[str, Any]:
    """Which cited frames the answer used, kept with the request's shadow record."""
    used = [u if isinstance(u, str) else u.model_dump() for u in p.used]
    fb = await ctx.daemon.shadow_feedback(p.request_id, used, p.helpful, p.note)
    return {"request_id": p.request_id, **fb.to_wire()}


async def host_status(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    return ctx.daemon.status()


async def host_shutdown(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    log.info("host.shutdown.requested")
    ctx.daemon.request_stop("host/shutdown")
    return {"stopping": True}


async def cancel(ctx: RequestContext, p: CancelParams) -> None:
    ctx.cancel_request(p.id)


METHODS: Mapping[str, Method] = {
    "context/compose": Method(ComposeParams, context_compose),
    "context/query": Method(ContextQueryParams, context_query),
    "providers/list": Method(NoParams, providers_list),
    "providers/restart": Method(RestartParams, providers_restart),
    "consent/grant": Method(ConsentParams, consent_grant),
    "consent/revoke": Method(ConsentParams, consent_revoke),
    "consent/list": Method(ConsentListParams, consent_list),
    "usage/report": Method(UsageParams, usage_report),
    "usage/feedback": Method(FeedbackParams, usage_feedback),
    "host/status": Method(NoParams, host_status),
    "host/shutdown": Method(NoParams, host_shutdown),
    "$/cancel": Method(CancelParams, cancel),
}


def _log_failure(method: str, exc: BaseException) -> None:
    if isinstance(exc, HostdError):
        log.info("request.failed", method=method, reason=exc.reason)
    elif not isinstance(exc, ValidationError):  # bad params are an answer, not news
        log.error("request.crashed", method=method, exc_info=exc)


#: The client API's dispatcher: every method above wrapped once in the error boundary.
DISPATCHER = Dispatcher(METHODS, on_error=_log_failure)


async def dispatch_one(daemon: DaemonState, connection: Peer, msg: Any) -> Any:
    """Dispatch one request object (not a batch) and return its reply (None: no reply)."""
    request_id = daemon.new_request_id()
    bind_request(request_id)
    method = msg.get("method") if isinstance(msg, dict) else None
    if daemon.stopping and method != "$/cancel" and isinstance(msg, dict) and "id" in msg:
        return error_reply(ShuttingDown("hostd is shutting down"), reply_id(msg))
    started = time.perf_counter()
    ctx = RequestContext(daemon, connection, request_id)
    reply = await DISPATCHER.dispatch(msg, ctx)
    daemon.counters["requests_total"] += 1
    error = reply.get("error") if isinstance(reply, dict) else None
    if error is not None:
        daemon.counters["requests_failed"] += 1
    if method != "$/cancel":
        data = error.get("data") if error else None
        log.info(
            "request.done",
            method=method if isinstance(method, str) else None,
            connection=connection.name,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            error_code=error.get("code") if error else None,
            error_reason=data.get("reason") if isinstance(data, dict) else None,
        )
    flush_logs()  # one write for all the events this request caused
    return reply
