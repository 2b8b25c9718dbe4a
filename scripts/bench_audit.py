"""Benchmark reading and auditing one provider reply: the accept-only schema against
the frame-by-frame path.

Two replies like the bundled providers' (``files``: snippets with a ``file``
provenance and digests; ``memory``: facts with a validity start), each a JSON-RPC line,
each read as the daemon reads it (``JsonRpcCodec.read``, ``query_result``) and audited
(``audit_leg``). ``accept``: as the daemon does (the whole reply validated against the
accept-only schema, ``accept_reply``); ``exact``: with that schema refused, every frame
parsed and checked on its own (``check_frame``), as before it. Both audits must be
equal (``same_audit``). Taking turns (ABBA), median thread-CPU microseconds per reply.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_audit.py [--frames 54] [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostd.engine import _leg_audit, audit_leg  # noqa: E402 - after the path set-up
from hostd.engine._leg_audit import LegAudit  # noqa: E402
from hostd.protocol import ContextQuery, canonical_token_cost, sha256_digest  # noqa: E402
from hostd.transport.bindings import JsonRpcCodec  # noqa: E402

WORDS = "retry backoff socket handler config parse token budget frame cache index".split()


def _frame(provider: str, i: int) -> dict[str, Any]:
    words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(40 + i % 60)]
    content = " ".join(words) + "\n"
    digest = sha256_digest(content.encode())
    frame: dict[str, Any] = {
        "id": f"{provider}-{i}",
        "kind": "snippet" if provider == "files" else "fact",
        "title": f"{provider} entry {i}",
        "content": content,
        "content_digest": digest,
        "uri": f"file:///src/m{i}.py" if provider == "files" else f"memory:m-{i}",
        "score": round(1 / (i + 2), 6),
        "token_cost": canonical_token_cost(content),
        "recorded_at": "2026-01-02T03:04:05.123456Z",
        "citation_label": f"m{i}.py L1-9" if provider == "files" else f"fact #{i}",
        "relations": [],
    }
    if provider == "files":
        frame["provenance"] = [
            {"type": "file", "uri": frame["uri"], "range": "L1-9", "digest": digest}
        ]
    else:
        frame["provenance"] = [{"type": "memory", "uri": frame["uri"]}]
        frame["valid_from"] = "2026-01-01T00:00:00Z"
    return frame


def _line(provider: str, frames: int, key: int) -> bytes:
    result = {"frames": [_frame(provider, i) for i in range(frames)], "truncated": False}
    return orjson.dumps({"jsonrpc": "2.0", "id": key, "result": result})


def _read_and_audit(line: bytes, query: ContextQuery) -> LegAudit:
    codec = JsonRpcCodec("bench")
    reply = codec.read(line)
    payload = getattr(reply, "payload", None)
    frames = codec.query_result(payload).frames
    return audit_leg("bench", query, frames, declared_kinds=("snippet", "fact"))


def _exact(line: bytes, query: ContextQuery) -> LegAudit:
    with mock.patch.object(_leg_audit, "accept_reply", lambda *_args: None):
        return _read_and_audit(line, query)


def _cpu_us(fn: Any, *args: Any) -> float:
    started = time.thread_time()
    fn(*args)
    return (time.thread_time() - started) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=54, help="frames per reply")
    parser.add_argument("--repeat", type=int, default=200, help="ABBA rounds")
    args = parser.parse_args()
    query = ContextQuery(goal="g", max_frames=args.frames, max_tokens=10**6)
    lines = [_line("files", args.frames, 1), _line("memory", args.frames, 2)]
    same = all(_read_and_audit(line, query) == _exact(line, query) for line in lines)
    accept: list[float] = []
    exact: list[float] = []
    for r in range(args.repeat):
        line = lines[r % 2]
        pair = ((accept, _read_and_audit), (exact, _exact))
        for out, fn in pair if r % 4 < 2 else pair[::-1]:
            out.append(_cpu_us(fn, line, query))
    a, e = statistics.median(accept), statistics.median(exact)
    print(
        json.dumps(
            {
                "frames_per_reply": args.frames,
                "accept_us": round(a, 1),
                "exact_us": round(e, 1),
                "accept_over_exact": round(a / e, 3) if e else None,
                "same_audit": same,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
