"""``scripts/bench_fanout.py`` keeps running: a tiny fan-out with real provider processes,
its paired floor and its layered floors. Figures are not judged here (benchmarks are
not tests); that every figure is there, and every frame came back, is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--providers", "2", "--frames", "3", "--delay-ms", "1", "--rounds", "4", "--warmup", "1"]


def _bench(*flags: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_fanout.py"), *TINY, *flags],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.mark.timeout(150)
def test_paired_floor_figures() -> None:
    out = _bench()
    assert (out["providers"], out["frames_per_provider"], out["rounds"]) == (2, 3, 4)
    assert out["overhead_ms"]["median"] > -1.0  # the delay really was waited for
    assert out["engine_over_floor_ms"]["engine_slower_in"].endswith("/4")
    assert out["floor"]["overhead_ms"]["median"] > -1.0
    assert out["target_ratio"] == 1.3 and "engine_to_floor_ratio" in out


@pytest.mark.timeout(150)
def test_layers_name_every_layer_and_the_engine_in_order() -> None:
    layers = _bench("--layers")["layers"]
    assert list(layers) == ["read", "json", "parse", "audit", "keep", "engine"]
    for layer in layers.values():
        assert layer["does"] and layer["host_cpu_ms"] >= 0
        assert set(layer) == {"does", "overhead_ms", "host_cpu_ms", "step_ms"}
    assert layers["read"]["step_ms"] == layers["read"]["overhead_ms"]
