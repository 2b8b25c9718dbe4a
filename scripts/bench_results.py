#!/usr/bin/env python3
"""What the evidence and the typed result cost: reply bytes and CPU, with and without.

One composition of ``--frames`` synthetic candidates from 8 providers (``bench_compose``'s
generator: file provenance, ~5% served twice), budget ``--budget``; the reply the daemon
would send is its wire form plus eight provider reports, a usage report and a request id.
Prints, as JSON, medians over ``--repeat`` runs taken in turns:

- ``server``: the wire form built and encoded (``to_wire`` + orjson), plain against
  ``include_content`` (``evidence`` added), in process-CPU milliseconds, and the reply's
  bytes each way;
- ``client``: the reply read as a plain dict (orjson) against read and validated into a
  ``ComposeResult`` (what ``hostd.client`` does once on receipt), for both replies, and
  ``ComposeResult.to_wire()`` giving the dict back.

    python scripts/bench_results.py [--frames 512] [--budget 8000] [--repeat 51]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compose import PROVIDERS, synthetic  # noqa: E402 - after the path set-up

from hostd.client import ComposeResult  # noqa: E402 - bench_compose sets the path up
from hostd.compose import compose_for_prompt  # noqa: E402


def _cpu_ms(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1000


def _turns(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median CPU ms of each function, the functions taking turns run by run."""
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            runs[name].append(_cpu_ms(fn))
    return {name: round(statistics.median(v), 3) for name, v in runs.items()}


def _reply(wire: dict[str, Any]) -> dict[str, Any]:
    reports = [
        {
            "provider_id": pid,
            "status": "ok",
            "frames_offered": 64,
            "frames_accepted": 64,
            "latency_ms": 12.5,
            "tokens_accepted": 4000,
            "violations": [],
            "max_tokens": 2000,
            "share": 1000,
        }
        for pid in PROVIDERS
    ]
    usage = {"budget_consumed": 32000, "global_budget": 8000, "frames": [], "providers": {}}
    return {**wire, "providers": reports, "usage": usage, "request_id": "bench-1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=512)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=51)
    args = parser.parse_args()

    composed = compose_for_prompt(synthetic(args.frames), args.budget, strategy="rrf")
    plain = orjson.dumps(_reply(composed.to_wire()))
    asked = orjson.dumps(_reply(composed.to_wire(include_content=True)))
    asked_reply = orjson.loads(asked)
    typed = ComposeResult.model_validate(asked_reply)
    assert typed.to_wire() == asked_reply  # the figures are of a faithful reading

    server = _turns(
        {
            "plain": lambda: orjson.dumps(_reply(composed.to_wire())),
            "include_content": lambda: orjson.dumps(_reply(composed.to_wire(include_content=True))),
        },
        args.repeat,
    )
    client = _turns(
        {
            "dict_plain": lambda: orjson.loads(plain),
            "typed_plain": lambda: ComposeResult.model_validate(orjson.loads(plain)),
            "dict_with_evidence": lambda: orjson.loads(asked),
            "typed_with_evidence": lambda: ComposeResult.model_validate(orjson.loads(asked)),
            "to_wire": typed.to_wire,
        },
        args.repeat,
    )
    print(
        json.dumps(
            {
                "frames": args.frames,
                "budget": args.budget,
                "included": len(composed.citations),
                "offered": len(composed.audit),
                "reply_bytes": {
                    "plain": len(plain),
                    "include_content": len(asked),
                    "ratio": round(len(asked) / len(plain), 2),
                },
                "server_cpu_ms": {
                    **server,
                    "ratio": round(server["include_content"] / server["plain"], 2),
                },
                "client_cpu_ms": {
                    **client,
                    "typed_over_dict_plain": round(client["typed_plain"] / client["dict_plain"], 1),
                    "typed_over_dict_with_evidence": round(
                        client["typed_with_evidence"] / client["dict_with_evidence"], 1
                    ),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
