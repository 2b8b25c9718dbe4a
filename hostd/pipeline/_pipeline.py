"""``Pipeline``: one request end to end, as named stages.

``compose``: price floors → fan out → prepare strategy → compose → record → report.
``query``: fan out → (rerank, when asked) → report. ``remember``/``forget``: one
memory write to one provider (the engine's), answered once the provider committed
it. Each stage is one call here
(the work is the engine's, the composition library's, a preparer's or the
recorder's); each hands the next a value, never a dict to re-read. The wire
(``hostd.server``) and every in-process caller (``hostd mcp``, the CLI's
one-shot commands, an embedded session) call these methods directly.

The pipeline owns what a request reads and leaves behind: the configured
provider ids, the usage reports kept for ``usage/report`` (UR1), the shadow
recorder (``usage/feedback``). Each leg is logged once, by the engine as it
lands; the composition once here (``compose.audit.summary``, ``compose.done``).
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import orjson

from hostd import compose as c
from hostd._log import INFO
from hostd._log import level as log_level
from hostd._tokenizer import load_tokenizer
from hostd.config import Config
from hostd.engine import ConsentStore, Engine, FanOut, LegReport, RerankService
from hostd.errors import (
    HostdError,
    InvalidParam,
    NoProviderAvailable,
    ShadowDisabled,
    UnknownProvider,
    unknown_provider,
)
from hostd.logs import get_logger, log_audit
from hostd.protocol import (
    ContextQuery,
    EncodedObject,
    ForgetRequest,
    RememberRequest,
    check_timestamp,
    parse_timestamp,
)

from ._advice import budget_hint
from ._coverage import coverage_caps, explain_caps
from ._degraded import degradations
from ._prepare import Prepared, Preparer, RerankPreparer, preparers
from ._request import ComposeRequest, Progress, QueryRequest

if TYPE_CHECKING:  # the recorder's types: the package loads with [shadow] (the daemon's)
    from hostd.quality import Feedback, ShadowRecorder

__all__ = ["USAGE_KEPT", "Pipeline"]

log = get_logger("hostd.pipeline")

#: Usage reports kept for ``usage/report`` (UR1), as compact JSON: bounded memory.
USAGE_KEPT = 1024

_NO_PREPARATION = Prepared(None)
#: Policies whose ranking costs in proportion to the candidates: run off the event loop.
_OFF_LOOP: frozenset[type] = frozenset({c.MaximalMarginalRelevance})


class Pipeline:
    """The request path over one engine: ``compose``, ``query`` and what they keep.

    ``reranker`` and ``recorder`` are the daemon's services (``None``: not
    configured); ``counters`` is the daemon's (``fanouts`` is counted here).
    """

    def __init__(
        self,
        config: Config,
        engine: Engine,
        *,
        reranker: RerankService | None = None,
        recorder: ShadowRecorder | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.reranker = reranker
        self.recorder = recorder
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.provider_ids = frozenset(p.id for p in config.provider)
        self._all_ids = tuple(sorted(self.provider_ids))  # ``chosen(None)``: sorted once
        #: ``rerank``'s preparer; ``context/query`` with ``rerank: true`` asks it too.
        self._rerank = RerankPreparer(reranker, config.reranker)
        self._preparers = preparers(config, self._rerank)
        self._usage: OrderedDict[str, bytes] = OrderedDict()

    def reconfigured(self, config: Config) -> Pipeline:
        """The request path under a reloaded ``config``, over the same engine and
        services, keeping what earlier requests left (their usage reports). A request
        already under way finishes on this one, under the config it began with."""
        new = Pipeline(
            config,
            self.engine,
            reranker=self.reranker,
            recorder=self.recorder,
            counters=self.counters,
        )
        new._usage = self._usage
        return new

    # -- what requests read and leave -----------------------------------------------------

    def chosen(self, wanted: Sequence[str] | None) -> list[str]:
        """The providers a request asks (all when ``wanted`` is None), each configured."""
        known = self.provider_ids
        if wanted is not None:
            for pid in wanted:
                if pid not in known:
                    # In the form of every refused param (the field first), with its own
                    # reason (unknown_provider) and the provider named in its data.
                    said = f"invalid params: providers: {unknown_provider(pid, known)}"
                    raise UnknownProvider(said, provider=pid, field="providers")
            chosen = sorted(set(wanted))
        else:
            chosen = list(self._all_ids)
        if not known:  # the config has none: name it, where else was looked, and `hostd init`
            raise NoProviderAvailable(self.config.no_providers())
        if not chosen:
            raise NoProviderAvailable("no provider available: none is selected")
        return chosen

    def consent_ledger(self) -> ConsentStore:
        """The ledger the consent gate reads (the daemon keeps one under its state dir)."""
        store = self.engine.consent
        if not isinstance(store, ConsentStore):
            raise HostdError("no consent ledger: the host runs without a state directory")
        return store

    def usage_of(self, request_id: str) -> Any:
        """The usage report of an earlier request (``None``: unknown or expired)."""
        raw = self._usage.get(request_id)
        return None if raw is None else orjson.loads(raw)

    def _remember_usage(self, request_id: str, usage: dict[str, Any] | bytes) -> None:
        # Serialised, not kept as an object graph: a report lists every served FrameId
        # (a composition's comes serialised by its reply step, ``compose_reply``).
        self._usage[request_id] = usage if isinstance(usage, bytes) else orjson.dumps(usage)
        while len(self._usage) > USAGE_KEPT:
            self._usage.popitem(last=False)

    async def feedback(
        self, request_id: str, used: list[Any], helpful: bool | None, note: str | None
    ) -> Feedback:
        """``usage/feedback``: kept beside the request's shadow record (once committed)."""
        recorder = self._require_recorder("usage/feedback is kept beside the shadow records")
        return await recorder.feedback(request_id, used, helpful, note)

    def _require_recorder(self, why: str) -> ShadowRecorder:
        """The shadow recorder; ``ShadowDisabled`` (saying ``why`` it is needed) without one."""
        if self.recorder is None:
            raise ShadowDisabled(
                f"{why}: enable [shadow] (sample = 0 keeps only the requests that get "
                "feedback or ask for their record)"
            )
        return self.recorder

    # -- context/compose ------------------------------------------------------------------

    async def compose(
        self, request: ComposeRequest, request_id: str, progress: Progress | None = None
    ) -> dict[str, Any]:
        """One composition: its ``context/compose`` result (protocol.md §4)."""
        budget = request.budget or self.config.host.default_budget
        if request.record:  # refused before anything is read: nowhere to keep the record
            self._require_recorder("record: the composition's record is kept in the shadow store")
        host = self.config.host
        tokenizer = load_tokenizer(host.tokenizer) if host.tokenizer is not None else None
        # 1. read the request and price the floors, in one call: the strategy parsed, the
        # provider ids it and the caps name checked, the placement, then the floors, and
        # the providers' query built for what the floors leave.
        # Admitted before ranking: priced once, they fail before any provider is asked
        # (FloorsExceedBudget, no silent drop); the providers split what is left.
        # Counting in a model's tokens, or a policy priced by what was offered (MMR's
        # similarities), is work in proportion to the candidates: a worker thread runs it,
        # never the event loop. A handoff costs the loop ~40 µs and four turns
        # (docs/pipeline.md): the floors go to the thread only when a tokenizer counts
        # them (their canonical price does not depend on the strategy: MMR's floors are
        # priced here, as every other policy's), and the composition whenever either
        # holds (MMR over even four candidates costs the loop more than a handoff).
        admit = functools.partial(
            c.admit_request,
            budget,
            strategy=request.strategy if request.strategy is not None else host.strategy,
            placement=request.placement,
            caps=request.caps,
            floors=[(f.label, f.content, f.position) for f in request.floors],
            providers=self.provider_ids,
            tokenizer=tokenizer,
            query=_query_fields(request),
        )
        admitted = await anyio.to_thread.run_sync(admit) if tokenizer is not None else admit()
        strategy, placement, floors = admitted.strategy, admitted.placement, admitted.floors
        offload = tokenizer is not None or type(strategy) in _OFF_LOOP
        # 2. fan out. With a tokenizer the providers are still asked in CGP units (B3), one
        # per model token of what the floors leave (docs/api.md: tokenizers average 3 to
        # 4.5 bytes a token on code, prose and CJK, and overfetch covers the rest).
        preparer = self._preparers.get(type(strategy))
        assert admitted.query is not None  # its fields were given
        fan = await self._fan_out(request, admitted.query, preparer, progress)
        # 3. prepare the strategy (state or I/O: calibration maps, the reranker's verdict).
        prepared = (
            _NO_PREPARATION
            if strategy is None
            else Prepared(strategy)
            if preparer is None
            else await preparer.prepare(strategy, request, fan)
        )
        # 4. compose (pure), and the reply around it in the same call: the fan-out's part
        # (legs, UR1 usage, verify figures: asked of the fan-out once) after the audit, the
        # prompt's size both ways added to its usage. Each wire dict is built once, in the
        # reply's order (``fan.part``, built by the engine as it judged the fan-out);
        # ``recorded`` (asked for with ``record``) holds its place there until the record
        # is committed.
        part = fan.part
        if request.record:
            part = {"recorded": False, **part}
        # A provider still building its index gets at most the share of the budget it
        # has built (its frames come from the few files it began with).
        caps = coverage_caps(request.caps, fan.coverage)
        compose = functools.partial(
            c.compose_reply,
            fan.accepted,
            budget,
            include_content=request.include_content,
            then=part,
            strategy=prepared.strategy,
            placement=placement,
            floors=floors,
            caps=caps,
            excluded=fan.excluded,
            verification=fan.verification,
            overfetch=fan.overfetch,
            asked=fan.asked,
            sources=fan.sources,
            merge_max_ratio=host.merge_max_ratio,
            tokenizer=tokenizer,
        )
        composed, result, usage = await anyio.to_thread.run_sync(compose) if offload else compose()
        explain_caps(result["audit"]["entries"], fan.coverage, request.caps)
        if not result["citations"]:  # nothing included: say the budget that could do
            hint = self._budget_hint(request, result["audit"]["entries"], fan, floors)
            if hint is not None:
                result["audit"]["budget_hint"] = hint
        # 5. record: one value, for shadow replay and feedback. With ``record`` the
        # reply waits for the record's commit (acknowledged means written).
        recorded = False
        if self.recorder is not None:
            # The caps composed with (a building provider's included): replay recomposes
            # the same prompt.
            kept = dict(caps) if caps is not None else None
            # What span merging was handed goes by reference: the recorder keeps line
            # counts of it, and only for a record that keeps content (``hold``).
            from hostd.quality import Composition  # loaded with the recorder

            composition = Composition(
                request_id,
                request.goal,
                floors.contested,
                kept,
                fan.accepted,
                composed,
                fan.verification,
                fan.sources,
                host.merge_max_ratio,
            )
            recorded = bool(await self.recorder.record(composition, keep=request.record))
        if request.record:  # whether it is on disk, in the place kept for it
            result["recorded"] = recorded
        # 6. report.
        return self._report(request_id, budget, fan, result, part, prepared, usage)

    def _budget_hint(
        self,
        request: ComposeRequest,
        entries: Sequence[Mapping[str, Any]],
        fan: FanOut,
        floors: c.AdmittedFloors,
    ) -> dict[str, Any] | None:
        """``audit.budget_hint`` (``budget_hint``) of a composition that included nothing,
        by the split this fan-out was planned with: the asked providers' weights, its
        over-fetch, what the floors held back of the budget."""
        asked = set(self.chosen(request.providers))
        weights = {p.id: p.weight for p in self.config.provider if p.id in asked}
        costs = {(pid, frame.id): frame.token_cost for pid, frame in fan.accepted}
        return budget_hint(
            entries,
            fan.reports,
            costs,
            weights,
            overfetch=fan.overfetch,
            fixed=floors.meter.tokens(floors.fixed),
            held=floors.budget - floors.contested,
        )

    def _report(
        self,
        request_id: str,
        budget: int,
        fan: FanOut,
        result: dict[str, Any],
        part: dict[str, Any],
        prepared: Prepared,
        kept: bytes | None = None,
    ) -> dict[str, Any]:
        """The reply (``result``: the composition's wire form with the fan-out's ``part``
        after its audit) finished: UR1's usage kept (``kept``: already serialised, as
        ``compose_reply`` hands it back), ``degraded`` and its reasons, the request id;
        the composition logged once."""
        usage = part["usage"]
        self._remember_usage(request_id, kept if kept is not None else usage)
        if kept is not None:  # the reply's usage, as kept: the wire writes these bytes
            result["usage"] = encoded = EncodedObject(result["usage"])
            encoded.text = kept
        degraded = degradations(fan.reports, fan.figures, prepared.degraded, fan.excluded)
        result["degraded"] = bool(degraded)
        result["degraded_reasons"] = [d.to_wire() for d in degraded]
        result["request_id"] = request_id
        if log_level.at > INFO:  # nothing of a composition's log is written above info
            return result
        audit = result["audit"]
        done = {
            "frames_offered": len(audit["entries"]),
            "citations": len(result["citations"]),
            "tokens_used": audit["tokens_used"],
            "global_budget": budget,
            "prompt_bytes": usage["prompt"]["bytes"],  # counted once, by prompt_usage
            "degraded": list(dict.fromkeys(d.reason for d in degraded)),
        }
        log_audit(log, audit["entries"], part["providers"], done=done)
        return result

    # -- context/query --------------------------------------------------------------------

    async def query(
        self,
        request: QueryRequest,
        request_id: str,
        progress: Progress | None = None,
        *,
        rerank: bool = False,
    ) -> dict[str, Any]:
        """One fan-out: its ``context/query`` result (frames per provider, each ranked in
        its provider's own order; with ``rerank`` the reranker's verdict as well)."""
        budget = request.budget or self.config.host.default_budget
        asked = ContextQuery(**_query_fields(request), max_tokens=budget)
        fan = await self._fan_out(request, asked, None, progress)
        result: dict[str, Any] = fan.to_wire()
        if rerank:  # the verdict as a strategy value: {"rerank": {order, model, …}}
            query = request.query_text or request.goal
            result["rerank"] = (await self._rerank.judge(query, fan.accepted)).to_wire()
        result["providers"] = _reports(fan.reports)
        # ``frames`` lists each provider's frames by FrameId; ``rank`` gives their ids in that
        # provider's own order, score descending (ordinal, F10), ties by FrameId: the order
        # every ranking policy reads a provider's list in.
        result["rank"] = {
            pid: [f["id"] for f in sorted(frames, key=_rank_key)]
            for pid, frames in result["frames"].items()
        }
        self._remember_usage(request_id, result["usage"])
        result["request_id"] = request_id
        return result

    # -- memory/remember, memory/forget ---------------------------------------------------

    async def remember(
        self,
        request: RememberRequest,
        request_id: str,
        *,
        provider: str | None = None,
        timeout_ms: float | None = None,
    ) -> dict[str, Any]:
        """One entry stored by one provider (default: the one that stores memories): its
        ``memory/remember`` result, answered once the provider committed it."""
        for field in ("valid_from", "valid_to"):
            bad = check_timestamp(getattr(request, field), field)
            if bad:  # F4: a time the provider could not store is the client's error
                raise InvalidParam(f"invalid params: {field}: {bad[0].message}", field=field)
        opens, closes = request.valid_from, request.valid_to
        if opens is not None and closes is not None:
            if (parse_timestamp(closes) or ()) <= (parse_timestamp(opens) or ()):
                raise InvalidParam(
                    "invalid params: valid_to: not after valid_from (a window [valid_from, "
                    "valid_to) holds an instant)",
                    field="valid_to",
                )
        self._writer(provider)
        pid, result = await self.engine.remember(
            request, provider=provider, timeout_ms=timeout_ms, configured=self.provider_ids
        )
        return {"provider": pid, **result.to_wire(), "request_id": request_id}

    async def forget(
        self,
        request: ForgetRequest,
        request_id: str,
        *,
        provider: str | None = None,
        timeout_ms: float | None = None,
    ) -> dict[str, Any]:
        """One entry deleted by one provider (default as ``remember``'s), once committed."""
        self._writer(provider)
        pid, result = await self.engine.forget(
            request, provider=provider, timeout_ms=timeout_ms, configured=self.provider_ids
        )
        return {"provider": pid, **result.to_wire(), "request_id": request_id}

    def _writer(self, provider: str | None) -> None:
        """A named provider is configured; some provider is."""
        known = self.provider_ids
        if not known:
            raise NoProviderAvailable(self.config.no_providers())
        if provider is not None and provider not in known:
            said = f"invalid params: provider: {unknown_provider(provider, known)}"
            raise UnknownProvider(said, provider=provider, field="provider")

    # -- the fan-out stage ----------------------------------------------------------------

    async def _fan_out(
        self,
        request: QueryRequest,
        query: ContextQuery,
        preparer: Preparer | None,
        progress: Progress | None,
    ) -> FanOut:
        """Ask the providers ``query`` (its ``max_tokens``: what the floors left, for
        compose; built by the admission then, as it works that out)."""
        if request.as_of is not None:  # no window: nothing to check (check_timestamp passes None)
            bad_time = check_timestamp(request.as_of, "as_of")
            if bad_time:
                # Q2/F4: a window the providers could not read is the client's error.
                raise InvalidParam(f"invalid params: as_of: {bad_time[0].message}", field="as_of")
        chosen = self.chosen(request.providers)
        overfetch = request.overfetch
        if overfetch is None and preparer is not None:
            overfetch = preparer.overfetch  # e.g. [reranker] overfetch: a larger pool
        if overfetch is None:
            overfetch = float(self.config.host.overfetch)
        self.counters["fanouts"] += 1
        notes = _Notes(progress, len(chosen)) if progress is not None else None
        return await self.engine.query_all(
            query,
            query.max_tokens,
            providers=request.providers,
            session=request.session,
            timeout_ms=request.timeout_ms,
            ready_wait_ms=request.ready_wait_ms,
            on_leg_done=notes.leg_done if notes is not None else None,
            overfetch=overfetch,
            on_progress=notes.warming if notes is not None else None,
            # The set it runs, which a reload since ``chosen`` may have changed.
            on_fan_out=notes.fan_out if notes is not None else None,
        )


