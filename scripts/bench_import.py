"""Import time of hostd's entry points: what every command and process pays first.

Each sample is a fresh interpreter timing one import (``time.perf_counter`` around
it, the interpreter's own start left out); the figure is the median of
``--samples`` samples, in milliseconds, per entry point:

- ``hostd.server``: a daemon's start (``hostd serve``): ``hostd.server._daemon``, the
  module of the ``Daemon`` it builds, which loads the rest of the daemon (the package
  alone loads each of its names with the name's first use);
- ``hostd.cli``: what every ``hostd`` command loads before it runs (``--version``,
  ``compose``, which import the rest on use);
- ``providers.files``: a bundled provider program's entry module
  (``python -m providers.files``).

``--base DIR`` measures another checkout beside this one in the same run, samples
interleaved (a loaded machine slows both alike; one unrecorded sample each first,
so compiling bytecode is not counted), and prints each entry point's
ratio (this / base). ``--entry NAME`` (repeatable) measures only those entry points
(a smoke run's tiny size).

    .venv/bin/python scripts/bench_import.py [--samples 21] [--base DIR] [--entry NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ENTRY_POINTS = {
    "hostd.server": "hostd.server._daemon",
    "hostd.cli": "hostd.cli",
    "providers.files": "providers.files._provider",
}

_TIMED = "import time\nt = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)\n"


def _sample(checkout: Path, module: str) -> float:
    """One fresh interpreter's import of ``module`` from ``checkout``, in ms."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _TIMED.format(module=module)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return float(done.stdout.split()[-1]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=21, help="fresh interpreters per figure")
    parser.add_argument("--base", type=Path, help="another checkout, measured beside this one")
    parser.add_argument(
        "--entry",
        action="append",
        choices=sorted(ENTRY_POINTS),
        help="measure only this entry point (repeatable; default: every one)",
    )
    args = parser.parse_args()
    entries = {e: m for e, m in ENTRY_POINTS.items() if not args.entry or e in args.entry}
    checkouts = {"this": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    times: dict[str, dict[str, list[float]]] = {k: {e: [] for e in entries} for k in checkouts}
    for module in entries.values():  # unrecorded: bytecode compiled and cached
        for checkout in checkouts.values():
            _sample(checkout, module)
    for _ in range(args.samples):
        for entry, module in entries.items():
            for side, checkout in checkouts.items():
                times[side][entry].append(_sample(checkout, module))
    out: dict[str, object] = {"samples": args.samples, "python": sys.version.split()[0]}
    medians = {
        side: {e: round(statistics.median(v), 1) for e, v in per.items()}
        for side, per in times.items()
    }
    out |= medians
    if args.base:
        out["base_checkout"] = str(args.base.resolve())
        out["ratio"] = {e: round(medians["this"][e] / medians["base"][e], 2) for e in entries}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
