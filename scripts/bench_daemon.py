#!/usr/bin/env python3
"""Daemon throughput: compositions per second and p50/p99 latency over the Unix socket.

Starts ``hostd serve`` with three local child-process providers, then for 1, 8 and
64 concurrent clients (one connection each) runs ``context/compose`` in a loop for
a fixed time and reports, as JSON: compositions/s, p50 and p99 latency (ms), errors,
and the daemon's peak RSS (VmHWM, MB) over the whole run.

    python scripts/bench_daemon.py [--seconds 5] [--clients 1,8,64] [--frames 8]
                                   [--providers fixture|bundled]

``fixture`` providers are ``tests.fixtures.healthy_provider`` children answering
``--frames`` frames; ``bundled`` uses ``providers.files`` over this repository's docs
(three instances over different subtrees). Targets: >= 200 compositions/s
with 64 clients against 3 local providers on a 2-core machine; RSS <= 80 MB.

``--shadow`` starts two daemons on the same providers, one with ``shadow.sample = 1.0``
and its store filled to its bound (``shadow.max_requests`` requests) and one without
shadow, and measures them in turns (ABBA, ``--rounds`` rounds of ``--seconds`` at each
``--clients`` level); it prints each side's median compositions/s and p50 and their
ratios (target: shadow <= 1.1x the no-shadow daemon).

``--gate`` times the consent gate in process (``missing_consent`` over a ledger of
10 events and one of ``--gate-events`` events, both ending in a live grant), call by
call in turns; target: the long ledger <= 1.1x the short one.

``--checkout DIR`` runs the daemon (and its providers) or the gate from another
checkout, for before/after figures with this one script.

    python scripts/bench_daemon.py --shadow [--rounds 6] [--seconds 3] [--clients 8]
    python scripts/bench_daemon.py --gate [--gate-events 10000] [--gate-calls 4000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket as sockets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_checkout import checkout as _checkout  # noqa: E402 - after the path set-up

ROOT = _checkout()
sys.path.insert(0, str(ROOT))


def _config(
    workdir: Path, kind: str, frames: int, log_level: str, shadow: dict[str, object] | None = None
) -> Path:
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        "max_in_flight = 256",
        "[log]",
        f'level = "{log_level}"',
        f'file = "{workdir}/hostd.log"',
    ]
    if shadow is not None:
        lines.append("[shadow]")
        lines += [f"{k} = {orjson.dumps(v).decode()}" for k, v in shadow.items()]
    if kind == "fixture":
        for pid in ("alpha", "beta", "gamma"):
            words = [
                "python",
                "-m",
                "tests.fixtures.healthy_provider",
                "--name",
                pid,
                "--frames",
                str(frames),
                "--size",
                "200",
            ]
            lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
            lines += [f'cwd = "{ROOT}"', "timeout_ms = 10000"]
    else:
        for pid, root in (("docs", "docs"), ("code", "hostd"), ("providers", "providers")):
            words = ["python", "-m", "providers.files", "--root", str(ROOT / root)]
            lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
            lines += [f'cwd = "{ROOT}"', "timeout_ms = 10000"]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class _Conn:
    """A minimal line client (the bench measures the daemon, not a client library)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buf = b""
        self.next_id = 0

    async def call(self, method: str, params: dict[str, object]) -> dict[str, Any]:
        """One request, its reply (the whole JSON-RPC object)."""
        self.next_id += 1
        req = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        await self.stream.send(orjson.dumps(req) + b"\n")
        while b"\n" not in self.buf:
            self.buf += await self.stream.receive(1 << 20)
        line, self.buf = self.buf.split(b"\n", 1)
        reply: dict[str, Any] = orjson.loads(line)
        return reply

    async def compose(self, goal: str, budget: int) -> bool:
        reply = await self.call("context/compose", {"goal": goal, "budget": budget})
        return "result" in reply and reply["result"]["audit"]["entries"] is not None


