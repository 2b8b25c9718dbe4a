"""Eval from traffic: recorded requests with feedback become a question set.

Each recorded request whose answer used at least one cited frame is a
question: its goal (or, without ``store_content``, the goal's digest) asked,
the used frames its gold (matched by FrameId; every member of a used candidate,
so the copy of the evidence a provider offered that lost the dedup tie is gold
too, and that provider alone is credited for it), its recorded candidate set
and contested budget the one candidate set every policy is composed from,
under its recorded caps. Each provider alone is its own recorded candidates
(what it answered to its share of the fan-out, not a query with the whole
budget, as the JSONL sets ask), composed by the default policy. The rows are
scored by ``score_asked``, the same function the JSONL sets go through. A record
that kept what span merging read is composed with it (``_sources.recorded_sources``),
the mixed set and each provider alone, so every row merges as the daemon would.

Feedback is what the model used, not what was relevant: a frame the live
policy never admitted cannot have been used, so every figure here leans
toward the live policy (docs/eval.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hostd.protocol import ContextFrame, FrameId

from ._credit import credited
from ._frames import recorded_frames
from ._record import Recorded
from ._replay import TokenizerOf
from ._run import Asked, Outcome, Policy, Verified, score_asked
from ._sources import recorded_sources

__all__ = ["TRAFFIC", "TrafficQuestion", "asked_from_shadow", "run_from_shadow"]

#: The style of every question drawn from recorded traffic.
TRAFFIC = "traffic"


@dataclass(slots=True, frozen=True)
class TrafficQuestion:
    """A recorded request as a question: its id, goal (or digest) and used frames."""

    id: str
    question: str
    gold: frozenset[FrameId]
    style: str = TRAFFIC


def _question(record: Recorded) -> TrafficQuestion | None:
    if record.feedback is None or not record.feedback.used:
        return None
    gold = frozenset(FrameId(p, i, d) for p, i, d in credited(record, record.feedback.used))
    return TrafficQuestion(record.request_id, record.goal or record.goal_digest, gold)


def asked_from_shadow(
    records: Sequence[Recorded], tokenizer_of: TokenizerOf | None = None
) -> tuple[list[TrafficQuestion], list[Asked]]:
    """The questions and their candidate sets, in recorded order (requests whose answer
    used nothing, and those without feedback, are left out: they have no gold); each
    composed in the tokens ``tokenizer_of`` gives for its record (None: canonical)."""
    questions: list[TrafficQuestion] = []
    asked: list[Asked] = []
    for record in records:
        question = _question(record)
        if question is None:
            continue
        candidates = recorded_frames(record)
        providers = sorted({pid for pid, _ in candidates})
        alone = [(pid, [c for c in candidates if c[0] == pid], False) for pid in providers]
        verified = Verified(*recorded_sources(record, candidates))

        def hit(fid: FrameId, _: ContextFrame, gold: frozenset[FrameId] = question.gold) -> bool:
            return fid in gold

        questions.append(question)
        asked.append(
            Asked(
                question.id,
                question.style,
                record.budget,
                candidates,
                False,
                alone,
                hit,
                caps=record.caps,
                reported_budget=0,  # each request's own budget: one table, "as recorded"
                tokenizer=tokenizer_of(record) if tokenizer_of is not None else None,
                # The sources are rebuilt from the whole set: a provider alone's frames
                # quote the same lines, and merging reads only its own members' lines.
                verified=verified,
                alone_verified=dict.fromkeys(providers, verified),
            )
        )
    return questions, asked


def run_from_shadow(
    records: Sequence[Recorded],
    policies: Sequence[Policy],
    tokenizer_of: TokenizerOf | None = None,
) -> tuple[list[TrafficQuestion], list[Outcome]]:
    """Every recorded request with used evidence under every policy and provider alone,
    each in the tokens ``tokenizer_of`` gives for its record (None: canonical)."""
    questions, asked = asked_from_shadow(records, tokenizer_of)
    return questions, [o for a in asked for o in score_asked(a, policies)]
