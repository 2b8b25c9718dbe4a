"""A query's ``anchors`` (CGP §query: "anchors bias relevance") as the chunks they name.

Shared by the ``files`` and ``semantic`` providers. An agent names the files it works
on three ways, and each is read: a ``file://`` URI (what a frame's ``uri`` is, a
fragment such as ``#L10-20`` dropped), an absolute path, or a path relative to the
provider's root. Each is matched against a chunk's file (its frame ``uri`` less any
fragment), so an anchor is the G4 predicate at zero hops, read by file.

An anchor that names a directory anchors every file under it: an agent that says it
works in ``src/net/`` is better served by that folder's code than by a lookalike
elsewhere, and no file's URI could equal a directory's. The root itself anchors
nothing (anchoring every file is anchoring none). An anchor that names nothing
indexed (a symbol name, another scheme's URI, a path outside the root, a file left
out) is ignored, never an error: anchors are hints, and an agent's list is not
checked against the tree it cannot see.

Anchors come from the client (any number, up to 4,096 characters each): only the first
``MAX_ANCHORS`` are read, each normalised once per query, and none is ever quoted back.

The ranking rule (``anchor_ranked``): among the chunks that match the query, anchored
ones come first; a file an anchor names itself (not by its directory) none of whose
chunks matches still offers its best chunk (its first on a tie), after the anchored
matches, so the agent sees the file it named. These providers declare no graph
capability, so G4's MUST does not bind them; they honour its SHOULD and its spirit. A
directory's unmatched files offer nothing: a folder of a thousand files would fill the
answer with chunks that match nothing. Scores follow the order (``banded``), since a
host ranks by them (F10: ordinal, this provider's own).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from hostd.chunking import Chunk

__all__ = ["MAX_ANCHORS", "Anchored", "FileSpans", "anchor_paths", "anchor_ranked", "banded"]

#: Anchors read per query, the first in the order given; the rest are ignored. An agent
#: names the few files it has open; 64 bounds the work (each is normalised, and may be
#: resolved on disk) whatever a client sends.
MAX_ANCHORS = 64

#: The highest score an unanchored chunk gets once anchors apply: frames carry six
#: decimals (``chunk_frame``), so the largest below the anchored band's floor of 0.5.
_BELOW_HALF = 0.499999


def _relative(path: str, root: Path) -> str | None:
    """``path`` (absolute) as a POSIX path under ``root``, or ``None`` outside it. The
    root is resolved (``Corpus``); the path is tried as written, then resolved, so an
    agent's path through a symbolic link to the project still names its files."""
    lexical = Path(os.path.normpath(path))
    if lexical.is_relative_to(root):
        return lexical.relative_to(root).as_posix()
    try:
        resolved = lexical.resolve()
    except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL in the path
        return None
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else None


def _anchor_path(anchor: str, root: Path) -> str | None:
    """One anchor as a path relative to ``root`` (``""``: the root), or ``None`` when
    it names no place under it."""
    if anchor[:5].lower() == "file:":
        parts = urlsplit(anchor)
        if parts.netloc not in ("", "localhost"):
            return None  # another machine's file
        path = unquote(parts.path)
        return _relative(path, root) if path.startswith("/") else None
    if anchor.startswith("/"):
        return _relative(anchor, root)
    if "://" in anchor:
        return None  # a URI of another scheme names no file here
    rel = os.path.normpath(anchor)
    if rel == ".." or rel.startswith(("../", "/")):
        return None
    return "" if rel == "." else rel


def anchor_paths(anchors: Sequence[str], root: Path) -> list[str]:
    """The paths under ``root`` (relative, POSIX) the first ``MAX_ANCHORS`` anchors name,
    each once, in the order given; the root itself and what is outside it left out."""
    found: dict[str, None] = {}
    for anchor in anchors[:MAX_ANCHORS]:
        rel = _anchor_path(anchor.strip(), root)
        if rel:
            found[rel] = None
    return list(found)


@dataclass(slots=True, frozen=True)
class Anchored:
    """The chunk positions a query's anchors name: ``chunks`` all of them (a file's or a
    directory's); ``files`` those of each file an anchor names itself, one tuple a file."""

    chunks: frozenset[int]
    files: tuple[tuple[int, ...], ...]


class FileSpans:
    """An index's files, sorted, and each one's chunk positions: what anchors are
    matched against. Built once per rebuild, so a query's anchors cost a lookup each
    and a directory's a bisection, not a pass over every chunk."""

    __slots__ = ("_at", "_rels")

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        at: dict[str, list[int]] = {}
        for i, chunk in enumerate(chunks):
            at.setdefault(chunk.rel, []).append(i)
        self._at = {rel: tuple(positions) for rel, positions in at.items()}
        self._rels = sorted(at)

    def anchored(self, paths: Sequence[str]) -> Anchored:
        """What ``paths`` (``anchor_paths``) name: a file's chunks, or every chunk of
        the files under a directory (the files under one prefix sort together)."""
        chunks: set[int] = set()
        files: list[tuple[int, ...]] = []
        for rel in paths:
            own = self._at.get(rel)
            if own is not None:
                chunks.update(own)
                files.append(own)
                continue
            prefix = rel + "/"
            k = bisect.bisect_left(self._rels, prefix)
            while k < len(self._rels) and self._rels[k].startswith(prefix):
                chunks.update(self._at[self._rels[k]])
                k += 1
        return Anchored(frozenset(chunks), tuple(files))


def anchor_ranked(
    matched: Sequence[int],
    relevance: Sequence[float],
    chunks: Sequence[Chunk],
    anchored: Anchored,
) -> list[int]:
    """Chunk positions best first: ``matched`` (those that match the query) anchored
    first, then the best chunk of each named file none of whose chunks matched, then
    the rest; within each, by ``relevance`` (every chunk's, higher better) descending,
    ties by chunk id as without anchors. A named file's best chunk is its first on a
    tie (all zero: nothing in it matched a word)."""
    hits = set(matched)
    picked = list(matched)
    for own in anchored.files:
        if hits.isdisjoint(own):
            picked.append(max(own, key=lambda i: (relevance[i], -chunks[i].start)))
    # An unmatched named file's chunk ranks below every anchored match: its relevance
    # is below the match threshold, so the key alone places it.
    picked.sort(key=lambda i: (i not in anchored.chunks, -relevance[i], chunks[i].chunk_id))
    return picked


def banded(score: float, anchored: bool) -> float:
    """A chunk's score once anchors apply: ``(1 + s) / 2`` anchored, ``s / 2`` (below
    0.5) not, so a host that ranks by score (F10) keeps anchored chunks first and each
    band in its old order. ``s`` is the score it gets without anchors, clamped to
    ``[0, 1]`` (F1)."""
    s = min(max(score, 0.0), 1.0)
    return (1.0 + s) / 2 if anchored else min(s / 2, _BELOW_HALF)
