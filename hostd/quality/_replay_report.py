"""Replays → a readable table: one line per request, a total, then the disagreements;
then, over the requests with feedback, how much of the used evidence each policy keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._record import Candidate
from ._replay import Replayed

__all__ = ["render_replay", "replay_json", "used_summary"]


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


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.2f})" if whole else "0/0 (-)"


def _credited(rated: Sequence[Replayed]) -> dict[str, int]:
    total: dict[str, int] = {}
    for r in rated:
        for pid, n in r.credited.items():
            total[pid] = total.get(pid, 0) + n
    return dict(sorted(total.items()))


def used_summary(replays: Sequence[Replayed]) -> dict[str, Any]:
    """The used-evidence figures over the replays that had feedback."""
    rated = [r for r in replays if r.has_feedback]
    used = sum(len(r.used) for r in rated)
    kept = sum(len(r.used_kept) for r in rated)
    live = sum(len(r.used_live) for r in rated)
    return {
        "requests": len(rated),
        "used": used,
        "kept": kept,
        "kept_live": live,
        "share": round(kept / used, 4) if used else None,
        "share_live": round(live / used, 4) if used else None,
        "gained": sum(r.gained for r in rated),
        "lost": sum(r.lost for r in rated),
        "credited": _credited(rated),
        "tokens": {
            "live": sum(Replayed.tokens(r.live_replayed) for r in rated),
            "replayed": sum(Replayed.tokens(r.replayed) for r in rated),
        },
    }


def _used_lines(policy: str, replays: Sequence[Replayed]) -> list[str]:
    rated = [r for r in replays if r.has_feedback]
    if not rated:
        return ["used evidence: no recorded request has feedback (usage/feedback)"]
    t = used_summary(rated)
    rows = [
        ["request", "used", f"kept by {policy}", "kept by live", "+/-", "tokens live replay→new"]
    ]
    rows += [
        [
            r.request_id,
            str(len(r.used)),
            str(len(r.used_kept)),
            str(len(r.used_live)),
            f"+{r.gained} -{r.lost}",
            f"{r.tokens(r.live_replayed)}→{r.tokens(r.replayed)}",
        ]
        for r in rated
    ]
    rows.append(
        [
            "total",
            str(t["used"]),
            str(t["kept"]),
            str(t["kept_live"]),
            f"+{t['gained']} -{t['lost']}",
            f"{t['tokens']['live']}→{t['tokens']['replayed']}",
        ]
    )
    return [
        f"used evidence on {t['requests']} requests with feedback (the frames the answer "
        f"used, as the agent reported): {policy} keeps {_share(t['kept'], t['used'])}, the "
        f"live policy replayed keeps {_share(t['kept_live'], t['used'])}; against it, frame "
        f"by frame, +{t['gained']} -{t['lost']} (live replay: the live policy composed "
        "again from the record, the pair each share is set against)",
        f"used evidence served by (every provider whose copy was folded into a used frame "
        f"is credited): {_mix(t['credited'])}",
        "",
        *_columns(rows),
        "",
        *_frames(
            f"used frames {policy} would drop",
            [(r.request_id, c) for r in rated for c in r.used_dropped],
        ),
    ]


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
        f"kept: included by both; +in: only under {policy}; -out: only in the live prompt; "
        "tokens live→new: the live prompt's frames, then the replay's (their canonical costs)",
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
        "",
        *_used_lines(policy, replays),
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
        "used": used_summary(replays),
        "replays": [r.to_wire() for r in replays],
    }