async def _level(
    socket: Path, clients: int, seconds: float, budget: int, daemon_pid: int
) -> dict[str, object]:
    latencies: list[float] = []
    errors = 0
    conns = [_Conn(await anyio.connect_unix(socket)) for _ in range(clients)]
    # Warm-up: every connection composes once, outside the measurement.
    async with anyio.create_task_group() as tg:
        for c in conns:
            tg.start_soon(c.compose, "warm up", budget)
    providers = _children(daemon_pid)
    cpu_before = (_cpu_s(daemon_pid), sum(_cpu_s(p) for p in providers), time.process_time())
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()

    async def loop(conn: _Conn, i: int) -> None:
        nonlocal errors
        n = 0
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            ok = await conn.compose(f"question {i}-{n} about configuration", budget)
            latencies.append((time.perf_counter() - t0) * 1000)
            errors += not ok
            n += 1

    async with anyio.create_task_group() as tg:
        for i, c in enumerate(conns):
            tg.start_soon(loop, c, i)
    elapsed = time.perf_counter() - started
    cpu_after = (_cpu_s(daemon_pid), sum(_cpu_s(p) for p in providers), time.process_time())
    for c in conns:
        await c.stream.aclose()
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2)

    return {
        "clients": clients,
        "compositions": len(latencies),
        "compositions_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "errors": errors,
        # CPU per composition, robust to other load on the machine (ms).
        "cpu_ms_per_composition": {
            name: round((after - before) * 1000 / max(len(latencies), 1), 2)
            for name, before, after in zip(
                ("daemon", "providers", "bench_client"), cpu_before, cpu_after, strict=True
            )
        },
    }


def _start(
    config: Path,
    root: Path | None = None,
    env: dict[str, str] | None = None,
    wrapper: tuple[str, ...] = (),
    wait_s: float = 120,
) -> tuple[subprocess.Popen[bytes], Path]:
    """``hostd serve`` of ``root`` (this checkout by default) with ``config``; ``env``
    is added to its environment; ``wrapper`` is the command that runs the interpreter
    (``valgrind ...``, say), given ``wait_s`` seconds to serve."""
    root = root or ROOT
    daemon = subprocess.Popen(
        [*wrapper, sys.executable, "-m", "hostd", "--config", str(config), "serve"],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(root), **(env or {})},
    )
    # The log goes to a file; a connection accepted is the sign the daemon serves (its
    # socket file can exist a moment before its listener does: a connection is refused
    # then). Asked this way, a checkout from before ``--ready-file`` is served alike.
    path = config.parent / "run" / "hostd.sock"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and daemon.poll() is None:
        if path.exists():
            probe = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
            try:
                probe.connect(str(path))
            except OSError:  # not listening yet
                pass
            else:
                break
            finally:
                probe.close()
        time.sleep(0.05)
    return daemon, path


def _stop(daemon: subprocess.Popen[bytes]) -> int:
    daemon.send_signal(signal.SIGTERM)
    return daemon.wait(120)


def _fill_shadow_store(state_dir: Path, requests: int, candidates: int) -> int:
    """Write ``requests`` records of ``candidates`` frames each, as the daemon records
    them (with the checkout's own store); returns the body size of one."""
    from hostd.compose import compose_for_prompt
    from hostd.protocol import ContextFrame, canonical_token_cost
    from hostd.quality import Composition, ShadowStore, build_record

    frames = []
    for i in range(candidates):
        content = f"frame {i} " + "x" * 190
        frames.append(
            (
                ("alpha", "beta", "gamma")[i % 3],
                ContextFrame.model_validate(
                    {
                        "id": f"f{i}",
                        "kind": "snippet",
                        "title": f"frame {i}",
                        "content": content,
                        "score": 1 - i / candidates,
                        "token_cost": canonical_token_cost(content),
                        "citation_label": f"frame {i}",
                    }
                ),
            )
        )
    composed = compose_for_prompt(frames, 2000)
    store = ShadowStore(state_dir / "shadow.db", max_requests=requests)
    record = build_record(
        Composition("fill", "goal", 2000, None, frames, composed), store_content=False
    )
    for n in range(requests):
        store.write(record.__class__(**{**_fields(record), "request_id": f"fill-{n}"}))
    close = getattr(store, "close", None)
    if close is not None:
        close()
    return len(record.body())


