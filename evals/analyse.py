"""Reproduce the analysis figures of docs/eval.md from a question set.

    HF_HUB_OFFLINE=1 python evals/analyse.py --config evals/repo.toml \\
        --questions evals/repo.jsonl --budget 800 --budget 1500 \\
        --held-out evals/held-out.txt --calibrate-on evals/stdlib.toml:evals/stdlib.jsonl

asks every question exactly as ``hostd eval`` does (one ``context/query`` fan-out
per question and budget, then each provider alone; ``hostd.quality``'s own helpers
compose and score them) and prints:

- the recall table ``hostd eval`` prints for the same set (every default policy,
  each provider alone, ``(offered)``), plus the calibrated rows when asked for;
- with ``--held-out FILE`` (question ids, one a line, ``#`` comments): the same
  rows split into the design questions (not listed) and the held-out ones
  (listed), lexical/paraphrase hits at each budget ("Design set and held-out set
  apart" in docs/eval.md);
- the separation signals ("The bar for a new default"): per provider and budget,
  over the fan-out candidate sets, each question's top score, top / mean,
  head z-score ``(top - mu) / sigma`` and ``(top - second) / sigma`` (population
  sigma of that provider's list), and the ROC AUC of each for lexical (positive)
  against paraphrase (negative) questions, ties counting half; a list of fewer
  than 3 frames is skipped;
- with ``--calibrate-on CONFIG:QUESTIONS``: a logistic map ``p = sigmoid(a*score + b)``
  per provider, fitted on the other set's fan-out frames at the largest budget
  (label: the frame holds that question's gold), and this set composed by each
  candidate's best calibrated chance over the providers that vouched for it, and
  by noisy-or ``1 - prod(1 - p)`` (the last bullet of that section).

Nothing here is a figure: everything printed is computed from the run. ``--json``
prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import orjson

from hostd.cli._common import session as _session
from hostd.compose import CandidateSet, strategy_from_wire
from hostd.compose._candidates import FramePair, rank_desc
from hostd.compose._fusion import provider_lists
from hostd.config import Config, load_config
from hostd.errors import HostdError
from hostd.logs import configure_logging
from hostd.quality import (
    DEFAULT_POLICIES,
    STYLES,
    Outcome,
    Policy,
    Question,
    Row,
    degraded_note,
    holds_gold,
    load_questions,
    render_table,
    score_asked,
    summarise,
)
from hostd.quality import Asked as EvalAsked
from hostd.quality._run import _candidates, _degraded, _query

#: The signals of docs/eval.md's AUC table, in its row order.
SIGNALS: tuple[str, ...] = ("top", "top/mean", "head z", "gap/sigma")
SIGNAL_TITLES = {
    "top": "top score",
    "top/mean": "top score / mean score of the list",
    "head z": "head z-score (top - mu) / sigma",
    "gap/sigma": "gap between first and second, over sigma",
}
#: A provider's list shorter than this gives no signal for that question.
MIN_FRAMES = 3
#: The L2 term of the logistic fit: only keeps a separable sample finite.
L2 = 1e-4
CALIBRATED_MAX = "calibrated max"
CALIBRATED_NOISY_OR = "calibrated noisy-or"


class AnalysisError(Exception):
    """A problem with the command line or its files, said in one line."""


# ---------------------------------------------------------------------------- pure pieces


def roc_auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The chance that a positive outscores a negative, ties counting half (NaN if either
    side is empty): the area under the ROC curve, as the Mann-Whitney U."""
    if not positives or not negatives:
        return math.nan
    wins = 0.0
    for p in positives:
        for n in negatives:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positives) * len(negatives))


