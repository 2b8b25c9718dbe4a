"""Replay: what another policy would have admitted from a recorded candidate set.

Each recorded request is composed again (``hostd.compose``) under the named
policy with the same contested budget and caps; its included set is compared
with what the live policy included: the overlap (shared / either), the frames
kept, newly included and newly excluded, the tokens and the provider mix. A
frame stored without its content is composed from a stand-in of the same
canonical cost (B3) and the same identity and regions, which is all ranking,
dedup (D2) and packing read.

A record that kept what span merging read (``Merging``: records with content) is
composed with the source bytes rebuilt from its candidates' own lines and their
verification states (``_sources.recorded_sources``), so overlapping windows the live
composition merged, and adjacent ones it coalesced, are merged and coalesced again:
the live policy's replay is the live prompt. A record without it (no content, or
recorded before it was kept) merges nothing.

A record composed in a model's tokens (``[host] tokenizer``: its policy names the
tokenizer) is composed again in that tokenizer's tokens when the caller hands it
over (``tokenizer``, ``tokenizer_of``), so packing and ``over_budget`` are decided
in the unit the recorded budget counts; without it, in canonical tokens (B3).

A request with feedback (``usage/feedback``) is also measured by benefit: of
the frames the answer used, the share the policy would still have admitted,
beside the share the live policy admits when replayed the same way (1.0 unless
the replay packs the budget's edge differently, as with floors: the recorded
budget is what the frames contested). The used frames a policy drops, and the
paired ``+gained −lost`` against the live replay, say what the shares are made of.
A used candidate counts as kept when the policy admits any of its members (the
frames dedup or a span merge folded into it, ``_credit``), and every provider that
served one of them is credited with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hostd.compose import (
    PrecomputedOrder,
    Strategy,
    strategy_from_wire,
    strategy_text,
)

from ._credit import members_of
from ._frames import recorded_frames
from ._record import Candidate, Recorded
from ._run import Verified, compose_verified
from ._sources import recorded_sources

__all__ = ["Replayed", "TokenCounter", "TokenizerOf", "live_strategy", "replay", "replay_all"]

Key = tuple[str, str, str | None]
#: A model's tokenizer as ``compose_for_prompt(tokenizer=...)`` takes it: ``str -> int``.
TokenCounter = Callable[[str], int]
#: The tokenizer a record is replayed in (``None``: canonical tokens, B3).
TokenizerOf = Callable[[Recorded], TokenCounter | None]


def _key(c: Candidate) -> Key:
    return (c.provider, c.id, c.digest)


@dataclass(slots=True, frozen=True)
class Replayed:
    """One recorded request: the live policy's inclusions beside the replayed policy's."""

    request_id: str
    live_policy: str
    live: tuple[Candidate, ...]
    replayed: tuple[Candidate, ...]
    #: The request had feedback: ``used`` is what its answer used (possibly nothing),
    #: ``live_replayed`` what the live policy admits when replayed like ``replayed``.
    has_feedback: bool = False
    used: tuple[Candidate, ...] = ()
    live_replayed: tuple[Candidate, ...] = ()
    #: Every member of each ``used`` candidate (itself and the frames folded into it,
    #: ``_credit``), in ``used``'s order: a used candidate is kept when any member is.
    used_members: tuple[tuple[Candidate, ...], ...] = ()

    def _members(self) -> list[tuple[Candidate, tuple[Candidate, ...]]]:
        members = self.used_members or tuple((c,) for c in self.used)
        return list(zip(self.used, members, strict=True))

    def _admits(self, frames: Sequence[Candidate]) -> list[Candidate]:
        admitted = {_key(c) for c in frames}
        return [c for c, group in self._members() if any(_key(m) in admitted for m in group)]

    @property
    def used_kept(self) -> list[Candidate]:
        return self._admits(self.replayed)

    @property
    def used_dropped(self) -> list[Candidate]:
        kept = {_key(c) for c in self.used_kept}
        return [c for c in self.used if _key(c) not in kept]

    @property
    def used_live(self) -> list[Candidate]:
        return self._admits(self.live_replayed)

    @property
    def gained(self) -> int:
        """Used frames this policy admits that the live replay does not."""
        live = {_key(c) for c in self.used_live}
        return sum(1 for c in self.used_kept if _key(c) not in live)

    @property
    def lost(self) -> int:
        """Used frames the live replay admits that this policy does not."""
        mine = {_key(c) for c in self.used_kept}
        return sum(1 for c in self.used_live if _key(c) not in mine)

    @property
    def credited(self) -> dict[str, int]:
        """Per provider, the used frames it served: every member of each used candidate,
        so a provider whose copy of the evidence lost the dedup tie is credited too."""
        return self.mix([m for _, group in self._members() for m in group])

    @property
    def kept(self) -> list[Candidate]:
        mine = {_key(c) for c in self.replayed}
        return [c for c in self.live if _key(c) in mine]

    @property
    def newly_included(self) -> list[Candidate]:
        live = {_key(c) for c in self.live}
        return [c for c in self.replayed if _key(c) not in live]

    @property
    def newly_excluded(self) -> list[Candidate]:
        mine = {_key(c) for c in self.replayed}
        return [c for c in self.live if _key(c) not in mine]

    @property
    def union(self) -> int:
        return len(self.live) + len(self.newly_included)

    @property
    def overlap(self) -> float:
        """Shared inclusions over all inclusions of either policy (1.0 when both are empty)."""
        return len(self.kept) / self.union if self.union else 1.0

    @staticmethod
    def tokens(frames: Sequence[Candidate]) -> int:
        return sum(c.cost for c in frames)

    @staticmethod
    def mix(frames: Sequence[Candidate]) -> dict[str, int]:
        return dict(sorted(Counter(c.provider for c in frames).items()))

    def to_wire(self) -> dict[str, Any]:
        def ids(frames: Sequence[Candidate]) -> list[dict[str, Any]]:
            return [
                {
                    "provider": c.provider,
                    "id": c.id,
                    "digest": c.digest,
                    "score": c.score,
                    "tokens": c.cost,
                }
                for c in frames
            ]

        out: dict[str, Any] = {
            "request_id": self.request_id,
            "live_policy": self.live_policy,
            "overlap": round(self.overlap, 4),
            "kept": len(self.kept),
            "tokens": {"live": self.tokens(self.live), "replayed": self.tokens(self.replayed)},
            "providers": {"live": self.mix(self.live), "replayed": self.mix(self.replayed)},
            "newly_included": ids(self.newly_included),
            "newly_excluded": ids(self.newly_excluded),
        }
        if self.has_feedback:
            out["feedback"] = {
                "used": len(self.used),
                "kept": len(self.used_kept),
                "kept_live": len(self.used_live),
                "gained": self.gained,
                "lost": self.lost,
                "credited": self.credited,
                "dropped": ids(self.used_dropped),
            }
        return out


def recorded_verdict(recorded: Recorded) -> PrecomputedOrder:
    """The reranker's verdict a ``rerank`` composition recorded (its audit's
    ``strategy_params``: order and model); for another live policy, none (``round_robin``)."""
    if recorded.policy.get("strategy") == PrecomputedOrder.name:
        verdict = strategy_from_wire(recorded.policy.get("strategy_params") or "rerank")
        if isinstance(verdict, PrecomputedOrder) and verdict.judged:
            return verdict
    live = recorded.policy.get("strategy")
    return PrecomputedOrder(reason="not_recorded", detail=f"live policy {live}", judged=True)


def _admitted(
    recorded: Recorded, strategy: Strategy, tokenizer: TokenCounter | None = None
) -> tuple[Candidate, ...]:
    by_key = {_key(c): c for c in recorded.candidates}
    frames = recorded_frames(recorded)
    verified = Verified(*recorded_sources(recorded, frames))
    composed = compose_verified(
        frames,
        recorded.budget,
        verified,
        strategy=strategy,
        caps=recorded.caps,
        tokenizer=tokenizer,
    )
    return tuple(
        by_key[(c.frame.provider_id, c.frame.frame_id, c.frame.content_digest)]
        for c in composed.citations
    )


def live_strategy(recorded: Recorded) -> Strategy | None:
    """The live policy as recorded (its object form first), or ``None`` if unreadable."""
    for spelling in (recorded.policy.get("strategy_params"), recorded.policy.get("strategy")):
        if spelling is None:
            continue
        try:
            return strategy_from_wire(spelling)
        except (ValueError, TypeError):
            continue
    return None


def replay(
    recorded: Recorded,
    strategy: Strategy | str | dict[str, Any],
    *,
    live: Strategy | None = None,
    tokenizer: TokenCounter | None = None,
) -> Replayed:
    """Compose ``recorded``'s candidates under ``strategy`` and compare with the live result.

    ``live`` is the live policy to replay for a request with feedback (default:
    as recorded; one that cannot be read stands as what it included). The bare
    ``rerank`` replays each record's own recorded verdict (``recorded_verdict``).
    ``tokenizer``: the budget counts its tokens, as it did for a record made with
    ``[host] tokenizer`` (both policies are replayed in it); ``None``: canonical tokens."""
    if not isinstance(strategy, Strategy):
        strategy = strategy_from_wire(strategy)
    if isinstance(strategy, PrecomputedOrder) and not strategy.judged:
        strategy = recorded_verdict(recorded)
    by_key = {_key(c): c for c in recorded.candidates}
    replayed = _admitted(recorded, strategy, tokenizer)
    included = tuple(by_key[k] for k in recorded.included if k in by_key)
    name = str(recorded.policy.get("strategy"))
    feedback = recorded.feedback
    if feedback is None:
        return Replayed(recorded.request_id, name, included, replayed)
    live = live or live_strategy(recorded)
    if live is None:
        live_replayed = included
    elif strategy_text(live) == strategy_text(strategy):
        live_replayed = replayed
    else:
        live_replayed = _admitted(recorded, live, tokenizer)
    members = members_of(recorded)
    used_keys = [k for k in feedback.used if k in by_key]
    return Replayed(
        recorded.request_id,
        name,
        included,
        replayed,
        True,
        tuple(by_key[k] for k in used_keys),
        live_replayed,
        tuple(tuple(by_key[m] for m in members.get(k, (k,)) if m in by_key) for k in used_keys),
    )


def replay_all(
    records: Sequence[Recorded],
    strategy: Strategy | str | dict[str, Any],
    *,
    bind: Callable[[Strategy], Strategy] | None = None,
    tokenizer_of: TokenizerOf | None = None,
) -> list[Replayed]:
    """``replay`` of every record; ``bind`` completes a policy read from a record (the
    calibration of a live ``calibrated``) before it is replayed; ``tokenizer_of`` names
    the tokenizer each record is replayed in (``None``, or none given: canonical tokens)."""
    if not isinstance(strategy, Strategy):
        strategy = strategy_from_wire(strategy)
    out = []
    for r in records:
        live = live_strategy(r) if r.feedback is not None else None
        if live is not None and bind is not None:
            live = bind(live)
        tokenizer = tokenizer_of(r) if tokenizer_of is not None else None
        out.append(replay(r, strategy, live=live, tokenizer=tokenizer))
    return out
