"""The client API: params models, the methods dict and the one error boundary.

Owns what each client method (protocol.md §4) accepts and returns. Every
method validates its params into a pydantic model first (−32602 naming the
field), then calls the engine and the composition library; every exception
leaves through ``_boundary`` → ``hostd.errors.error_to_wire``. Ranking and
rendering live in ``hostd.compose``; fan-out, consent and verification in
``hostd.engine`` — this module only wires them to the wire.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hostd.errors import (
    BadRequest,
    HostdError,
    NoProviderAvailable,
    UnknownProvider,
    error_to_wire,
)
from hostd.logs import get_logger, log_audit, log_legs
from hostd.protocol import INVALID_PARAMS, ContextQuery, canonical_token_cost, check_timestamp

with warnings.catch_warnings():
    # jsonrpcserver 5 reads its schema with the deprecated importlib.resources.read_text;
    # harmless, but it must not break runs with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from jsonrpcserver import Error, Success
    from jsonrpcserver.result import Result

if TYPE_CHECKING:
    from ._connection import RequestContext

__all__ = ["METHODS", "ComposeParams", "QueryParams"]

log = get_logger("hostd.server")

_MAX_STR = 64 * 1024


class InvalidParam(BadRequest):
    """A param that parsed but does not name a known policy (strategy, placement)."""

    reason = "invalid_params"


class UnknownRequest(BadRequest):
    """``usage/report`` for a request id this daemon does not remember."""

    reason = "unknown_request"


class _Params(BaseModel):
    # Our own API: a misspelt member is a named error, not silently ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class FloorParam(_Params):
    label: Annotated[str, Field(min_length=1, max_length=256)]
    content: Annotated[str, Field(max_length=4 * 1024 * 1024)]
    position: Literal["top", "bottom"] = "top"


class QueryParams(_Params):
    goal: Annotated[str, Field(min_length=1, max_length=_MAX_STR)]
    query_text: Annotated[str, Field(max_length=_MAX_STR)] | None = None
    kinds: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(default_factory=list)
    anchors: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list)
    as_of: str | None = None
    budget: Annotated[int, Field(gt=0, le=10_000_000)] | None = None
    max_frames: Annotated[int, Field(ge=1, le=10_000)] = 64
    providers: list[Annotated[str, Field(min_length=1)]] | None = None
    timeout_ms: Annotated[int, Field(gt=0, le=600_000)] | None = None
    session: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    progress_token: str | int | None = None
    #: Overrides ``[host] overfetch``: each provider is asked for up to its share × this.
    overfetch: (
        Annotated[float, Field(ge=1.0, le=1000.0, allow_inf_nan=False, strict=True)] | None
    ) = None


class ComposeParams(QueryParams):
    strategy: str | dict[str, Any] | None = None
    placement: str | None = None
    floors: list[FloorParam] = Field(default_factory=list)
    caps: dict[str, Annotated[float, Field(ge=0, le=1)]] | None = None


class ConsentParams(_Params):
    provider: Annotated[str, Field(min_length=1)]
    scope: Annotated[str, Field(min_length=1, max_length=1024)]
    grantor: Annotated[str, Field(min_length=1, max_length=256)] = "client"


class ConsentListParams(_Params):
    provider: str | None = None


class UsageParams(_Params):
    request_id: Annotated[str, Field(min_length=1)]


class CancelParams(_Params):
    id: str | int | None


class _NoParams(_Params):
    pass


def _field_of(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "params"


def _invalid_params(exc: ValidationError) -> Result:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0]
    field = _field_of(first["loc"])
    msg = "unknown member" if first["type"] == "extra_forbidden" else first["msg"]
    detail = [{"field": _field_of(e["loc"]), "problem": e["msg"]} for e in errors[:20]]
    return Error(
        INVALID_PARAMS,
        f"invalid params: {field}: {msg}",
        {"reason": "invalid_params", "field": field, "errors": detail},
    )


Method = Callable[..., Awaitable[Result]]


def _boundary(model: type[_Params]) -> Callable[[Callable[..., Awaitable[Any]]], Method]:
    """Validate params into ``model``, call, and turn every exception into a wire error."""

    def wrap(fn: Callable[..., Awaitable[Any]]) -> Method:
        async def method(ctx: RequestContext, *args: Any, **kwargs: Any) -> Result:
            if args:
                return Error(
                    INVALID_PARAMS,
                    "invalid params: params must be an object (by-name), not an array",
                    {"reason": "invalid_params", "field": "params"},
                )
            try:
                params = model.model_validate(kwargs)
            except ValidationError as exc:
                return _invalid_params(exc)
            try:
                return Success(await fn(ctx, params))
            except ValidationError as exc:
                return _invalid_params(exc)
            except HostdError as exc:
                wire = error_to_wire(exc)
                log.info("request.failed", method=fn.__name__, reason=exc.reason)
                return Error(wire["code"], wire["message"], wire["data"])
            except Exception as exc:  # the boundary: nothing escapes as a crash
                log.error("request.crashed", method=fn.__name__, exc_info=exc)
                wire = error_to_wire(exc)
                return Error(wire["code"], wire["message"], wire["data"])

        # No functools.wraps: jsonrpcserver binds params against the *wrapper's* signature.
        method.__name__ = method.__qualname__ = fn.__name__
        method.__doc__ = fn.__doc__
        # jsonrpcserver calls inspect.signature per request; a precomputed one is a lookup.
        method.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]  # read by inspect
        return method

    return wrap


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
    if not chosen:
        raise NoProviderAvailable("no provider available: none is configured or selected")
    return chosen


async def _fan_out(ctx: RequestContext, p: QueryParams, budget: int, provider_budget: int) -> Any:
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
        max_tokens=provider_budget,
        as_of=p.as_of,
    )
    on_leg_done = None
    if p.progress_token is not None:
        total = len(chosen)
        done = 0
        token = p.progress_token

        async def on_leg_done(report: Any) -> None:
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

    fan = await ctx.daemon.query_all(
        query,
        provider_budget,
        providers=p.providers,
        session=p.session,
        timeout_ms=p.timeout_ms,
        on_leg_done=on_leg_done,
        overfetch=_overfetch(ctx, p),
    )
    log_legs(log, fan.reports)
    return fan


def _overfetch(ctx: RequestContext, p: QueryParams) -> float:
    if p.overfetch is not None:
        return p.overfetch
    return float(ctx.daemon.config.host.overfetch)


def _reports(fan: Any) -> list[dict[str, Any]]:
    return [fan.reports[pid].to_wire() for pid in sorted(fan.reports)]


# -- methods ---------------------------------------------------------------------------


@_boundary(ComposeParams)
async def context_compose(ctx: RequestContext, p: ComposeParams) -> dict[str, Any]:
    from hostd import compose as c

    budget = p.budget or ctx.daemon.config.host.default_budget
    try:
        strategy = c.strategy_from_wire(p.strategy) if p.strategy is not None else None
    except (ValueError, TypeError) as exc:
        raise InvalidParam(f"invalid params: strategy: {exc}", field="strategy") from None
    placement = p.placement or "edges"
    if placement not in c.PLACEMENTS:
        raise InvalidParam(
            f"invalid params: placement: must be one of {', '.join(c.PLACEMENTS)}",
            field="placement",
        )
    floors = [c.Floor(label=f.label, content=f.content, position=f.position) for f in p.floors]
    kwargs: dict[str, Any] = {"placement": placement, "floors": floors, "caps": p.caps}
    if strategy is not None:
        kwargs["strategy"] = strategy
    # Floors are admitted before ranking: fail before any provider is asked (no silent drop).
    floor_cost = sum(canonical_token_cost(f.content) for f in p.floors)
    if floors:
        c.compose_for_prompt((), budget, **kwargs)  # FloorsExceedBudget is a HostdError
    fan = await _fan_out(ctx, p, budget, max(budget - floor_cost, 0))
    composed = c.compose_for_prompt(
        fan.accepted, budget, excluded=fan.excluded, verification=fan.verification, **kwargs
    )
    await ctx.daemon.record_shadow(ctx.request_id, p, budget - floor_cost, fan.accepted, composed)
    result = composed.to_wire()
    policy = result.get("audit", {}).get("policy")
    if isinstance(policy, dict):
        # What the providers were asked for: share × overfetch, capped at the budget.
        policy["overfetch"] = fan.overfetch
        policy["asked"] = dict(fan.asked)
    log_audit(log, result.get("audit", {}).get("entries", ()))
    usage = fan.usage_report()
    ctx.daemon.remember_usage(ctx.request_id, usage)
    result["providers"] = _reports(fan)
    result["usage"] = usage
    if fan.figures:
        # Reuse and verification figures of the verify stage (sessions, V1–V4).
        result["verification"] = fan.figures
    result["request_id"] = ctx.request_id
    audit = result.get("audit", {})
    log.info(
        "compose.done",
        frames_offered=len(audit.get("entries", ())),
        citations=len(result.get("citations", ())),
        tokens_used=audit.get("tokens_used"),
        global_budget=budget,
        prompt_bytes=len(result.get("prompt", "").encode()),
    )
    return result


def _rank_key(frame: dict[str, Any]) -> tuple[float, str, str]:
    return (-frame["score"], frame["id"], frame.get("content_digest") or "")


@_boundary(QueryParams)
async def context_query(ctx: RequestContext, p: QueryParams) -> dict[str, Any]:
    budget = p.budget or ctx.daemon.config.host.default_budget
    fan = await _fan_out(ctx, p, budget, budget)
    result: dict[str, Any] = fan.to_wire()
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


@_boundary(_NoParams)
async def providers_list(ctx: RequestContext, p: _NoParams) -> dict[str, Any]:
    return {"providers": await ctx.daemon.providers_list()}


@_boundary(ConsentParams)
async def consent_grant(ctx: RequestContext, p: ConsentParams) -> dict[str, Any]:
    _check_providers(ctx, [p.provider])
    receipt = ctx.daemon.consent.grant(p.provider, p.scope, p.grantor)
    log.info("consent.granted", provider=p.provider, scope=p.scope, grantor=p.grantor)
    return {"receipt": _wire(receipt)}


@_boundary(ConsentParams)
async def consent_revoke(ctx: RequestContext, p: ConsentParams) -> dict[str, Any]:
    receipts = ctx.daemon.consent.revoke(p.provider, p.scope, p.grantor)
    log.info("consent.revoked", provider=p.provider, scope=p.scope, grantor=p.grantor)
    return {"revoked": [_wire(r) for r in receipts]}


@_boundary(ConsentListParams)
async def consent_list(ctx: RequestContext, p: ConsentListParams) -> dict[str, Any]:
    return {"receipts": [_wire(r) for r in ctx.daemon.consent.list(p.provider)]}


def _wire(value: Any) -> Any:
    to_wire = getattr(value, "to_wire", None)
    return to_wire() if callable(to_wire) else value


@_boundary(UsageParams)
async def usage_report(ctx: RequestContext, p: UsageParams) -> dict[str, Any]:
    usage = ctx.daemon.usage_of(p.request_id)
    if usage is None:
        raise UnknownRequest(
            f"no usage report for request {p.request_id!r} (unknown or expired)",
            request_id=p.request_id,
        )
    return {"request_id": p.request_id, "usage": usage}


@_boundary(_NoParams)
async def host_status(ctx: RequestContext, p: _NoParams) -> dict[str, Any]:
    return ctx.daemon.status()


@_boundary(_NoParams)
async def host_shutdown(ctx: RequestContext, p: _NoParams) -> dict[str, Any]:
    log.info("host.shutdown.requested")
    ctx.daemon.request_stop("host/shutdown")
    return {"stopping": True}


@_boundary(CancelParams)
async def cancel(ctx: RequestContext, p: CancelParams) -> None:
    ctx.cancel_request(p.id)


METHODS: Mapping[str, Method] = {
    "context/compose": context_compose,
    "context/query": context_query,
    "providers/list": providers_list,
    "consent/grant": consent_grant,
    "consent/revoke": consent_revoke,
    "consent/list": consent_list,
    "usage/report": usage_report,
    "host/status": host_status,
    "host/shutdown": host_shutdown,
    "$/cancel": cancel,
}
