"""The same text served by two providers, one of them without a place: one piece of evidence.

A ``file`` frame is a place (a ``uri`` and a ``range``): the same bytes served twice
share a digest, the same region is one by its ``uri`` and ``range``, and overlapping
regions are span merging's. A text served without one (an MCP tool's answer, such as
a ``read_text_file`` of ``docs/runbook.md``) is cut by its content alone. A piece
whose lines are a ``files`` chunk's has its bytes and digest (both end at their last
line of text), and dedup merges the two as any; but its cuts need not be the chunk's
(its title, a tool's name, takes other room than the file's path, and a tool may
return part of a file or add a line of its own), so the same lines arrive as pieces
of one ``files`` chunk, as a piece that holds a chunk's lines and more, or with other
line endings under another digest, and no digest ties them. Two rules do, only
between frames of *different providers*, *one with* ``file`` *provenance and one
without*: the placeless text is then that file's lines, and what stands for both
carries the place. Two texts without a place prove nothing of each other (two
answers may share a line such as ``}`` or ``No results``), and two places are
compared by their ranges:

- **equal text** (``text_links``): frames whose ``normal_text`` is equal are the same
  evidence (D2): dedup groups them with the others, the best survives and carries
  the group's provenance (the ``file`` entry among it, which makes it verifiable);
- **contained text** (``Quotes``): a frame whose whole text, in whole lines, lies
  inside a block the packer admitted is redundant (``contained_in``). The walk skips
  it when the block that quotes it came first; a block it admitted first and a later
  one quotes is left out of the prompt (``folds``), its fence left unspent as a
  coalesced member's is.

``normal_text`` changes nothing that carries meaning: line endings, whitespace at
the end of a line and blank lines before and after the text. Indentation and every
character inside a line stay. Equal text is found by a hash map (linear); contained
text only against what the packer admitted (bounded by the budget), and only for the
pairs above: a composition of one provider, or of ``file`` frames only (or of
none), compares nothing and composes as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import compress

__all__ = ["Quotes", "normal_text", "text_links"]

#: Whitespace at the end of a line (before its newline, or the text's end).
_TRAILING = re.compile(r"[ \t\f\v]+$", re.MULTILINE)


def normal_text(text: str) -> str:
    """``text`` with ``\\n`` line endings, no whitespace at a line's end and no blank
    line before or after it: what two providers serving the same lines agree on."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Most texts have no whitespace before a newline: four C searches spare the regex.
    if " \n" in text or "\t\n" in text or "\f" in text or "\v" in text:
        text = _TRAILING.sub("", text)
    return text.lstrip("\n").rstrip(" \t\f\v\n")


#: Providers offer the same frames turn after turn (the leg audit's memo hands back the
#: same content strings), and dedup's ``text_links`` and the packing walk's ``Quotes``
#: both normalise them: a text's normal form is remembered, one lookup on a hit (a
#: string's hash is kept in it). Bounded: the last 1,024 texts of at most 4,096
#: characters (a longer one is normalised each time, never kept).
_NORMAL_KEPT = 1024
_NORMAL_CHARS = 4096
_remembered_normal = lru_cache(maxsize=_NORMAL_KEPT)(normal_text)


def _normal(text: str) -> str:
    """``normal_text``, remembered for a text of at most ``_NORMAL_CHARS`` characters."""
    return _remembered_normal(text) if len(text) <= _NORMAL_CHARS else normal_text(text)


def text_links(
    contents: Sequence[str | None], pids: Sequence[str], placeless: Sequence[bool]
) -> list[tuple[int, int]]:
    """Links between frames of equal ``normal_text`` that make a pair (two providers,
    one frame with ``file`` provenance and one without), closed as dedup closes them.

    Found by a hash map of the texts. Within a group of equal text, members of one
    provider that are alike (both placed, or both not) have the same partners, so
    each such bucket is linked to its first member and buckets to one another by
    their first members: a handful of buckets, never a scan of member pairs.
    """
    groups: dict[str, list[int]] = {}
    for i in compress(range(len(contents)), map(bool, contents)):
        text = _normal(contents[i])  # type: ignore[arg-type]  # compress kept only str
        if text:  # nothing but whitespace is no evidence to join by
            groups.setdefault(text, []).append(i)
    links: list[tuple[int, int]] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        buckets: dict[tuple[str, bool], list[int]] = {}
        for i in members:
            buckets.setdefault((pids[i], placeless[i]), []).append(i)
        partnered: set[tuple[str, bool]] = set()
        for a in buckets:
            for b in buckets:
                if not a[1] and b[1] and a[0] != b[0]:
                    links.append((buckets[a][0], buckets[b][0]))
                    partnered.update((a, b))
        for bucket in partnered:
            first, *rest = buckets[bucket]
            links.extend((i, first) for i in rest)
    return links


