"""The budget a refusal names: for a composition that included nothing because the
budget was too small, the smallest budget at which a frame could be included.

Pure, over the composition's audit entries and the fan-out's figures; the engine's
own split (``least_budget``) says what each provider would be asked at another
budget, so the budget named asks the provider whose frame it names for that frame
(a provider's share, and the over-fetch on it, change with the budget). The split is
the one the fan-out was planned with: over the providers expected to answer, a
provider whose leg says its share was kept apart (``LegReport.share_apart``) taking
none of it but its own nominal one. The hint is ``audit.budget_hint`` on the wire;
``hostd._hints.budget_advice`` words it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hostd.engine import LegReport, asked_at, least_budget

__all__ = ["budget_hint"]


def budget_hint(
    entries: Sequence[Mapping[str, Any]],
    reports: Mapping[str, LegReport],
    costs: Mapping[tuple[str, str], int],
    weights: Mapping[str, float],
    *,
    overfetch: float,
    fixed: int,
    held: int,
) -> dict[str, Any] | None:
    """``{budget, provider, asked, fixed, …}`` for a composition that included nothing
    because nothing fit, else ``None`` (something was included, or nothing was offered
    and no provider said it left frames out: the budget is not why).

    ``entries``: the audit's; ``reports``: each leg's; ``costs``: each accepted frame's
    cost as its provider priced it, by ``(provider id, frame id)``; ``weights``: the
    split's, every provider of the fan-out by id; ``fixed``: the tokens the prompt's
    own lines take (preamble, floors); ``held``: the budget's tokens the providers did
    not share (the floors').

    A frame was offered and priced over the budget (``over_budget``): the budget that
    holds the prompt's own lines and its block, and asks its provider for its cost, the
    smallest over the frames (``cost``: its block's, ``frame``: its id). None was
    offered but a provider said it had frames and none fit what it was asked for
    (``nothing_fit``): each of them costs more than that, so the smallest budget that
    holds the prompt's own lines and one token more, and asks it for one token more
    (``had``: what it was asked for). Either way the providers may offer other frames at
    another budget: the budget named is a least one, never a promise.
    """
    if any(e.get("disposition") == "included" for e in entries):
        return None
    priced = [
        (int(d["cost"]), e)
        for e in entries
        if e.get("reason") == "over_budget" and isinstance(d := e.get("detail"), Mapping)
    ]
    # The split each provider was asked by: over those expected to answer, or, for one
    # kept apart, its nominal one over every provider.
    apart = {p for p, r in reports.items() if r.share_apart is not None}
    counted = {p: w for p, w in weights.items() if p not in apart} if apart else weights

    def split_of(pid: str) -> Mapping[str, float]:
        return weights if pid in apart else counted

    best: dict[str, Any] | None = None
    # Cheapest block first: none costing more can need a smaller budget than the best.
    for block, entry in sorted(priced, key=lambda p: p[0]):
        if best is not None and fixed + block >= best["budget"]:
            break
        pid = str(entry.get("provider"))
        frame = entry.get("frame") or {}
        own = costs.get((pid, str(frame.get("frame_id"))), block)
        if weights.get(pid, 0) <= 0:
            continue
        budget = least_budget(
            pid, split_of(pid), own, overfetch=overfetch, at_least=fixed + block, held=held
        )
        if best is None or budget < best["budget"]:
            best = {"budget": budget, "provider": pid, "cost": block, "frame": dict(frame)}
    if best is None and not entries:
        for pid in sorted(reports):
            report = reports[pid]
            if not report.nothing_fit or weights.get(pid, 0) <= 0:
                continue
            had = report.max_tokens or 0
            budget = least_budget(
                pid,
                split_of(pid),
                had + 1,
                overfetch=overfetch,
                at_least=fixed + had + 1,
                held=held,
            )
            if best is None or budget < best["budget"]:
                best = {"budget": budget, "provider": pid, "had": had}
    if best is None:
        return None
    best["fixed"] = fixed
    pid = best["provider"]
    best["asked"] = asked_at(pid, split_of(pid), best["budget"], overfetch=overfetch, held=held)
    return best
