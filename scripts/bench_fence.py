"""Measure what the fence lines of a composed prompt cost: bytes per fence line, their
share of the prompt, and frames per prompt.

Ten goals over each of two corpora, hostd's own ``docs/`` and ``hostd/`` as the
repository eval exports them (``python evals/repo_corpus.py`` writes them under
``.state/eval/repo/``, pinned, so before and after see the same bytes), each asked of
the ``files`` provider's index in process and composed by ``compose_for_prompt`` at
one budget (2,000 tokens; the whole budget asked of the one provider, overfetch 1).
A fence line is a prompt line that opens a block (``<frame …>``: content cannot start
a line so, R3); the closing lines are counted apart. Prints one JSON object: per
corpus the goals' means and the totals.

``--checkout DIR`` composes with another checkout's hostd (e.g. ``git archive`` of
main unpacked in /tmp), so the same script gives before and after figures.

``--corpus DIR`` reads ``DIR/docs`` and ``DIR/hostd`` instead (the checkout itself, say);
``--goals N`` asks only the first N goals of each.

    python scripts/bench_fence.py [--budget 2000] [--corpus DIR] [--goals N] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_checkout import checkout as _checkout  # noqa: E402 - after the path set-up

sys.path.insert(0, str(_checkout()))

from hostd.compose import (  # noqa: E402 - after the path set-up
    EVIDENCE_PREAMBLE,
    compose_for_prompt,
    render_frame,
)
from hostd.protocol import ContextFrame, ContextQuery  # noqa: E402
from providers._corpus import CorpusOptions  # noqa: E402
from providers.files._index import FileIndex  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: Ten goals a user of each part might ask: about the docs, then about the source.
GOALS = {
    "docs": [
        "how does the budget count the fenced blocks of the prompt",
        "what does span merging do with overlapping line ranges",
        "how do I configure a provider's timeout",
        "what happens when a provider is still warming",
        "how are citation labels made unique",
        "what does the shadow record keep for feedback",
        "how do I run the eval on the repository",
        "how does hostd mcp expose citations as resources",
        "what does floors_exceed_budget mean",
        "how is an unverifiable frame marked in the prompt",
    ],
    "hostd": [
        "render a frame inside a fence and escape its attributes",
        "pack frames into the budget in rank order",
        "restart a crashed provider with backoff",
        "dedup frames with the same content digest",
        "reciprocal rank fusion across providers",
        "read a JSON-RPC line with a length limit",
        "verify a file region against its digest",
        "error to wire translation of HostdError",
        "coalesce adjacent blocks of one source",
        "log the compose audit with the request id",
    ],
}


def _fence_figures(prompt: str) -> tuple[int, int, int]:
    """``(fences, bytes of their opening lines, bytes of the prompt)``."""
    opened = [ln for ln in prompt.split("\n") if ln.startswith("<frame ")]
    return len(opened), sum(len(ln.encode()) + 1 for ln in opened), len(prompt.encode())


def _closing_bytes(frame: ContextFrame) -> int:
    """What the renderer writes in a block besides its opening line and the content it
    shows: the block of ``frame`` with no content, less its opening line (the newline
    before ``</frame>`` and that closing line)."""
    block = render_frame("files", frame.model_copy(update={"content": ""}))
    return len(block.encode()) - len(block.split("\n", 1)[0].encode()) - 1


def measure(corpus: Path, goals: list[str], budget: int) -> dict[str, object]:
    index = FileIndex(CorpusOptions(root=corpus), cache_path=None)
    index.build()
    rows = []
    closing = 0
    for goal in goals:
        query = ContextQuery(goal=goal, max_frames=64, max_tokens=budget)
        result = index.answer(query).to_result()
        frames = [("files", ContextFrame.model_validate(f)) for f in result.frames]
        if frames:
            closing = _closing_bytes(frames[0][1])
        out = compose_for_prompt(frames, budget)
        fences, header_bytes, prompt_bytes = _fence_figures(out.prompt)
        rows.append((fences, header_bytes, prompt_bytes))
    fences = sum(r[0] for r in rows)
    headers = sum(r[1] for r in rows)
    prompts = sum(r[2] for r in rows)
    # The bytes of evidence the blocks show: the prompt less its preamble (an empty
    # prompt has none), the opening lines, and what the renderer closes each block with.
    preambles = sum(1 for r in rows if r[2]) * len(EVIDENCE_PREAMBLE.encode())
    content = prompts - headers - fences * closing - preambles
    return {
        "goals": len(rows),
        "frames_per_prompt": round(fences / len(rows), 2),
        "frames_per_prompt_median": statistics.median(r[0] for r in rows),
        "bytes_per_fence_line": round(headers / fences, 1) if fences else None,
        "fence_line_share": round(headers / prompts, 3) if prompts else None,
        "prompt_bytes_mean": round(prompts / len(rows)),
        "content_bytes_mean": round(content / len(rows)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument(
        "--corpus", type=Path, default=ROOT / ".state" / "eval" / "repo", metavar="DIR"
    )
    parser.add_argument("--goals", type=int, default=10, metavar="N")
    parser.add_argument("--checkout", type=Path, help="compose with this checkout's hostd")
    args = parser.parse_args()
    figures = {
        part: measure(args.corpus / part, goals[: args.goals], args.budget)
        for part, goals in GOALS.items()
    }
    print(json.dumps({"budget": args.budget, **figures}, indent=2))


if __name__ == "__main__":
    main()
