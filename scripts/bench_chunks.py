#!/usr/bin/env python3
"""How big the ``files`` provider's chunks should be: gold questions answered per chunk bound.

For each chunk bound (``--bounds``, the provider's ``--chunk-tokens``), the ``files``
provider alone is configured over ``PROJECT`` as ``hostd init`` writes it (``--root .``,
its configs and tokenizer excluded, ``cwd`` and ``trusted_roots`` the project, so every
cited region is re-read and checked; its ``timeout_ms`` raised to 60 s, so a busy machine
times no leg out: a miss must be the chunks'), with a cache of its own in a temporary
directory (every build is cold), and a daemon is run in process (``Daemon.local``: the same
``context/compose`` a socket client gets). ``providers/warm`` waits for the index; its
ready message gives the chunk count and the build time, its cache the lines per chunk.
Then each question of ``QUESTIONS`` is composed at each budget (``--budgets``), and the
audit read: the best rank of a frame overlapping one of the question's gold ranges whose
lines the prompt quotes (included, or coalesced into an included block), or ``-`` when
none is in the prompt (then the best rank any candidate overlapping the gold reached,
and what became of it, as ``why``), and how many of its gold lines the prompt quotes
(``gold_lines``: a hit of a few lines of a long answer is found, yet holds little of it).

``QUESTIONS`` is a JSON list of ``{"id": "Q1", "question": "...", "gold": [{"path":
"src/x.py", "lines": [10, 20]}, ...]}`` (paths relative to the project, line ranges
inclusive; any gold range counts). Prints one JSON object.

    python scripts/bench_chunks.py PROJECT QUESTIONS [--bounds 128,256,384,512]
        [--budgets 2000,4000] [--checkout DIR] [--provider-arg=ARG ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_checkout import checkout as _checkout  # noqa: E402 - after the path set-up

CHECKOUT = _checkout()
sys.path.insert(0, str(CHECKOUT))
# The provider process imports the same checkout's ``providers`` as this one.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])]
)

from hostd.chunking import parse_chunk_id  # noqa: E402 - after the path set-up
from hostd.config import parse_config  # noqa: E402
from hostd.server import Daemon  # noqa: E402
from providers._corpus import Corpus, CorpusOptions  # noqa: E402
from providers._corpus_cache import load_corpus  # noqa: E402

_READY = re.compile(r"^([\d,]+) chunks? from .* in ([\d.]+)s")


def _config(project: Path, bound: int, scratch: Path, extra: Sequence[str] = ()) -> str:
    """The ``files`` provider as ``hostd init`` writes it, with ``--chunk-tokens`` and
    ``extra`` options of its own (``--provider-arg``)."""
    command = [
        "python",
        "-m",
        "providers.files",
        "--root",
        ".",
        "--exclude",
        "hostd.toml",
        "--exclude",
        "hostd.toml.bak*",
        "--exclude",
        "tokenizer.json",
        "--chunk-tokens",
        str(bound),
        "--cache",
        str(scratch / "cache"),
        *extra,
    ]
    return (
        f"[host]\nstate_dir = {json.dumps(str(scratch / 'state'))}\n\n"
        "[[provider]]\n"
        'id = "files"\n'
        f"command = {json.dumps(command)}\n"
        'cwd = "."\n'
        'trusted_roots = ["."]\n'
        "timeout_ms = 60000\n"
    )


def _lines_per_chunk(project: Path, cache: Path) -> dict[str, Any]:
    """Lines per chunk of code (``snippet``) and of prose (``doc``), p25/median/p75/max,
    read back from the index's cache: the chunks the provider served."""
    corpus = Corpus(CorpusOptions(root=project))
    saved = sorted(cache.glob("*.json"))
    if len(saved) != 1 or not load_corpus(corpus, saved[0]):
        return {}
    out: dict[str, Any] = {}
    for kind in ("snippet", "doc"):
        sizes = sorted(c.end - c.start + 1 for c in corpus.chunks if c.kind == kind)
        if len(sizes) >= 2:
            p25, p50, p75 = statistics.quantiles(sizes, n=4)
            out[kind] = [round(p25), round(p50), round(p75), sizes[-1]]
    return out


#: A frame whose lines the prompt quotes in another's block: coalesced with the block
#: before or after it, or merged into (or held by) an overlapping region (docs/pipeline.md).
_QUOTED_BY_ANOTHER = ("merged_into", "contained_in")