def _fields(record: object) -> dict[str, object]:
    return {f: getattr(record, f) for f in record.__dataclass_fields__}  # type: ignore[attr-defined]


def shadow_pair(args: argparse.Namespace) -> dict[str, object]:
    """The shadow daemon (store at its bound) against the no-shadow one, in turns."""
    bound = args.shadow_bound
    sides: dict[str, tuple[subprocess.Popen[bytes], Path, Path]] = {}
    body = 0
    for name in ("shadow", "plain"):
        workdir = Path(tempfile.mkdtemp(prefix=f"hb-{name}-"))
        shadow = (
            {"enabled": True, "sample": args.shadow_sample, "max_requests": bound}
            if name == "shadow"
            else None
        )
        config = _config(workdir, args.providers, args.frames, args.log_level, shadow)
        if name == "shadow":
            body = _fill_shadow_store(workdir / "state", bound, 3 * args.frames)
        daemon, socket = _start(config)
        sides[name] = (daemon, socket, workdir)
    rounds: dict[str, list[dict[str, object]]] = {"shadow": [], "plain": []}
    codes: dict[str, int] = {}
    try:
        clients = int(args.clients.split(",")[0])
        for r in range(args.rounds):
            order = ("shadow", "plain") if r % 2 == 0 else ("plain", "shadow")
            for name in order:
                daemon, socket, _ = sides[name]
                rounds[name].append(
                    anyio.run(
                        _level,
                        socket,
                        clients,
                        args.seconds,
                        args.budget,
                        daemon.pid,
                        backend="asyncio",
                    )
                )
        db = sqlite3.connect(sides["shadow"][2] / "state" / "shadow.db")
        stored_before_stop = db.execute("SELECT count(*) FROM requests").fetchone()[0]
        db.close()
    finally:
        for name, (daemon, _, _) in sides.items():
            codes[name] = _stop(daemon)
    db = sqlite3.connect(sides["shadow"][2] / "state" / "shadow.db")
    stored = db.execute("SELECT count(*), max(seq) FROM requests").fetchone()
    db.close()
    for _, _, workdir in sides.values():
        shutil.rmtree(workdir, ignore_errors=True)

    def med(name: str, key: str) -> float:
        return float(statistics.median(float(x[key]) for x in rounds[name]))  # type: ignore[arg-type]

    def cpu(name: str) -> float:
        return float(
            statistics.median(x["cpu_ms_per_composition"]["daemon"] for x in rounds[name])  # type: ignore[index]
        )

    out: dict[str, object] = {"checkout": str(ROOT), "clients": clients, "rounds": args.rounds}
    out["seconds_per_turn"] = args.seconds
    out["store"] = {
        "max_requests": bound,
        "body_chars": body,
        "rows_before_stop": stored_before_stop,
        "rows_after_stop": stored[0],
        "last_seq": stored[1],
    }
    for name in ("shadow", "plain"):
        out[name] = {
            "compositions_per_s": round(med(name, "compositions_per_s"), 1),
            "p50_ms": round(med(name, "p50_ms"), 2),
            "daemon_cpu_ms_per_composition": round(cpu(name), 2),
        }
    out["ratio_p50"] = round(med("shadow", "p50_ms") / med("plain", "p50_ms"), 3)
    out["ratio_throughput"] = round(
        med("plain", "compositions_per_s") / med("shadow", "compositions_per_s"), 3
    )
    out["ratio_daemon_cpu"] = round(cpu("shadow") / cpu("plain"), 3)
    out["exit_codes"] = codes
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    return out


