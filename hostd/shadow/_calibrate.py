"""``hostd calibrate``: fit the ``calibrated`` policy's maps on recorded feedback.

The samples are the frames each recorded request with feedback *showed* (the
live policy included them): one per frame, its provider, its provider's own
score, its rank in that provider's list and whether the answer used it. A
frame never shown cannot have been used, so the fit says how often shown
frames at a score were used, not how relevant the unshown ones were.

Per provider with at least ``min_samples`` samples: an isotonic map from its
score to P(used), fitted by pool-adjacent-violators (weighted, on the distinct
scores; a small exact algorithm, written here rather than taking scikit-learn
and SciPy as dependencies of the daemon for thirty lines). Pooled over every
provider: one map from rank to P(used), for providers with fewer samples. The
file is JSON with sorted keys and no timestamp, so the same recordings give
the same bytes; its ``version`` is the digest of its maps.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from hostd.compose import Calibrated, Calibration, MonotoneMap, Strategy
from hostd.protocol import sha256_digest

from ._store import Recorded

__all__ = [
    "FORMAT",
    "bind_calibration",
    "calibration_path",
    "fit_calibration",
    "isotonic",
    "load_calibration",
    "parse_calibration",
    "write_calibration",
]

#: The file format's name and version; a file of another format is refused.
FORMAT = "hostd-calibration/1"


def calibration_path(state_dir: Path) -> Path:
    """Where ``hostd calibrate`` writes the calibrated policy's maps, and reads them."""
    return state_dir / "calibration.json"


def isotonic(points: Sequence[tuple[float, float]]) -> MonotoneMap:
    """The least-squares non-decreasing fit of ``(x, y)`` points, as knots on the distinct x."""
    by_x: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0])  # x -> [sum y, count]
    for x, y in points:
        cell = by_x[x]
        cell[0] += y
        cell[1] += 1
    # Pool adjacent violators: each block is [sum y, weight, first x index, last x index].
    xs = sorted(by_x)
    blocks: list[list[float]] = []
    for j, x in enumerate(xs):
        total, weight = by_x[x]
        blocks.append([total, weight, j, j])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            last = blocks.pop()
            blocks[-1][0] += last[0]
            blocks[-1][1] += last[1]
            blocks[-1][3] = last[3]
    ps: list[float] = []
    for total, weight, first, end in blocks:
        ps += [total / weight] * (int(end) - int(first) + 1)
    return MonotoneMap(tuple(xs), tuple(ps))


def _samples(records: Sequence[Recorded]) -> tuple[dict[str, list[tuple[float, float]]], int]:
    """Per provider, ``(score, used)`` of every shown frame; and ``(-rank, used)`` pooled."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    rated = 0
    for record in records:
        if record.feedback is None:
            continue
        rated += 1
        used = set(record.feedback.used)
        shown = set(record.included)
        lists: dict[str, list[Any]] = defaultdict(list)
        for c in record.candidates:
            lists[c.provider].append(c)
        for pid in sorted(lists):
            ranked = sorted(lists[pid], key=lambda c: (-c.score, c.id, c.digest or ""))
            for rank, c in enumerate(ranked, start=1):
                key = (c.provider, c.id, c.digest)
                if key in shown:
                    hit = 1.0 if key in used else 0.0
                    out[pid].append((c.score, hit))
                    out["\0pooled"].append((-float(rank), hit))
    return out, rated


def fit_calibration(records: Sequence[Recorded], *, min_samples: int = 20) -> dict[str, Any]:
    """The calibration file's content for ``records`` (those with feedback are read)."""
    samples, rated = _samples(records)
    pooled = samples.pop("\0pooled", [])
    providers: dict[str, Any] = {}
    for pid in sorted(samples):
        points = samples[pid]
        if len(points) >= min_samples:
            providers[pid] = {
                "feature": "score",
                "samples": len(points),
                "used": int(sum(y for _, y in points)),
                **isotonic(points).to_wire(),
            }
    body: dict[str, Any] = {
        "providers": providers,
        "pooled": (
            {
                "feature": "-rank",
                "samples": len(pooled),
                "used": int(sum(y for _, y in pooled)),
                **isotonic(pooled).to_wire(),
            }
            if len(pooled) >= min_samples
            else None
        ),
        "fitted_from": {"requests": rated, "min_samples": min_samples},
    }
    maps = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return {"format": FORMAT, "version": sha256_digest(maps).split(":")[-1][:16], **body}


def write_calibration(path: Path, content: dict[str, Any]) -> None:
    """Write the file (0600, replaced whole, never half-written)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(content, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, path)


def parse_calibration(raw: Any, file: str) -> Calibration:
    """A calibration file's decoded JSON as the policy reads it (``file`` names it)."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f"{file}: not a {FORMAT} file")
    pooled = raw.get("pooled")
    return Calibration(
        version=str(raw["version"]),
        providers={p: MonotoneMap.from_wire(m) for p, m in sorted(raw["providers"].items())},
        pooled=MonotoneMap.from_wire(pooled) if pooled else None,
        file=file,
    )


_cache: dict[str, tuple[tuple[int, int], Calibration]] = {}


def load_calibration(path: Path) -> Calibration:
    """The file's calibration; read again only when its size or mtime changed."""
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        calibration = parse_calibration(orjson.loads(path.read_bytes()), str(path))
    except (KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable calibration: {exc}") from None
    _cache[str(path)] = (stamp, calibration)
    return calibration


def bind_calibration(strategy: Strategy, path: Path) -> Strategy:
    """``calibrated`` with the file at ``path``; any other policy as it is. A missing or
    unreadable file leaves the policy falling back to ``round_robin``, saying why."""
    if not isinstance(strategy, Calibrated) or strategy.calibration is not None:
        return strategy
    try:
        calibration = load_calibration(path)
    except FileNotFoundError:
        return Calibrated(reason=f"no calibration file at {path} (run hostd calibrate)")
    except (OSError, ValueError) as exc:
        return Calibrated(reason=str(exc))
    if calibration.empty:
        return Calibrated(calibration, reason="the calibration was fitted without feedback")
    return Calibrated(calibration)
