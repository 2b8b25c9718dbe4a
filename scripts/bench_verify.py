"""Benchmark: the cost of verification, and how stable a session's prompt stays.

8 child-process providers each serve 50 ``file``-backed frames (whole-file
provenance, content digests, ``capabilities.verify``). Each round runs
``Host.query_all`` over all of them and composes the result, in three ways:

- ``plain``: fan-out → compose, no verification stage;
- ``verified``: fan-out → inline digests + source re-reads → compose (no session);
- ``session``: turn 2 of an unchanged session: ``context/verify`` concurrently
  with the fresh queries, reuse of ``valid`` frames, digests, re-reads → compose.

It prints one JSON object: median and p99 compose latency per mode, the
verification overhead (median ``verified`` − ``plain``, ``session`` − ``plain``),
and the share of prompt bytes identical between turn 1 and turn 2 of an
unchanged session (whole prompt and evidence block; target 100 %).

Run: ``python scripts/bench_verify.py [--providers 8] [--frames 50] [--rounds 30]``.
The same file is the provider (``--serve ROOT``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
SELF = str(Path(__file__).resolve())
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402 - after the repo is importable

from hostd.compose import compose_for_prompt  # noqa: E402
from hostd.engine import Host, ProviderSpec  # noqa: E402
from hostd.engine.verify import VerifyStage  # noqa: E402
from hostd.logs import configure_logging  # noqa: E402
from hostd.protocol import (  # noqa: E402
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    FrameIdentity,
    FrameVerdict,
    Provenance,
    ProviderInfo,
    QueryCapability,
    sha256_digest,
)
from hostd.provider import Provider, make_frame, run_stdio  # noqa: E402


class FilesProvider(Provider):
    def __init__(self, root: Path, delay_ms: float) -> None:
        self.root = root
        self.delay = delay_ms / 1000
        self.info = ProviderInfo(name=root.name, version="1", data_flow=DataFlow(reads=True))
        self.capabilities = Capabilities(
            query=QueryCapability(kinds=["snippet"]), correlation=True, verify=True
        )

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        if self.delay:
            await anyio.sleep(self.delay)
        out = []
        for path in sorted(self.root.iterdir())[: query.max_frames]:
            data = path.read_bytes()
            out.append(
                make_frame(
                    id=path.name,
                    kind="snippet",
                    title=path.name,
                    content=data.decode(),
                    citation_label=f"{self.root.name}/{path.name}",
                    score=0.5,
                    uri=path.as_uri(),
                    provenance=[
                        Provenance(type="file", uri=path.as_uri(), digest=sha256_digest(data))
                    ],
                ).to_wire()
            )
        return ContextQueryResult(frames=out)

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        out = []
        for ident in frames:
            path = self.root / ident.frame_id
            if not path.is_file():
                out.append(FrameVerdict(frame=ident, status="gone"))
            elif sha256_digest(path.read_bytes()) == ident.content_digest:
                out.append(FrameVerdict(frame=ident, status="valid"))
            else:
                out.append(FrameVerdict(frame=ident, status="stale"))
        return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


async def _bench(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    roots = []
    for p in range(args.providers):
        root = base / f"p{p}"
        root.mkdir()
        for f in range(args.frames):
            body = f"# provider {p} file {f}\n" + "".join(
                f"line {i} of file {f}: some code here\n" for i in range(args.lines)
            )
            (root / f"f{f:03d}.py").write_text(body)
        roots.append(root)
    budget = args.providers * args.frames * 200
    query = ContextQuery(goal="bench", max_frames=args.frames, max_tokens=budget)

    specs = [
        ProviderSpec(
            f"p{i}",
            [sys.executable, SELF, "--serve", str(root), "--delay-ms", str(args.delay_ms)],
            cwd=str(REPO),
            env={"PYTHONPATH": str(REPO)},
            timeout_ms=30000,
            trusted_roots=[root],
        )
        for i, root in enumerate(roots)
    ]
    async with Host(specs, start="boot") as host:
        stage_default = host.verify_stage

        async def turn(stage: VerifyStage | None, session: str | None) -> tuple[Any, Any]:
            host.verify_stage = stage  # the same providers, with or without the stage
            fan = await host.query_all(query, budget, session=session)
            composed = compose_for_prompt(
                fan.accepted,
                budget,
                placement="canonical",
                excluded=fan.excluded,
                verification=fan.verification,
            )
            return composed, fan

        timings: dict[str, list[float]] = {"plain": [], "verified": [], "session": []}
        stage_plain = VerifyStage(host_roots=[base])
        session_stage = VerifyStage(host_roots=[base])
        await turn(session_stage, "warm")  # turn 1 of the measured session
        for _ in range(args.warmup):
            await turn(None, None)
        for _round in range(args.rounds):
            for mode in ("plain", "verified", "session"):
                t0 = time.perf_counter()
                if mode == "plain":
                    await turn(None, None)
                elif mode == "verified":
                    await turn(stage_plain, None)
                else:
                    await turn(session_stage, "warm")
                timings[mode].append((time.perf_counter() - t0) * 1000)

        # Prompt stability: two turns of a fresh, unchanged session.
        stab = VerifyStage(host_roots=[base])
        turn1, _ = await turn(stab, "stable")
        turn2, fan2 = await turn(stab, "stable")
        host.verify_stage = stage_default

    p1, p2 = turn1.prompt.encode(), turn2.prompt.encode()
    common = 0
    for a, b in zip(p1, p2, strict=False):
        if a != b:
            break
        common += 1
    med = {m: statistics.median(v) for m, v in timings.items()}
    return {
        "providers": args.providers,
        "frames_per_provider": args.frames,
        "provider_delay_ms": args.delay_ms,
        "rounds": args.rounds,
        "compose_latency_ms": {
            m: {"median": round(med[m], 3), "p99": round(_percentile(v, 0.99), 3)}
            for m, v in timings.items()
        },
        "verification_overhead_ms": {
            "verified_minus_plain": round(med["verified"] - med["plain"], 3),
            "session_minus_plain": round(med["session"] - med["plain"], 3),
        },
        "turn2_reused_frames": fan2.figures.get("reused", 0),
        "prompt_bytes": len(p1),
        "prompt_identical_prefix_bytes": common,
        "prompt_identical_share": round(common / max(len(p1), 1), 6),
        "evidence_block_identical": p1 == p2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=8)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--lines", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        run_stdio(FilesProvider(Path(args.serve), args.delay_ms))
        return
    configure_logging("warning")  # stderr only: stdout carries the JSON result
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        out = anyio.run(_bench, args, Path(tmp), backend="asyncio")
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
