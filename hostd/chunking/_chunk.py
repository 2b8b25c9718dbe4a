"""How a text becomes chunks: runs of whole lines sized by the embedding model's count.

Shared by the ``files`` and ``semantic`` providers, so both serve exactly the
same regions of a file (one uri and range, one digest) and cross-provider
dedup (D2) merges them instead of quoting a region twice, and by the ``mcp``
binding, which cuts what an MCP server serves (resources, tool results) the same
way (``chunk_text``; a ``file://`` resource exactly as ``chunk_file`` cuts the
file). A chunk is a run of whole lines (markdown is first cut at its headings,
fenced code is not a heading, and reStructuredText at its section titles, ``_rst``;
other text may be cut at its blank lines first,
``sections="paragraphs"``, or into its records, ``sections="records"``: the elements
of JSON over several lines, ``_json_records``, else see ``_record_sections``) that

- fits what the model reads well: its embedding input (title line plus text)
  takes at most ``max_tokens`` word pieces by the model tokenizer's count
  (``_tokens``). The default is the length the model was trained at (128),
  not its window (256): one embedding then stands for a passage the size the
  model learned to summarise, and a chunk is a small part of a typical prompt
  budget, so a composition can quote several providers' best passages side by
  side. A caller that embeds the chunks (``semantic``) may raise ``max_tokens``
  to the window and no further, so nothing is cut off when a chunk is embedded;
  one that does not (``files``) sets a bound of its own. A single line longer
  than ``max_tokens`` is a chunk of its own (a line of a file is never split:
  its range addresses whole lines), or, with ``split_long_lines`` (text that is
  no file), cut into parts that fit (``_line_parts``);
- holds at most ``window_lines`` lines, preferring to end, in code of a language
  ``code_items`` knows, just before a definition (``def``, ``class``, ``fn``,
  ``impl``, ``func``…, at any nesting; its decorators and the comments right above
  it go with it: ``CodeOutline.starts``) in the last half of what fits, else at a
  blank line, so a chunk of code starts at a definition's head rather than in the
  middle of a statement, and a function that fits in one chunk is one chunk
  (reStructuredText's object directives are its definitions: ``.. confval::``);
- is not a tiny fragment: one under ``min_tokens`` word pieces is merged with
  its neighbour when the two still fit both bounds, so the tail of a budget is
  not filled with headings and closing braces; but the small tail of one
  definition is not glued to the head of the next (``_merge_small``).

A chunk's text is exactly the bytes ``address_line_range(file, "L<a>-<b>")``
returns, so its provenance digest is checkable against the file (F5, F17); a part
of a long line is the one exception: its range is its line's, its digest its own.

A code chunk names the definitions it starts in (``_items``: ``impl Foo › fn build``)
in its frame's title, as a markdown chunk names its heading; nothing that keys, cites
or embeds it reads that (``Chunk.index_title``). The scan that names them also finds
where definitions start, which is where code is preferably cut.
"""

from __future__ import annotations

import bisect
import collections
import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from hostd.protocol import ContextFrame, Provenance, canonical_token_cost, sha256_digest

from ._items import CodeOutline, code_outline, language_suffix
from ._json_records import json_records
from ._notebook import NOTEBOOK_SUFFIX, Cell, cells_text, read_notebook
from ._rst import RST_SUFFIXES, rst_sections
from ._tokens import MODEL_TRAINED_LENGTH, Counter, piece_counter

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_MIN_CHUNK_TOKENS",
    "DEFAULT_WINDOW_LINES",
    "DOC_SUFFIXES",
    "Chunk",
    "Sections",
    "TextChunk",
    "chunk_file",
    "chunk_frame",
    "chunk_notebook",
    "chunk_text",
    "file_sections",
    "is_binary",
    "parse_chunk_id",
    "split_lines",
    "with_item",
]

