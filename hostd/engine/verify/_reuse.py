"""The session reuse cache: frames held from a session's last turn (D2–D4, V3, V4).

A session's entry is the list of ``(provider_id, frame)`` its last turn served,
in that turn's order, with the verification state each had. The cache is
bounded per session (frames beyond the bound are not held) and in total
(least recently used sessions are evicted whole until the total fits), and it
keeps counters for ``host/status``. It is plain synchronous data: it never talks
to a provider, it never decides whether a held frame is still good — the
verify stage does, and tells it what to evict.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hostd.protocol import ContextFrame, FrameId

__all__ = ["DEFAULT_MAX_FRAMES_PER_SESSION", "DEFAULT_MAX_FRAMES_TOTAL", "HeldFrame", "ReuseCache"]

DEFAULT_MAX_FRAMES_PER_SESSION = 512
DEFAULT_MAX_FRAMES_TOTAL = 8192


@dataclass(slots=True, frozen=True)
class HeldFrame:
    """One frame kept from a session's last turn, exactly as it was served."""

    provider_id: str
    frame: ContextFrame
    fid: FrameId

    @classmethod
    def of(cls, provider_id: str, frame: ContextFrame) -> HeldFrame:
        return cls(provider_id, frame, FrameId.of(provider_id, frame))


@dataclass(slots=True)
class _Counters:
    remembered: int = 0
    truncated: int = 0
    lookups: int = 0
    hits: int = 0
    evicted_lru_sessions: int = 0
    evicted_lru_frames: int = 0
    evicted: dict[str, int] = field(default_factory=dict)


class ReuseCache:
    """Frames of each session's last turn, bounded, least recently used evicted first."""

    def __init__(
        self,
        *,
        max_frames_per_session: int = DEFAULT_MAX_FRAMES_PER_SESSION,
        max_frames_total: int = DEFAULT_MAX_FRAMES_TOTAL,
    ) -> None:
        if max_frames_per_session < 0 or max_frames_total < 0:
            raise ValueError("reuse cache bounds must not be negative")
        self.max_frames_per_session = max_frames_per_session
        # A single session can never exceed the total, so remembering one always fits.
        self.max_frames_total = max(max_frames_total, 0)
        self._sessions: OrderedDict[str, list[HeldFrame]] = OrderedDict()
        self._total = 0
        self._c = _Counters()

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session: object) -> bool:
        return session in self._sessions

    def __repr__(self) -> str:
        return (
            f"<ReuseCache sessions={len(self._sessions)} frames={self._total}"
            f"/{self.max_frames_total}>"
        )

    @property
    def total_frames(self) -> int:
        return self._total

    def held(self, session: str) -> list[HeldFrame]:
        """The frames held for ``session`` (a copy), marking it most recently used."""
        self._c.lookups += 1
        frames = self._sessions.get(session)
        if frames is None:
            return []
        self._c.hits += 1
        self._sessions.move_to_end(session)
        return list(frames)

    def remember(self, session: str, frames: Iterable[tuple[str, ContextFrame]]) -> int:
        """Replace ``session``'s held frames with this turn's; returns how many are held.

        Duplicate FrameIds keep their first occurrence (D2). Frames past the
        per-session bound are not held; other sessions are evicted, least
        recently used first, until the total fits.
        """
        seen: set[FrameId] = set()
        kept: list[HeldFrame] = []
        offered = 0
        for provider_id, frame in frames:
            held = HeldFrame.of(provider_id, frame)
            if held.fid in seen:
                continue
            seen.add(held.fid)
            offered += 1
            if len(kept) < min(self.max_frames_per_session, self.max_frames_total):
                kept.append(held)
        self._c.truncated += offered - len(kept)
        self.forget(session, _count=False)
        self._sessions[session] = kept
        self._total += len(kept)
        self._c.remembered += len(kept)
        self._shrink(keep=session)
        return len(kept)

    def evict(self, session: str, fids: Iterable[FrameId], reason: str) -> int:
        """Drop these frames from ``session`` (V4: a stale or gone frame is never served again)."""
        frames = self._sessions.get(session)
        if not frames:
            return 0
        drop = set(fids)
        kept = [h for h in frames if h.fid not in drop]
        n = len(frames) - len(kept)
        if n:
            self._sessions[session] = kept
            self._total -= n
            self._c.evicted[reason] = self._c.evicted.get(reason, 0) + n
        return n

    def forget(self, session: str, *, _count: bool = True) -> int:
        """Drop a whole session; returns how many frames it held."""
        frames = self._sessions.pop(session, None)
        if frames is None:
            return 0
        self._total -= len(frames)
        if _count and frames:
            self._c.evicted["forgotten"] = self._c.evicted.get("forgotten", 0) + len(frames)
        return len(frames)

    def _shrink(self, keep: str) -> None:
        while self._total > self.max_frames_total:
            victim = next((s for s in self._sessions if s != keep), None)
            if victim is None:
                break
            n = len(self._sessions.pop(victim))
            self._total -= n
            self._c.evicted_lru_sessions += 1
            self._c.evicted_lru_frames += n

    def figures(self) -> dict[str, Any]:
        """Counters and sizes for ``host/status``."""
        c = self._c
        return {
            "sessions": len(self._sessions),
            "frames": self._total,
            "max_frames_per_session": self.max_frames_per_session,
            "max_frames_total": self.max_frames_total,
            "remembered": c.remembered,
            "truncated": c.truncated,
            "lookups": c.lookups,
            "hits": c.hits,
            "evicted_lru_sessions": c.evicted_lru_sessions,
            "evicted_lru_frames": c.evicted_lru_frames,
            "evicted": dict(sorted(c.evicted.items())),
        }