def list_signals(scores: Sequence[float]) -> dict[str, float] | None:
    """The four signals of one provider's list, or ``None`` for fewer than 3 frames.

    A ratio over a zero denominator (every score equal, or a mean of 0) is NaN,
    and that question then counts for no AUC of that signal.
    """
    if len(scores) < MIN_FRAMES:
        return None
    xs = sorted((float(s) for s in scores), reverse=True)
    top, second = xs[0], xs[1]
    mean = math.fsum(xs) / len(xs)
    sigma = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / len(xs))
    return {
        "top": top,
        "top/mean": top / mean if mean else math.nan,
        "head z": (top - mean) / sigma if sigma else math.nan,
        "gap/sigma": (top - second) / sigma if sigma else math.nan,
    }


def _log_loss(w: np.ndarray, x: np.ndarray, y: np.ndarray, l2: float) -> float:
    z = w[0] * x + w[1]
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * float(w @ w))


def fit_logistic(
    scores: Sequence[float], labels: Sequence[int | bool], *, l2: float = L2
) -> tuple[float, float]:
    """``(a, b)`` of ``p = sigmoid(a * score + b)`` by maximum likelihood.

    Newton's method with a backtracking line search on the log loss plus
    ``l2 / 2 * (a^2 + b^2)``; the tiny L2 term only keeps the fit finite when
    the labels are separable by score.
    """
    x = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    if x.size == 0:
        raise ValueError("no labelled frames to fit")
    w = np.zeros(2)
    for _ in range(200):
        z = w[0] * x + w[1]
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid, without overflow
        r = p - y
        grad = np.array([r @ x, r.sum()]) + l2 * w
        h = p * (1.0 - p)
        hess = np.array([[h @ (x * x), h @ x], [h @ x, h.sum()]]) + l2 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        before = _log_loss(w, x, y, l2)
        t = 1.0
        while t > 1e-12 and _log_loss(w - t * step, x, y, l2) > before - 1e-4 * t * (grad @ step):
            t /= 2
        w = w - t * step
        if float(np.max(np.abs(t * step))) < 1e-10:
            break
    return float(w[0]), float(w[1])


def _softplus(z: float) -> float:
    return max(z, 0.0) + math.log1p(math.exp(-abs(z)))


@dataclass(slots=True, frozen=True)
class CalibratedChance:
    """Candidates by the calibrated chance that they hold gold (not a shipped policy).

    Each provider that vouched for a candidate (``provider_lists``: its own best
    score for that evidence) gives ``p = sigmoid(a * score + b)`` with its fitted
    ``(a, b)``; ``combine`` is ``max`` (the best chance) or ``noisy-or``
    (``1 - prod(1 - p)``). Sorted on the logit of the max, or on
    ``-log prod(1 - p)``, which order exactly as the chances do without rounding
    chances near 1 into ties; ties end in the canonical key.
    """

    fits: Mapping[str, tuple[float, float]]
    combine: str = "max"

    def __post_init__(self) -> None:
        if self.combine not in ("max", "noisy-or"):
            raise ValueError(f"combine must be 'max' or 'noisy-or', got {self.combine!r}")

    @property
    def name(self) -> str:
        return f"calibrated-{self.combine}"

    def order(self, frames: CandidateSet | Iterable[FramePair]) -> list[int]:
        c = CandidateSet.of(frames)
        logits: list[list[float]] = [[] for _ in range(len(c))]
        for pid, entries in provider_lists(c).items():
            a, b = self.fits[pid]
            for i, s in entries:
                logits[i].append(a * s + b)
        if self.combine == "max":
            values = [max(zs) for zs in logits]
        else:
            values = [math.fsum(map(_softplus, zs)) for zs in logits]
        return rank_desc(c.canonical(), values)


