"""A definition's chunks scored together: its best chunk ranks for what the whole says.

A chunk holds about ten lines of code at the default bound (128 word pieces), so a
100-line function is about ten chunks that BM25 ranks apart: the question's words are
spread over them and none holds enough of them to rank (click's ``CliRunner.invoke``:
its best chunk ranked 33rd, below the prose that mentions it; ``docs/benchmarks.md``,
"A definition's chunks scored together"). Here the chunks of one definition (a *run*:
consecutive chunks of one file whose first lines sit in the same item, ``Chunk.item``,
headed by the chunk before them when their item is one level inside that one's: the
chunk that holds the definition's first line, its signature and docstring, which sits
in the item around it) are scored as one text: for each term of the query, the best
score any of them has for it, summed (each term counted where it matches best, never
twice). The run's best chunk by its own score is raised by ``TOGETHER_WEIGHT`` of what
that adds to its own score; the others keep theirs, so a long function does not crowd
out the rest of the prompt. A definition in one chunk, or whose best chunk holds every
term best, ranks as before.

Returning the raised chunk's neighbours with it as well (at its score, for the host to
quote the touching blocks as one) was measured and not kept: at 2,000 tokens it cost
other questions their answers (the same page).

A pure function of the index's arrays and the query's terms: the same query over the
same chunks gives the same scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

from hostd.chunking import ITEM_SEPARATOR

from .._corpus import Chunk

__all__ = ["TOGETHER_WEIGHT", "definition_runs", "score_together"]

#: What share of the gain from scoring its definition as one text a run's best chunk
#: is raised by: the whole of it ranked click's long functions first and cost other
#: questions lines of their answers; half found every question at both budgets.
TOGETHER_WEIGHT = 0.5


def definition_runs(chunks: Sequence[Chunk]) -> np.ndarray:
    """Each chunk's run (from 0), ``-1`` for one in none: consecutive chunks of one file,
    each starting on the line after the one before ends, in the same item, headed by
    the chunk before the first when their item is one level inside its (the chunk the
    definition starts in). A chunk heads one run at most and is then in no other."""
    runs = np.full(len(chunks), -1, dtype=np.int64)
    run = -1
    for i, c in enumerate(chunks):
        if c.item is None:
            continue
        prev = chunks[i - 1] if i > 0 else None
        if prev is None or prev.rel != c.rel or prev.end + 1 != c.start:
            run += 1
        elif prev.item == c.item:
            runs[i] = runs[i - 1]
            continue
        else:
            run += 1
            if _inside(c.item, prev.item):
                runs[i - 1] = run  # the chunk its definition starts in heads it
        runs[i] = run
    return runs


def _inside(item: str, outer: str | None) -> bool:
    """Whether ``item`` is exactly one level inside ``outer`` (``None``: top level)."""
    if outer is None:
        return ITEM_SEPARATOR not in item
    head, sep, last = item.rpartition(ITEM_SEPARATOR)
    return bool(sep) and head == outer and bool(last)


def score_together(
    bm25: bm25s.BM25,
    tokens: Sequence[str],
    runs: np.ndarray,
    scores: np.ndarray,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """``scores`` (BM25, the test prior and the definition lift applied) with each run's
    best chunk raised toward its run's score. ``scale``: what each chunk's BM25 score
    was multiplied by (the test prior), which its run's score is multiplied by too."""
    terms = [t for t in dict.fromkeys(tokens) if t in bm25.vocab_dict]
    matched = np.flatnonzero((scores > 0) & (runs >= 0))
    if len(terms) < 2 or matched.size == 0:  # one term: the best chunk has it best
        return scores
    # Only the runs a matching chunk is in, with every chunk of each.
    live = np.unique(runs[matched])
    at = np.flatnonzero(np.isin(runs, live))
    which = np.searchsorted(live, runs[at])
    whole = np.zeros(live.size, dtype=np.float64)
    for term in terms:
        per = np.asarray(bm25.get_scores([term]), dtype=np.float64)[at]
        best = np.zeros(live.size, dtype=np.float64)
        np.maximum.at(best, which, per)
        whole += best
    out = scores.copy()
    # Each run's best chunk by its own score, the first in index order among equals.
    order = np.lexsort((at, -scores[at], which))
    firsts = order[np.r_[True, which[order][1:] != which[order][:-1]]]
    for k in firsts.tolist():
        lead = int(at[k])
        total = float(whole[which[k]]) * (1.0 if scale is None else float(scale[lead]))
        if total > scores[lead]:
            out[lead] = scores[lead] + TOGETHER_WEIGHT * (total - scores[lead])
    return out
