#!/usr/bin/env python3
"""Trace one ``context/compose`` through a real daemon, call by call, and count its hops.

A ``hostd serve`` daemon runs in a thread of this script (its own event loop, a Unix
socket, two ``tests.fixtures.healthy_provider`` children and a
``tests.fixtures.reranker`` child); a plain blocking socket in the main thread is the
client. After two warm-up compositions (``strategy: "rerank"``, so the reranker stage
is on the path), a profiler (``sys.setprofile``) is armed in the daemon's thread by a
callback on its own loop, one composition is sent and read back, and the profiler is
disarmed the same way: every call the daemon's event loop made between the request's
bytes and the reply's bytes is seen. Counted by docs/pipeline.md's rule:

- every function the loop ran is a *function*: a hostd function, or the entry into a
  library from hostd code (a third-party package, the standard library, a C function
  of a module other than ``builtins``, and hostd's pure libraries ``hostd.compose``
  and ``hostd.protocol``). Nothing below a library entry is counted until the library
  calls back into hostd (an event loop running a callback, a dispatcher running a
  method); a coroutine a library entry returns, awaited by the entry's caller, runs
  inside that entry. A function called many times (per frame, per leg) is one function;
- a *package* is a hostd subpackage (``server``, ``rpc``, ``pipeline``, ``engine``,
  ``transport``, ``compose``, ``protocol``, ``logs`` …) or a library by its top-level
  module (``anyio``, ``jsonrpcserver``, ``pydantic``, ``posix`` …);
- a *hop* is a function some other package calls: the request moving from one room
  into the next. What a package does inside itself is its own business;
- a *crossing* is one distinct caller -> callee pair of functions in two different
  packages; A -> B and B -> A are two one-way crossings;
- what the daemon's own periodic tasks run meanwhile (``NOT_THE_REQUEST``: the log
  flusher) is not on the request's path, nor is anything they call.

Worker threads (a tokenizer, ``mmr``, file re-reads under trusted roots) are not
traced: with this config the whole path runs on the event loop.

    python scripts/trace_path.py [--markdown] [--checkout DIR]

prints JSON (hops, crossings, per-pair counts, each crossing call), or with ``--markdown`` the table
docs/pipeline.md lists.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_checkout import checkout as _checkout  # noqa: E402 - after the path set-up

ROOT = _checkout()
sys.path.insert(0, str(ROOT))

#: hostd's pure libraries: one hop per entry, their insides not counted.
PURE = ("hostd.compose", "hostd.protocol")

#: Stage of a hop, by the innermost function on its stack that names one.
STAGE_OF = {
    "Connection._read": "1 read",
    "Connection._handle_line": "1 read",
    "dispatch_one": "2 dispatch",
    "Pipeline.compose": "3 request",
    "check_floors": "4 price floors",
    "Pipeline._fan_out": "5 fan out",
    "Host.query_all": "5 fan out",
    "run_fan_out": "5 fan out",
    "RerankPreparer.prepare": "6 prepare strategy",
    "compose_for_prompt": "7 compose",
    "Pipeline._report": "9 report",
    "Connection.send": "10 write",
    "Connection._finish_after": "10 write",
}
#: Stage by package when no function on the stack names one (a task's own stack).
STAGE_BY_PACKAGE = {
    "server": "10 write",
    "rpc": "2 dispatch",
    "pipeline": "3 request",
    "engine": "5 fan out",
    "transport": "5 fan out",
    "compose": "7 compose",
    "protocol": "5 fan out",
}


def _config(workdir: Path) -> Path:
    python = sys.executable
    lines = [
        "[host]",
        f'socket = "{workdir}/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        'start_providers = "boot"',
        "[log]",
        'level = "warning"',
        f'file = "{workdir}/hostd.log"',
    ]
    for pid in ("alpha", "beta"):
        words = [python, "-m", "tests.fixtures.healthy_provider", "--name", pid, "--frames", "4"]
        lines += ["[[provider]]", f'id = "{pid}"', f"command = {json.dumps(words)}"]
        lines += [f"cwd = {json.dumps(str(ROOT))}", "timeout_ms = 20000"]
    lines += ["[reranker]", f"command = {json.dumps([python, '-m', 'tests.fixtures.reranker'])}"]
    lines[-1] = lines[-1][:-1] + ', "reverse"]'
    lines += [f"cwd = {json.dumps(str(ROOT))}", "timeout_ms = 20000"]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _package(module: str) -> str:
    """``hostd.<sub>`` for hostd, the top-level module for a library."""
    parts = module.split(".")
    if parts[0] == "hostd":
        return parts[1].lstrip("_") if len(parts) > 2 else parts[1].lstrip("_")
    return parts[0]


def _is_pure(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in PURE)


#: Tasks of the daemon's own that are not the request's: what they run while it is
#: traced is not on its path (the log flusher wakes every 0.2 s, whatever is asked).
NOT_THE_REQUEST = frozenset({"Daemon._flush_logs_periodically"})
#: The hop of a frame run by one of them, and of everything it calls.
OUTSIDE = "<outside the request>"


class Tracer:
    """The profile function: hops and the caller -> callee edges between them."""

    def __init__(self) -> None:
        #: hop name -> (file, package, stage), in first-call order.
        self.hops: dict[str, tuple[str, str, str]] = {}
        self.edges: dict[tuple[str, str], None] = {}
        #: frame -> the hop it runs in (None: inside a library below its entry).
        self._hop_of: dict[FrameType, str | None] = {}
        #: A library entry's frame -> its name, while it runs: what it returns may be awaited.
        self._entries: dict[FrameType, str] = {}
        #: A coroutine a library entry returned -> that entry (``anyio.wait_readable``
        #: hands back its backend's): awaited, it runs inside the entry, not as one more.
        self._returned: dict[str, str] = {}

    def _hop_at(self, frame: FrameType | None) -> str | None | bool:
        """The hop ``frame`` runs in; False when the frame is not traced (not hostd)."""
        while frame is not None:
            if frame in self._hop_of:
                return self._hop_of[frame]
            module = frame.f_globals.get("__name__", "")
            if module.split(".")[0] == "hostd" and not _is_pure(module):
                return self._name(frame)  # a hostd frame entered before arming
            frame = frame.f_back
        return False

    @staticmethod
    def _name(frame: FrameType) -> str:
        module = frame.f_globals.get("__name__", "?")
        qualname = frame.f_code.co_qualname
        if qualname.startswith("__create_fn__"):  # a dataclass's generated __init__
            cls = type(frame.f_locals.get("self"))
            return f"{cls.__module__}:{cls.__qualname__}.__init__"
        return f"{module}:{qualname}"

    def _stage(self, frame: FrameType, package: str) -> str:
        f: FrameType | None = frame
        while f is not None:
            stage = STAGE_OF.get(f.f_code.co_qualname)
            if stage is not None:
                return stage
            f = f.f_back
        return STAGE_BY_PACKAGE.get(package, "library")

    def _add(self, name: str, file: str, package: str, stage: str, caller: str | None) -> None:
        if name not in self.hops:
            self.hops[name] = (file, package, stage)
        if caller is not None and caller != name:
            self.edges[(caller, name)] = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "?")
            caller = self._hop_at(frame.f_back)
            if caller == OUTSIDE or frame.f_code.co_qualname in NOT_THE_REQUEST:
                self._hop_of[frame] = OUTSIDE
                return
            hostd = module.split(".")[0] == "hostd"
            if hostd and not _is_pure(module):
                name = self._name(frame)
                self._hop_of[frame] = name
                package = _package(module)
                file = os.path.relpath(frame.f_code.co_filename, ROOT)
                self._add(name, file, package, self._stage(frame, package), caller or None)
            elif caller:  # a library entered from hostd code: one hop, its insides not
                name = self._name(frame)
                self._hop_of[frame] = None
                self._entries[frame] = name
                package = _package(module)
                where = frame.f_code.co_filename
                file = os.path.relpath(where, ROOT) if hostd else module
                self._add(name, file, package, self._stage(frame, package), caller)
            else:
                self._hop_of[frame] = None
        elif event == "c_call":
            caller = self._hop_at(frame)
            module = getattr(arg, "__module__", None)
            if not caller or caller == OUTSIDE or module in (None, "builtins"):
                return
            name = f"{module}:{arg.__qualname__}"
            self._add(name, module, _package(module), self._stage(frame, ""), caller)
        elif event == "return":
            self._hop_of.pop(frame, None)
            entry = self._entries.pop(frame, None)
            returned = getattr(arg, "cr_frame", None)
            if entry is not None and returned is not None:
                self._returned[self._name(returned)] = entry

    def figures(self) -> dict[str, Any]:
        pairs: dict[str, int] = {}
        route: set[str] = set()
        crossings: list[str] = []
        # A coroutine awaited by the caller of the library entry that returned it is
        # that entry's own work (possibly resumed before the profiler saw the entry).
        inside = {
            (caller, callee)
            for caller, callee in self.edges
            if (caller, self._returned.get(callee)) in self.edges
        }
        called = {edge[1] for edge in self.edges if edge not in inside}
        for caller, callee in self.edges:
            if (caller, callee) in inside:
                continue
            a, b = self.hops[caller][1], self.hops[callee][1]
            if a != b:
                pairs[f"{a} -> {b}"] = pairs.get(f"{a} -> {b}", 0) + 1
                route.add(callee)
                crossings.append(f"{caller} -> {callee}")
        return {
            "functions": len(self.hops) - len({c for _, c in inside} - called),
            "hops": len(route),
            "crossings": sum(pairs.values()),
            "most_crossed": max(pairs.values(), default=0),
            "pairs": dict(sorted(pairs.items())),
            # Every crossing, caller -> callee, in the order first made.
            "crossing_calls": crossings,
            "path": [
                {"hop": name, "file": file, "package": package, "stage": stage}
                for name, (file, package, stage) in self.hops.items()
                if name in route
            ],
        }


class _Client:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.buf = b""
        self.next_id = 0

    def compose(self) -> dict[str, Any]:
        self.next_id += 1
        params = {"goal": "how is the budget split", "budget": 2000, "strategy": "rerank"}
        req = {"jsonrpc": "2.0", "id": self.next_id, "method": "context/compose", "params": params}
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise SystemExit("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        if "result" not in reply:
            raise SystemExit(f"compose failed: {reply}")
        return reply["result"]


def trace() -> dict[str, Any]:
    import anyio

    from hostd.config import load_config
    from hostd.logs import configure_logging
    from hostd.server import Daemon

    workdir = Path(tempfile.mkdtemp(prefix="trace-"))
    cfg = load_config(_config(workdir))
    configure_logging("warning", settings=cfg.log)
    daemon = Daemon(cfg)
    ready = threading.Event()
    loops: list[Any] = []

    def on_ready(_daemon: Any) -> None:
        import asyncio

        loops.append(asyncio.get_running_loop())
        ready.set()

    def serve() -> None:
        anyio.run(lambda: daemon.run(handle_signals=False, ready=on_ready), backend="asyncio")

    thread = threading.Thread(target=serve, name="daemon")
    thread.start()
    if not ready.wait(120):  # a hang guard
        raise SystemExit("the daemon did not start")
    loop = loops[0]

    def in_loop(fn: Callable[[], None]) -> None:
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()

        loop.call_soon_threadsafe(run)
        if not done.wait(60):
            raise SystemExit("the daemon's loop did not run the callback")

    tracer = Tracer()
    try:
        client = _Client(workdir / "hostd.sock")
        for _ in range(2):
            warm = client.compose()
            legs = {leg["provider_id"]: leg["status"] for leg in warm["providers"]}
            if set(legs.values()) != {"ok"}:
                raise SystemExit(f"a provider is not ok: {legs}")
        in_loop(lambda: sys.setprofile(tracer))
        result = client.compose()
        in_loop(lambda: sys.setprofile(None))
        policy = result["audit"]["policy"]
        client.sock.close()
    finally:
        loop.call_soon_threadsafe(daemon.request_stop, "trace done")
        thread.join(120)
    out = tracer.figures()
    out["strategy"] = policy.get("strategy") if isinstance(policy, dict) else policy
    out["checkout"] = str(ROOT)
    return out


def markdown(out: dict[str, Any]) -> str:
    rows = ["| # | function | file | package | stage |", "| --- | --- | --- | --- | --- |"]
    for i, hop in enumerate(out["path"], 1):
        rows.append(
            f"| {i} | `{hop['hop']}` | `{hop['file']}` | {hop['package']} | {hop['stage']} |"
        )
    rows.append("")
    rows.append(
        f"{out['hops']} hops ({out['functions']} functions in all), "
        f"{out['crossings']} one-way package crossings, "
        f"no pair crossed more than {out['most_crossed']} times one way."
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="the table docs/pipeline.md lists")
    parser.add_argument("--checkout", help="trace the daemon of another checkout")
    args = parser.parse_args()
    out = trace()
    print(markdown(out) if args.markdown else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
