#!/usr/bin/env python3
"""Does the daemon's memory level off? RSS of ``hostd serve`` and its providers over a long run.

Starts ``hostd serve`` with the bundled ``files`` provider (over this repository's docs,
code and README) and ``memory`` provider (a database seeded with ``--memory-entries``
entries), logging at ``--log-level`` (``info``, the default, as a deployment logs) to a
file, and drives it the way agents do, over a few Unix-socket connections at a time:

- ``--compositions`` ``context/compose`` calls, each with a fresh goal (four words
  drawn, seeded, from the corpus's Markdown; every seventh one of bench_serve's
  ``GOALS`` again), a budget drawn from 1,000 to 8,000, some with a ``session`` (one of
  50), a ``progress_token``, ``include_content`` or a ``strategy``;
- between them, every ``--mix-every`` compositions, one of each of these in turn:
  a ``memory/remember`` (and every other time a ``memory/forget`` of an entry it
  wrote), a composition cancelled at once (``$/cancel``), a bad request (params
  out of range, an unknown provider, an unknown method, a line that is not JSON),
  and a ``usage/report`` of an earlier composition;
- one connection closed and a new one opened every ``--reconnect-every`` compositions.

Every ``--sample-every`` compositions it reads the resident set size (``VmRSS``, MB) of
the daemon, of each provider and of their ``_reaper`` shims from ``/proc``, prints a
line to stderr as it goes, and at the end prints JSON: every sample, the figures at
the start (the first composition answered with every leg ``ok``), after
``--warmup`` compositions and at the end, and the growth from the warm-up sample to
the end (MB, and MB per 1,000 compositions over the second half of the run, which is
near 0 when the memory has levelled off).

    python scripts/bench_soak.py [--compositions 5000] [--sample-every 250]
        [--warmup 1000] [--connections 3] [--reconnect-every 200] [--mix-every 5]
        [--memory-entries 200] [--log-level info|warning] [--checkout DIR]

``--checkout DIR`` runs the daemon (and its providers, over that checkout's files) of
another checkout, for before/after figures with this one script.

``--trace N`` finds what grows: the daemon runs with ``tracemalloc`` on from the first
sample (``N`` frames a traceback), started by a ``sitecustomize`` this script writes
into the run's directory and puts first on the daemon's ``PYTHONPATH`` (hostd itself
is not changed, and its providers are not traced); at each sample the daemon writes a
snapshot and its live objects counted by type, and the JSON gets ``trace``: the
allocation sites and the types that grew most from the warm-up sample to the end.
Tracing slows the daemon and adds to its RSS: read the RSS figures of a run without it.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemon import ROOT, _start, _stop  # noqa: E402 - after the path set-up
from bench_serve import GOALS, _seed_memory  # noqa: E402 - after the path set-up

#: What the ``files`` provider serves (``--include`` patterns), as bench_serve's ``large``.
INCLUDES = ("/docs/", "/hostd/", "/providers/", "/README.md")


def _config(workdir: Path, db: Path, log_level: str) -> Path:
    includes = [w for pattern in INCLUDES for w in ("--include", pattern)]
    commands = {
        "files": ["python", "-m", "providers.files", "--root", str(ROOT), *includes],
        "memory": ["python", "-m", "providers.memory", "--db", str(db)],
    }
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        'start_providers = "boot"',
        "[log]",
        f'level = "{log_level}"',
        'audit = "summary"',
        f'file = "{workdir}/hostd.log"',
        "[shadow]",
        "enabled = true",
    ]
    for pid, words in commands.items():
        lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
        lines += [f'cwd = "{ROOT}"', "timeout_ms = 10000"]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _words() -> list[str]:
    words: set[str] = set()
    for path in sorted(ROOT.glob("docs/*.md")):
        words.update(re.findall(r"[a-z]{5,}", path.read_text(encoding="utf-8").lower()))
    return sorted(words)


#: The daemon's ``sitecustomize`` under ``--trace``: the environment variables are taken
#: out of ``os.environ`` at once, so the providers the daemon starts are not traced.
TRACER = """\
import gc, os, signal, sys, tracemalloc
from collections import Counter

_dir = os.environ.pop("HOSTD_SOAK_TRACE_DIR", None)
_frames = int(os.environ.pop("HOSTD_SOAK_TRACE_FRAMES", "1"))
if _dir:

    def _dump(signum, frame):
        if not tracemalloc.is_tracing():  # from the first sample on: not the imports
            tracemalloc.start(_frames)
        n = len([p for p in os.listdir(_dir) if p.endswith(".done")])
        tracemalloc.take_snapshot().dump(os.path.join(_dir, f"{n:04d}.snap"))
        types = Counter(type(o).__qualname__ for o in gc.get_objects())
        with open(os.path.join(_dir, f"{n:04d}.types"), "w") as fh:
            fh.writelines(f"{k}\\t{v}\\n" for k, v in types.items())
        open(os.path.join(_dir, f"{n:04d}.done"), "w").close()

    signal.signal(signal.SIGUSR1, _dump)