def _gold_rank(result: dict[str, Any], gold: list[dict[str, Any]]) -> dict[str, Any]:
    """The best rank of a frame overlapping a gold range whose lines are in the prompt
    (included, or quoted by an included block it was merged into), and its lines; else
    the best-ranked candidate that overlaps one and why it is not in the prompt."""

    def overlaps(frame_id: str) -> str | None:
        parsed = parse_chunk_id(frame_id)
        if parsed is None:
            return None
        rel, range_ = parsed
        a, _, b = range_[1:].partition("-")
        lo, hi = int(a), int(b or a)
        for g in gold:
            g_lo, g_hi = g["lines"]
            if rel == g["path"] and lo <= g_hi and hi >= g_lo:
                return range_
        return None

    entries = result["audit"]["entries"]
    included = {
        e["frame"]["frame_id"]: e["rank"] for e in entries if e["disposition"] == "included"
    }
    quoted: list[tuple[int, str]] = []
    missed: list[tuple[float, str]] = []
    # The gold lines the prompt quotes, by gold range: what of the answer it holds.
    gold_lines = [set(range(g["lines"][0], g["lines"][1] + 1)) for g in gold]
    held: set[tuple[int, int]] = set()
    for e in entries:
        lines = overlaps(e["frame"]["frame_id"])
        if lines is None:
            continue
        reason = e.get("reason")
        kept = (e.get("detail") or {}).get("kept") or {}
        in_prompt = e["disposition"] == "included" or (
            reason in _QUOTED_BY_ANOTHER and kept.get("frame_id") in included
        )
        if in_prompt:
            rel = e["frame"]["frame_id"].rpartition("#")[0]
            a, _, b = lines[1:].partition("-")
            for n, g in enumerate(gold):
                if g["path"] == rel:
                    held.update(
                        (n, x) for x in range(int(a), int(b or a) + 1) if x in gold_lines[n]
                    )
        if e["disposition"] == "included":
            quoted.append((e["rank"], lines))
        elif reason in _QUOTED_BY_ANOTHER and kept.get("frame_id") in included:
            rank = e.get("rank")
            quoted.append((included[kept["frame_id"]] if rank is None else rank, lines))
        else:
            rank = e.get("rank")
            at = "unranked" if rank is None else f"rank {rank}"
            missed.append((float("inf") if rank is None else rank, f"{reason} at {at} ({lines})"))
    covered = f"{len(held)}/{sum(len(g) for g in gold_lines)}"
    if quoted:
        rank, lines = min(quoted)
        return {"rank": rank, "lines": lines, "gold_lines": covered}
    if missed:
        return {"rank": None, "why": min(missed)[1]}
    return {"rank": None, "why": "not offered"}


async def _measure_bound(
    project: Path,
    bound: int,
    questions: list[dict[str, Any]],
    budgets: list[int],
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-chunks-") as tmp:
        scratch = Path(tmp)
        cfg = parse_config(_config(project, bound, scratch, extra), source="<bench>", base=project)
        started = time.perf_counter()
        async with Daemon(cfg).local() as session:
            await session.call("providers/warm", {})
            warm_s = time.perf_counter() - started
            listed = await session.call("providers/list", {})
            (row,) = listed["providers"]
            message = row["health"].get("progress", {}).get("message") or ""
            found = _READY.match(message)
            out: dict[str, Any] = {
                "chunks": int(found.group(1).replace(",", "")) if found else None,
                "build_s": float(found.group(2)) if found else None,
                "start_to_ready_s": round(warm_s, 2),
                "ready_message": message[:200],
                "lines_per_chunk": _lines_per_chunk(project, scratch / "cache"),
                "budgets": {},
            }
            for budget in budgets:
                rows = {}
                for q in questions:
                    result = await session.call(
                        "context/compose", {"goal": q["question"], "budget": budget}
                    )
                    rows[q["id"]] = _gold_rank(result, q["gold"])
                ranks = [r["rank"] for r in rows.values()]
                out["budgets"][str(budget)] = {
                    "found": sum(r is not None for r in ranks),
                    "ranks": ",".join("-" if r is None else str(r) for r in ranks),
                    "gold_lines": ",".join(
                        r.get("gold_lines", "0").partition("/")[0] for r in rows.values()
                    ),
                    "questions": rows,
                }
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path, help="the project directory")
    parser.add_argument("questions", type=Path, help="a JSON list of questions and gold")
    parser.add_argument("--bounds", default="128,256,384,512", help="chunk bounds, comma-separated")
    parser.add_argument("--budgets", default="2000,4000", help="budgets, comma-separated")
    parser.add_argument("--checkout", type=Path, help="measure this checkout's hostd")
    parser.add_argument(
        "--provider-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument of the provider (repeatable: --provider-arg=--definition-tokens "
        "--provider-arg=256)",
    )
    args = parser.parse_args()
    project = args.project.resolve()
    questions = json.loads(args.questions.read_text(encoding="utf-8"))
    bounds = [int(b) for b in args.bounds.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]
    figures: dict[str, Any] = {
        "project": str(project),
        "questions": [q["id"] for q in questions],
        "budgets": budgets,
        "provider_args": args.provider_arg,
        "load_average": list(os.getloadavg()),
        "bounds": {},
    }
    for bound in bounds:
        # The daemon's own log lines go to stderr; stdout is the figures alone.
        with contextlib.redirect_stdout(sys.stderr):
            figures["bounds"][str(bound)] = anyio.run(
                _measure_bound, project, bound, questions, budgets, args.provider_arg
            )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