DEFAULT_WINDOW_LINES = 40
#: Word pieces a chunk's embedding input may take by default: the model's trained length.
DEFAULT_CHUNK_TOKENS = MODEL_TRAINED_LENGTH
#: A chunk under this many word pieces is merged with a neighbour when they fit.
DEFAULT_MIN_CHUNK_TOKENS = 48
#: Prose files: served as ``doc`` frames and chunked by heading when markdown or
#: reStructuredText.
DOC_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".rest", ".txt", ".adoc"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
_HEADING_RE = re.compile(rb"#{1,6}[ \t]+\S")
_FENCE_RE = re.compile(rb"(```|~~~)")
_BINARY_SNIFF_BYTES = 8192
#: ``[CLS]`` and ``[SEP]``: the model spends two pieces of its window on them.
_SPECIAL_PIECES = 2
#: How a text is cut before its runs are sized: not at all, at markdown headings, at
#: reStructuredText's section titles (``rst_sections``), at blank lines (paragraphs of
#: prose), or into records (``git log`` entries, numbered items: ``_record_sections``),
#: at its blank lines when it has none.
Sections = Literal["none", "markdown", "rst", "paragraphs", "records"]
#: Record headers: unindented lines of a few recognisable shapes, one kind each (a
#: rule, a markdown heading, a numbered item, a JSON object, ``commit <hex>``, else
#: ``Key:``, one kind per key); and fence lines, inside which nothing is a header.
#: Matched at a line's start (``$``: before its newline).
_HEADER_RE = re.compile(
    rb"(?:[ \t]*(?P<fence>```|~~~)"
    rb"|(?P<rule>-{3,}|={3,}|\*{3,}|_{3,})[ \t\r]*$"
    rb"|(?P<heading>#{1,6}[ \t]+\S)"
    rb"|(?P<numbered>(?:[0-9]{1,4}[.)]|\[[0-9]{1,4}\])(?:[ \t]|\r?$))"
    rb"|(?P<json>\{[^\n]*\})[ \t\r]*$"
    rb"|(?P<commit>commit [0-9a-f]{7,64}\b)"
    rb"|(?P<key>[A-Za-z][A-Za-z0-9_-]{0,31}):(?:[ \t]|\r?$))"
)
_KINDS = {"rule": b"---", "heading": b"#", "numbered": b"1.", "json": b"{}", "commit": b"commit"}
_NUMBER_MARK_RE = re.compile(r"(?:[0-9]{1,4}[.)]|\[[0-9]{1,4}\])\s*")
#: A record's heading (its header line) is cut to this many characters: it is counted
#: in the room of every piece of the record, and it is a label, not evidence.
_MAX_RECORD_HEADING = 80
#: A parent heading before a repeated one (``3. Inventory › Checklist``) is cut to this
#: many characters, so the heading it tells apart keeps most of the record's bound.
_MAX_PARENT = 32
#: A word with the whitespace after it (a line's indent is a segment of its own): where
#: a long line may be cut. Neither count joins pieces across whitespace, so a part's
#: word pieces are the sum of its words'.
_WORD_RE = re.compile(r"\S+\s*|\s+")
#: A word that ends a sentence (a closing quote or bracket may follow).
_SENTENCE_END_RE = re.compile(r"[.!?][\"')\]]*\s+\Z")
#: Just after a punctuation character: where a word too long for a part is cut.
_AFTER_PUNCTUATION_RE = re.compile(r"(?<=[^\w\s])")
#: Just after one JSON value of an array or object ends (``},`` or ``],``): where a
#: line of JSON may be cut, so a part holds whole records.
_AFTER_JSON_VALUE_RE = re.compile(r"(?<=[}\]],)")
#: A segment that ends one JSON value of a list (whitespace may follow).
_JSON_VALUE_END_RE = re.compile(r"[}\]],\s*\Z")


@dataclass(slots=True, frozen=True)
class TextChunk:
    """A run of whole lines ``start..end`` (1-indexed, inclusive) of one text."""

    start: int
    end: int
    #: Exactly the addressed bytes, decoded (UTF-8, nothing normalised); for a part of
    #: a long line (``split_long_lines``), exactly that part, the line's range its own.
    text: str
    digest: str  # sha256 of exactly ``text``'s bytes (F5, F17)
    heading: str | None
    #: ``sections="records"``: which record (from 0) this chunk is or is a part of;
    #: ``None`` for the lines before the first record, and for any other cut.
    record: int | None = None
    #: The code definitions its first line of text sits in (``code_items``), when the
    #: text is code of a language named by ``code_suffix``.
    item: str | None = None

    @property
    def range(self) -> str:
        return f"L{self.start}-{self.end}"


@dataclass(slots=True, frozen=True)
class Chunk:
    """A run of whole lines ``start..end`` (1-indexed, inclusive) of one file."""

    rel: str  # POSIX path relative to the corpus root
    path: Path  # absolute
    start: int
    end: int
    #: Exactly the addressed bytes, decoded (UTF-8, nothing normalised); a notebook
    #: cell's chunk: the cell's text those lines hold (``chunk_notebook``).
    text: str
    digest: str  # sha256 of exactly ``text``'s bytes (F5, F17)
    heading: str | None
    kind: str  # "doc" or "snippet"
    #: Where a reader finds it when its lines do not say (a notebook cell's chunk:
    #: ``cell 4 (python)``); ``None``: its range does.
    place: str | None = None
    #: The sha256 of the addressed bytes when ``text`` is not them (a notebook cell's
    #: chunk quotes the cell, not its JSON): its provenance digest (F5); ``None``:
    #: ``digest`` is.
    source_digest: str | None = None
    #: The code definitions its first line of text sits in (``impl Foo › fn build``,
    #: ``code_items``), as a markdown chunk has its heading; ``None`` at top level and
    #: in any file that is no code of a language ``code_items`` knows.
    item: str | None = None

    @property
    def range(self) -> str:
        return f"L{self.start}-{self.end}"

    @property
    def chunk_id(self) -> str:
        """Stable across restarts, so a verify needs no index: ``<rel>#L<a>-<b>``."""
        return f"{self.rel}#{self.range}"

    @property
    def uri(self) -> str:
        return self.path.as_uri()

    @property
    def citation_label(self) -> str:
        return f"{self.rel} {self.place or self.range}"

    @property
    def title(self) -> str:
        """What a reader sees it called: ``index_title``, then the item it sits in
        (``src/lib.rs L40-52 · in impl Foo › fn build``)."""
        return with_item(self.index_title, self.item)

    @property
    def index_title(self) -> str:
        """The title line of its embedding input, and the title its size was counted
        with: without its item, which says where it is, not what it says, so the
        vectors cached before items were shown still serve (an embedding of a whole tree
        takes hours on a small machine)."""
        return _title(self.rel, self.heading, self.place or self.range)


def _title(rel: str, heading: str | None, where: str) -> str:
    return f"{rel} § {heading}" if heading else f"{rel} {where}"


def with_item(title: str, item: str | None) -> str:
    """A code chunk's title with the item it sits in, as a reader sees it."""
    return f"{title} · in {item}" if item else title


