"""``scripts/bench_rerank.py`` and ``bench_rerank_down.py`` keep running: a few stage
timings with a real reranker process, and a rerank server that is down. Figures are not
judged here (benchmarks are not tests); that each is there is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_rerank_bench_prints_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_rerank.py")]
        + ["--rounds", "2", "--warmup", "0", "--sizes", "3,5", "--rerankers", "pipe"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stage = json.loads(done.stdout)["stage"]
    assert list(stage) == ["pipe"] and list(stage["pipe"]) == ["3", "5"]
    for figures in stage["pipe"].values():
        assert set(figures) == {
            "median_ms",
            "p10_ms",
            "p90_ms",
            "min_ms",
            "max_ms",
            "compose_ms_over_round_robin",
        }
        assert figures["min_ms"] <= figures["median_ms"] <= figures["max_ms"]


def test_the_rerank_down_bench_prints_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_rerank_down.py")]
        # A cool-down of a hang guard's length: the count spared cannot depend on speed.
        + ["--compositions", "5", "--timeout-ms", "100", "--cool-down-ms", "600000"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    for case in ("hang", "refused"):
        on, off = result[case]["on"], result[case]["off"]
        # Counts, not times: the cool-down spares all but the first three (its default).
        assert (on["exchanges"], on["skipped"]) == (3, 2)
        assert (off["exchanges"], off["skipped"], off["spared_median_ms"]) == (5, 0, None)
        keys = {"total_ms", "exchanges", "skipped", "asked_median_ms", "spared_median_ms"}
        assert set(on) == set(off) == keys
