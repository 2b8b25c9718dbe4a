"""Caps for providers still building their index: at most the share they have built.

A provider that answers while it builds (``semantic`` embedding a large tree for
hours) ranks what it has embedded so far, the one or two files it began with, as high
as complete providers rank the right answers: under ``rrf`` its frames take every
other rank. ``coverage_caps`` turns the fan-out's coverage (``FanOut.coverage``: done
of total, per provider) into caps the composition already enforces: a provider still
building gets ``min(its cap, done / total)`` of the budget, and a provider at full
coverage is not named. ``explain_caps`` says why in the audit: each frame such a cap
left out carries ``building: "done/total"`` beside its cap and share. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["coverage_caps", "explain_caps"]


def coverage_caps(
    caps: Mapping[str, float] | None, coverage: Mapping[str, tuple[int, int]]
) -> Mapping[str, float] | None:
    """``caps`` (the request's, ``"*"`` for every provider not named) with each provider
    of ``coverage`` capped at the share of its index built; ``caps`` itself when none is
    building, so a composition with every index complete is composed as asked."""
    if not coverage:
        return caps
    out = dict(caps) if caps else {}
    default = out.get("*", 1.0)
    for pid, (done, total) in coverage.items():
        out[pid] = min(out.get(pid, default), done / total)
    return out


def explain_caps(
    entries: Iterable[dict[str, Any]],
    coverage: Mapping[str, tuple[int, int]],
    caps: Mapping[str, float] | None,
) -> None:
    """Add ``building: "done/total"`` to the detail of each ``provider_cap`` entry whose
    cap is its provider's coverage (not a smaller cap the request set)."""
    if not coverage:
        return
    for entry in entries:
        if entry.get("reason") != "provider_cap":
            continue
        pid = entry["provider"]
        built = coverage.get(pid)
        if built is None:
            continue
        done, total = built
        asked = caps.get(pid, caps.get("*", 1.0)) if caps else 1.0
        if done / total <= asked:
            entry["detail"]["building"] = f"{done}/{total}"
