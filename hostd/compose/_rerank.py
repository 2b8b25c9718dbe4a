"""``PrecomputedOrder``: a reranker's verdict as a ranking policy (``rerank``).

A reranker reads the question and each candidate together, which is I/O (a model,
a process), so it runs before composition, outside this library. Its verdict
reaches composition as data: an order of FrameIds. The policy puts the named
candidates first, in the given order, and every other candidate after them by
``round_robin``; a FrameId that names no candidate, or one already named, is
skipped. The order is therefore a pure function of (candidates, verdict), and a
verdict that names nothing is plain ``round_robin``.

``rerank_request`` is the pure half of the stage: which candidates the reranker
is shown (after dedup, the best ``max_candidates`` by the fallback policy),
under which opaque keys, and how its reply (or its failure) becomes a
``PrecomputedOrder`` whose wire form says what happened: the model, how many
candidates it was shown, and the fallback used and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from hostd.protocol import FrameId

from ._candidates import CandidateSet, FramePair
from ._dedup import dedup_pool
from ._round_robin import RoundRobinByRank

__all__ = ["FALLBACK", "PrecomputedOrder", "RerankRequest", "rerank_request"]

#: The policy for whatever the verdict does not name (and for all of it when none came).
FALLBACK = "round_robin"
_MEMBERS = frozenset({"order", "model", "candidates", "fallback", "reason", "detail", "ignored"})


def _fallback_order(c: CandidateSet) -> list[int]:
    return RoundRobinByRank().order(c)


@dataclass(slots=True, frozen=True)
class PrecomputedOrder:
    """Named frames first in ``ranked``'s order, the rest by ``round_robin``.

    ``judged`` is false for the bare spelling ``rerank``: no reranker has been
    asked yet (the daemon asks its own and replaces this one). ``candidates``
    is how many candidates the reranker was shown; ``reason`` (a short code) and
    ``detail`` say why the order is not the reranker's whole verdict (``partial``,
    ``timeout``, ``crashed``, ``bad_reply``, ``unavailable``, …), ``None`` when it
    is; ``ignored`` counts unknown and repeated keys in its reply.
    """

    ranked: tuple[FrameId, ...] = ()
    model: str | None = None
    candidates: int = 0
    reason: str | None = None
    detail: str | None = None
    ignored: int = 0
    judged: bool = False
    name: ClassVar[str] = "rerank"

    def order_of(self, c: CandidateSet) -> list[int]:
        index = {c.key(i): i for i in range(len(c))}  # a FrameId equals its sort key
        seen: set[int] = set()
        named: list[int] = []
        for fid in self.ranked:
            i = index.get(fid)
            if i is not None and i not in seen:
                seen.add(i)
                named.append(i)
        return named + [i for i in _fallback_order(c) if i not in seen]

    def order(self, frames: CandidateSet | Iterable[FramePair]) -> list[int]:
        return self.order_of(CandidateSet.of(frames))

    def to_wire(self) -> Any:
        reason = self.reason if self.judged else "no_verdict"
        return {
            "rerank": {
                "order": [fid.to_wire() for fid in self.ranked],
                "model": self.model,
                "candidates": self.candidates,
                "fallback": FALLBACK if reason is not None else None,
                "reason": reason,
                "detail": self.detail,
                "ignored": self.ignored,
            }
        }

    @classmethod
    def from_wire(cls, body: object) -> PrecomputedOrder:
        """From ``{"order": [FrameIdentity…], "model"?, …}`` (what ``to_wire`` writes); no
        ``order`` (or ``null``): the bare ``rerank``, for the daemon's reranker to judge."""
        if body is None:
            return cls()
        if not isinstance(body, Mapping):
            raise ValueError(f"strategy rerank takes an object {{order, model?}}, got {body!r}")
        unknown = sorted(set(map(str, body)) - _MEMBERS)
        if unknown:
            raise ValueError(f"strategy rerank has unknown member(s) {unknown}")
        if "order" not in body:
            return cls()
        raw = body["order"]
        if not isinstance(raw, list) or not all(isinstance(f, Mapping) for f in raw):
            raise ValueError("strategy rerank: order must be a list of frame identities")
        try:
            order = tuple(FrameId.from_wire(dict(f)) for f in raw)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ValueError(f"strategy rerank: bad frame identity in order: {exc}") from None
        model, reason, detail = body.get("model"), body.get("reason"), body.get("detail")
        for field, value in (("model", model), ("reason", reason), ("detail", detail)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"strategy rerank: {field} must be a string or null")
        counts = [body.get("candidates", len(order)), body.get("ignored", 0)]
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts):
            raise ValueError("strategy rerank: candidates and ignored are counts")
        return cls(order, model, counts[0], reason, detail, counts[1], judged=True)


@dataclass(slots=True, frozen=True)
class RerankRequest:
    """What the reranker is shown, and how its answer becomes a ``PrecomputedOrder``.

    ``keys[k]`` is the FrameId behind the opaque key ``str(k)``; ``candidates`` the
    wire objects ``{key, kind, title, content}`` in the fallback policy's order.
    """

    keys: tuple[FrameId, ...]
    candidates: tuple[dict[str, Any], ...]

    def fallback(self, reason: str, detail: str | None = None) -> PrecomputedOrder:
        """No verdict: every candidate by the fallback policy, and why."""
        return PrecomputedOrder(
            candidates=len(self.keys), reason=reason, detail=detail, judged=True
        )

    def verdict(self, order: Sequence[object], model: str | None) -> PrecomputedOrder:
        """The reply's ``order`` read against the keys shown: unknown and repeated keys
        are skipped (and counted); keys it leaves out go to the fallback (``partial``)."""
        named: list[FrameId] = []
        taken: set[int] = set()
        ignored = 0
        n = len(self.keys)
        for key in order:
            k = int(key) if isinstance(key, str) and key.isdecimal() and key.isascii() else -1
            if 0 <= k < n and str(k) == key and k not in taken:
                taken.add(k)
                named.append(self.keys[k])
            else:
                ignored += 1
        missing = n - len(named)
        reason = "partial" if missing else None
        detail = f"{missing} of {n} candidates not named" if missing else None
        return PrecomputedOrder(tuple(named), model, n, reason, detail, ignored, judged=True)


def rerank_request(frames: Iterable[FramePair], max_candidates: int) -> RerankRequest:
    """The reranker's input: the candidates composition will rank (after dedup, D2),
    the best ``max_candidates`` of them by the fallback policy, keyed ``"0"``, ``"1"`` …"""
    pairs = frames if isinstance(frames, list | tuple) else list(frames)
    pool, _, provenances = CandidateSet.with_columns(pairs)
    kept = dedup_pool(pool, provenances).kept
    chosen = _fallback_order(kept)[: max(0, max_candidates)]
    keys = tuple(kept.frame_id(i) for i in chosen)
    candidates = tuple(
        {
            "key": str(k),
            "kind": kept.frames[i].kind,
            "title": kept.frames[i].title,
            "content": kept.frames[i].content or "",
        }
        for k, i in enumerate(chosen)
    )
    return RerankRequest(keys, candidates)
