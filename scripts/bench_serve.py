#!/usr/bin/env python3
"""``context/compose`` through ``hostd serve`` against the same providers queried directly.

Two bundled providers, ``providers.files`` over this repository and
``providers.memory`` over a database seeded with ``--memory-entries`` entries, run
twice: once under ``hostd serve`` (a Unix-socket client sends ``context/compose``)
and once as plain child processes of this script (``direct``: one
``context/query`` line written to each, both replies read and decoded with orjson,
the least a client of the two providers must do). Each provider is asked for the
same ``max_tokens`` the daemon asks it for (its share × ``overfetch``, read from the
first composition's ``policy.asked``). The two sides take turns request by request
(ABBA) for ``--requests`` pairs after ``--warmup`` pairs; the figures are the
medians, the median of the per-pair ratios (target: <= 1.5x), and the daemon's CPU
per composition. Both sides wait until every provider is warm (its
``context/progress`` says ``ready``) before measuring.

``--corpus`` picks the set-up: ``large`` (the default) serves ``docs/``, ``hostd/``,
``providers/`` and the README with no trusted roots, as the demo config does;
``docs`` serves ``docs/`` and the README with ``[host] trusted_roots`` set to this
checkout, so every ``file`` source is re-read and checked on the daemon side.

    python scripts/bench_serve.py [--requests 500] [--warmup 30] [--budget 4000]
        [--corpus large|docs] [--goals rotate|fresh] [--memory-entries 500] [--checkout DIR]
        [--against DIR] [--runs 1]

``--goals rotate`` (the default) asks the five ``GOALS`` in turn, so providers offer
many of the same frames again, as an agent's turns on one task do; ``--goals fresh``
asks a new goal every request (four words drawn, seeded, from the corpus's Markdown),
so most frames are new to the daemon: the figure for the caches that pay on repeats.

``--runs N`` measures N times over (fresh daemons, providers and database each
time) and prints the runs' medians, each run's own figures under ``each_run``: the
figures docs/benchmarks.md gives are the medians of three runs.

``--against DIR`` runs a second daemon, of checkout ``DIR`` (the base commit, say),
beside this checkout's, over the same providers and corpus (this checkout's): the
three sides (this daemon, that daemon, direct) take turns request by request, and
``cpu_ratio_to_against`` is this daemon's CPU per composition over that one's, with
both daemon/direct ratios, measured in the same minutes of the same machine.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemon import ROOT, _Conn, _cpu_s, _start, _stop  # noqa: E402 - after the path set-up

GOALS = [
    "how does the engine split the budget across providers",
    "consent receipts and egress scopes",
    "retry backoff after a provider crash",
    "citation labels in the composed prompt",
    "verification of file provenance under trusted roots",
]


def _goals(kind: str, n: int, root: Path = ROOT) -> list[str]:
    """``n`` goals: the five ``GOALS`` in turn, or fresh ones drawn from the corpus
    (the Markdown of ``root``'s docs/)."""
    if kind == "rotate":
        return [GOALS[i % len(GOALS)] for i in range(n)]
    words: set[str] = set()
    for path in sorted(root.glob("docs/*.md")):
        words.update(re.findall(r"[a-z]{5,}", path.read_text(encoding="utf-8").lower()))
    pool = sorted(words)
    draw = random.Random(7)
    return [" ".join(draw.sample(pool, 4)) for _ in range(n)]


def _seed_memory(db: Path, entries: int) -> None:
    from providers.memory import MemoryStore, NewEntry

    words = " ".join(GOALS).split()
    with MemoryStore(db) as store:
        store.add_many(
            [
                NewEntry(
                    ("fact", "memory", "episode")[i % 3],
                    f"entry {i}",
                    " ".join(words[(i * 7 + k) % len(words)] for k in range(40)),
                )
                for i in range(entries)
            ]
        )


#: What ``providers.files`` serves in each set-up (``--include`` patterns).
CORPORA = {
    "large": ("/docs/", "/hostd/", "/providers/", "/README.md"),
    "docs": ("/docs/", "/README.md"),
}


def _commands(db: Path, corpus: str, root: Path = ROOT) -> dict[str, list[str]]:
    """The two providers' commands, ``files`` over ``root`` (this checkout by default)."""
    includes = [w for pattern in CORPORA[corpus] for w in ("--include", pattern)]
    return {
        "files": [sys.executable, "-m", "providers.files", "--root", str(root), *includes],
        "memory": [sys.executable, "-m", "providers.memory", "--db", str(db)],
    }


def _config(workdir: Path, commands: dict[str, list[str]], corpus: str, root: Path = ROOT) -> Path:
    """The daemon's config: the providers run from ``root``, its trusted root in ``docs``."""
    roots = [f"trusted_roots = [{orjson.dumps(str(root)).decode()}]"] if corpus == "docs" else []
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        'start_providers = "boot"',
        *roots,
        "[log]",
        'level = "warning"',
        f'file = "{workdir}/hostd.log"',
    ]
    for pid, words in commands.items():
        words = ["python", *words[1:]]  # "python": the interpreter running hostd
        lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
        lines += [f'cwd = "{root}"', "timeout_ms = 10000"]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Direct:
    """The two providers as this script's own children, queried over their pipes."""

    def __init__(self, commands: dict[str, list[str]]) -> None:
        self.commands = commands
        self.procs: dict[str, Any] = {}
        self.bufs: dict[str, bytes] = {}
        self.next_id = 0
        #: Providers whose ``context/progress`` said ``ready``.
        self.ready: set[str] = set()

    async def start(self) -> None:
        from hostd.protocol import PROTOCOL_VERSION

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for pid, words in self.commands.items():
            self.procs[pid] = await anyio.open_process(words, cwd=ROOT, env=env, stderr=None)
            self.bufs[pid] = b""
        hello = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "bench", "version": "1"}}
        await self._round("context/handshake", dict.fromkeys(self.commands, hello))
        await self._until_warm()

    async def _until_warm(self) -> None:
        """Ask each provider once; one still warming (CGP ``unavailable`` with
        ``data.warming``) is waited for until its ``context/progress`` says ``ready``."""
        probe = {"query": {"goal": "warm", "max_tokens": 100, "max_frames": 1}}
        replies = await self._round("context/query", dict.fromkeys(self.commands, probe))
        for pid, reply in replies.items():
            if "result" in reply or pid in self.ready:
                continue
            if not (reply.get("error", {}).get("data") or {}).get("warming"):
                raise SystemExit(f"{pid} refused the probe: {reply}")
            with anyio.fail_after(600):  # a hang guard, not a wait
                while pid not in self.ready:
                    self._heard(pid, orjson.loads(await self._raw_line(pid)))

    async def _raw_line(self, pid: str) -> bytes:
        proc = self.procs[pid]
        while b"\n" not in self.bufs[pid]:
            self.bufs[pid] += await proc.stdout.receive(1 << 20)
        line, self.bufs[pid] = self.bufs[pid].split(b"\n", 1)
        return line

    def _heard(self, pid: str, note: dict[str, Any]) -> None:
        """A notification read between replies: ``context/progress`` says when it is warm."""
        if "id" in note:
            raise SystemExit(f"{pid}: a reply with nothing asked: {note}")
        params = note.get("params") or {}
        if note.get("method") == "context/progress" and params.get("state") != "warming":
            if params.get("state") != "ready":
                raise SystemExit(f"{pid} did not warm: {params}")
            self.ready.add(pid)

    async def _line(self, pid: str) -> bytes:
        """The next reply line; notifications before it (progress) are read and noted."""
        while True:
            line = await self._raw_line(pid)
            msg = orjson.loads(line)
            if "id" in msg:
                return line
            self._heard(pid, msg)

    async def _round(self, method: str, params: dict[str, dict[str, Any]]) -> dict[str, Any]:
        self.next_id += 1
        for pid, p in params.items():
            msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": p}
            await self.procs[pid].stdin.send(orjson.dumps(msg) + b"\n")
        out: dict[str, Any] = {}

        async def read(pid: str) -> None:
            out[pid] = orjson.loads(await self._line(pid))

        async with anyio.create_task_group() as tg:
            for pid in params:
                tg.start_soon(read, pid)
        return out

    async def query(self, goal: str, asked: dict[str, int]) -> int:
        params = {
            pid: {"query": {"goal": goal, "max_tokens": asked[pid], "max_frames": 64}}
            for pid in self.commands
        }
        replies = await self._round("context/query", params)
        return sum(len(r["result"]["frames"]) for r in replies.values())

    async def aclose(self) -> None:
        for proc in self.procs.values():
            await proc.stdin.aclose()
            await proc.wait()


