"""A definition's chunks are scored together (``_together``): the best chunk of a long
function whose chunks each hold part of the question's words ranks above a short chunk
that mentions them all once; the function's other chunks keep their own scores, and
a chunk in no definition is ranked by BM25 alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hostd.chunking import tokenize
from providers import CorpusOptions
from providers._corpus import Chunk
from providers.files import FileIndex
from providers.files._together import definition_runs

QUESTION = "how are ledger totals kept"


def _long_function() -> str:
    """One function over many chunks: ``ledger`` three times near its start, ``totals``
    three times near its end, filler between."""
    body = [
        "def build_report(rows):",
        "    ledger = open_ledger(rows)  # the ledger of every row",
        "    ledger.check()  # ledger first",
    ]
    body += [f"    step_{i} = compute_{i}(rows, {i})" for i in range(60)]
    body += [
        "    totals = sum_totals(rows)  # the totals of every row",
        "    return totals.merged()  # totals last",
        "",
    ]
    return "\n".join(body)


def _tree(root: Path) -> Path:
    (root / "report.py").write_text(_long_function())
    # A short note that mentions both words once: BM25 alone ranks it above either
    # chunk of the function.
    (root / "notes.py").write_text(
        "# ledger totals\n" + "".join(f"NOTE_{i} = {i}\n" for i in range(6))
    )
    return root


def _index(root: Path) -> FileIndex:
    ix = FileIndex(CorpusOptions(root=root), refresh_interval_s=0.0, refresh_wait_s=60)
    ix.refresh(force=True)
    return ix


def test_a_long_functions_best_chunk_ranks_for_the_whole_function(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    chunks = ix._served.chunks
    report = [c for c in chunks if c.rel == "report.py"]
    assert len(report) > 2
    # Its first chunk sits at top level, the rest inside it: one run all the same.
    assert [c.item for c in report[:2]] == [None, "def build_report"]
    assert len(set(definition_runs(chunks)[[chunks.index(c) for c in report]].tolist())) == 1
    bm25 = ix._served.bm25
    assert bm25 is not None
    alone = np.asarray(bm25.get_scores(tokenize(QUESTION)))
    by_id = {c.chunk_id: float(s) for c, s in zip(chunks, alone, strict=True)}
    # BM25 alone: the note first.
    assert max(chunks, key=lambda c: by_id[c.chunk_id]).rel == "notes.py"

    hits = ix.search(QUESTION)
    assert hits[0].chunk.rel == "report.py"
    assert hits[0].raw > by_id[hits[0].chunk.chunk_id]
    # One chunk of the function raised; the rest, and the note, score as BM25 does.
    assert all(h.raw == by_id[h.chunk.chunk_id] for h in hits[1:])
    assert ix.search(QUESTION) == hits


def _chunk(rel: str, start: int, end: int, item: str | None) -> Chunk:
    return Chunk(
        rel, Path(rel), start, end, "x\n" * (end - start + 1), "", None, "snippet", item=item
    )


def test_a_definitions_chunks_are_one_run_headed_by_the_chunk_it_starts_in() -> None:
    chunks = [
        _chunk("a.py", 1, 9, None),  # imports, then ``class A:`` starts
        _chunk("a.py", 10, 19, "class A"),  # ``def f`` starts in its last lines
        _chunk("a.py", 20, 29, "class A › def f"),
        _chunk("a.py", 30, 39, "class A › def f"),
        _chunk("a.py", 40, 49, "class A › def g"),  # g started inside f's last chunk
        _chunk("a.py", 50, 59, None),  # top-level code again
        _chunk("a.py", 60, 69, "def h"),
        _chunk("b.py", 1, 9, "def h"),  # another file: another run
        _chunk("b.py", 20, 29, "def h"),  # lines 10-19 held no chunk: another run
    ]
    runs = definition_runs(chunks).tolist()
    # ``class A``'s run lost its one chunk to ``def f``, which starts in it.
    assert runs[1:4] == [runs[1]] * 3
    assert runs[0] != runs[1]
    # A sibling's item is not one level inside: g's run starts at its own chunk.
    assert runs[4] not in (-1, runs[3])
    # The top-level chunk ``def h`` starts in heads its run.
    assert runs[5] == runs[6] != -1
    assert len({runs[4], runs[6], runs[7], runs[8]}) == 4