def chunk_frame(chunk: Chunk, score: float, recorded_at: str | None = None) -> ContextFrame:
    """A full frame of one chunk: its inline bytes are exactly the addressed bytes (F5, F17)."""
    return ContextFrame(
        id=chunk.chunk_id,
        kind=chunk.kind,
        title=chunk.title,
        content=chunk.text,
        content_digest=chunk.digest,
        uri=chunk.uri,
        score=round(min(max(score, 0.0), 1.0), 6),  # F1
        token_cost=canonical_token_cost(chunk.text),  # B3
        recorded_at=recorded_at,
        provenance=[
            Provenance(
                type="file",
                uri=chunk.uri,
                range=chunk.range,
                digest=chunk.source_digest or chunk.digest,
            )
        ],
        citation_label=chunk.citation_label,  # F3
    )


def parse_chunk_id(chunk_id: str) -> tuple[str, str] | None:
    """``(rel, range)`` of a chunk id, or ``None`` when it is not one of ours."""
    rel, sep, range_ = chunk_id.rpartition("#")
    if not sep or not rel or not range_.startswith("L"):
        return None
    return rel, range_


def split_lines(data: bytes) -> list[bytes]:
    """Lines as F17 counts them: split on LF only, each keeps its LF, CR is content."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # a final unterminated line runs to EOF
    return lines


def _markdown_sections(lines: Sequence[bytes]) -> list[tuple[int, int, str | None]]:
    """``(start, end, heading)`` per section, 1-indexed inclusive; fenced code is not a heading."""
    sections: list[tuple[int, int, str | None]] = []
    start, heading, fence = 1, None, None
    for i, line in enumerate(lines, start=1):
        stripped = line.lstrip()
        m = _FENCE_RE.match(stripped)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence is None and _HEADING_RE.match(line):
            if i > start:
                sections.append((start, i - 1, heading))
                start = i
            heading = line.decode("utf-8", "replace").strip().lstrip("#").strip()
    if lines:
        sections.append((start, len(lines), heading))
    return sections


def _paragraph_sections(lines: Sequence[bytes]) -> list[tuple[int, int, str | None]]:
    """``(start, end, None)`` per paragraph: a new one starts at a non-blank line after a
    blank one; blank lines stay with the paragraph before them, so no line is lost."""
    sections: list[tuple[int, int, str | None]] = []
    start, blank_before = 1, False
    for i, line in enumerate(lines, start=1):
        blank = not line.strip()
        if not blank and blank_before and i > start:
            sections.append((start, i - 1, None))
            start = i
        blank_before = blank
    if lines:
        sections.append((start, len(lines), None))
    return sections


def _header_kinds(lines: Sequence[bytes]) -> dict[int, bytes]:
    """The record header lines of a text, ``{line index (from 0): kind}``; lines in
    fenced code are none."""
    kinds: dict[int, bytes] = {}
    fence: bytes | None = None
    # One match per line, mapped in C: most lines are none and cost no Python step.
    for i, m in enumerate(map(_HEADER_RE.match, lines)):
        if m is None:
            continue
        what = m.lastgroup
        if what == "fence":
            tick = m.group("fence")
            fence = None if fence == tick else (fence or tick)
        elif fence is None and what is not None:
            kinds[i] = m.group("key") + b":" if what == "key" else _KINDS[what]
    return kinds


def _record_heading(lines: Sequence[bytes], start: int, end: int, kind: bytes) -> str | None:
    """What a record is called: its header line, without a heading's ``#`` or an item's
    number (both say where it is, not what); after a rule, the first line of text."""
    for i in range(start, end + 1):
        text = lines[i - 1].decode("utf-8", "replace").strip()
        if not text or (kind == b"---" and i == start):
            continue
        if kind == b"#":
            text = text.lstrip("#").strip()
        elif kind == b"1.":
            text = _NUMBER_MARK_RE.sub("", text, count=1) or text
        return text[:_MAX_RECORD_HEADING]
    return None


def _record_sections(
    lines: Sequence[bytes],
) -> list[tuple[int, int, str | None, int | None]] | None:
    """``(start, end, heading, record)`` per record, after the lines before the first one
    (cut at their blank lines, ``record`` None); ``None`` when the text has no records.

    A header (``_HEADER_RE``; lines in fenced code are none) *opens a block* when it is
    the text's first line, follows a blank line, or follows a header of its own kind (a
    run of one-line records, as JSON lines are); a markdown heading opens one wherever
    it is, as markdown reads it (no blank line needed before it). A kind *recurs* when it starts two
    records or more: the lines of it that open a block, and its first line wherever it
    is (after a caption such as ``Commit history:``). The record header is the
    recurring kind whose first line comes first (the outer structure: ``Commit:``
    before the ``Signed-off-by:`` trailers of each message). A record runs from one of
    its header lines to the next; blank lines inside it (a message's paragraphs) stay.
    A text that opens with a ``commit <hex>`` line and has no recurring kind is one
    record (``git show``: the header, the message and its diff belong together).
    """
    kinds = _header_kinds(lines)
    opens = {
        i: i == 0
        or kind == _KINDS["heading"]
        or not lines[i - 1].strip()
        or kinds.get(i - 1) == kind
        for i, kind in kinds.items()
    }
    first: dict[bytes, int] = {}
    records: dict[bytes, int] = {}
    for i, kind in kinds.items():  # in text order
        if kind not in first:
            first[kind] = i
            records[kind] = 1
        elif opens[i]:
            records[kind] += 1
    recurring = [k for k, n in records.items() if n >= 2]
    if not recurring:
        if kinds.get(0) == _KINDS["commit"]:  # one commit (``git show``): one record
            return [(1, len(lines), _record_heading(lines, 1, len(lines), b"commit"), 0)]
        return None
    chosen = min(recurring, key=first.__getitem__)
    starts = [i + 1 for i, k in kinds.items() if k == chosen and (opens[i] or i == first[chosen])]
    sections: list[tuple[int, int, str | None, int | None]] = []
    if starts[0] > 1:
        preamble = _paragraph_sections(lines[: starts[0] - 1])
        sections.extend((a, b, None, None) for a, b, _ in preamble)
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    if chosen == _KINDS["heading"]:
        named = _heading_records(lines, starts, ends)
    else:
        named = [
            (a, b, _record_heading(lines, a, b, chosen)) for a, b in zip(starts, ends, strict=True)
        ]
    sections.extend((a, b, heading, n) for n, (a, b, heading) in enumerate(named))
    return sections


def _heading_records(
    lines: Sequence[bytes], starts: Sequence[int], ends: Sequence[int]
) -> list[tuple[int, int, str | None]]:
    """Markdown sections as records ``(start, end, heading)``.

    A section that is its heading alone (a title right before its first sub-heading)
    is no evidence of its own: it opens the section after it, or is left out when
    none follows (a text of headings alone is one record, a list of contents). A
    heading that names two sections or more (``Checklist`` under each
    of five parts) carries its parent heading, the nearest one of a higher level
    before it (``3. Inventory › Checklist``), so a citation tells them apart; where
    that still repeats, the label's ``(k/n)`` does."""
    named: list[tuple[str, str | None]] = []  # (heading, parent) per section
    stack: list[tuple[int, str]] = []  # enclosing (level, heading), levels rising
    for a in starts:
        title = lines[a - 1].decode("utf-8", "replace").strip()
        level = len(title) - len(title.lstrip("#"))
        heading = title.lstrip("#").strip()[:_MAX_RECORD_HEADING]
        while stack and stack[-1][0] >= level:
            stack.pop()
        named.append((heading, stack[-1][1] if stack else None))
        stack.append((level, heading))
    repeated = collections.Counter(heading for heading, _ in named)
    out: list[tuple[int, int, str | None]] = []
    opened: int | None = None  # where the heading-only sections before this one start
    for a, b, (heading, parent) in zip(starts, ends, named, strict=True):
        if not any(line.strip() for line in lines[a:b]):
            opened = a if opened is None else opened
            continue
        if repeated[heading] > 1 and parent is not None:
            parent = _clipped(parent, _MAX_PARENT)
            heading = f"{parent} › {_clipped(heading, _MAX_RECORD_HEADING - len(parent) - 3)}"
        out.append((a if opened is None else opened, b, heading))
        opened = None
    return out or [(starts[0], ends[-1], named[0][0])]


def _clipped(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


@dataclass(slots=True, frozen=True)
class _Span:
    start: int
    end: int
    heading: str | None
    pieces: int  # word pieces of the text
    room: int  # word pieces the text may take beside this span's title
    record: int | None = None  # which record it is part of: spans never merge across


def _windows(
    start: int,
    end: int,
    lines: Sequence[bytes],
    pieces: Sequence[int],
    size: int,
    room: int,
    definitions: Sequence[int] = (),
    outline: CodeOutline | None = None,
    whole: int = 0,
) -> Iterator[tuple[int, int, int]]:
    """``start..end`` cut into ``(a, b, pieces)`` runs of at most ``size`` lines and ``room``
    pieces (a longer single line stands alone). A run that cannot hold the rest ends
    just before the last of ``definitions`` (ascending lines where a definition of code
    starts, ``CodeOutline.starts``) in its last half, else at a blank line in its last
    quarter, else where it is full.

    A definition of ``outline`` that it would cut and that fits ``whole`` pieces (more
    than ``room``) and ``size`` lines is not cut (``_whole_definition``): the run before
    it ends just before it, and it is a run of its own, its doc comment and attributes
    included. A run that starts inside a definition's doc comment (one too long to
    share a run with its definition) ends just before the definition's header, so the
    header opens a run with its body rather than ending one of comment lines."""
    pos = start
    while pos <= end:
        hi, total = pos, pieces[pos - 1]
        while hi < end and hi - pos + 1 < size and total + pieces[hi] <= room:
            total += pieces[hi]
            hi += 1
        if hi < end and outline is not None:
            kept = None
            if whole > room:
                kept = _whole_definition(
                    outline, lines, pieces, definitions, pos, hi, end, size, whole
                )
            if kept is None:
                kept = _before_header(outline, definitions, pos, hi, pieces)
            if kept is not None:
                hi, total = kept
                yield pos, hi, total
                pos = hi + 1
                continue
        if hi < end:
            cut = _before_definition(definitions, pos, hi)
            if cut is None:
                # Back off to a blank line in the last quarter so a run ends between blocks.
                cut = next(
                    (
                        j
                        for j in range(hi, pos + (3 * (hi - pos + 1)) // 4 - 1, -1)
                        if not lines[j - 1].strip()
                    ),
                    hi,
                )
            total -= sum(pieces[cut:hi])
            hi = cut
        yield pos, hi, total
        pos = hi + 1


def _whole_definition(
    outline: CodeOutline,
    lines: Sequence[bytes],
    pieces: Sequence[int],
    definitions: Sequence[int],
    pos: int,
    hi: int,
    end: int,
    size: int,
    whole: int,
) -> tuple[int, int] | None:
    """Where the run from ``pos``, full at ``hi``, ends instead and its pieces, so that
    the first definition it cuts that fits ``whole`` pieces and ``size`` lines is whole:
    at that definition's last line when it starts the run, else just before it; ``None``
    when the run cuts no such definition (``pos..hi`` ends inside none, or in one too
    large, whose own runs are cut as any are)."""
    first = bisect.bisect_left(definitions, pos)
    last = bisect.bisect_right(definitions, hi)
    for d in definitions[first:last]:  # outermost first: a method's impl before it
        stop = outline.end(lines, d, size)
        if stop is None or stop <= hi or stop > end or sum(pieces[d - 1 : stop]) > whole:
            continue
        if d > pos:
            return d - 1, sum(pieces[pos - 1 : d - 1])
        return stop, sum(pieces[pos - 1 : stop])
    return None


def _before_header(
    outline: CodeOutline, definitions: Sequence[int], pos: int, hi: int, pieces: Sequence[int]
) -> tuple[int, int] | None:
    """Where the run ``pos..hi`` ends, and its pieces, when it starts inside the doc
    comment of a definition whose header it holds: just before that header, so the
    header opens the next run with its body rather than ending this one; else
    ``None``."""
    i = bisect.bisect_right(definitions, pos) - 1
    if i < 0 or definitions[i] == pos:
        return None
    head = outline.header(definitions[i])
    if head is None or not pos < head <= hi:
        return None
    return head - 1, sum(pieces[pos - 1 : head - 1])


def _before_definition(definitions: Sequence[int], pos: int, hi: int) -> int | None:
    """The line just before the last definition that starts in the last half of the run
    ``pos..hi`` or right after it, so the run holds at least half of what fits; ``None``
    when none does."""
    i = bisect.bisect_right(definitions, hi + 1) - 1
    if i >= 0 and definitions[i] >= pos + (hi - pos + 2) // 2:
        return definitions[i] - 1
    return None


def _merge_small(
    spans: list[_Span], size: int, min_pieces: int, definitions: Collection[int] = ()
) -> list[_Span]:
    """Fold a span under ``min_pieces`` into its predecessor (or it into the next) when
    the two together still fit the first one's room and ``size`` lines. A span that
    starts a definition (one of ``definitions``) and is not small itself is not joined
    to a small predecessor that starts inside one, so the tail of one definition is not
    glued to the head of the next; a small definition still joins what is before it,
    and a small predecessor that starts a definition, or the text, joins it."""
    out: list[_Span] = []
    for span in spans:
        if out and out[-1].record == span.record:
            prev = out[-1]
            small = span.pieces < min_pieces or prev.pieces < min_pieces
            pieces = prev.pieces + span.pieces
            if (
                span.start in definitions
                and span.pieces >= min_pieces
                and prev.start not in definitions
                and prev.start > 1
            ):
                small = False  # a tail of the definition before, the head of this one
            if small and pieces <= prev.room and span.end - prev.start + 1 <= size:
                heading = prev.heading or span.heading
                out[-1] = _Span(prev.start, span.end, heading, pieces, prev.room, span.record)
                continue
        out.append(span)
    return out


def chunk_file(
    path: Path,
    rel: str,
    data: bytes,
    window_lines: int = DEFAULT_WINDOW_LINES,
    *,
    max_tokens: int = DEFAULT_CHUNK_TOKENS,
    min_tokens: int = DEFAULT_MIN_CHUNK_TOKENS,
    definition_tokens: int | None = None,
) -> list[Chunk]:
    """The chunks of one file's bytes; empty for binary (``is_binary``) or non-UTF-8 content,
    and for a notebook whose cells cannot be read (``chunk_notebook``). A definition of
    code within ``definition_tokens`` is one chunk (``chunk_text``)."""
    if is_binary(data):
        return []
    suffix = path.suffix.lower()
    if suffix == NOTEBOOK_SUFFIX:
        cut = chunk_notebook(
            path,
            rel,
            data,
            window_lines,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            definition_tokens=definition_tokens,
        )
        return cut or []
    kind = "doc" if suffix in DOC_SUFFIXES else "snippet"
    sections = file_sections(path.name)
    return [
        Chunk(
            rel=rel,
            path=path,
            start=c.start,
            end=c.end,
            text=c.text,
            digest=c.digest,
            heading=c.heading,
            kind=kind,
            item=c.item,
        )
        for c in chunk_text(
            data,
            rel,
            window_lines,
            sections=sections,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            code_suffix=suffix,
            definition_tokens=definition_tokens,
        )
    ]


def chunk_notebook(
    path: Path,
    rel: str,
    data: bytes,
    window_lines: int = DEFAULT_WINDOW_LINES,
    *,
    max_tokens: int = DEFAULT_CHUNK_TOKENS,
    min_tokens: int = DEFAULT_MIN_CHUNK_TOKENS,
    definition_tokens: int | None = None,
) -> list[Chunk] | None:
    """The chunks of a Jupyter notebook's cells (``_notebook``), or ``None`` when its
    bytes are not a notebook whose cells can be read.

    Each cell is first cut on its own, as a file of its text would be: a markdown cell as
    markdown (a ``doc``), a code cell as code (a ``snippet``, its label naming the
    notebook's language) and a raw cell as text (a ``doc``); outputs are left out. A
    chunk's range is the lines of the file that hold its cell's strings (the source
    digest is theirs), its text those strings joined (``range_text``), and its label
    names the cell (``analysis.ipynb cell 4 (python)``; with the cell's own lines when
    the cell is cut in several). Chunks whose lines hold the same strings (a cell
    written as one string) are one. A part of a code cell cut in several names the
    definitions it starts in (``Chunk.item``), found in the cell's own lines as in a
    file of the notebook's language (``language_suffix``); a whole cell starts at its
    top, in none.

    A cell that is one chunk then joins the whole cells of its kind just before it when
    either is under ``min_tokens`` (``df.head()``, an import: weak evidence alone, and
    one more chunk in the index) and together, titled, they still fit ``max_tokens``
    and ``window_lines``, as ``_merge_small`` joins a file's small pieces. Such a
    chunk quotes its cells' texts joined (``cells_text``), its range runs from its
    first cell's lines to its last's (what Jupyter writes between them included), and
    its label names them (``analysis.ipynb cells 3-5 (python)``). A markdown cell never
    joins a code cell, and a cell cut in several joins nothing."""
    notebook = read_notebook(data)
    if notebook is None:
        return None
    raw = split_lines(data)
    count = piece_counter()
    language = f" ({notebook.language})"  # what a code cell's label ends with
    code_suffix = language_suffix(notebook.language)  # how a code cell's items are found
    # In the notebook's order: a cell that is one chunk (and that chunk's heading), or
    # the chunks of a cell cut in several.
    units: list[tuple[Cell, str | None] | list[Chunk]] = []
    for cell in notebook.cells:
        code = cell.kind == "code"
        where = f"cell {cell.number}" + (language if code else "")
        sections: Sections = "markdown" if cell.kind == "markdown" else "none"
        body = cell.text.encode("utf-8")
        starts = [0, *(m.end() for m in re.finditer("\n", cell.text))]
        # The lines each chunk cites, its heading and its item.
        found: dict[tuple[int, int], tuple[str | None, str | None]] = {}
        for piece in chunk_text(
            body,
            f"{rel} {where}",
            window_lines,
            sections=sections,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            counter=count,
            code_suffix=code_suffix if code else None,
            definition_tokens=definition_tokens,
        ):
            begin = starts[piece.start - 1]
            stop = begin + len(piece.text)
            held = [p for p in cell.parts if p.start < stop and p.end > begin]
            found.setdefault((held[0].first_line, held[-1].last_line), (piece.heading, piece.item))
        if len(found) == 1 and cell.within(*next(iter(found))) == cell.parts:
            units.append((cell, next(iter(found.values()))[0]))
            continue
        cut: list[Chunk] = []
        for (first, last), (heading, item) in found.items():
            parts = cell.within(first, last)
            place = where
            if len(found) > 1:  # the cell's own lines tell its chunks apart
                a = bisect.bisect_right(starts, parts[0].start)
                b = bisect.bisect_right(starts, parts[-1].end - 1)
                place = f"{where} lines {a}-{b}"
            text = cell.text[parts[0].start : parts[-1].end]
            cut.append(
                _cell_chunk(path, rel, raw, first, last, text, heading, cell.kind, place, item)
            )
        units.append(cut)
    # Every whole cell's lines counted in one call: a run's pieces are their sum.
    whole = [u[0].text.split("\n") for u in units if isinstance(u, tuple)]
    counted = iter(count([line for lines in whole for line in lines]))
    pieces = iter([sum(next(counted) for _ in lines) for lines in whole])
    room = max_tokens - _SPECIAL_PIECES
    chunks: list[Chunk] = []
    run: _CellRun | None = None  # the whole cells the next one may join
    for unit in units:
        if isinstance(unit, list):
            if run is not None:
                chunks.append(run.chunk(path, rel, raw, language))
            run = None
            chunks.extend(unit)
            continue
        cell, heading = unit
        alone = _CellRun((cell,), heading, next(pieces))
        grown = run.join(alone, min_tokens, window_lines) if run is not None else None
        if grown is not None and grown.pieces + count([grown.title(rel, language)])[0] <= room:
            run = grown
            continue
        if run is not None:
            chunks.append(run.chunk(path, rel, raw, language))
        run = alone
    if run is not None:
        chunks.append(run.chunk(path, rel, raw, language))
    return chunks


@dataclass(slots=True, frozen=True)
class _CellRun:
    """Adjacent whole cells of one kind that one chunk quotes (``chunk_notebook``)."""

    cells: tuple[Cell, ...]
    heading: str | None
    pieces: int  # word pieces of the cells' text

    @property
    def text(self) -> str:
        return cells_text([cell.text for cell in self.cells])

    def place(self, language: str) -> str:
        first, last = self.cells[0].number, self.cells[-1].number
        where = f"cell {first}" if first == last else f"cells {first}-{last}"
        return where + (language if self.cells[0].kind == "code" else "")

    def title(self, rel: str, language: str) -> str:
        return _title(rel, self.heading, self.place(language))

    def join(self, then: _CellRun, min_pieces: int, size: int) -> _CellRun | None:
        """This run and ``then`` as one, when ``then`` may join it (``chunk_notebook``)
        and the two hold at most ``size`` lines; the room left for the title is the
        caller's to judge."""
        if then.cells[0].kind != self.cells[0].kind:
            return None
        if self.pieces >= min_pieces and then.pieces >= min_pieces:
            return None
        pieces = self.pieces + then.pieces
        grown = _CellRun(self.cells + then.cells, self.heading or then.heading, pieces)
        text = grown.text
        return None if text.count("\n") + (not text.endswith("\n")) > size else grown

    def chunk(self, path: Path, rel: str, raw: Sequence[bytes], language: str) -> Chunk:
        first, last = self.cells[0].parts[0].first_line, self.cells[-1].parts[-1].last_line
        kind, place = self.cells[0].kind, self.place(language)
        return _cell_chunk(path, rel, raw, first, last, self.text, self.heading, kind, place)


def _cell_chunk(
    path: Path,
    rel: str,
    raw: Sequence[bytes],
    first: int,
    last: int,
    text: str,
    heading: str | None,
    kind: str,
    place: str,
    item: str | None = None,
) -> Chunk:
    """The chunk of a notebook's lines ``first``-``last`` that quotes ``text`` of them
    (``item``: the code definitions a part of a code cell starts in)."""
    return Chunk(
        rel=rel,
        path=path,
        start=first,
        end=last,
        text=text,
        digest=sha256_digest(text.encode("utf-8")),
        heading=heading,
        kind="snippet" if kind == "code" else "doc",
        place=place,
        source_digest=sha256_digest(b"".join(raw[first - 1 : last])),
        item=item,
    )


def is_binary(data: bytes) -> bool:
    """Whether a file's bytes are binary, as ``chunk_file`` judges: a NUL in the first 8 KiB
    (git's test for a binary file), whether or not the bytes are valid UTF-8."""
    return b"\0" in data[:_BINARY_SNIFF_BYTES]


def file_sections(path: str) -> Sections:
    """How ``chunk_file`` cuts a file of this name (by its suffix)."""
    suffix = Path(path).suffix.lower()
    if suffix in _MARKDOWN_SUFFIXES:
        return "markdown"
    return "rst" if suffix in RST_SUFFIXES else "none"


def chunk_text(
    data: bytes,
    name: str,
    window_lines: int = DEFAULT_WINDOW_LINES,
    *,
    sections: Sections = "none",
    max_tokens: int = DEFAULT_CHUNK_TOKENS,
    min_tokens: int = DEFAULT_MIN_CHUNK_TOKENS,
    counter: Counter | None = None,
    record_tokens: int | None = None,
    split_long_lines: bool = False,
    code_suffix: str | None = None,
    definition_tokens: int | None = None,
) -> list[TextChunk]:
    """The chunks of one UTF-8 text (empty when it is not UTF-8). ``name`` is what a
    chunk's title starts with (a path, a resource or tool name): it takes room in the
    embedding input, so it is counted as ``chunk_file`` counts a file's path.
    ``counter`` counts word pieces (default ``piece_counter()``, the model's count when
    installed: what a text that is also embedded must be cut by).

    ``sections="records"``: each record (``json_records``, else ``_record_sections``)
    is cut on its own, under ``record_tokens`` (default ``max_tokens``) and
    ``window_lines``: one chunk when it fits, however small (records never merge),
    else runs of its lines; the lines before the first record as ``"paragraphs"``
    cuts them. A text without records is cut as ``"paragraphs"`` cuts it. A record's
    chunks depend on its own lines only, never on where it sits: the same record cuts
    the same wherever it is (a markdown section after a heading-only one starts at
    that heading, ``_heading_records``).

    ``split_long_lines``: a line over the bound is cut into parts within it
    (``_line_parts``), each a chunk of that line's range with the digest of exactly
    its text, so no chunk holds more than the bound. Only for a text that is no
    file: a file's range must address whole lines (F17).

    ``code_suffix``: the text is a file of this suffix (``.rs``); when that names a
    language ``code_items`` knows (or reStructuredText, whose object directives are
    its definitions: ``code_outline``), a run of lines that must be cut ends just before a
    definition when one starts in its last half (``_windows``), a small tail is not
    merged with the next definition's head (``_merge_small``), and each chunk carries
    the definitions its first line of text sits in (``TextChunk.item``), which changes
    no bound, text or digest. The same text with the same suffix cuts the same.

    ``definition_tokens`` (more than ``max_tokens``; with ``code_suffix``): a definition
    that ``max_tokens`` would cut but that fits this many word pieces, title included,
    and ``window_lines`` lines, its doc comment and attributes with it, is one chunk
    (``_windows``), so a short function whose comment fills the bound is served whole.
    A caller that embeds the chunks keeps it within the model's window."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    lines = split_lines(data)
    if not lines:
        return []
    count = counter or piece_counter()
    pieces = count([line.decode("utf-8") for line in lines])
    cuts: list[tuple[int, int, str | None, int | None]] | None = None
    if sections == "records":
        elements = json_records(data, len(lines))
        if elements is not None:
            cuts = [(a, b, name, n) for n, (a, b, name) in enumerate(elements)]
        else:
            cuts = _record_sections(lines)
        if cuts is not None:
            # Its blank lines at the end say nothing and would move a cut inside a long
            # record (a window backs off to a blank line): the record ends at its text.
            cuts = [(a, _last_text(lines, a, b), h, r) for a, b, h, r in cuts]
    if cuts is None:
        if sections == "markdown":
            found = _markdown_sections(lines)
        elif sections == "rst":
            found = rst_sections(lines)
        elif sections in ("paragraphs", "records"):
            found = _paragraph_sections(lines)
        else:
            found = [(1, len(lines), None)]
        cuts = [(a, b, h, None) for a, b, h in found]
    # A title names its range when it has no heading. The range's pieces are bounded
    # by its characters (WordPiece never makes more pieces than characters), so the
    # room is known before the range is: how digits split varies from number to number.
    widest = len(f"L{len(lines)}-{len(lines)}")
    spans: list[_Span] = []
    # Every title counted in one call: a text of records has a heading per record.
    headings = list(dict.fromkeys(heading for _, _, heading, _ in cuts))
    counted = count([_title(name, heading, "") for heading in headings])
    titles = dict(zip(headings, counted, strict=True))
    outline = code_outline(code_suffix, lines) if code_suffix is not None else None
    definitions = outline.starts if outline is not None else ()
    for s_start, s_end, heading, record in cuts:
        title = titles[heading] + (0 if heading else widest)
        limit = max_tokens if record is None else (record_tokens or max_tokens)
        room = max(limit - _SPECIAL_PIECES - title, 1)
        whole = (definition_tokens or 0) - _SPECIAL_PIECES - title if record is None else 0
        for a, b, n in _windows(
            s_start, s_end, lines, pieces, window_lines, room, definitions, outline, whole
        ):
            spans.append(_Span(a, b, heading, n, room, record))
    chunks: list[TextChunk] = []
    for span in _merge_small(spans, window_lines, min_tokens, frozenset(definitions)):
        if split_long_lines and span.start == span.end and span.pieces > span.room:
            # A lone line: nothing joins it (a whole definition is several).
            line = lines[span.start - 1].decode("utf-8")
            for part in _line_parts(line, count, span.room):
                raw = part.encode("utf-8")
                chunks.append(
                    TextChunk(
                        span.start, span.start, part, sha256_digest(raw), span.heading, span.record
                    )
                )
            continue
        # The blank lines after a chunk's text carry nothing: its range ends at its last
        # line of text, so a citation names no empty line and the prompt quotes none.
        end = _last_text(lines, span.start, span.end)
        raw = b"".join(lines[span.start - 1 : end])
        if not raw.strip():
            continue  # whitespace carries no evidence
        chunks.append(
            TextChunk(
                start=span.start,
                end=end,
                text=raw.decode("utf-8"),
                digest=sha256_digest(raw),
                heading=span.heading,
                record=span.record,
            )
        )
    if outline is not None:
        items = [outline.item(lines, c.start) for c in chunks]
        if any(items):
            chunks = [replace(c, item=i) for c, i in zip(chunks, items, strict=True)]
    return chunks


def _last_text(lines: Sequence[bytes], start: int, end: int) -> int:
    """The last line of ``start..end`` that is not blank (``start`` when none is)."""
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _nearest_end(
    group: list[tuple[str, int]], i: int, j: int, ends: tuple[re.Pattern[str], ...]
) -> int:
    """Where a part of ``group[i:j]`` (the most that fits) ends: after the last segment
    in its last half that the first of ``ends`` matches, else the next, else after the
    last sentence end in its first half (a short part, but the next one starts a
    sentence, not the middle of one), else at ``j``."""
    half = i + (j - i) // 2
    for end in ends:
        for k in range(j - 1, half - 1, -1):
            if end.search(group[k][0]):
                return k + 1
    for k in range(half - 1, i - 1, -1):
        if _SENTENCE_END_RE.search(group[k][0]):
            return k + 1
    return j


def _line_parts(line: str, count: Counter, room: int) -> list[str]:
    """``line`` cut into parts of at most ``room`` word pieces that join back into it.

    Cut between words (the whitespace after a word stays with it), each part as long
    as it can be, ending at a sentence end when one is in its last half, else at the
    last one it holds, so a part of prose reads whole and the next starts a sentence.
    A word over ``room`` on its own (minified JSON) is cut after its punctuation
    characters: both counts make a piece of each, so pieces still add up. A run of
    word characters over ``room`` (a blob) is cut every ``room`` characters, each run
    a part of its own: a word piece covers one character at least, so a run is within
    ``room`` whatever the count. A line of JSON (``[`` or ``{`` first) may also be cut
    after a value of a list or object ends (``},``), and a part ends there when one is
    in its last half, so it holds whole records; a cut after punctuation keeps the
    counts adding up, as above."""
    words = _WORD_RE.findall(line)
    json_line = line.lstrip()[:1] in ("[", "{")
    if json_line:
        words = [sub for word in words for sub in _AFTER_JSON_VALUE_RE.split(word) if sub]
    ends = (_JSON_VALUE_END_RE, _SENTENCE_END_RE) if json_line else (_SENTENCE_END_RE,)
    # Runs of segments that may share a part; a blob's runs stand alone.
    groups: list[list[tuple[str, int]]] = [[]]
    for word, size in zip(words, count(words), strict=True):
        if size <= room:
            groups[-1].append((word, size))
            continue
        subs = [sub for sub in _AFTER_PUNCTUATION_RE.split(word) if sub]
        for sub, n in zip(subs, count(subs), strict=True):
            if n <= room:
                groups[-1].append((sub, n))
                continue
            runs = [sub[i : i + room] for i in range(0, len(sub), room)]
            groups.extend([(run, n)] for run, n in zip(runs, count(runs), strict=True))
            groups.append([])
    parts: list[str] = []
    for group in groups:
        i = 0
        while i < len(group):
            j, total = i + 1, group[i][1]
            while j < len(group) and total + group[j][1] <= room:
                total += group[j][1]
                j += 1
            if j < len(group):
                j = _nearest_end(group, i, j, ends)
            parts.append("".join(segment for segment, _ in group[i:j]))
            i = j
    return parts