async def _compose(conn: _Conn, goal: str, budget: int) -> dict[str, Any]:
    reply = await conn.call("context/compose", {"goal": goal, "budget": budget})
    if "result" not in reply:
        raise SystemExit(f"compose failed: {reply}")
    result: dict[str, Any] = reply["result"]
    return result


async def _warm_daemon(conn: _Conn, budget: int) -> dict[str, Any]:
    """Compose until every provider's leg is ``ok`` (the daemon starts them at boot and
    reports a leg ``warming`` until its provider is ready)."""
    with anyio.fail_after(600):  # a hang guard
        while True:
            result = await _compose(conn, GOALS[0], budget)
            legs = {leg["provider_id"]: leg["status"] for leg in result["providers"]}
            if all(status == "ok" for status in legs.values()):
                return result
            if any(status not in ("ok", "warming") for status in legs.values()):
                raise SystemExit(f"a provider failed under the daemon: {legs}")
            await anyio.sleep(0.2)  # a bench pacing its retries, not a test's wait


@dataclass
class Side:
    """One measured path: a daemon (``socket``, ``pid``) or, with neither, the direct one."""

    name: str
    conn: _Conn | None = None
    pid: int = 0
    ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)


def _figures(side: Side, direct: Side) -> dict[str, Any]:
    ratios = [a / b for a, b in zip(side.ms, direct.ms, strict=True)]
    return {
        "serve_median_ms": round(statistics.median(side.ms), 3),
        "serve_minus_direct_median_ms": round(
            statistics.median(a - b for a, b in zip(side.ms, direct.ms, strict=True)), 3
        ),
        "ratio_of_medians": round(statistics.median(side.ms) / statistics.median(direct.ms), 2),
        "paired_ratio_median": round(statistics.median(ratios), 2),
        "paired_ratio_quartiles": [round(q, 2) for q in statistics.quantiles(ratios, n=4)],
        # /proc CPU ticks are 10 ms: the mean over every composition is the figure to read.
        "daemon_cpu_ms_per_composition": round(statistics.fmean(side.cpu_ms), 2),
    }


