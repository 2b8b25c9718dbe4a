"""The verification and reuse stage between fan-out and composition (D2–D4, F5, F17, V1–V4).

Every frame that reaches composition leaves here with a verification state;
every frame this stage drops leaves as ``(FrameId, reason, detail)``. A turn of
a session is plan, judge, read, merge, record, so the ``context/verify`` round
trip overlaps the fresh queries instead of following them:

1. ``plan = stage.plan(session, can_verify=...)`` — sync: which held frames to
   revalidate with which provider (digest-carrying only, V1; D3). The fan-out
   sends them (``ask_one``) in its own task group, beside the fresh legs.
2. ``checked = await stage.check(plan, replies, fresh, ...)`` — the one I/O step,
   run in the fan-out's task group once every leg and verify is in: the verdicts
   judged (``judge_held``, pure: V2, V3, V4), then inline digests (D4) and ``file``
   sources under trusted roots (F5, F17) read in a worker thread. The frames of legs
   that land while others are still out are checked then (``check_early``, the same
   pass): the turn's reads overlap the wait for its slowest provider.
3. ``result = stage.merge(checked)`` — pure: each frame decided once, reused and
   fresh frames merged by FrameId (D2); ``stage.record(result)`` then evicts,
   holds this turn's frames for the next and counts.

This module owns the verification settings and the session cache; it never
talks to a transport (the fan-out does).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread

from hostd._log import INFO, get_logger
from hostd._log import level as log_level
from hostd.protocol import ContextFrame, FrameId

from ._checks import EarlyChecks, FrameChecks, Readers, Sources, check_frames, needs_io
from ._files import SourceCache
from ._judge import Checked, judge_held, merge, split_held
from ._reuse import ReuseCache
from ._rules import (
    UNTRUSTED_CHOICES,
    InlineMemo,
    build_verify_requests,
    decide_frame,
)
from ._source import DEFAULT_MAX_SOURCE_BYTES
from ._turn import (
    Roots,
    StageResult,
    VerifyPlan,
    VerifyReply,
)

__all__ = ["VerifyStage"]

log = get_logger("hostd.engine.verify")

_HEALTH_KEYS = (
    "digest_mismatch",
    "source_mismatch",
    "rubber_stamp",
    "verify_failed",
    "verify_missing",
    "verify_unrequested",
    "verify_conflicting",
)


class VerifyStage:
    """Verification settings, the session cache and cumulative counters for one host.

    ``trusted_roots`` maps provider id → roots under which that provider's
    ``file`` sources are re-read; ``host_roots`` apply to every provider. With
    no root for a provider its sources are not re-read (its frames get
    ``content_checked`` at best). ``remote`` names providers on another machine:
    their paths name that machine's files, so ``host_roots`` do not cover them (only
    their own ``trusted_roots`` do). Source files larger than ``max_source_bytes``
    are ``too_large``.
    """

    def __init__(
        self,
        *,
        cache: ReuseCache | None = None,
        trusted_roots: Mapping[str, Roots] | None = None,
        host_roots: Roots = (),
        max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
        untrusted: str = "exclude",
        provider_untrusted: Mapping[str, str] | None = None,
        remote: Iterable[str] = (),
    ) -> None:
        self.cache = cache if cache is not None else ReuseCache()
        self.remote = frozenset(remote)
        self.trusted_roots = {pid: tuple(r) for pid, r in (trusted_roots or {}).items()}
        self.host_roots = tuple(host_roots)
        self.max_source_bytes = max_source_bytes
        #: Source files kept across passes while their ``stat`` identity holds (F5, F17).
        self.sources = SourceCache()
        #: Contents whose inline digest held, kept across passes (D4: not hashed again).
        self.inline = InlineMemo()
        for choice in (untrusted, *(provider_untrusted or {}).values()):
            if choice not in UNTRUSTED_CHOICES:
                raise ValueError(f"untrusted must be one of {UNTRUSTED_CHOICES}, got {choice!r}")
        #: Frames with ``file`` provenance outside every trusted root: "exclude" or
        #: "include" (marked ``unverifiable``), per provider or for all.
        self.untrusted = untrusted
        self.provider_untrusted = dict(provider_untrusted or {})
        self._health: dict[str, dict[str, int]] = {}
        self._totals: dict[str, int] = {}

    # -- step 1: plan (sync) -------------------------------------------------------

    def plan(
        self,
        session: str | None,
        *,
        can_verify: Callable[[str], bool] | Mapping[str, bool],
        providers: Iterable[str] | None = None,
    ) -> VerifyPlan:
        """Which held frames of ``session`` to revalidate, and with whom (V1, D3)."""
        if session is None:
            return VerifyPlan(None)
        held = self.cache.held(session)
        entries = build_verify_requests(held, can_verify=can_verify, providers=providers)
        return VerifyPlan(session, entries, len(held))

    # -- step 3: finish ------------------------------------------------------------

    def _roots_for(self, provider_id: str) -> tuple[str | os.PathLike[str], ...]:
        own = self.trusted_roots.get(provider_id, ())
        return own if provider_id in self.remote else (*own, *self.host_roots)

    def _reads_files(self) -> bool:
        """Whether any provider has roots its ``file`` sources are re-read under."""
        return bool(self.host_roots) or any(self.trusted_roots.values())

    def early(self, plan: VerifyPlan) -> EarlyChecks | None:
        """Where a turn keeps the checks it runs before every reply is in, or ``None``
        when no frame's check touches files (no roots): inline checks gain nothing
        from running early."""
        if not self._reads_files():
            return None
        asked = frozenset(h.fid for entry in plan.entries.values() for h in entry.ask)
        return EarlyChecks(asked)

    async def check_early(
        self,
        early: EarlyChecks,
        fresh: Sequence[tuple[str, ContextFrame]],
        fresh_ids: Sequence[FrameId],
    ) -> None:
        """The source checks of legs already in, run while others are still out: the
        turn's I/O started early, its results the same (``check`` takes them as they
        are). Only frames no held copy may stand for (D2), and only when one touches
        files."""
        skip = early.skip
        todo = [pair for pair, fid in zip(fresh, fresh_ids, strict=True) if fid not in skip]
        if not todo or not needs_io(todo, self._roots_for):
            return
        run = functools.partial(
            check_frames,
            todo,
            self._roots_for,
            self.max_source_bytes,
            self.sources,
            self.inline.check,
            early.readers,
        )
        checks, _, sources = await anyio.to_thread.run_sync(run)
        early.add(todo, checks, sources)

    async def _run_checks(
        self, items: list[tuple[str, ContextFrame]], early: EarlyChecks | None = None
    ) -> tuple[list[FrameChecks], int, Sources]:
        """``check_frames`` in a worker thread when it will touch files, inline otherwise;
        with ``early``, only over the frames it has not checked, in the same pass."""
        if not items:
            return [], 0, {}
        if not self._reads_files():
            return [(self.inline.check(frame), None) for _, frame in items], 0, {}  # D4 only
        if early is None or not early.done:
            return await self._check_now(items, None)
        hits = [early.get(frame) for _, frame in items]
        rest = [pair for pair, hit in zip(items, hits, strict=True) if hit is None]
        more, _, more_sources = await self._check_now(rest, early.readers)
        fresh_checks = iter(more)
        checks = [hit if hit is not None else next(fresh_checks) for hit in hits]
        reads = sum(r.reads for r in early.readers.values())
        return checks, reads, {**early.sources, **more_sources}

    async def _check_now(
        self, items: list[tuple[str, ContextFrame]], readers: Readers | None
    ) -> tuple[list[FrameChecks], int, Sources]:
        if not items:
            return [], 0, {}
        if not needs_io(items, self._roots_for):
            # No frame has a ``file`` entry its provider's roots let us re-read: every
            # source check would be None, so only the inline checks run (D4).
            reads = sum(r.reads for r in readers.values()) if readers else 0
            return [(self.inline.check(frame), None) for _, frame in items], reads, {}
        run = functools.partial(
            check_frames,
            items,
            self._roots_for,
            self.max_source_bytes,
            self.sources,
            self.inline.check,
            readers,
        )
        return await anyio.to_thread.run_sync(run)

    async def check(
        self,
        plan: VerifyPlan,
        replies: Mapping[str, VerifyReply],
        fresh: Iterable[tuple[str, ContextFrame]],
        *,
        upstream_excluded: Iterable[FrameId] = (),
        distrusted: Mapping[str, str] | Iterable[str] = (),
        fresh_ids: Sequence[FrameId] | None = None,
        early: EarlyChecks | None = None,
        answered: Iterable[str] | None = None,
    ) -> Checked:
        """The verdicts judged and every frame's checks read: the turn's one I/O step.

        ``upstream_excluded``: FrameIds an earlier stage (the leg audit) already
        dropped this turn; a held copy of one is never reused nor reported again,
        so each FrameId has one audit entry. ``distrusted``: providers whose leg
        was quarantined this turn (id → reason, or ids with reason
        ``quarantined``); their held frames are not reused (B2: a rejected
        provider contributes nothing). ``fresh_ids``: the FrameId of each ``fresh`` frame,
        in order, when the caller built them already (the leg audit does).
        ``early``: the checks ``check_early`` ran this turn, taken as they are.
        ``answered``: the providers whose leg answered (``ok``) this turn: a held frame
        of theirs stands only when they offered it again (``Checked.answered``).
        """
        fresh_list = list(fresh)
        if fresh_ids is not None and len(fresh_ids) == len(fresh_list):
            fresh_fids = list(fresh_ids)
        else:
            fresh_fids = [FrameId.of(pid, f) for pid, f in fresh_list]
        # A list (the engine's) is no mapping: told apart without an ABC check.
        if type(distrusted) is not list and isinstance(distrusted, Mapping):
            blocked = dict(distrusted)
        else:
            blocked = dict.fromkeys(distrusted, "quarantined")
        offered = set(fresh_fids)  # read, never changed: the held judgement's and ours
        held = judge_held(
            plan,
            replies,
            fresh_ids=offered,
            upstream=set(upstream_excluded),
            blocked=blocked,
        )
        first, first_fids, deferred = split_held(held.valid, fresh_list, fresh_fids)
        checks, reads, sources = await self._run_checks(first, early)
        # D2: a deferred fresh copy is checked only if its held copy fell out.
        fallen = {
            h.fid
            for h, (inline, source) in zip(held.valid, checks, strict=False)
            if decide_frame(
                inline, source, reused=True, untrusted=self._untrusted(h.provider_id)
            ).excluded
            is not None
        }
        retry = [(fid, pair) for fid, pair in deferred if fid in fallen]
        if retry:
            more, n, more_sources = await self._run_checks([pair for _, pair in retry])
            first += [pair for _, pair in retry]
            first_fids += [fid for fid, _ in retry]
            checks += more
            reads += n
            sources = {**more_sources, **sources}
        reoffered = frozenset(h.fid for h in held.valid if h.fid in offered)
        return Checked(
            plan,
            held,
            len(fresh_list),
            first,
            first_fids,
            checks,
            len(held.valid),
            reads,
            sources,
            reoffered,
            frozenset(answered) if answered is not None else None,
        )

    def _untrusted(self, provider_id: str) -> str:
        return self.provider_untrusted.get(provider_id, self.untrusted)

    def merge(self, checked: Checked) -> StageResult:
        """Every checked frame decided once, reused and fresh merged (pure, D2)."""
        return merge(checked, self.provider_untrusted, self.untrusted)

    def record(self, result: StageResult, *, remember: bool = True) -> None:
        """What this turn leaves behind: evictions (V4, rubber stamps), this turn's
        frames held for the next (with a session), cumulative health and totals."""
        session = result.session
        if session is not None:
            for reason, fids in result.evict.items():
                self.cache.evict(session, fids, reason)
            if remember:
                self.cache.remember(session, result.accepted)
        result.figures["cache"] = {"sessions": len(self.cache), "frames": self.cache.total_frames}
        for pid, flags in result.health.items():
            cumulative = self._health.setdefault(pid, {})
            for k, n in flags.items():
                cumulative[k] = cumulative.get(k, 0) + n
        for k, n in result.counts.items():
            self._totals[k] = self._totals.get(k, 0) + n
        self._totals["passes"] = self._totals.get("passes", 0) + 1
        if log_level.at <= INFO:  # else dropped: not built (every request)
            figures = {k: v for k, v in result.figures.items() if k != "cache"}
            log.info("verify.stage.done", **figures)

    # -- state for host/status and providers/list ----------------------------------

    def health(self, provider_id: str) -> dict[str, int]:
        """Cumulative verification counters against one provider (all keys present)."""
        h = self._health.get(provider_id, {})
        return {k: h.get(k, 0) for k in _HEALTH_KEYS}

    def figures(self) -> dict[str, Any]:
        """Cumulative verification totals and the reuse cache figures, for ``host/status``."""
        return {"verification": dict(sorted(self._totals.items())), "reuse": self.cache.figures()}
