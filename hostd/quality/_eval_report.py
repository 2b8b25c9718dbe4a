"""Outcomes → recall per budget, policy and style: a table for people, a dict for machines.

Beside recall, each row says what its evidence cost: the mean prompt tokens, the
prompt tokens per question recalled (all its compositions' tokens over its hits:
what one recalled answer costs in the budget) and the median frames in a prompt.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._questions import STYLES
from ._run import OFFERED, TRIM_ORACLE, Outcome

__all__ = [
    "Paired",
    "Row",
    "degraded_note",
    "paired",
    "render_paired",
    "render_table",
    "summarise",
    "to_json",
]


class _Styled(Protocol):
    @property
    def style(self) -> str: ...


def _styles(seen: Sequence[str] | set[str]) -> tuple[str, ...]:
    """The JSONL sets' two styles, or (traffic, say) the styles the outcomes hold."""
    found = set(seen)
    return STYLES if found <= set(STYLES) else tuple(sorted(found))


def _budget(budget: int) -> str:
    return f"budget {budget}" if budget else "budgets as recorded"


@dataclass(slots=True, frozen=True)
class Row:
    """Recall of one policy at one budget: ``hits[style]`` of ``totals[style]``."""

    budget: int
    policy: str
    hits: dict[str, int]
    totals: dict[str, int]
    mean_tokens: float
    #: The median number of frames in a prompt (``(offered)``: candidates in the set).
    median_frames: float = 0.0

    @property
    def all_hits(self) -> int:
        return sum(self.hits.values())

    @property
    def all_total(self) -> int:
        return sum(self.totals.values())

    @property
    def tokens_per_hit(self) -> float | None:
        """Prompt tokens spent per question recalled (None: nothing recalled)."""
        hits = self.all_hits
        return self.mean_tokens * self.all_total / hits if hits else None

    def to_wire(self) -> dict[str, Any]:
        recall = {s: {"hits": self.hits[s], "total": self.totals[s]} for s in self.hits}
        recall["all"] = {"hits": self.all_hits, "total": self.all_total}
        per_hit = self.tokens_per_hit
        return {
            "budget": self.budget,
            "policy": self.policy,
            "recall": recall,
            "mean_tokens": round(self.mean_tokens, 1),
            "tokens_per_hit": None if per_hit is None else round(per_hit, 1),
            "median_frames": self.median_frames,
        }


def summarise(outcomes: Sequence[Outcome]) -> list[Row]:
    """One row per (budget, policy), budgets ascending, policies in first-seen order."""
    groups: dict[tuple[int, str], list[Outcome]] = {}
    styles = _styles({o.style for o in outcomes})
    for o in outcomes:
        groups.setdefault((o.budget, o.policy), []).append(o)
    rows: list[Row] = []
    for budget in sorted({b for b, _ in groups}):
        for (b, policy), group in groups.items():
            if b != budget:
                continue
            hits = {s: sum(1 for o in group if o.style == s and o.hit) for s in styles}
            totals = {s: sum(1 for o in group if o.style == s) for s in styles}
            mean = sum(o.tokens for o in group) / len(group)
            frames = statistics.median(o.frames for o in group)
            rows.append(Row(budget, policy, hits, totals, mean, frames))
    return rows


def _cell(hits: int, total: int) -> str:
    if total == 0:
        return "-"
    return f"{hits}/{total} {100 * hits / total:3.0f}%"


def render_table(questions: Sequence[_Styled], rows: Sequence[Row]) -> str:
    """Per budget, one line per policy: recall per style and overall, mean prompt tokens,
    tokens per question recalled, median frames in the prompt."""
    styles = _styles({q.style for q in questions})
    counts = {s: sum(1 for q in questions if q.style == s) for s in styles}
    lines = [
        "recall: a gold passage is in the composed prompt "
        f"({len(questions)} question{'' if len(questions) == 1 else 's'}: "
        + ", ".join(f"{counts[s]} {s}" for s in styles)
        + f"); {OFFERED} = in any provider's candidates, its tokens and frames the "
        "candidates' total; tok/hit = prompt tokens per question recalled; frames = median "
        "frames in the prompt",
    ]
    if any(r.policy == TRIM_ORACLE for r in rows):
        lines.append(
            f"{TRIM_ORACLE} = every candidate cut to its gold lines, composed at the budget"
        )
    width = max([len("policy"), *(len(r.policy) for r in rows)])
    header = (
        f"{'policy':<{width}}  "
        + "  ".join(f"{name:<12}" for name in (*styles, "all"))
        + "  tokens  tok/hit  frames"
    )
    budget = None
    for row in rows:
        if row.budget != budget:
            budget = row.budget
            lines += ["", _budget(budget), header]
        cells = [_cell(row.hits[s], row.totals[s]) for s in styles]
        cells.append(_cell(row.all_hits, row.all_total))
        per_hit = row.tokens_per_hit
        lines.append(
            f"{row.policy:<{width}}  "
            + "  ".join(f"{c:<12}" for c in cells)
            + f"  {row.mean_tokens:<6.0f}  {'-' if per_hit is None else f'{per_hit:.0f}':<7}"
            + f"  {row.median_frames:g}"
        )
    return "\n".join(lines) + "\n"


