"""Citations as MCP resources: every cited frame of ``compose_context`` as a ``hostd://``
URI that ``resources/read`` serves, so a client on another machine can open it.

Pure functions over a ``context/compose`` result (the wire dict), and one bounded
store. The text of a cited frame is the one its prompt quotes: each included frame
is one fenced block, rendered in citation order (R3, ``hostd.compose``'s renderer),
so the blocks are read back from the prompt rather than carried twice on the wire.
Inside a block, content cannot hold a fence line (fence-shaped ``<`` are
neutralised), so ``\\n</frame>\\n`` ends a block unambiguously; pinned floor blocks
(``<frame pinned=…>``) are no citation and are skipped. A block does not show the
newline its content ends with (the renderer writes one before the closing fence
whatever the content ends with); a cited text gets it back when the frame's digest
says the content had it, so a cited file range is its lines' bytes.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

from hostd.protocol import sha256_digest

__all__ = [
    "DEFAULT_MAX_CITED_BYTES",
    "DEFAULT_MAX_CITED_TEXTS",
    "CitationStore",
    "CitedText",
    "cited_texts",
    "quoted_blocks",
]

#: How many cited texts ``resources/read`` keeps, newest first evicted last.
DEFAULT_MAX_CITED_TEXTS = 4096
#: How many bytes (UTF-8) of cited text it keeps in all.
DEFAULT_MAX_CITED_BYTES = 16 * 1024 * 1024

# An older daemon's fence holds ``id="…"`` after the provider: ``hostd mcp --connect``
# to one still reads its prompt's blocks.
_BLOCK_OPEN = re.compile(
    r'<frame (?:provider="[^"\n]*"(?: id="[^"\n]*")? kind="[^"\n]*" cite="[^"\n]*"'
    r'(?: (?:in|section|title)="[^"\n]*")?(?: valid="[^"\n]*")?(?: verified="no")?'
    r'|(?P<pinned>pinned)="[^"\n]*" cite="[^"\n]*")>\n'
)
_BLOCK_CLOSE = "\n</frame>\n"

# A fixed table, not ``mimetypes``: that one reads the machine's own tables (``.rs`` is
# an XML type on some), and the same citation must get the same type everywhere.
_MIME_TYPES = {
    ".c": "text/x-c",
    ".cc": "text/x-c++",
    ".cpp": "text/x-c++",
    ".cs": "text/x-csharp",
    ".css": "text/css",
    ".csv": "text/csv",
    ".go": "text/x-go",
    ".h": "text/x-c",
    ".hpp": "text/x-c++",
    ".html": "text/html",
    ".java": "text/x-java",
    ".js": "text/javascript",
    ".json": "application/json",
    ".kt": "text/x-kotlin",
    ".md": "text/markdown",
    ".py": "text/x-python",
    ".rb": "text/x-ruby",
    ".rs": "text/x-rust",
    ".rst": "text/x-rst",
    ".sh": "text/x-shellscript",
    ".sql": "application/sql",
    ".swift": "text/x-swift",
    ".toml": "application/toml",
    ".ts": "text/x-typescript",
    ".txt": "text/plain",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}


@dataclass(slots=True, frozen=True)
class CitedText:
    """One cited source range of one composition, as a resource."""

    uri: str  # hostd://citation/REQUEST_ID/N
    label: str  # the citation label the prompt cites it by
    text: str  # exactly what the prompt quotes under that label
    mime_type: str
    source: str | None  # the provenance URI (and range) it came from, if any
    size: int  # UTF-8 bytes of ``text``
    #: The (provider, frame id) of each citation that shares it: what a forget evicts.
    frames: tuple[tuple[str, str], ...] = ()

    @property
    def description(self) -> str:
        where = f" from {self.source}" if self.source else ""
        return f"the text cited as [{self.label}]{where}"


def quoted_blocks(prompt: str) -> Iterator[str]:
    """The content of each provider frame block of ``prompt``, in prompt order."""
    opened = _BLOCK_OPEN.search(prompt)
    while opened is not None:
        end = prompt.find(_BLOCK_CLOSE, opened.end())
        if end == -1:
            return
        if opened["pinned"] is None:
            yield prompt[opened.end() : end]
        opened = _BLOCK_OPEN.match(prompt, end + len(_BLOCK_CLOSE))


def _source(citation: dict[str, Any]) -> tuple[str | None, str | None]:
    """The first provenance URI of a citation and its range (a source range)."""
    for p in citation.get("provenance") or []:
        uri = p.get("uri")
        if isinstance(uri, str) and uri:
            span = p.get("range")
            return uri, span if isinstance(span, str) and span else None
    return None, None


def _mime_type(source_uri: str | None) -> str:
    if source_uri is None:
        return "text/plain"
    suffix = PurePosixPath(urlsplit(source_uri).path).suffix.lower()
    return _MIME_TYPES.get(suffix, "text/plain")


def cited_texts(result: dict[str, Any]) -> list[CitedText]:
    """One resource per distinct source range cited by a ``context/compose`` result, in
    citation order: citations of the same range (the same URI and range, or the same
    frame when it has no URI) share the first one's resource. Empty when the prompt's
    blocks do not pair with its citations (then nothing is linked, rather than a wrong
    text)."""
    citations = result.get("citations") or []
    texts = list(quoted_blocks(result.get("prompt") or ""))
    if len(texts) != len(citations):
        return []
    request = quote(str(result.get("request_id") or "request"), safe="")
    seen: dict[tuple[str, ...], int] = {}
    out: list[CitedText] = []
    frames: list[list[tuple[str, str]]] = []
    for citation, quoted in zip(citations, texts, strict=True):
        uri, span = _source(citation)
        frame = citation.get("frame") or {}
        text = _with_last_newline(quoted, frame.get("content_digest"))
        # The source range, else (no URI) the frame itself.
        ident = (str(frame.get("provider_id")), str(frame.get("frame_id")))
        key = (uri, span or "") if uri else ("", *ident)
        if key in seen:
            frames[seen[key]].append(ident)
            continue
        seen[key] = len(out)
        frames.append([ident])
        out.append(
            CitedText(
                uri=f"hostd://citation/{request}/{len(out) + 1}",
                label=str(citation.get("label") or ""),
                text=text,
                mime_type=_mime_type(uri),
                source=f"{uri} {span}" if uri and span else uri,
                size=len(text.encode("utf-8", "surrogatepass")),
            )
        )
    return [replace(t, frames=tuple(f)) for t, f in zip(out, frames, strict=True)]


def _with_last_newline(quoted: str, digest: object) -> str:
    """A block's text, and the newline the render did not show when the frame's content
    ended with it: its ``content_digest`` is that of the text with it (a chunk of a file
    ends with its last line's newline). Else the text as the block quotes it."""
    if isinstance(digest, str) and not quoted.endswith("\n"):
        with_newline = f"{quoted}\n"
        if sha256_digest(with_newline.encode("utf-8", "surrogatepass")) == digest:
            return with_newline
    return quoted


class CitationStore:
    """The cited texts ``resources/read`` serves: the newest, bounded by count and bytes.

    Adding past either bound evicts the oldest texts first; a text larger than the
    byte bound on its own is never kept (its composition gets no link to it)."""

    __slots__ = ("_bytes", "_texts", "max_bytes", "max_texts")

    def __init__(
        self, max_texts: int = DEFAULT_MAX_CITED_TEXTS, max_bytes: int = DEFAULT_MAX_CITED_BYTES
    ) -> None:
        if max_texts < 1 or max_bytes < 1:
            raise ValueError("a citation store keeps at least one text of at least one byte")
        self.max_texts = max_texts
        self.max_bytes = max_bytes
        self._texts: OrderedDict[str, CitedText] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._texts)

    @property
    def bytes(self) -> int:
        return self._bytes

    def add(self, texts: Iterable[CitedText]) -> list[CitedText]:
        """Keep ``texts`` (evicting the oldest as needed); returns those kept."""
        kept = [t for t in texts if t.size <= self.max_bytes]
        for text in kept:
            old = self._texts.pop(text.uri, None)
            if old is not None:
                self._bytes -= old.size
            self._texts[text.uri] = text
            self._bytes += text.size
        while len(self._texts) > self.max_texts or self._bytes > self.max_bytes:
            _, evicted = self._texts.popitem(last=False)
            self._bytes -= evicted.size
        return [t for t in kept if t.uri in self._texts]

    def get(self, uri: str) -> CitedText | None:
        return self._texts.get(uri)

    def drop_frame(self, provider_id: str, frame_id: str) -> int:
        """Evict every text that quotes that frame (a memory forgotten through this
        server must not be served again); how many were kept."""
        ident = (provider_id, frame_id)
        gone = [uri for uri, t in self._texts.items() if ident in t.frames]
        for uri in gone:
            self._bytes -= self._texts.pop(uri).size
        return len(gone)

    def page(self, after: str | None, limit: int) -> tuple[list[CitedText], str | None]:
        """Up to ``limit`` texts, oldest first, from just after the URI ``after`` (a
        cursor; one evicted since restarts at the oldest); and the next cursor."""
        items = list(self._texts.values())
        start = 0
        if after is not None and after in self._texts:
            start = next(i for i, t in enumerate(items) if t.uri == after) + 1
        chunk = items[start : start + limit]
        more = start + limit < len(items)
        return chunk, (chunk[-1].uri if more and chunk else None)