def gate_pair(args: argparse.Namespace) -> dict[str, object]:
    """The consent gate over a short and a long ledger, call by call in turns."""
    from hostd.engine._gate import missing_consent
    from hostd.engine.consent import ConsentStore
    from hostd.protocol import DataFlow, ProviderInfo

    info = ProviderInfo(
        name="cloud",
        version="1",
        data_flow=DataFlow(reads=True, egress=True, egress_scopes=["org"]),
    )
    workdir = Path(tempfile.mkdtemp(prefix="hb-gate-"))
    stores = {}
    for name, events in (("short", 10), ("long", args.gate_events)):
        store = ConsentStore(workdir / f"{name}.sqlite3")
        db = store._conn()
        # Filled in one transaction (the ledger's own API commits once per event).
        db.execute("BEGIN IMMEDIATE")
        for n in range(events - 1):
            db.execute(
                "INSERT INTO consent_events (action, provider_id, scope, grantor, at) "
                "VALUES (?, 'cloud', 'org', 'ops', '2026-01-14T09:02:00.000000Z')",
                ("grant" if n % 2 == 0 else "revoke",),
            )
        db.execute("COMMIT")
        store.grant("cloud", "org", "ops")
        assert missing_consent(store, "cloud", info) == []
        stores[name] = store
    times: dict[str, list[float]] = {"short": [], "long": []}
    for n in range(args.gate_calls):
        for name in ("short", "long") if n % 2 == 0 else ("long", "short"):
            t0 = time.perf_counter()
            missing_consent(stores[name], "cloud", info)
            times[name].append((time.perf_counter() - t0) * 1e6)
    for store in stores.values():
        store.close()
    shutil.rmtree(workdir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "checkout": str(ROOT),
        "events": {"short": 10, "long": args.gate_events},
        "calls_each": args.gate_calls,
        "short_us": round(med["short"], 2),
        "long_us": round(med["long"], 2),
        "ratio": round(med["long"] / med["short"], 3),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per level")
    parser.add_argument("--clients", default="1,8,64", help="comma-separated client counts")
    parser.add_argument("--frames", type=int, default=8, help="frames per fixture provider")
    parser.add_argument("--budget", type=int, default=2000, help="global token budget")
    parser.add_argument("--providers", choices=("fixture", "bundled"), default="fixture")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning"),
        help="daemon log level (info writes one event per audit entry; to a file)",
    )
    parser.add_argument("--checkout", help="run the daemon of another checkout")
    parser.add_argument("--shadow", action="store_true", help="shadow vs no-shadow, in turns")
    parser.add_argument("--shadow-bound", type=int, default=1000, help="shadow.max_requests")
    parser.add_argument("--rounds", type=int, default=6, help="--shadow: turns per side")
    parser.add_argument(
        "--shadow-sample", type=float, default=1.0, help="--shadow: the shadow side's sample"
    )
    parser.add_argument("--gate", action="store_true", help="the consent gate, 10 vs N events")
    parser.add_argument("--gate-events", type=int, default=10_000)
    parser.add_argument("--gate-calls", type=int, default=4000)
    args = parser.parse_args()
    if args.gate or args.shadow:
        report = gate_pair(args) if args.gate else shadow_pair(args)
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return

    workdir = Path(tempfile.mkdtemp(prefix="hb-"))
    config = _config(workdir, args.providers, args.frames, args.log_level)
    daemon, socket = _start(config)
    try:
        levels = [
            anyio.run(
                _level, socket, int(n), args.seconds, args.budget, daemon.pid, backend="asyncio"
            )
            for n in args.clients.split(",")
        ]
        out = {
            "providers": 3,
            "provider_kind": args.providers,
            "cores": os.cpu_count(),
            "budget": args.budget,
            "log_level": args.log_level,
            "seconds_per_level": args.seconds,
            "levels": levels,
            "daemon_peak_rss_mb": _peak_rss_mb(daemon.pid),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        code = _stop(daemon)
        shutil.rmtree(workdir, ignore_errors=True)
    out["daemon_exit_code"] = code
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
