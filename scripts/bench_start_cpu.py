"""CPU time of the processes the test suite starts most: what each pays before it works.

Each sample is one fresh process, its CPU time (user + system, from ``os.wait4``) from
launch to exit, in milliseconds; the figure is the median of ``--samples`` samples:

- ``import hostd.cli``: ``python -c "import hostd.cli"``, what every command loads;
- ``hostd --version``: ``python -m hostd --version``, a whole command (the tests run
  ``python -m hostd ...`` for every CLI and daemon check);
- ``hostd --help``: ``python -m hostd --help``, the whole command line built (every
  command's options) and printed, no config read;
- ``healthy_provider``: ``python -m tests.fixtures.healthy_provider`` answering a
  handshake and one query, then stdin's end: a provider child's start, as the engine
  and daemon tests start it;
- ``import hostd.cli._checks``: what ``hostd check-provider`` loads (the command the
  CLI tests run most);
- ``import hostd.server._daemon``: ``python -c "import hostd.server._daemon"``, a
  daemon's imports (the ``Daemon`` ``hostd serve`` builds; the package alone loads each
  of its names with the name's first use).

``--base DIR`` measures another checkout beside this one, samples alternating (this,
base, base, this, ...: a loaded machine slows both alike), and prints each figure's
ratio (this / base). One unrecorded sample of each first, so compiling bytecode is not
counted. The load average is printed before and after: on a busy machine the figures
are loose and the ratio is what counts.

    .venv/bin/python scripts/bench_start_cpu.py [--samples 5] [--base DIR] [--only NAME]
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

#: name -> (python arguments, whether it is a provider fed a handshake and a query)
PROCESSES: dict[str, tuple[list[str], bool]] = {
    "import hostd.cli": (["-c", "import hostd.cli"], False),
    "hostd --version": (["-m", "hostd", "--version"], False),
    "hostd --help": (["-m", "hostd", "--help"], False),
    "healthy_provider": (["-m", "tests.fixtures.healthy_provider"], True),
    "import hostd.cli._checks": (["-c", "import hostd.cli._checks"], False),
    "import hostd.server._daemon": (["-c", "import hostd.server._daemon"], False),
}


def _provider_input(version: str) -> bytes:
    """A handshake and one query, one JSON-RPC request a line."""
    handshake = {"protocol_version": version, "host": {"name": "bench", "version": "0"}}
    query = {"query": {"goal": "g", "max_frames": 3, "max_tokens": 1000}}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "context/handshake", "params": handshake},
        {"jsonrpc": "2.0", "id": 2, "method": "context/query", "params": query},
    ]
    return b"".join(json.dumps(r).encode() + b"\n" for r in requests)


def _protocol_version(checkout: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from hostd.protocol import PROTOCOL_VERSION as v; print(v)"],
        cwd=checkout,
        env=_env(checkout),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _env(checkout: Path) -> dict[str, str]:
    """This environment, importing ``checkout``; bytecode written and read (with
    ``PYTHONDONTWRITEBYTECODE`` every sample would compile every module again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPATH": str(checkout)}


def _sample(checkout: Path, args: list[str], stdin: bytes) -> float:
    """One fresh process from ``checkout``, run to its exit: its CPU time in ms."""
    env = _env(checkout)
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=checkout,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    if proc.returncode != 0 or (stdin and out.count(b"\n") < stdin.count(b"\n")):
        raise SystemExit(f"{args} from {checkout} failed ({proc.returncode}): {out[-500:]!r}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5, help="fresh processes per figure")
    parser.add_argument("--base", type=Path, help="another checkout, measured beside this one")
    parser.add_argument(
        "--only", action="append", choices=list(PROCESSES), help="measure this one (repeatable)"
    )
    args = parser.parse_args()
    checkouts = {"this": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    feed = _provider_input(_protocol_version(ROOT))
    procs = {
        name: (argv, feed if fed else b"")
        for name, (argv, fed) in PROCESSES.items()
        if not args.only or name in args.only
    }
    load_before = os.getloadavg()
    for argv, stdin in procs.values():  # unrecorded: bytecode compiled and cached
        for checkout in checkouts.values():
            _sample(checkout, argv, stdin)
    times: dict[str, dict[str, list[float]]] = {k: {p: [] for p in procs} for k in checkouts}
    order = list(checkouts.items())
    for i in range(args.samples):
        for name, (argv, stdin) in procs.items():
            for side, checkout in order if i % 2 == 0 else order[::-1]:
                times[side][name].append(_sample(checkout, argv, stdin))
    out: dict[str, object] = {
        "samples": args.samples,
        "python": sys.version.split()[0],
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    medians = {
        side: {p: round(statistics.median(v)) for p, v in per.items()}
        for side, per in times.items()
    }
    out |= medians
    if args.base:
        out["base_checkout"] = str(args.base.resolve())
        out["ratio"] = {p: round(medians["this"][p] / medians["base"][p], 2) for p in procs}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
