"""``scripts/bench_stderr.py`` keeps running: every figure is there and both sides read
the whole flood, the same count of lines whatever the machine's speed (figures are not
judged here; benchmarks are not tests)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures.procs import ROOT


@pytest.mark.timeout(120)
def test_the_stderr_benchmark_reports_both_sides() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_stderr.py"),
            "--seconds",
            "0.3",
            "--rounds",
            "1",
            "--rate",
            "50000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["rounds"] == 1
    (lines,) = out["hostd"]["lines"]
    (suppressed,) = out["hostd"]["suppressed"]
    # The same flood (a fixed count of lines, whatever the machine's speed: 0.3 s at
    # 50,000 a second, in batches of 655), each side drained to its end.
    assert lines == out["floor"]["lines"][0] == out["flood_lines"] == 23 * 655
    assert 0 < suppressed < lines  # past the bucket: counted, not logged
    assert out["hostd"]["host_cpu_share"] >= 0 and out["us_per_line_over_floor"] > 0
