"""Replays → a readable table: one line per request, a total, then the disagreements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._replay import Replayed
from ._store import Candidate

__all__ = ["render_replay", "replay_json"]


def _mix(mix: dict[str, int]) -> str:
    return " ".join(f"{p} {n}" for p, n in mix.items()) or "none"


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _frames(title: str, items: list[tuple[str, Candidate]]) -> list[str]:
    if not items:
        return [f"{title}: none"]
    rows = [["request", "provider", "frame", "score", "tokens"]]
    rows += [[rid, c.provider, c.id, f"{c.score:.4f}", str(c.cost)] for rid, c in items]
    return [f"{title}:", *_columns(rows)]


def render_replay(policy: str, replays: Sequence[Replayed]) -> str:
    """The comparison of ``policy`` with the live one, request by request."""
    if not replays:
        return "no recorded requests to replay (is [shadow] enabled?)\n"
    head = [
        "request",
        "live",
        "overlap",
        "kept",
        "+in",
        "-out",
        "tokens live→new",
        "providers live → new",
    ]
    rows = [head]
    for r in replays:
        rows.append(
            [
                r.request_id,
                r.live_policy,
                f"{r.overlap:.2f}",
                str(len(r.kept)),
                str(len(r.newly_included)),
                str(len(r.newly_excluded)),
                f"{r.tokens(r.live)}→{r.tokens(r.replayed)}",
                f"{_mix(r.mix(r.live))} → {_mix(r.mix(r.replayed))}",
            ]
        )
    kept = sum(len(r.kept) for r in replays)
    union = sum(r.union for r in replays)
    live = [c for r in replays for c in r.live]
    new = [c for r in replays for c in r.replayed]
    rows.append(
        [
            "total",
            "",
            f"{kept / union if union else 1.0:.2f}",
            str(kept),
            str(sum(len(r.newly_included) for r in replays)),
            str(sum(len(r.newly_excluded) for r in replays)),
            f"{Replayed.tokens(live)}→{Replayed.tokens(new)}",
            f"{_mix(Replayed.mix(live))} → {_mix(Replayed.mix(new))}",
        ]
    )
    lines = [
        f"shadow replay: {policy} against the live policy on {len(replays)} recorded requests "
        "(overlap = included by both / by either)",
        "",
        *_columns(rows),
        "",
        *_frames(
            f"newly excluded under {policy} (the live policy included them)",
            [(r.request_id, c) for r in replays for c in r.newly_excluded],
        ),
        "",
        *_frames(
            f"newly included under {policy}",
            [(r.request_id, c) for r in replays for c in r.newly_included],
        ),
    ]
    return "\n".join(lines) + "\n"


def replay_json(policy: Any, replays: Sequence[Replayed]) -> dict[str, Any]:
    """A replay report as a JSON-ready dict: the policy, the overlap, each request's replay."""
    kept = sum(len(r.kept) for r in replays)
    union = sum(r.union for r in replays)
    return {
        "policy": policy,
        "requests": len(replays),
        "overlap": round(kept / union, 4) if union else 1.0,
        "replays": [r.to_wire() for r in replays],
    }
