#!/usr/bin/env python3
"""Instructions per composition of the ``hostd serve`` process, counted by callgrind.

CPU time on a shared two-core machine moves by tens of per cent from one run to the
next; the count of instructions the daemon executes for the same requests in the same
order barely moves, so a cut of a few per cent shows in it. The set-up is
``scripts/bench_serve.py``'s (its corpus, providers, memory database and config): the
daemon runs under ``valgrind --tool=callgrind --instr-atstart=no``, its providers
outside valgrind (callgrind does not follow child processes), so only the daemon's
own work is counted, every thread of it. After the providers are warm and
``--warmup`` compositions have filled the daemon's caches, ``callgrind_control
--instr=on`` starts the count, ``--compositions`` compositions run one at a time,
and ``callgrind_control --dump`` reads the total (``Ir``), divided by their number.

    python scripts/bench_instructions.py [--corpus large|docs] [--budget 4000]
        [--goals rotate|fresh] [--warmup 10] [--compositions 40]
        [--memory-entries 500] [--against CHECKOUT] [--checkout DIR]
        [--corpus-root DIR] [--no-valgrind]

The two set-ups of docs/benchmarks.md are ``--corpus large --budget 4000`` (a) and
``--corpus docs --budget 2000`` (b). ``--against CHECKOUT`` counts that checkout's
daemon too (after this one's, over the same providers, corpus and requests in the
same order) and prints ``ratio`` (this / that). ``PYTHONHASHSEED`` is fixed, so two
runs agree to a fraction of a per cent. The corpus (and the providers' code) is this
checkout's; ``--corpus-root DIR`` serves another tree instead, a fixed copy, so that a
count before an edit of ``hostd/`` and one after it serve the same frames.

``--no-valgrind`` runs the same plumbing without valgrind and gives CPU milliseconds
per composition from ``/proc`` instead (``cpu_ms_per_composition``; the test suite's
smoke run uses it, since a daemon starting under valgrind takes a minute).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemon import ROOT, _Conn, _cpu_s, _start, _stop  # noqa: E402 - after the path set-up
from bench_serve import (  # noqa: E402 - after the path set-up
    CORPORA,
    _commands,
    _compose,
    _config,
    _goals,
    _seed_memory,
    _warm_daemon,
)

#: Runs the daemon: its instrumentation off until the warm-up is done.
VALGRIND = ("valgrind", "--tool=callgrind", "--instr-atstart=no")


def _control(*args: str) -> None:
    """``callgrind_control`` (it asks the process through vgdb, which wakes it)."""
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=600)


def _total_ir(out_file: Path) -> int:
    """The ``Ir`` total of a callgrind dump: its ``summary:`` (or ``totals:``) line."""
    totals = None
    for line in out_file.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            totals = int(line.split()[1])
    if totals is None:
        raise SystemExit(f"no summary line in {out_file}")
    return totals


async def _drive(
    socket: Path, pid: int, args: argparse.Namespace, goals: list[str], on: Any, off: Any
) -> dict[str, Any]:
    """Warm the daemon, then ``on()``, the counted compositions, ``off()``; returns what
    the compositions included (the same work on both sides is the same requests, not
    necessarily the same replies: a checkout may price or render differently)."""
    conn = _Conn(await anyio.connect_unix(socket))
    try:
        await _warm_daemon(conn, args.budget)
        for goal in goals[: args.warmup]:
            await _compose(conn, goal, args.budget)
        offered = included = 0
        prompts = hashlib.sha256()
        c0 = _cpu_s(pid)
        await anyio.to_thread.run_sync(on)
        for goal in goals[args.warmup :]:
            result = await _compose(conn, goal, args.budget)
            included += len(result["citations"])
            offered += len(result["audit"]["entries"])
            prompts.update(result["prompt"].encode())
        figure = await anyio.to_thread.run_sync(off)
        cpu_ms = (_cpu_s(pid) - c0) * 1000
    finally:
        await conn.stream.aclose()
    return {
        "figure": figure,
        "cpu_ms": cpu_ms,
        "offered": offered,
        "included": included,
        "prompts": prompts.hexdigest()[:16],
    }


def count(args: argparse.Namespace, root: Path, side: str) -> dict[str, Any]:
    """One daemon of checkout ``root`` over fresh providers and database: its figures
    (``side`` names its dump)."""
    workdir = Path(tempfile.mkdtemp(prefix="hi-"))
    db = workdir / "memory.db"
    _seed_memory(db, args.memory_entries)
    corpus_root = args.corpus_root.resolve()
    config = _config(workdir, _commands(db, args.corpus, corpus_root), args.corpus, corpus_root)
    out_file = workdir / "callgrind.out"
    wrapper = () if args.no_valgrind else (*VALGRIND, f"--callgrind-out-file={out_file}.%p")
    daemon, socket = _start(config, root, {"PYTHONHASHSEED": "0"}, wrapper, wait_s=900)
    pid = daemon.pid

    def on() -> None:
        if not args.no_valgrind:
            _control("--instr=on", str(pid))

    def off() -> int | None:
        if args.no_valgrind:
            return None
        _control("--dump", str(pid))
        (dump,) = [p for p in workdir.glob("callgrind.out.*.*") if p.suffix != f".{pid}"]
        if args.keep_dump is not None:
            args.keep_dump.mkdir(parents=True, exist_ok=True)
            shutil.copy(dump, args.keep_dump / f"callgrind.out.{side}")
        return _total_ir(dump)

    try:
        if daemon.poll() is not None:
            raise SystemExit(f"the daemon of {root} did not start ({daemon.returncode})")
        goals = _goals(args.goals, args.warmup + args.compositions, corpus_root)
        seen = anyio.run(_drive, socket, pid, args, goals, on, off, backend="asyncio")
    finally:
        code = _stop(daemon)
        shutil.rmtree(workdir, ignore_errors=True)
    n = args.compositions
    figures: dict[str, Any] = {"checkout": str(root)}
    if seen["figure"] is not None:
        figures["instructions_per_composition"] = round(seen["figure"] / n)
        figures["m_instructions_per_composition"] = round(seen["figure"] / n / 1e6, 3)
    else:  # under valgrind, CPU time says nothing
        figures["cpu_ms_per_composition"] = round(seen["cpu_ms"] / n, 2)
    figures["frames_offered"] = seen["offered"]
    figures["frames_included"] = seen["included"]
    figures["prompts_sha256"] = seen["prompts"]
    figures["daemon_exit_code"] = code
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="large")
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--goals", choices=["rotate", "fresh"], default="rotate")
    parser.add_argument("--warmup", type=int, default=10, help="compositions not counted")
    parser.add_argument("--compositions", type=int, default=40, help="compositions counted")
    parser.add_argument("--memory-entries", type=int, default=500)
    parser.add_argument(
        "--corpus-root",
        type=Path,
        default=ROOT,
        help="the tree the files provider serves and the providers run from (this "
        "checkout by default): a fixed copy keeps counts comparable while this one changes",
    )
    parser.add_argument("--checkout", help="count the daemon of another checkout")
    parser.add_argument(
        "--against", type=Path, help="a second checkout whose daemon is counted the same way"
    )
    parser.add_argument(
        "--keep-dump",
        type=Path,
        help="a directory to keep the counted compositions' callgrind dumps in "
        "(callgrind.out.this, callgrind.out.against: read them with callgrind_annotate)",
    )
    parser.add_argument(
        "--no-valgrind",
        action="store_true",
        help="the same plumbing without valgrind: CPU ms from /proc, no instruction count",
    )
    args = parser.parse_args()
    if args.compositions < 1:
        parser.error("--compositions must be at least 1")
    if not args.no_valgrind and not (
        shutil.which("valgrind") and shutil.which("callgrind_control")
    ):
        parser.error("valgrind and callgrind_control are needed (or --no-valgrind)")
    out: dict[str, Any] = {
        "corpus": args.corpus,
        "budget": args.budget,
        "goals": args.goals,
        "warmup": args.warmup,
        "compositions": args.compositions,
        "corpus_root": str(args.corpus_root.resolve()),
        "this": count(args, ROOT, "this"),
    }
    if args.against is not None:
        out["against"] = count(args, args.against.resolve(), "against")
        key = "cpu_ms_per_composition" if args.no_valgrind else "instructions_per_composition"
        this, that = out["this"][key], out["against"][key]
        out["ratio"] = round(this / that, 4) if that else None
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