def read_held_out(path: str | Path) -> list[str]:
    """The question ids of a held-out list: one a line, blank lines and ``#`` comments
    ignored, first mention kept."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnalysisError(f"{file}: cannot read: {exc}") from None
    ids: list[str] = []
    for line in text.splitlines():
        qid = line.partition("#")[0].strip()
        if qid and qid not in ids:
            ids.append(qid)
    return ids


def split_held_out(ids: Iterable[str], questions: Sequence[Question]) -> tuple[set[str], list[str]]:
    """``(held-out ids of this set, listed ids this set does not have)``."""
    known = {q.id for q in questions}
    listed = list(ids)
    return {i for i in listed if i in known}, [i for i in listed if i not in known]


def parse_calibrate_on(value: str) -> tuple[Path, Path]:
    config, sep, questions = value.partition(":")
    if not sep or not config or not questions:
        raise AnalysisError(f"--calibrate-on: expected CONFIG:QUESTIONS, got {value!r}")
    return Path(config), Path(questions)


# ---------------------------------------------------------------------------- asking


@dataclass(slots=True)
class Asked:
    """One question at one budget: the fan-out candidates and each provider alone."""

    question: Question
    budget: int
    candidates: list[FramePair]
    degraded: bool
    #: Every provider of the fan-out, whether it returned frames or not.
    providers: list[str] = field(default_factory=list)
    alone: dict[str, tuple[list[FramePair], bool]] = field(default_factory=dict)


async def ask(
    session: Any, questions: Sequence[Question], budgets: Sequence[int], *, singles: bool
) -> list[Asked]:
    """The same queries ``run_eval`` makes, in its order, kept for every analysis."""
    out: list[Asked] = []
    for question in questions:
        for budget in budgets:
            result = await _query(session, question, budget, None)
            pids = sorted(r["provider_id"] for r in result.get("providers") or ())
            asked = Asked(question, budget, _candidates(result), _degraded(result), pids)
            if singles:
                for pid in pids:
                    single = await _query(session, question, budget, [pid])
                    asked.alone[pid] = (_candidates(single), _degraded(single))
            out.append(asked)
    return out


def outcomes_of(asked: Sequence[Asked], policies: Sequence[Policy]) -> list[Outcome]:
    """What ``run_eval`` returns for the same answers (rows in its order): its own scorer."""
    out: list[Outcome] = []
    for a in asked:
        gold = a.question.gold

        def hit(_: Any, frame: Any, gold: Any = gold) -> bool:
            return holds_gold(frame, gold)

        singles = [(pid, c, d) for pid, (c, d) in a.alone.items()]
        scored = EvalAsked(
            a.question.id, a.question.style, a.budget, a.candidates, a.degraded, singles, hit
        )
        out.extend(score_asked(scored, policies))
    return out


# ---------------------------------------------------------------------------- analyses


def split_rows(
    outcomes: Sequence[Outcome], held: set[str]
) -> dict[str, dict[str, dict[int, dict[str, int]]]]:
    """``{policy: {"design"|"held-out": {budget: {style: hits}}}}``."""
    out: dict[str, dict[str, dict[int, dict[str, int]]]] = {}
    for part, rows in (
        ("design", summarise([o for o in outcomes if o.question not in held])),
        ("held-out", summarise([o for o in outcomes if o.question in held])),
    ):
        for r in rows:
            out.setdefault(r.policy, {"design": {}, "held-out": {}})[part][r.budget] = dict(r.hits)
    return out


def signal_table(asked: Sequence[Asked]) -> list[dict[str, Any]]:
    """Per provider and budget: each signal's AUC, and how many lists were used or skipped."""
    values: dict[tuple[str, int], dict[str, dict[str, list[float]]]] = {}
    skipped: dict[tuple[str, int], int] = {}
    for a in asked:
        by_provider: dict[str, list[float]] = {pid: [] for pid in a.providers}
        for pid, frame in a.candidates:
            by_provider.setdefault(pid, []).append(frame.score)
        for pid, scores in by_provider.items():
            key = (pid, a.budget)
            cell = values.setdefault(key, {s: {st: [] for st in STYLES} for s in SIGNALS})
            skipped.setdefault(key, 0)
            signals = list_signals(scores)
            if signals is None:
                skipped[key] += 1
                continue
            for name, v in signals.items():
                if not math.isnan(v):
                    cell[name][a.question.style].append(v)
    table = []
    for pid, budget in sorted(values):
        cell = values[pid, budget]
        table.append(
            {
                "provider": pid,
                "budget": budget,
                "auc": {s: roc_auc(cell[s]["lexical"], cell[s]["paraphrase"]) for s in SIGNALS},
                "used": {st: len(cell["top"][st]) for st in STYLES},
                "skipped": skipped[pid, budget],
            }
        )
    return table


