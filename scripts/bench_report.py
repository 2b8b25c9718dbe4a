"""Benchmark the report stage of ``context/compose`` and the audit entries it carries.

One fan-out like the daemon's in its larger set-up (two providers, ``--frames`` each,
about half of the second's frames the first's again, so dedup folds them; snippets
with a ``file`` provenance and digests), composed once (``compose_for_prompt``, budget
``--budget``). Then, thread CPU per call, median of ``--rounds`` rounds of
``--repeat`` calls:

- ``report_us``: the pipeline's report stage (``Pipeline._report``: the fan-out's part,
  the composition's wire form around it, usage remembered, the log below info);
- ``ranked_entries_us`` / ``unranked_entries_us``: the composition's audit entries of
  the ranked frames, and of the duplicates (``hostd.compose._audit``), over the inputs
  ``compose_for_prompt`` hands them.

``--checkout DIR`` measures another checkout's hostd with the same code (before/after).

    .venv/bin/python scripts/bench_report.py [--frames 54] [--budget 4000] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import functools
import gc
import inspect
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_checkout import checkout as _checkout  # noqa: E402 - after the path set-up

ROOT = _checkout()
sys.path.insert(0, str(ROOT))

import hostd  # noqa: E402
from hostd.compose import _audit, _compose, compose_for_prompt  # noqa: E402
from hostd.config import parse_config  # noqa: E402
from hostd.engine import FanOut, LegReport, LegStatus  # noqa: E402
from hostd.logs import configure_logging  # noqa: E402
from hostd.pipeline import Pipeline  # noqa: E402
from hostd.pipeline._prepare import Prepared  # noqa: E402
from hostd.protocol import (  # noqa: E402
    ContextFrame,
    ContextQuery,
    Provenance,
    canonical_token_cost,
    sha256_digest,
)

WORDS = "retry backoff socket handler config parse token budget frame cache index".split()
PROVIDERS = ("code", "corpus")


def _frame(i: int) -> ContextFrame:
    content = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(30 + (i * 13) % 90))
    digest = sha256_digest(content.encode())
    return ContextFrame(
        id=f"m{i}",
        kind="snippet",
        title=f"entry {i}",
        content=content,
        content_digest=digest,
        score=round(1 / (i + 2), 6),
        token_cost=canonical_token_cost(content),
        citation_label=f"m{i}.py L1-9",
        provenance=[Provenance(type="file", uri=f"file:///src/m{i}.py", range="L1-9")],
    )


def _fan_out(frames: int, budget: int) -> FanOut:
    # The second provider offers every other frame of the first's again: dedup's folds.
    own = {pid: [_frame(i + k * 1000) for i in range(frames)] for k, pid in enumerate(PROVIDERS)}
    own["corpus"][::2] = own["code"][: len(own["corpus"][::2])]
    accepted = sorted(
        ((pid, f) for pid in PROVIDERS for f in own[pid]), key=lambda t: (t[0], t[1].id)
    )
    reports = {
        pid: LegReport(pid, LegStatus.OK, frames, frames, 3.2, max_tokens=budget, share=budget)
        for pid in PROVIDERS
    }
    query = ContextQuery(goal="g", max_frames=frames, max_tokens=budget)
    return FanOut(query, budget, accepted=accepted, reports=reports, overfetch=1.5)


def _median_us(fn: Callable[[], Any], repeat: int, rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(repeat):
            fn()
        runs.append((time.thread_time() - start) / repeat * 1e6)
    return round(statistics.median(runs), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=54, help="frames each provider offers")
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--checkout", help="measure another checkout's hostd")
    args = parser.parse_args()
    configure_logging("warning", stream=io.StringIO())  # as the daemon runs: no audit lines
    text = "".join(f'[[provider]]\nid = "{pid}"\ncommand = ["x"]\n' for pid in PROVIDERS)
    pipeline = Pipeline(parse_config(text, source="<bench>"), engine=None)  # type: ignore[arg-type]  # the report stage asks no engine
    fan = _fan_out(args.frames, args.budget)
    calls: dict[str, list[tuple[Any, Any]]] = {"ranked_entries": [], "unranked_entries": []}
    for name, keep in calls.items():
        real = getattr(_compose, name)

        def recording(*a: Any, _real: Any = real, _keep: Any = keep, **kw: Any) -> Any:
            if _real is _audit.unranked_entries:  # its folds may be one-shot iterables
                a = (a[0], *(list(x) for x in a[1:]))
            _keep.append((a, kw))
            return _real(*a, **kw)

        setattr(_compose, name, recording)
    composed = compose_for_prompt(
        fan.accepted, args.budget, overfetch=fan.overfetch, asked=fan.asked
    )
    for name in calls:
        setattr(_compose, name, getattr(_audit, name))
    prepared = Prepared(None)
    gc.freeze()  # as `hostd serve` runs the collector
    gc.set_threshold(10_000, 20, 20)
    out: dict[str, Any] = {
        "checkout": str(Path(hostd.__file__).resolve().parent.parent),
        "accepted": len(fan.accepted),
        "entries": len(composed.audit),
        "citations": len(composed.citations),
    }

    def report() -> dict[str, Any]:
        # The report's work: the fan-out's part, the composition's wire form around it
        # (``compose_reply`` builds it right after composing), then ``Pipeline._report``.
        part = fan.compose_part()
        result = composed.to_wire(then=part)
        return pipeline._report("r", args.budget, fan, result, part, prepared)

    def report_before() -> dict[str, Any]:  # a checkout whose report stage built both
        return pipeline._report("r", args.budget, fan, composed, prepared)  # type: ignore[arg-type, call-arg]  # that checkout's signature

    if "composed" in inspect.signature(pipeline._report).parameters:
        report = report_before

    out["report_us"] = _median_us(report, args.repeat, args.rounds)
    for name, recorded in calls.items():
        ((a, kw),) = recorded
        call = functools.partial(getattr(_audit, name), *a, **kw)
        out[f"{name}_us"] = _median_us(call, args.repeat, args.rounds)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
