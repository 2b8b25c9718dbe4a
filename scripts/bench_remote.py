#!/usr/bin/env python3
"""Remote leg benchmark: what a remote HTTPS provider's leg costs over a plain POST.

One provider (20 frames a query) is served over HTTPS on loopback by a child process
(uvicorn, a CA made here with trustme). Two clients take turns, request by request
(ABBA), so both see the same phases of a shared machine:

- ``leg``: ``Host.query_all`` with the provider configured by ``url``: the plan, the
  consent gate, the HTTP exchange on the provider's pooled client, reading the bounded
  body, the reply check, the leg audit, the report and the verify stage;
- ``plain``: an ``httpx.AsyncClient`` (same CA, keep-alive) POSTing the same JSON-RPC
  request body to the same server and ``orjson.loads``-ing the reply.

It prints JSON: each side's median and p99, the paired median of ``leg / plain``
(target ≤ 1.3) and of ``leg − plain``, and then, from a phase of ``--concurrent``
fan-outs at a time, how many TCP connections the server accepted per 1,000 requests
(counted in the server's protocol as they are accepted).

With ``--token-file`` the leg reads its token from a file (one ``stat`` of it per
exchange, to see a rotation) instead of a variable; either way it prints what one
such check of the token costs (``token_check_us``).

    python scripts/bench_remote.py [--rounds 400] [--warmup 40] [--frames 20]
                                   [--concurrent 64] [--requests 1000] [--token-file]

Run with ``--serve DIR`` it is the server (the URL goes to stdout, then it serves
until its stdin closes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import orjson

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[1]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import httpx  # noqa: E402
from bench_fanout import BenchProvider  # noqa: E402  # the fan-out bench's provider

from hostd.protocol import ContextQuery  # noqa: E402

TOKEN = "bench-token-not-secret"


# -- the server (a child process) ------------------------------------------------------


def serve(directory: Path, frames: int) -> None:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from hostd.provider._http import make_app, serve_asgi

    counts = {"connections": 0, "requests": 0}

    class Counting(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            counts["connections"] += 1
            super().connection_made(transport)

    inner = make_app(BenchProvider("bench-remote", frames, 0.0), token=TOKEN)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":  # the figures, for the bench
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": orjson.dumps(counts)})
            return
        if scope["type"] == "http":
            counts["requests"] += 1
        await inner(scope, receive, send)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            url = await tg.start(
                lambda task_status: serve_asgi(
                    app,
                    certfile=directory / "cert.pem",
                    keyfile=directory / "key.pem",
                    http=Counting,
                    task_status=task_status,
                )
            )
            print(url, flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)  # until the bench closes it
            tg.cancel_scope.cancel()

    anyio.run(main, backend="asyncio")


# -- the bench -------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(args: argparse.Namespace, directory: Path, url: str) -> dict[str, Any]:
    from hostd.engine import ConsentStore, Host, ProviderSpec
    from hostd.logs import configure_logging

    configure_logging("warning")  # as a daemon runs: info events per leg off the console
    ca_file = directory / "ca.pem"
    from hostd.transport import TokenSource

    os.environ["HOSTD_BENCH_TOKEN"] = TOKEN
    token_file = directory / "bench.token"
    token_file.write_text(TOKEN + "\n")
    source: dict[str, Any] = (
        {"token_file": token_file} if args.token_file else {"token_env": "HOSTD_BENCH_TOKEN"}
    )
    spec = ProviderSpec("remote", url=url, ca_file=ca_file, timeout_ms=60_000, **source)
    tokens = TokenSource(spec.token_file, spec.token_env)
    tokens.current()
    token_check_us = min(timeit.repeat(tokens.current, number=20_000, repeat=5)) / 20_000 * 1e6
    store = ConsentStore(directory / "state")
    store.grant("remote", "egress", "bench")
    query = ContextQuery(goal="retry policy", max_frames=args.frames, max_tokens=0)
    budget = 100_000
    trust = ssl.create_default_context(cafile=str(ca_file))
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    asked = query.model_copy(update={"max_tokens": budget}).to_wire()
    seq = iter(range(10**9))
    leg_ms: list[float] = []
    plain_ms: list[float] = []

    async with Host([spec], consent=store) as host, httpx.AsyncClient(verify=trust) as plain:

        async def one_leg() -> float:
            t0 = time.perf_counter()
            fan = await host.query_all(query, budget)
            elapsed = (time.perf_counter() - t0) * 1000
            assert fan.reports["remote"].status.value == "ok", fan.reports["remote"]
            assert len(fan.accepted) == args.frames
            return elapsed

        async def one_plain() -> float:
            body = orjson.dumps(
                {"jsonrpc": "2.0", "method": "context/query", "params": {"query": asked},
                 "id": next(seq)}
            )  # fmt: skip
            t0 = time.perf_counter()
            response = await plain.post(url, content=body, headers=headers)
            reply = orjson.loads(response.content)
            elapsed = (time.perf_counter() - t0) * 1000
            assert len(reply["result"]["frames"]) == args.frames
            return elapsed

        for _ in range(args.warmup):
            await one_leg()
            await one_plain()
        for i in range(args.rounds):
            # ABBA: neither side always goes first.
            if i % 2 == 0:
                leg_ms.append(await one_leg())
                plain_ms.append(await one_plain())
            else:
                plain_ms.append(await one_plain())
                leg_ms.append(await one_leg())

        before = orjson.loads((await plain.get(url)).content)
        done = 0

        async def worker() -> None:
            nonlocal done
            while done < args.requests:
                done += 1
                await host.query_all(query, budget)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(args.concurrent):
                tg.start_soon(worker)
        concurrent_s = time.perf_counter() - t0
        after = orjson.loads((await plain.get(url)).content)
    store.close()

    ratios = [a / b for a, b in zip(leg_ms, plain_ms, strict=True)]
    diffs = [a - b for a, b in zip(leg_ms, plain_ms, strict=True)]
    requests = after["requests"] - before["requests"]
    opened = after["connections"] - before["connections"]
    return {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "frames": args.frames,
        "rounds": args.rounds,
        "token_from": "token_file" if args.token_file else "token_env",
        "token_check_us": round(token_check_us, 3),
        "leg_ms": {"median": statistics.median(leg_ms), "p99": _pct(leg_ms, 0.99)},
        "plain_post_ms": {"median": statistics.median(plain_ms), "p99": _pct(plain_ms, 0.99)},
        "paired_leg_over_plain_ms": statistics.median(diffs),
        "paired_ratio_median": statistics.median(ratios),
        "target_ratio": 1.3,
        "concurrent": {
            "fan_outs_at_a_time": args.concurrent,
            "requests": requests,
            "connections_opened": opened,
            "connections_per_1000_requests": round(opened * 1000 / max(requests, 1), 2),
            "requests_per_s": round(requests / concurrent_s, 1),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--token-file", action="store_true", help="the leg's token from a file")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.frames)
        return 0

    import trustme

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        ca.cert_pem.write_to_path(str(directory / "ca.pem"))
        cert.private_key_and_cert_chain_pem.write_to_path(str(directory / "cert.pem"))
        cert.private_key_pem.write_to_path(str(directory / "key.pem"))
        server = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--serve", str(directory), "--frames", str(args.frames)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None and server.stdin is not None
            url = server.stdout.readline().strip()
            if not url:
                print("the server did not start", file=sys.stderr)
                return 1
            result = asyncio.run(bench(args, directory, url))
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(timeout=30)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