def calibrate(asked: Sequence[Asked]) -> dict[str, dict[str, Any]]:
    """Per provider: ``(a, b)`` fitted on every fan-out frame, labelled by holding gold."""
    samples: dict[str, tuple[list[float], list[int]]] = {}
    for one in asked:
        for pid, frame in one.candidates:
            if not math.isfinite(frame.score):
                continue
            xs, ys = samples.setdefault(pid, ([], []))
            xs.append(frame.score)
            ys.append(int(holds_gold(frame, one.question.gold)))
    fits: dict[str, dict[str, Any]] = {}
    for pid in sorted(samples):
        xs, ys = samples[pid]
        a, b = fit_logistic(xs, ys)
        fits[pid] = {"a": a, "b": b, "frames": len(xs), "gold": sum(ys)}
    return fits


# ---------------------------------------------------------------------------- output


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for n, r in enumerate((header, *rows)):
        cells = [
            f"{c:<{w}}" if i == 0 else f"{c:>{w}}"
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def _counts(questions: Sequence[Question], ids: set[str] | None = None) -> str:
    qs = [q for q in questions if ids is None or q.id in ids]
    return "+".join(str(sum(1 for q in qs if q.style == s)) for s in STYLES)


def render(
    questions: Sequence[Question],
    rows: Sequence[Row],
    split: dict[str, Any] | None,
    held: set[str],
    signals: Sequence[dict[str, Any]],
    fits: Mapping[str, Mapping[str, Any]] | None,
    budgets: Sequence[int],
) -> str:
    parts = [render_table(questions, rows)]
    if split is not None:
        design = {q.id for q in questions} - held
        header = [
            "policy (lexical/paraphrase at " + ", then ".join(map(str, budgets)) + ")",
            f"design ({_counts(questions, design)})",
            f"held-out ({_counts(questions, held)})",
        ]

        def cell(by_budget: Mapping[int, Mapping[str, int]]) -> str:
            return ", ".join(
                "/".join(str(by_budget[b][s]) for s in STYLES) if b in by_budget else "-"
                for b in budgets
            )

        body = [[p, cell(v["design"]), cell(v["held-out"])] for p, v in split.items()]
        parts.append("design and held-out questions apart\n" + _aligned(header, body))
    if signals:
        header = ["signal (AUC, lexical vs paraphrase)"] + [
            f"{s['provider']} {s['budget']}" for s in signals
        ]
        body = [
            [SIGNAL_TITLES[name]] + [f"{s['auc'][name]:.3f}" for s in signals] for name in SIGNALS
        ]
        body.append(
            ["lists used (lexical+paraphrase)"]
            + ["+".join(str(s["used"][st]) for st in STYLES) for s in signals]
        )
        body.append(
            [f"lists skipped (< {MIN_FRAMES} frames)"] + [str(s["skipped"]) for s in signals]
        )
        parts.append(
            "signals of each provider's fan-out list, per question (0.5 is chance)\n"
            + _aligned(header, body)
        )
    if fits is not None:
        header = ["provider", "a", "b", "frames", "gold frames"]
        body = [
            [p, f"{f['a']:.3f}", f"{f['b']:.3f}", str(f["frames"]), str(f["gold"])]
            for p, f in fits.items()
        ]
        parts.append("calibration p = sigmoid(a * score + b)\n" + _aligned(header, body))
    return "\n".join(parts)


def _rows_wire(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [r.to_wire() for r in rows]


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


# ---------------------------------------------------------------------------- main


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evals/analyse.py",
        description="Reproduce docs/eval.md's design/held-out split, separation-signal AUCs "
        "and per-provider calibration from a question set.",
    )
    p.add_argument("--config", required=True, metavar="PATH", help="the hostd config")
    p.add_argument("--questions", required=True, metavar="PATH", help="the question set")
    p.add_argument(
        "--budget",
        type=int,
        action="append",
        metavar="N",
        help="token budget (repeatable; default: the config's default_budget)",
    )
    p.add_argument("--held-out", metavar="FILE", help="held-out question ids, one a line")
    p.add_argument(
        "--calibrate-on",
        metavar="CONFIG:QUESTIONS",
        help="fit a per-provider calibration on another set and compose this one by it",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


async def _run(cfg: Config, args: argparse.Namespace) -> int:
    questions = load_questions(args.questions)
    held: set[str] = set()
    if args.held_out is not None:
        held, unknown = split_held_out(read_held_out(args.held_out), questions)
        if unknown:
            sys.stderr.write(
                f"analyse: warning: {len(unknown)} id(s) of {args.held_out} are not in "
                f"{args.questions}, ignored: {', '.join(unknown[:5])}"
                + (", ..." if len(unknown) > 5 else "")
                + "\n"
            )
    other = None
    if args.calibrate_on is not None:
        other_config, other_questions = parse_calibrate_on(args.calibrate_on)
        other = (load_config(other_config), load_questions(other_questions))
    budgets = sorted(set(args.budget or [cfg.host.default_budget]))
    if any(b <= 0 for b in budgets):
        raise AnalysisError("--budget must be a positive number of tokens")
    policies = [Policy(p, strategy_from_wire(p)) for p in DEFAULT_POLICIES]

    async with _session(cfg, None) as s:
        asked = await ask(s, questions, budgets, singles=True)
    fits = None
    if other is not None:
        async with _session(other[0], None) as s:
            labelled = await ask(s, other[1], [max(budgets)], singles=False)
        fits = calibrate(labelled)
        ab = {p: (f["a"], f["b"]) for p, f in fits.items()}
        missing = sorted({p for a in asked for p, _ in a.candidates} - set(ab))
        if missing:
            raise AnalysisError(
                f"--calibrate-on: no frames of provider(s) {', '.join(missing)} to fit on"
            )
        policies += [
            Policy(CALIBRATED_MAX, CalibratedChance(ab, "max")),
            Policy(CALIBRATED_NOISY_OR, CalibratedChance(ab, "noisy-or")),
        ]
    outcomes = outcomes_of(asked, policies)
    rows = summarise(outcomes)
    split = split_rows(outcomes, held) if args.held_out is not None else None
    signals = signal_table(asked)
    if args.json:
        value = {
            "questions": len(questions),
            "styles": {s: sum(1 for q in questions if q.style == s) for s in STYLES},
            "budgets": budgets,
            "table": _rows_wire(rows),
            "held_out": sorted(held) if args.held_out is not None else None,
            "split": split,
            "signals": signals,
            "calibration": fits,
            "degraded": sum(1 for o in outcomes if o.degraded),
        }
        sys.stdout.write(
            orjson.dumps(
                _nan_to_none(value), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
            ).decode()
            + "\n"
        )
    else:
        sys.stdout.write(render(questions, rows, split, held, signals, fits, budgets))
    sys.stderr.write(degraded_note(outcomes))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
        # as the hostd CLI does for its one-shot commands: warnings and up, on stderr
        configure_logging("warning", settings=cfg.log)
        return anyio.run(_run, cfg, args, backend="asyncio")
    except BaseExceptionGroup as group:  # errors raised inside the daemon's task groups
        matched, _rest = group.split((AnalysisError, HostdError))
        if matched is None:
            raise
        first: BaseException = matched
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        sys.stderr.write(f"analyse: error: {first}\n")
        return 1
    except (AnalysisError, HostdError) as exc:
        sys.stderr.write(f"analyse: error: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