class _Notes:
    """A request's progress notes: one per finished leg (``done`` of ``total``) and one
    per warm-up step of a provider it asks (its own figures, apart from done/total).

    A provider's leg note is the last it gets: its steps heard after its leg ended are
    not told (the leg's report says where it stood, ``phase`` for a ``warming`` leg),
    so a client's last word of a provider agrees with the result, and the request's
    count is never passed by a provider it no longer waits for."""

    __slots__ = ("_done", "_ended", "_progress", "_total")

    def __init__(self, progress: Progress, total: int) -> None:
        self._progress = progress
        self._total = total
        self._done = 0
        self._ended: set[str] = set()

    def fan_out(self, ids: list[str]) -> None:
        """The providers the fan-out asks (``Host.query_all``, before any note): the
        total, where it differs from those the request chose (a reload since)."""
        self._total = len(ids)

    async def _send(self, note: dict[str, Any]) -> None:
        out = self._progress(note)
        if inspect.isawaitable(out):
            await out

    def leg_done(self, report: LegReport) -> Awaitable[None]:
        # Counted and marked ended when the engine judges the leg, not when the engine's
        # task sends the note: a step of its provider handed over meanwhile is dropped.
        self._done += 1
        self._ended.add(report.provider_id)
        note: dict[str, Any] = {
            "provider": report.provider_id,
            "status": str(report.status),
            "frames_accepted": report.frames_accepted,
            "latency_ms": round(report.latency_ms, 3),  # as the result's leg report has it
            "done": self._done,
            "total": self._total,
        }
        if report.phase is not None:  # a warming leg: what its provider was doing
            note["phase"] = report.phase
        return self._send(note)

    async def warming(self, provider_id: str, progress: dict[str, Any]) -> None:
        if provider_id in self._ended:
            return
        # With the request's count of legs, so a client shows one total from the start.
        note = {"provider": provider_id, "status": "warming", "warming": progress}
        await self._send({**note, "total": self._total})


def _query_fields(request: QueryRequest) -> dict[str, Any]:
    """The providers' ``ContextQuery`` fields a request gives (all but ``max_tokens``)."""
    return {
        "goal": request.goal,
        "query_text": request.query_text,
        "kinds": list(request.kinds),
        "anchors": list(request.anchors),
        "max_frames": request.max_frames,
        "as_of": request.as_of,
    }


def _reports(reports: Mapping[str, LegReport]) -> list[dict[str, Any]]:
    return [reports[pid].to_wire() for pid in sorted(reports)]


def _rank_key(frame: dict[str, Any]) -> tuple[float, str, str]:
    return (-frame["score"], frame["id"], frame.get("content_digest") or "")