@dataclass(slots=True, frozen=True)
class Paired:
    """One policy against a baseline at one budget, question by question.

    ``gained[style]``: questions this policy recalled and the baseline missed;
    ``lost[style]``: the other way round. Recall differences between two policies
    are these two counts' difference; their sum says how many questions the two
    actually disagree on, which is what a difference of one or two is made of.
    """

    budget: int
    policy: str
    baseline: str
    gained: dict[str, int]
    lost: dict[str, int]

    def to_wire(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "policy": self.policy,
            "baseline": self.baseline,
            "gained": dict(self.gained),
            "lost": dict(self.lost),
        }


def paired(outcomes: Sequence[Outcome], baseline: str) -> list[Paired]:
    """Every other row (``(offered)`` aside) against ``baseline``, per budget and style.

    Budgets ascending, policies in first-seen order. A question enters a pair only
    when both rows have an outcome for it.
    """
    rows: dict[tuple[int, str], dict[str, bool]] = {}  # (budget, policy) -> question -> hit
    style: dict[str, str] = {}
    styles = _styles({o.style for o in outcomes})
    for o in outcomes:
        rows.setdefault((o.budget, o.policy), {})[o.question] = o.hit
        style[o.question] = o.style
    out: list[Paired] = []
    if not any(p == baseline for _, p in rows):
        return out
    for budget, policy in sorted(rows, key=lambda row: row[0]):  # stable: first-seen order
        base = rows.get((budget, baseline))
        if policy in (baseline, OFFERED, TRIM_ORACLE) or base is None:
            continue
        gained = dict.fromkeys(styles, 0)
        lost = dict.fromkeys(styles, 0)
        for q, h in rows[(budget, policy)].items():
            if q in base and base[q] != h:
                (gained if h else lost)[style[q]] += 1
        out.append(Paired(budget, policy, baseline, gained, lost))
    return out


def render_paired(pairs: Sequence[Paired]) -> str:
    """Per budget, one line per policy: ``+gained −lost`` against the baseline, per style."""
    if not pairs:
        return ""
    baseline = pairs[0].baseline
    lines = [
        f"against {baseline}, question by question: +N recalled that {baseline} missed, "
        f"-M missed that {baseline} recalled"
    ]
    width = max([len("policy"), *(len(p.policy) for p in pairs)])
    styles = tuple(pairs[0].gained)
    budget = None
    for p in pairs:
        if p.budget != budget:
            budget = p.budget
            lines += [
                "",
                _budget(budget),
                f"{'policy':<{width}}  " + "  ".join(f"{name:<12}" for name in (*styles, "all")),
            ]
        cells = [f"+{p.gained[s]} -{p.lost[s]}" for s in styles]
        cells.append(f"+{sum(p.gained.values())} -{sum(p.lost.values())}")
        lines.append(f"{p.policy:<{width}}  " + "  ".join(f"{c:<12}" for c in cells))
    return "\n".join(lines) + "\n"


def degraded_note(outcomes: Sequence[Outcome]) -> str:
    """A line naming the rows whose fan-out lost a provider, or ``""`` when none did."""
    lost = sorted({(o.budget, o.policy) for o in outcomes if o.degraded})
    if not lost:
        return ""
    where = ", ".join(f"{policy} at {budget}" for budget, policy in lost)
    count = sum(1 for o in outcomes if o.degraded)
    return (
        f"note: {count} compositions had a provider that did not answer ok ({where}); "
        "their recall is a lower bound\n"
    )


def to_json(
    questions: Sequence[_Styled], outcomes: Sequence[Outcome], baseline: str = "score"
) -> dict[str, Any]:
    """The evaluation report as a JSON-ready dict, policies paired against ``baseline``."""
    styles = _styles({q.style for q in questions})
    return {
        "questions": len(questions),
        "styles": {s: sum(1 for q in questions if q.style == s) for s in styles},
        "table": [r.to_wire() for r in summarise(outcomes)],
        "paired": [p.to_wire() for p in paired(outcomes, baseline)],
        "degraded": sum(1 for o in outcomes if o.degraded),
        "outcomes": [o.to_wire() for o in outcomes],
    }