class Quotes:
    """Which admitted block already quotes a candidate's text, for the pairs the rule
    compares (see the module's docstring). Texts are normalised when first compared.

    The packing walk tells it each block it admits (``admit``) and asks, for each
    candidate it reaches, which admitted block holds that candidate's text
    (``container``). Most texts are in no block: the texts admitted on each side
    (placed, placeless) are kept joined, so that one search of the other side's
    tells, and the blocks are walked one by one only when it finds the text."""

    __slots__ = ("_admitted", "_contents", "_joined", "_pids", "_placeless", "_sides", "_texts")

    def __init__(
        self, pids: Sequence[str], contents: Sequence[str | None], placeless: Sequence[bool]
    ) -> None:
        self._pids = pids
        self._contents = contents
        self._placeless = placeless
        self._texts: dict[int, str | None] = {}
        #: The candidates admitted so far, in admission order.
        self._admitted: list[int] = []
        #: Per side (placeless or not): the texts of the blocks admitted on it, and
        #: (once searched) those texts joined.
        self._sides: dict[bool, list[str]] = {False: [], True: []}
        self._joined: dict[bool, str] = {}

    @classmethod
    def of(
        cls, pids: Sequence[str], contents: Sequence[str | None], placeless: Sequence[bool]
    ) -> Quotes | None:
        """None when no pair could ever be compared: one provider, or every frame a
        ``file`` frame, or none."""
        if all(placeless) or not any(placeless) or len(set(pids)) < 2:
            return None
        return cls(pids, contents, placeless)

    def _text(self, i: int) -> str | None:
        """Candidate ``i``'s normal text between newlines, so that ``in`` finds whole
        lines only (``retry = 3`` is not inside ``max_retry = 3``); None without text."""
        if i not in self._texts:
            content = self._contents[i]
            text = _normal(content) if content else ""
            self._texts[i] = f"\n{text}\n" if text else None
        return self._texts[i]

    def _inside(self, i: int, j: int) -> bool:
        """Whether ``i``'s whole text lies in ``j``'s (both candidates of a pair)."""
        inner = self._text(i)
        if inner is None:
            return False
        outer = self._text(j)
        return outer is not None and len(inner) <= len(outer) and inner in outer

    @staticmethod
    def _in_any(inner: str, texts: list[str], joined: dict[bool, str], side: bool) -> bool:
        """Whether ``inner`` may lie in one of ``texts`` (the blocks of ``side``): False
        is sure (a text inside one block is inside them joined), True is to be checked
        block by block (a match may straddle two)."""
        if not texts:
            return False
        whole = joined.get(side)
        if whole is None:
            whole = joined[side] = "\x00".join(texts)
        return inner in whole

    def admit(self, k: int) -> None:
        """The walk admitted candidate ``k``'s block (the next admission index)."""
        self._admitted.append(k)
        text = self._text(k)
        if text is not None:
            side = bool(self._placeless[k])
            self._sides[side].append(text)
            self._joined.pop(side, None)

    def container(self, i: int) -> int | None:
        """The first admitted block (in admission order) whose text holds candidate
        ``i``'s, as its admission index; None when none does."""
        pids, placeless = self._pids, self._placeless
        pid, side = pids[i], placeless[i]
        other = not side
        if not self._sides[other]:  # nothing admitted that ``i`` could be inside
            return None
        inner = self._text(i)
        if inner is None or not self._in_any(inner, self._sides[other], self._joined, other):
            return None
        for j, k in enumerate(self._admitted):
            if placeless[k] == side or pids[k] == pid:
                continue
            outer = self._text(k)
            if outer is not None and len(inner) <= len(outer) and inner in outer:
                return j
        return None

    def folds(self, admitted: Sequence[int]) -> dict[int, int]:
        """Admitted blocks a later one quotes: admission index -> the first later
        admission whose text holds it (the walk skipped any frame an earlier one held)."""
        out: dict[int, int] = {}
        pids, placeless = self._pids, self._placeless
        sides: dict[bool, list[str]] = {False: [], True: []}
        for k in admitted:
            text = self._text(k)
            if text is not None:
                sides[bool(placeless[k])].append(text)
        joined: dict[bool, str] = {}
        for j in range(len(admitted) - 1):
            inner_i = admitted[j]
            pid, side = pids[inner_i], placeless[inner_i]
            inner = self._text(inner_i)
            if inner is None or not self._in_any(inner, sides[not side], joined, not side):
                continue  # inside no block of the other side: no later one holds it
            for k in range(j + 1, len(admitted)):
                outer_i = admitted[k]
                if placeless[outer_i] == side or pids[outer_i] == pid:
                    continue
                if self._inside(inner_i, outer_i):
                    out[j] = k
                    break
        return out
