"""The client API: the method table, the one error boundary, the request scope.

Owns what each client method (protocol.md §4) accepts (its params model, in
``_params``) and which pipeline call answers it; each method is wrapped once in
``hostd.rpc``'s error boundary, so every exception leaves through
``hostd.errors.error_to_wire``. At the wire, ``dispatch_one`` hands a decoded
request to jsonrpcserver (``DISPATCHER``); in-process, ``call_local`` calls the
same methods directly (``DIRECT``: no envelope). Both run in one request scope:
a request id bound for the log, the ``shutting_down`` refusal, the counters and
one ``request.done``. Methods see the daemon only through ``DaemonState`` and
their connection through ``Peer``, so this module imports neither. The request
path itself (floors, fan-out, strategy, composition, recording, the report) is
``hostd.pipeline``'s; this module neither ranks nor asks a provider.
"""

from __future__ import annotations

import inspect
import time
from collections import Counter
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from hostd._log import INFO
from hostd._log import level as log_level
from hostd.errors import (
    HostdError,
    RpcError,
    ShuttingDown,
    UnknownProvider,
    UnknownRequest,
    error_to_wire,
    unknown_provider,
)
from hostd.logs import REQUEST_ID, end_request, get_logger
from hostd.pipeline import Pipeline, Progress
from hostd.protocol import ForgetRequest, RememberRequest
from hostd.rpc import DirectDispatcher, Dispatcher, Method, error_reply, reply_id, tag_request

from ._params import (
    CancelParams,
    ComposeParams,
    ConsentListParams,
    ConsentParams,
    ContextQueryParams,
    FeedbackParams,
    ForgetParams,
    NoParams,
    RememberParams,
    RestartParams,
    UsageParams,
    WarmParams,
)

__all__ = [
    "DIRECT",
    "DISPATCHER",
    "METHODS",
    "DaemonState",
    "Peer",
    "RequestContext",
    "answer_one",
    "call_local",
    "dispatch_one",
]

log = get_logger("hostd.server")


class DaemonState(Protocol):
    """What the client methods read and change of the daemon (``_daemon.Daemon``)."""

    counters: Counter[str]
    stopping: bool

    @property
    def pipeline(self) -> Pipeline: ...  # the request path the methods call directly

    def new_request_id(self) -> str: ...

    def status(self) -> dict[str, Any]: ...

    def request_stop(self, reason: str) -> None: ...

    async def reload(self, trigger: str) -> dict[str, Any]: ...  # the config file again


class Peer(Protocol):
    """The connection a request came on (``_connection.Connection``, or none in-process)."""

    name: str
    #: A TCP client's ``address:port``; ``None`` on a Unix socket, stdio, in-process.
    peer: str | None

    def send(self, obj: Any) -> Awaitable[None]: ...

    def cancel(self, id_: Any) -> None: ...


class RequestContext:
    """What a method sees of the world: the daemon, its request id, its connection, and
    (in-process) the caller's own progress callback."""

    __slots__ = ("connection", "daemon", "on_progress", "request_id")

    def __init__(
        self,
        daemon: DaemonState,
        connection: Peer,
        request_id: str,
        on_progress: Progress | None = None,
    ) -> None:
        self.daemon = daemon
        self.connection = connection
        self.request_id = request_id
        self.on_progress = on_progress

    @property
    def pipeline(self) -> Pipeline:
        return self.daemon.pipeline

    def progress(self, token: str | int | None) -> Progress | None:
        """Where this request's progress notes go: the in-process caller's callback, or
        ``$/progress`` notifications on the connection for a request with a token."""
        if self.on_progress is not None:
            return self.on_progress
        if token is None:
            return None
        send = self.connection.send

        async def notify(note: dict[str, Any]) -> None:
            params = {"progress_token": token, **note}
            await send({"jsonrpc": "2.0", "method": "$/progress", "params": params})

        return notify

    def cancel_request(self, id_: Any) -> None:
        self.connection.cancel(id_)


# -- methods ---------------------------------------------------------------------------