"""


def _start_traced(
    config: Path, trace_dir: Path, frames: int
) -> tuple[subprocess.Popen[bytes], Path]:
    """``hostd serve`` as ``_start`` starts it, with the ``TRACER`` on its path."""
    (trace_dir / "site").mkdir(parents=True)
    (trace_dir / "site" / "sitecustomize.py").write_text(TRACER, encoding="utf-8")
    env = {
        "PYTHONPATH": f"{trace_dir / 'site'}{os.pathsep}{ROOT}",
        "HOSTD_SOAK_TRACE_DIR": str(trace_dir),
        "HOSTD_SOAK_TRACE_FRAMES": str(frames),
    }
    return _start(config, ROOT, env)


def _snapshot(daemon: int, trace_dir: Path, n: int) -> None:
    """Ask the traced daemon for its ``n``-th snapshot and wait until it is written."""
    os.kill(daemon, signal.SIGUSR1)
    done = trace_dir / f"{n:04d}.done"
    deadline = time.monotonic() + 600  # a hang guard
    while not done.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the traced daemon wrote no snapshot")
        time.sleep(0.1)  # a script polling a file, not a test's wait


def _types(path: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        name, count = line.rsplit("\t", 1)
        out[name] = int(count)
    return out


def _grown(trace_dir: Path, first: int, last: int, top: int = 25) -> dict[str, Any]:
    """What grew from snapshot ``first`` to ``last``: allocation sites and object types."""
    old = tracemalloc.Snapshot.load(str(trace_dir / f"{first:04d}.snap"))
    new = tracemalloc.Snapshot.load(str(trace_dir / f"{last:04d}.snap"))
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    old, new = old.filter_traces(keep), new.filter_traces(keep)
    stats = new.compare_to(old, "traceback")
    sites = [
        {
            "kb": round(st.size_diff / 1024, 1),
            "count": st.count_diff,
            "where": [f"{f.filename}:{f.lineno}" for f in st.traceback],
        }
        for st in stats[:top]
    ]
    types = _types(trace_dir / f"{last:04d}.types")
    types.subtract(_types(trace_dir / f"{first:04d}.types"))
    total = sum(st.size for st in new.statistics("filename"))
    total_before = sum(st.size for st in old.statistics("filename"))
    return {
        "snapshots": [first, last],
        "traced_mb": [round(total_before / 2**20, 1), round(total / 2**20, 1)],
        "sites": sites,
        "types": dict(types.most_common(top)),
    }


# --- /proc --------------------------------------------------------------------------


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _processes(daemon: int) -> dict[str, int]:
    """The daemon's provider processes by name (``files``, ``memory``) and their shims
    (``files_reaper`` ...): a shim's command line holds its provider's command too, so
    a shim is told by the ``_reaper.py`` it runs."""
    out: dict[str, int] = {}
    todo = _children(daemon)
    while todo:
        pid = todo.pop()
        todo += _children(pid)
        argv = _argv(pid)
        name = next((n for n in ("files", "memory") if f"providers.{n}" in argv), None)
        if name is None:
            continue
        shim = any(word.endswith("_reaper.py") for word in argv[:4])
        out[f"{name}_reaper" if shim else name] = pid
    return out


def _sample(daemon: int, done: int, counts: dict[str, int]) -> dict[str, Any]:
    row: dict[str, Any] = {"compositions": done, "daemon": _rss_mb(daemon)}
    for name, pid in sorted(_processes(daemon).items()):
        row[name] = _rss_mb(pid)
    row["total"] = round(sum(v for k, v in row.items() if k != "compositions" and v), 1)
    row["calls"] = dict(counts)
    return row


# --- the client ---------------------------------------------------------------------


class Conn:
    """One connection; replies are matched by id, and a cancelled call's reply (one the
    daemon sent before the ``$/cancel`` reached it) is dropped."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buf = b""
        self.next_id = 0
        self.cancelled: set[int] = set()

    async def send(self, obj: Any) -> None:
        await self.stream.send(orjson.dumps(obj) + b"\n")

    async def _read(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = await self.stream.receive(1 << 20)
            if not chunk:
                raise SystemExit("the daemon closed a connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg: dict[str, Any] = orjson.loads(line)
        return msg

    async def reply(self, id_: Any) -> dict[str, Any]:
        """The reply to ``id_``; notifications and cancelled calls' replies skipped."""
        while True:
            msg = await self._read()
            if "id" not in msg:
                continue  # $/progress
            if msg["id"] == id_:
                return msg
            if msg["id"] in self.cancelled:
                self.cancelled.discard(msg["id"])
                continue
            raise SystemExit(f"a reply to no call waiting: {msg}")

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await self.reply(self.next_id)

    async def cancelled_call(self, method: str, params: dict[str, Any]) -> None:
        self.next_id += 1
        self.cancelled.add(self.next_id)
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        await self.send({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": self.next_id}})

    async def aclose(self) -> None:
        await self.stream.aclose()


class Soak:
    def __init__(
        self, args: argparse.Namespace, socket: Path, daemon: int, trace_dir: Path | None
    ) -> None:
        self.args = args
        self.trace_dir = trace_dir
        self.socket = socket
        self.daemon = daemon
        self.draw = random.Random(args.seed)
        self.words = _words()
        self.counts = dict.fromkeys(
            ("compose", "remember", "forget", "cancelled", "bad", "report", "reconnect"), 0
        )
        self.request_ids: list[str] = []
        self.memories: list[str] = []
        self.samples: list[dict[str, Any]] = []
        self.conns: list[Conn] = []

    async def connect(self) -> Conn:
        return Conn(await anyio.connect_unix(self.socket))

    def compose_params(self, n: int) -> dict[str, Any]:
        d = self.draw
        goal = GOALS[n % len(GOALS)] if n % 7 == 0 else " ".join(d.sample(self.words, 4))
        params: dict[str, Any] = {"goal": goal, "budget": d.choice((1000, 2000, 4000, 8000))}
        if d.random() < 0.3:
            params["session"] = f"agent-{d.randrange(50)}"
        if d.random() < 0.2:
            params["progress_token"] = f"p{n}"
        if d.random() < 0.1:
            params["include_content"] = True
        if d.random() < 0.1:
            params["strategy"] = d.choice(("round_robin", "score", "rrf"))
        return params

    async def compose(self, conn: Conn, n: int) -> dict[str, Any]:
        reply = await conn.call("context/compose", self.compose_params(n))
        if "result" not in reply:
            raise SystemExit(f"compose failed: {reply}")
        self.counts["compose"] += 1
        result: dict[str, Any] = reply["result"]
        self.request_ids.append(result["request_id"])
        del self.request_ids[:-100]
        return result

    async def mix(self, conn: Conn, k: int) -> None:
        """One of the calls between compositions, in turn."""
        d = self.draw
        kind = k % 4
        if kind == 0:
            if self.memories and k % 8 == 0:
                mem = self.memories.pop(d.randrange(len(self.memories)))
                reply = await conn.call("memory/forget", {"id": mem})
                self._expect(reply, "result", "forget")
                self.counts["forget"] += 1
                return
            content = " ".join(d.sample(self.words, 30))
            reply = await conn.call(
                "memory/remember", {"kind": "fact", "title": f"note {k}", "content": content}
            )
            self._expect(reply, "result", "remember")
            self.memories.append(reply["result"]["id"])
            self.counts["remember"] += 1
        elif kind == 1:
            await conn.cancelled_call("context/compose", self.compose_params(k))
            self.counts["cancelled"] += 1
        elif kind == 2:
            bad = (k // 4) % 4
            if bad == 3:
                await conn.stream.send(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
                reply = await conn.reply(None)
            else:
                method, params = (
                    ("context/compose", {"goal": "x", "budget": -5}),
                    ("context/compose", {"goal": "x", "providers": ["nope"]}),
                    ("context/nothing", {}),
                )[bad]
                reply = await conn.call(method, params)
            self._expect(reply, "error", "bad request")
            self.counts["bad"] += 1
        else:
            rid = d.choice(self.request_ids)
            reply = await conn.call("usage/report", {"request_id": rid})
            self._expect(reply, "result", "usage/report")
            self.counts["report"] += 1

    @staticmethod
    def _expect(reply: dict[str, Any], key: str, what: str) -> None:
        if key not in reply:
            raise SystemExit(f"{what}: expected a {key}, got {reply}")

    async def warm(self) -> None:
        """Compose until every leg is ``ok`` (the providers start at boot)."""
        conn = self.conns[0]
        with anyio.fail_after(600):  # a hang guard
            while True:
                result = await self.compose(conn, 0)
                legs = {leg["provider_id"]: leg["status"] for leg in result["providers"]}
                if all(status == "ok" for status in legs.values()):
                    return
                if any(status not in ("ok", "warming") for status in legs.values()):
                    raise SystemExit(f"a provider failed under the daemon: {legs}")
                await anyio.sleep(0.2)  # a script pacing its retries

    def take(self, done: int) -> None:
        row = _sample(self.daemon, done, self.counts)
        self.samples.append(row)
        if self.trace_dir is not None:
            _snapshot(self.daemon, self.trace_dir, len(self.samples) - 1)
        figures = " ".join(f"{k}={v}" for k, v in row.items() if k not in ("calls",))
        print(f"[soak] {figures}", file=sys.stderr, flush=True)

    async def run(self) -> None:
        args = self.args
        self.conns = [await self.connect() for _ in range(args.connections)]
        await self.warm()
        self.counts["compose"] = 0
        self.take(0)
        for n in range(1, args.compositions + 1):
            conn = self.conns[n % len(self.conns)]
            await self.compose(conn, n)
            if n % args.mix_every == 0:
                await self.mix(conn, n // args.mix_every)
            if n % args.reconnect_every == 0:
                i = (n // args.reconnect_every) % len(self.conns)
                await self.conns[i].aclose()
                self.conns[i] = await self.connect()
                self.counts["reconnect"] += 1
            if n % args.sample_every == 0:
                self.take(n)
        for conn in self.conns:
            await conn.aclose()


def _slope(rows: list[dict[str, Any]], key: str) -> float | None:
    """Least-squares MB per 1,000 compositions of ``key`` over ``rows``."""
    points = [(r["compositions"], r[key]) for r in rows if r.get(key) is not None]
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        return None
    slope, _ = statistics.linear_regression([x for x, _ in points], [y for _, y in points])
    return round(slope * 1000, 3)


def summary(samples: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    start = samples[0]
    warm = next((r for r in samples if r["compositions"] >= warmup), samples[-1])
    end = samples[-1]
    half = [r for r in samples if r["compositions"] >= end["compositions"] / 2]
    keys = [k for k in end if k not in ("compositions", "calls")]
    out: dict[str, Any] = {}
    for key in keys:
        out[key] = {
            "start_mb": start.get(key),
            "after_warmup_mb": warm.get(key),
            "end_mb": end.get(key),
            "max_mb": max((r[key] for r in samples if r.get(key) is not None), default=None),
            "warmup_to_end_mb": (
                round(end[key] - warm[key], 1)
                if end.get(key) is not None and warm.get(key) is not None
                else None
            ),
            "second_half_mb_per_1000": _slope(half, key),
        }
    return out


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compositions", type=int, default=5000)
    parser.add_argument("--sample-every", type=int, default=250)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=3)
    parser.add_argument("--reconnect-every", type=int, default=200)
    parser.add_argument("--mix-every", type=int, default=5)
    parser.add_argument("--memory-entries", type=int, default=200)
    parser.add_argument("--log-level", choices=("info", "warning"), default="info")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkout", help="run the daemon of another checkout")
    parser.add_argument(
        "--trace",
        type=int,
        metavar="FRAMES",
        help="run the daemon under tracemalloc (FRAMES a traceback) and report what grew",
    )
    args = parser.parse_args()
    # A SIGTERM (a job runner's stop, `kill`) ends the run as Ctrl-C does: through the
    # ``finally`` below, which stops the daemon and its providers and removes the files.
    signal.signal(signal.SIGTERM, _terminated)
    workdir = Path(tempfile.mkdtemp(prefix="hsoak-"))
    daemon = None
    trace = None
    try:
        db = workdir / "memory.db"
        _seed_memory(db, args.memory_entries)
        config = _config(workdir, db, args.log_level)
        trace_dir = None if args.trace is None else workdir / "trace"
        if trace_dir is None:
            daemon, socket = _start(config)
        else:
            daemon, socket = _start_traced(config, trace_dir, args.trace)
        t0 = time.monotonic()
        soak = Soak(args, socket, daemon.pid, trace_dir)
        anyio.run(soak.run, backend="asyncio")
        log_bytes = (workdir / "hostd.log").stat().st_size
        if trace_dir is not None:
            counts = [row["compositions"] for row in soak.samples]
            first = next((i for i, c in enumerate(counts) if c >= args.warmup), 0)
            trace = _grown(trace_dir, first, len(counts) - 1)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the stop below is not cut short
        code = _stop(daemon) if daemon is not None else None
        shutil.rmtree(workdir, ignore_errors=True)
    out = {
        "checkout": str(ROOT),
        "compositions": args.compositions,
        "calls": soak.counts,
        "log_level": args.log_level,
        "log_bytes": log_bytes,
        "wall_s": round(time.monotonic() - t0, 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "summary": summary(soak.samples, args.warmup),
        "samples": soak.samples,
        "daemon_exit_code": code,
    }
    if trace is not None:
        out["trace"] = trace
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
