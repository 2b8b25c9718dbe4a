"""``hostd calibrate``: fit the ``calibrated`` policy's maps on recorded feedback.

The samples are the frames each recorded request with feedback *showed* (the
live policy included them): one per frame, its provider, its provider's own
score, its rank in that provider's list and whether the answer used it. A
frame never shown cannot have been used, so the fit says how often shown
frames at a score were used, not how relevant the unshown ones were. A frame
folded into a shown candidate (dedup, a span merge) was shown too, and used
when that candidate was (``_credit``): the provider whose copy lost the tie
learns from it like the one whose copy won.

Per provider with at least ``min_frames`` samples: an isotonic map from its
score to P(used), fitted by pool-adjacent-violators (weighted, on the distinct
scores; a small exact algorithm, written here rather than taking scikit-learn
and SciPy as dependencies of the daemon for thirty lines). Pooled over every
provider: one map from rank to P(used), for providers with fewer samples. The
file is JSON with sorted keys and no timestamp, so the same recordings give
the same bytes; its ``version`` is the digest of its maps. Fitted on fewer than
``min_requests`` requests with feedback, the file carries a ``warning`` saying so.

Reading the file back is total: a file of any shape (truncated, wrong types,
``providers`` a list) is a ``ValueError`` whose text names the file and the first
thing wrong, never the file's content, so ``calibrated`` falls back to
``round_robin`` with that reason in its audit.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hostd.compose import Calibrated, Calibration, MonotoneMap, Strategy
from hostd.protocol import sha256_digest

from ._credit import credited
from ._record import Recorded

__all__ = [
    "FORMAT",
    "MIN_FRAMES",
    "MIN_REQUESTS",
    "bind_calibration",
    "fit_calibration",
    "isotonic",
    "load_calibration",
    "parse_calibration",
    "write_calibration",
]

#: The file format's name and version; a file of another format is refused.
FORMAT = "hostd-calibration/1"


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
        # Every member of a shown or used candidate counts as shown or used (_credit).
        used = set(credited(record, record.feedback.used))
        shown = set(credited(record, record.included))
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


#: Requests with feedback below which ``hostd calibrate`` warns that the fit is thin.
MIN_REQUESTS = 50
#: Shown frames a provider needs for a map of its own.
MIN_FRAMES = 20


def fit_calibration(
    records: Sequence[Recorded],
    *,
    min_frames: int = MIN_FRAMES,
    min_requests: int = MIN_REQUESTS,
) -> dict[str, Any]:
    """The calibration file's content for ``records`` (those with feedback are read);
    fitted on fewer than ``min_requests`` of them, its ``warning`` says so."""
    samples, rated = _samples(records)
    pooled = samples.pop("\0pooled", [])
    providers: dict[str, Any] = {}
    for pid in sorted(samples):
        points = samples[pid]
        if len(points) >= min_frames:
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
            if len(pooled) >= min_frames
            else None
        ),
        "fitted_from": {"requests": rated, "min_frames": min_frames, "min_requests": min_requests},
    }
    if rated < min_requests:
        body["warning"] = (
            f"fitted on {rated} requests with feedback, fewer than {min_requests}: the maps "
            "follow a few answers' choices; record more feedback and calibrate again"
        )
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


class _MapFile(BaseModel):
    """One map as the file holds it; other members (``samples``, ``used``) are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, allow_inf_nan=False)

    x: list[float] = Field(min_length=1)
    p: list[float] = Field(min_length=1)


class _CalibrationFile(BaseModel):
    """The calibration file: strict types (a number is not a string, a map is an object);
    a damaged file fails here, and the policy falls back naming the first problem."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, allow_inf_nan=False)

    format: str
    version: str
    providers: dict[str, _MapFile]
    pooled: _MapFile | None = None


_FIELDS = frozenset({"format", "version", "providers", "pooled", "x", "p"})


def _problem(exc: ValidationError) -> str:
    # Where and what, never the input: the file's bytes are not quoted.
    # A location part that is not one of the schema's own fields is a key the file chose
    # (a provider id): named by its position, never quoted.
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    where = (
        ".".join(
            str(part) if isinstance(part, int) or part in _FIELDS else "<key>"
            for part in first["loc"]
        )
        or "the file"
    )
    return f"{where}: {first['msg']}"


def parse_calibration(raw: Any, file: str) -> Calibration:
    """A calibration file's decoded JSON as the policy reads it (``file`` names it);
    ``ValueError`` naming the file and what is wrong for any other shape."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f"{file}: not a {FORMAT} file")
    try:
        parsed = _CalibrationFile.model_validate(raw)
        return Calibration(
            version=parsed.version,
            providers={
                p: MonotoneMap(tuple(m.x), tuple(m.p)) for p, m in sorted(parsed.providers.items())
            },
            pooled=(
                MonotoneMap(tuple(parsed.pooled.x), tuple(parsed.pooled.p))
                if parsed.pooled is not None
                else None
            ),
            file=file,
        )
    except ValidationError as exc:
        raise ValueError(f"{file}: not a readable calibration: {_problem(exc)}") from None
    except ValueError as exc:  # a map that is not monotone, or out of [0, 1]
        raise ValueError(f"{file}: not a readable calibration: {exc}") from None


_cache: dict[str, tuple[tuple[int, int], Calibration]] = {}


def load_calibration(path: Path) -> Calibration:
    """The file's calibration; read again only when its size or mtime changed."""
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        raw = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a readable calibration: not JSON ({exc})") from None
    calibration = parse_calibration(raw, str(path))
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
