#!/usr/bin/env python3
"""What acknowledged-means-written costs: ``usage/feedback`` round trips over the socket.

Starts ``hostd serve`` with three fixture providers and ``[shadow] sample = 0``, and
on one connection composes then sends feedback on that composition, ``--requests``
times; prints, as JSON, the feedback round trip's p50 and p95 (ms) beside the
composition's, and the ratio of their p50s. Each feedback writes its record and the
feedback in one synced transaction before the reply (docs/api.md); before that
change the reply came once the write was queued. ``--checkout DIR`` measures another
checkout's daemon, for before/after figures with this one script.

    python scripts/bench_feedback.py [--requests 200] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import orjson
from bench_daemon import ROOT, _config, _Conn, _start, _stop


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


async def _run(socket: Path, requests: int) -> dict[str, object]:
    conn = _Conn(await anyio.connect_unix(socket))
    compose_s: list[float] = []
    feedback_s: list[float] = []
    errors = 0
    for i in range(requests + 5):  # the first five warm up, outside the figures
        t0 = time.perf_counter()
        composed = await conn.call("context/compose", {"goal": f"q {i}", "budget": 800})
        t1 = time.perf_counter()
        result = composed.get("result") or {}
        labels = [c["label"] for c in result.get("citations") or ()][:2]
        params = {"request_id": result.get("request_id", "?"), "used": labels}
        reply = await conn.call("usage/feedback", params)
        t2 = time.perf_counter()
        errors += "result" not in reply
        if i >= 5:
            compose_s.append(t1 - t0)
            feedback_s.append(t2 - t1)
    await conn.stream.aclose()
    return {
        "requests": requests,
        "errors": errors,
        "compose_ms": {"p50": _ms(compose_s, 0.5), "p95": _ms(compose_s, 0.95)},
        "feedback_ms": {"p50": _ms(feedback_s, 0.5), "p95": _ms(feedback_s, 0.95)},
        "feedback_over_compose_p50": round(
            statistics.median(feedback_s) / statistics.median(compose_s), 2
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--checkout", help="run the daemon of another checkout")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hd-fb-"))
    os.chmod(workdir, 0o700)
    config = _config(workdir, "fixture", 8, "warning", {"enabled": True, "sample": 0.0})
    daemon, socket = _start(config)
    try:
        out = {"checkout": str(ROOT), **anyio.run(_run, socket, args.requests)}
        out["load_average_1m"] = round(os.getloadavg()[0], 2)
    finally:
        code = _stop(daemon)
        shutil.rmtree(workdir, ignore_errors=True)
    out["daemon_exit_code"] = code
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
