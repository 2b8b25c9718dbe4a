#!/usr/bin/env python3
"""Log volume: bytes of JSON log per ``context/compose`` under each ``[log] audit`` mode.

Runs one ``hostd serve --stdio`` per mode (``entries`` is the one-event-per-entry
log hostd wrote before the summary existed), each with the same fixture providers
and the same compositions, the modes interleaved round by round, and reports as
JSON: log bytes and lines per composition (every line carrying the composition's
``request_id``) and the ratio of each mode to ``entries``.

    python scripts/bench_logs.py [--providers 4] [--frames 25] [--compositions 40]
                                 [--rounds 2] [--sample 0.05]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostd.client import spawn  # noqa: E402 - after the sys.path insert above

MODES = ("entries", "sample", "summary")


def _config(workdir: Path, mode: str, args: argparse.Namespace) -> Path:
    lines = [
        "[host]",
        f'state_dir = "{workdir}/state"',
        "[log]",
        'level = "info"',
        f'file = "{workdir}/hostd.log"',
        f'audit = "{mode}"',
        f"audit_sample = {args.sample}",
    ]
    for i in range(args.providers):
        words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", f"p{i}"]
        words += ["--frames", str(args.frames), "--size", "200"]
        lines += ["[[provider]]", f'id = "p{i}"', f"command = {orjson.dumps(words).decode()}"]
        lines += [f'cwd = "{ROOT}"', "timeout_ms = 10000"]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def _run(mode: str, args: argparse.Namespace) -> tuple[int, int, int]:
    """(bytes, lines, compositions) of one daemon's log lines that belong to a compose."""
    workdir = Path(tempfile.mkdtemp(prefix="hd-logs-"))
    try:
        config = _config(workdir, mode, args)
        ids = set()
        async with spawn(config, cwd=ROOT) as client:
            for i in range(args.compositions):
                result = await client.compose(f"how is request {i} composed", budget=2000)
                ids.add(result.request_id)
        size = lines = 0
        for raw in (workdir / "hostd.log").read_bytes().splitlines():
            if orjson.loads(raw).get("request_id") in ids:
                size += len(raw) + 1
                lines += 1
        return size, lines, len(ids)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=4)
    parser.add_argument("--frames", type=int, default=25)
    parser.add_argument("--compositions", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sample", type=float, default=0.05)
    args = parser.parse_args()
    totals = {m: [0, 0, 0] for m in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            for i, value in enumerate(await _run(mode, args)):
                totals[mode][i] += value
    per = {m: (b / n, ln / n) for m, (b, ln, n) in totals.items()}
    base = per["entries"][0]
    out = {
        "providers": args.providers,
        "frames_per_provider": args.frames,
        "compositions": args.compositions * args.rounds,
        "audit_sample": args.sample,
        "modes": {
            m: {
                "bytes_per_composition": round(b),
                "lines_per_composition": round(ln, 1),
                "ratio_to_entries": round(b / base, 4),
            }
            for m, (b, ln) in per.items()
        },
    }
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
