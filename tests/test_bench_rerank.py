"""``scripts/bench_rerank.py`` keeps running: a few stage timings with a real reranker
process. Figures are not judged here (benchmarks are not tests); that each is there is."""

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