def context_compose(ctx: RequestContext, p: ComposeParams) -> Awaitable[dict[str, Any]]:
    # The pipeline's coroutine itself, not awaited in one of this method's own: one
    # coroutine fewer in the chain each resumption of a composition passes through.
    return ctx.pipeline.compose(p, ctx.request_id, ctx.progress(p.progress_token))


async def context_query(ctx: RequestContext, p: ContextQueryParams) -> dict[str, Any]:
    progress = ctx.progress(p.progress_token)
    return await ctx.pipeline.query(p, ctx.request_id, progress, rerank=p.rerank)


async def providers_list(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    # The reranker is the daemon's, beside the engine: its row (the one host/status
    # shows) under a key of its own, so `providers` holds providers alone; null
    # without a [reranker], so a client can tell "none" from an older daemon.
    reranker = ctx.daemon.status().get("reranker")
    return {"providers": ctx.pipeline.engine.providers_list(), "reranker": reranker}


def _unknown_provider(provider: str, known: Iterable[str], **more: Any) -> UnknownProvider:
    """A ``provider`` param naming no configured provider, in the form of every refused
    param and of the pipeline's own refusal (``invalid params: provider: unknown provider
    …``, ``data.provider`` and ``data.field``, docs/api.md)."""
    said = f"invalid params: provider: {unknown_provider(provider, known)}"
    return UnknownProvider(said, provider=provider, field="provider", **more)


async def providers_restart(ctx: RequestContext, p: RestartParams) -> dict[str, Any]:
    """Stop the provider if running, forget its failures, start it now (docs/api.md)."""
    known = ctx.pipeline.provider_ids
    if p.provider not in known:  # ``providers``: the member its refusal had first, kept
        raise _unknown_provider(p.provider, known, providers=[p.provider])
    return {"provider": await ctx.pipeline.engine.restart_provider(p.provider)}


async def providers_warm(ctx: RequestContext, p: WarmParams) -> dict[str, Any]:
    """Start every provider not running and wait until each is ready or has failed
    (``hostd warm`` through a serving daemon: its own providers, never a second set)."""
    progress = ctx.progress(p.progress_token)

    async def note(provider_id: str, step: dict[str, Any]) -> None:
        if progress is not None:
            out = progress({"provider": provider_id, "status": "warming", "warming": step})
            if inspect.isawaitable(out):
                await out

    return {"providers": await ctx.pipeline.engine.warm_all(note if progress else None)}


async def consent_grant(ctx: RequestContext, p: ConsentParams) -> dict[str, Any]:
    known = ctx.pipeline.provider_ids
    if p.provider not in known:
        raise _unknown_provider(p.provider, known)
    receipt = ctx.pipeline.consent_ledger().grant(p.provider, p.scope, p.grantor)
    log.info("consent.granted", provider=p.provider, scope=p.scope, grantor=p.grantor)
    return {"receipt": receipt.to_wire()}


async def consent_revoke(ctx: RequestContext, p: ConsentParams) -> dict[str, Any]:
    receipts = ctx.pipeline.consent_ledger().revoke(p.provider, p.scope, p.grantor)
    log.info("consent.revoked", provider=p.provider, scope=p.scope, grantor=p.grantor)
    return {"revoked": [r.to_wire() for r in receipts]}


async def consent_list(ctx: RequestContext, p: ConsentListParams) -> dict[str, Any]:
    return {"receipts": [r.to_wire() for r in ctx.pipeline.consent_ledger().list(p.provider)]}


async def usage_report(ctx: RequestContext, p: UsageParams) -> dict[str, Any]:
    usage = ctx.pipeline.usage_of(p.request_id)
    if usage is None:
        raise UnknownRequest(
            f"no usage report for request {p.request_id!r} (unknown or expired)",
            request_id=p.request_id,
        )
    return {"request_id": p.request_id, "usage": usage}


async def usage_feedback(ctx: RequestContext, p: FeedbackParams) -> dict[str, Any]:
    """Which cited frames the answer used, kept with the request's shadow record."""
    used = [u if isinstance(u, str) else u.model_dump() for u in p.used]
    fb = await ctx.pipeline.feedback(p.request_id, used, p.helpful, p.note)
    return {"request_id": p.request_id, **fb.to_wire()}


async def memory_remember(ctx: RequestContext, p: RememberParams) -> dict[str, Any]:
    """Store one entry with one provider; answered once the provider committed it."""
    request = RememberRequest(
        kind=p.kind,
        title=p.title,
        content=p.content,
        valid_from=p.valid_from,
        valid_to=p.valid_to,
        supersedes=p.supersedes,
    )
    return await ctx.pipeline.remember(
        request, ctx.request_id, provider=p.provider, timeout_ms=p.timeout_ms
    )


async def memory_forget(ctx: RequestContext, p: ForgetParams) -> dict[str, Any]:
    """Delete one entry; answered once the provider committed it."""
    return await ctx.pipeline.forget(
        ForgetRequest(id=p.id), ctx.request_id, provider=p.provider, timeout_ms=p.timeout_ms
    )


async def host_status(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    return ctx.daemon.status()


async def host_shutdown(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    log.info("host.shutdown.requested", **_who(ctx))
    ctx.daemon.request_stop("host/shutdown")
    return {"stopping": True}


async def host_reload(ctx: RequestContext, p: NoParams) -> dict[str, Any]:
    """Read the daemon's config file again and apply it (docs/api.md ``host/reload``)."""
    log.info("host.reload.requested", **_who(ctx))
    return await ctx.daemon.reload("host/reload")


def _who(ctx: RequestContext) -> dict[str, Any]:
    """Who asked, for the log of a request that stops or reconfigures the daemon: the
    connection, and a TCP client's address (every holder of the token shares it) or a
    Unix client's user and process ids."""
    identity = getattr(ctx.connection, "identity", None)  # a socket's ``Connection``
    said = identity() if identity is not None else {"peer": ctx.connection.peer}
    return {"connection": ctx.connection.name, **said}


async def cancel(ctx: RequestContext, p: CancelParams) -> None:
    ctx.cancel_request(p.id)


METHODS: Mapping[str, Method] = {
    "context/compose": Method(ComposeParams, context_compose),
    "context/query": Method(ContextQueryParams, context_query),
    "providers/list": Method(NoParams, providers_list),
    "providers/restart": Method(RestartParams, providers_restart),
    "providers/warm": Method(WarmParams, providers_warm),
    "consent/grant": Method(ConsentParams, consent_grant),
    "consent/revoke": Method(ConsentParams, consent_revoke),
    "consent/list": Method(ConsentListParams, consent_list),
    "usage/report": Method(UsageParams, usage_report),
    "usage/feedback": Method(FeedbackParams, usage_feedback),
    "memory/remember": Method(RememberParams, memory_remember),
    "memory/forget": Method(ForgetParams, memory_forget),
    "host/status": Method(NoParams, host_status),
    "host/shutdown": Method(NoParams, host_shutdown),
    "host/reload": Method(NoParams, host_reload),
    "$/cancel": Method(CancelParams, cancel),
}


#: The members of a refusal's ``data`` its ``request.failed`` line carries too: what a
#: reader matches a client's error by, besides the request id. Never a value the
#: client sent beyond a provider id or a field's path (C8).
_LOGGED_DATA = ("field", "provider", "providers")


def _log_failure(method: str, exc: BaseException) -> None:
    if isinstance(exc, HostdError):
        # An answer (a refused param, an unknown provider): the client's to act on, so
        # info; a bug of hostd's own is ``request.crashed``, at error.
        said = {k: exc.data[k] for k in _LOGGED_DATA if k in exc.data}
        log.info("request.failed", method=method, reason=exc.reason, **said)
    elif not isinstance(exc, ValidationError):  # bad params are an answer, not news
        log.error("request.crashed", method=method, exc_info=exc)


#: The client API's dispatcher at the wire: every method above wrapped once in the boundary.
DISPATCHER = Dispatcher(METHODS, on_error=_log_failure)
#: The same methods for in-process callers (``LocalSession``): no envelope.
DIRECT = DirectDispatcher(METHODS, on_error=_log_failure)


def _begin(daemon: DaemonState) -> tuple[str, float]:
    """A request's start: its id, set for the log (``REQUEST_ID``, in the request's own
    task: nothing to undo at its end; ``call_local`` undoes it in its caller's), and
    the time its ``request.done`` measures from (0.0 when that event is below the level:
    it is not written, so no clock is read)."""
    request_id = daemon.new_request_id()
    REQUEST_ID.set(request_id)
    return request_id, time.perf_counter() if log_level.at <= INFO else 0.0


def _done(daemon: DaemonState, method: Any, connection: str, started: float, error: Any) -> None:
    """A request's end: counted, one ``request.done`` (not for ``$/cancel``), logs written."""
    daemon.counters["requests_total"] += 1
    if error is not None:
        daemon.counters["requests_failed"] += 1
    data = error.get("data") if error else None
    end_request(
        log if method != "$/cancel" else None,
        started,
        method if isinstance(method, str) else None,
        connection,
        error.get("code") if error else None,
        data.get("reason") if isinstance(data, dict) else None,
    )


def _refusal(daemon: DaemonState, method: Any, msg: Any) -> dict[str, Any] | None:
    """While stopping, a request (not ``$/cancel``, not a notification) is refused."""
    if daemon.stopping and method != "$/cancel" and isinstance(msg, dict) and "id" in msg:
        return error_reply(ShuttingDown("hostd is shutting down"), reply_id(msg))
    return None


async def dispatch_one(daemon: DaemonState, connection: Peer, msg: Any) -> Any:
    """Dispatch one request object (not a batch) and return its reply (None: no reply)."""
    request_id, started = _begin(daemon)
    method = msg.get("method") if isinstance(msg, dict) else None
    refused = _refusal(daemon, method, msg)
    if refused is not None:
        return tag_request(refused, request_id)
    reply = await DISPATCHER.dispatch(msg, RequestContext(daemon, connection, request_id))
    tag_request(reply, request_id)
    error = reply.get("error") if isinstance(reply, dict) else None
    _done(daemon, method, connection.name, started, error)
    return reply


async def answer_one(daemon: DaemonState, connection: Peer, msg: Any) -> bytes | None:
    """``dispatch_one``, its reply encoded by the same call into the dispatcher: the line
    to write (None: no reply)."""
    request_id, started = _begin(daemon)
    method = msg.get("method") if isinstance(msg, dict) else None
    refused = _refusal(daemon, method, msg)
    if refused is not None:
        return DISPATCHER.encode_reply(tag_request(refused, request_id))
    ctx = RequestContext(daemon, connection, request_id)
    reply, line = await DISPATCHER.answer(msg, ctx, request_id)
    error = reply.get("error") if isinstance(reply, dict) else None
    _done(daemon, method, connection.name, started, error)
    return line


async def call_local(
    daemon: DaemonState,
    connection: Peer,
    method: str,
    params: Mapping[str, Any] | None,
    on_progress: Progress | None = None,
) -> Any:
    """One in-process call: ``method``'s result, or the ``RpcError`` the wire would answer.
    The caller's own task runs it, so its request id (``REQUEST_ID``) is set for the
    call only: the caller's events after it carry no stale id (its own, if it had one)."""
    token = REQUEST_ID.set(None)
    try:
        return await _call_local(daemon, connection, method, params, on_progress)
    finally:
        REQUEST_ID.reset(token)


async def _call_local(
    daemon: DaemonState,
    connection: Peer,
    method: str,
    params: Mapping[str, Any] | None,
    on_progress: Progress | None,
) -> Any:
    request_id, started = _begin(daemon)
    if daemon.stopping and method != "$/cancel":
        wire = tag_request(
            {"error": error_to_wire(ShuttingDown("hostd is shutting down"))}, request_id
        )
        error = wire["error"]
        raise RpcError(error["code"], error["message"], error["data"])
    ctx = RequestContext(daemon, connection, request_id, on_progress)
    try:
        result = await DIRECT.call(method, params, ctx)
    except RpcError as exc:
        tag_request({"error": {"data": exc.rpc_data}}, request_id)
        error = {"code": exc.rpc_code, "data": exc.rpc_data}
        _done(daemon, method, connection.name, started, error)
        raise
    _done(daemon, method, connection.name, started, None)
    return result
