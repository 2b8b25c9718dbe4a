"""Make the near-duplicate eval corpus: the standard library set, vendored three times over.

    python evals/neardup_corpus.py [--copies N]

writes ``.state/eval/neardup/`` (under the repository root, git-ignored):
``python3.11/`` holds the 16 modules of the standard library set
(``evals/stdlib_corpus.py``'s ``MODULES``), copied from the running interpreter,
and ``vendor/v1/`` … ``vendor/vN/`` (N = ``--copies``, 3 by default) each hold a
near-duplicate of every module, as a repository that vendors one library at
several versions does. A copy is its module with about one line in eight
carrying a version marker (``  # vendored vK``): every chunk of a copy differs
from the original's (no exact dedup folds them), and its word 3-shingles are
mostly the original's. Which lines change is drawn from a generator seeded by the
copy and the module, so the corpus is the same bytes on every run; lines that
hold a gold phrase of ``evals/stdlib.jsonl`` are never changed, so every copy
quotes every gold passage verbatim.

The question set is ``evals/stdlib.jsonl`` itself: a gold ``file`` matches any
path it ends, so ``argparse.py`` names the original and each vendored copy,
and a question is recalled by whichever copy reaches the prompt. The same
questions over the same text, with four near-copies of every passage, show
what redundancy costs each policy (docs/eval.md). Exit 1 names the questions
whose gold a copy lost (another Python version than 3.11 may word a docstring
differently).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE.parent / ".state" / "eval" / "neardup"
BASE = "python3.11"
#: The share of changeable lines that carry a copy's version marker.
MARK_RATE = 0.125

sys.path.insert(0, str(HERE))
from stdlib_corpus import MODULES  # noqa: E402 - evals/ is a folder of scripts, not a package


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def protected_lines(lines: list[str], phrases: list[str]) -> set[int]:
    """Indices of the lines any occurrence of a phrase touches (whitespace and case folded;
    a word never crosses a line, so the folded lines joined by a space are the folded text)."""
    spans: list[tuple[int, int, int]] = []
    at = 0
    for index, line in enumerate(lines):
        folded = _fold(line)
        if folded:
            spans.append((at, at + len(folded), index))
            at += len(folded) + 1
    text = " ".join(_fold(line) for line in lines if _fold(line))
    keep: set[int] = set()
    for phrase in phrases:
        start = text.find(phrase)
        while start >= 0:
            end = start + len(phrase)
            keep.update(i for lo, hi, i in spans if lo < end and start < hi)
            start = text.find(phrase, start + 1)
    return keep


def vendored(text: str, copy: int, name: str, phrases: list[str]) -> str:
    """Copy ``copy`` of module ``name``: a version marker on about one line in eight."""
    lines = text.split("\n")
    keep = protected_lines(lines, phrases)
    rng = random.Random(f"neardup:{copy}:{name}")
    out = []
    for index, line in enumerate(lines):
        mark = rng.random() < MARK_RATE  # drawn for every line, so edits elsewhere keep it
        if mark and line.strip() and index not in keep:
            line = f"{line}  # vendored v{copy}"
        out.append(line)
    return "\n".join(out)


def gold_phrases() -> dict[str, list[str]]:
    """Module path -> the folded gold phrases the standard library set quotes in it."""
    phrases: dict[str, list[str]] = {}
    for line in (HERE / "stdlib.jsonl").read_text(encoding="utf-8").splitlines():
        for gold in json.loads(line)["gold"]:
            phrases.setdefault(gold["file"], []).append(_fold(gold["phrase"]))
    return phrases


def build(target: Path, source: Path, copies: int) -> list[str]:
    """Write the corpus under ``target`` from the modules under ``source``; the copies
    (``folder/module``) that lost a gold phrase, which should be none."""
    phrases = gold_phrases()
    if target.exists():
        shutil.rmtree(target)
    folders = [BASE] + [f"vendor/v{k}" for k in range(1, copies + 1)]
    for name in MODULES:
        text = (source / name).read_text(encoding="utf-8")
        for k, folder in enumerate(folders):
            path = target / folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            body = text if k == 0 else vendored(text, k, name, phrases.get(name, []))
            path.write_text(body, encoding="utf-8")
    return sorted(
        f"{folder}/{name}"
        for name, wanted in phrases.items()
        for folder in folders
        if not all(p in _fold((target / folder / name).read_text(encoding="utf-8")) for p in wanted)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=3, help="vendored copies (default 3)")
    args = parser.parse_args()
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    source = Path(sysconfig.get_paths()["stdlib"])
    missing = build(TARGET, source, args.copies)
    print(f"{len(MODULES)} modules from {source}, {args.copies} vendored copies, in {TARGET}")
    if missing:
        print(f"gold phrases not found (another Python version?): {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