async def pair(args: argparse.Namespace, daemons: list[Side], direct: Direct) -> Any:
    for side in daemons:
        assert side.conn is not None
        first = await _warm_daemon(side.conn, args.budget)
    asked = first["audit"]["policy"]["asked"]
    plain = Side("direct")
    sides = [*daemons, plain]
    goals = _goals(args.goals, args.warmup + args.requests)
    for n, goal in enumerate(goals):
        # Every side goes first as often as last: the order turns request by request.
        k = n % len(sides)
        order = sides[k:] + sides[:k]
        if (n // len(sides)) % 2:
            order.reverse()
        for side in order:
            t0 = time.perf_counter()
            if side.conn is None:
                await direct.query(goal, asked)
            else:
                c0 = _cpu_s(side.pid)
                await _compose(side.conn, goal, args.budget)
                cpu = (_cpu_s(side.pid) - c0) * 1000
            ms = (time.perf_counter() - t0) * 1000
            if n >= args.warmup:
                side.ms.append(ms)
                if side.conn is not None:
                    side.cpu_ms.append(cpu)
    for side in daemons:
        assert side.conn is not None
        await side.conn.stream.aclose()
    this = daemons[0]
    out: dict[str, Any] = {
        "requests": args.requests,
        "budget": args.budget,
        "corpus": args.corpus,
        "goals": args.goals,
        "asked": asked,
        **_figures(this, plain),
        "direct_median_ms": round(statistics.median(plain.ms), 3),
    }
    if len(daemons) > 1:
        other = daemons[1]
        out["against"] = {"checkout": str(args.against), **_figures(other, plain)}
        # The two daemons' CPU side by side: < 1 means this checkout spends less.
        # (None when a run too short to see one /proc tick gives that daemon 0 ms.)
        cpu_other = statistics.fmean(other.cpu_ms)
        out["cpu_ratio_to_against"] = (
            round(statistics.fmean(this.cpu_ms) / cpu_other, 3) if cpu_other else None
        )
        out["latency_ratio_to_against_paired_median"] = round(
            statistics.median(a / b for a, b in zip(this.ms, other.ms, strict=True)), 3
        )
    return out


async def run(args: argparse.Namespace, daemons: list[tuple[int, Path]], db: Path) -> Any:
    direct = Direct(_commands(db, args.corpus))
    await direct.start()
    sides = [Side(str(i), await _connect(socket), pid) for i, (pid, socket) in enumerate(daemons)]
    try:
        return await pair(args, sides, direct)
    finally:
        await direct.aclose()


async def _connect(socket: Path) -> _Conn:
    return _Conn(await anyio.connect_unix(socket))


def _one_run(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement: fresh providers, daemons and memory database, stopped after."""
    workdir = Path(tempfile.mkdtemp(prefix="hs-"))
    db = workdir / "memory.db"
    _seed_memory(db, args.memory_entries)
    commands = _commands(db, args.corpus)
    roots = [ROOT] if args.against is None else [ROOT, args.against.resolve()]
    started = []
    try:
        for i, root in enumerate(roots):
            (workdir / str(i)).mkdir()
            started.append(_start(_config(workdir / str(i), commands, args.corpus), root))
        daemons = [(daemon.pid, socket) for daemon, socket in started]
        out: dict[str, Any] = anyio.run(run, args, daemons, db, backend="asyncio")
        out["load_average_1m"] = round(os.getloadavg()[0], 2)
        out["checkout"] = str(ROOT)
    finally:
        codes = [_stop(daemon) for daemon, _ in started]
        shutil.rmtree(workdir, ignore_errors=True)
    out["daemon_exit_code"] = max(codes, key=abs)
    return out


def median_of_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs' figures as one: each number the median over the runs (an exit code the
    one furthest from 0), a member that is the same in every run as it is, any other
    (a list, a string that differs) as the list of the runs' values."""
    out: dict[str, Any] = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        if all(isinstance(v, dict) for v in values):
            out[key] = median_of_runs(values)
        elif key.endswith("exit_code"):
            out[key] = max(values, key=abs)
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = statistics.median(values)
        elif all(v == values[0] for v in values):
            out[key] = values[0]
        else:
            out[key] = values
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="large")
    parser.add_argument("--goals", choices=["rotate", "fresh"], default="rotate")
    parser.add_argument("--memory-entries", type=int, default=500)
    parser.add_argument("--checkout", help="run the daemon of another checkout")
    parser.add_argument(
        "--against",
        type=Path,
        help="a second checkout whose daemon runs beside this one's, over the same "
        "providers and corpus, request by request",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="measure this many times, each with fresh daemons and providers; the "
        "figures printed are the runs' medians, each run's under 'each_run'",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    runs = [_one_run(args) for _ in range(args.runs)]
    out = runs[0] if args.runs == 1 else {**median_of_runs(runs), "each_run": runs}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
