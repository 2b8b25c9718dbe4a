"""A framework's retrieved documents as CGP frames, and the verdicts on them (reverse adapters).

Owns the one decision a served retriever cannot leave to its framework: what a
document *is* as evidence. A document whose metadata names a readable local file
(``source`` or ``file_path``) and whose text is a run of whole lines of it
(surrounding whitespace aside) becomes a frame whose content is exactly those
lines, with ``file`` provenance digesting exactly them (F5, F17), so the host can
re-read the source and cross-provider dedup (D2) meets the ``files`` provider's
frames of the same region; its id is ``<source>#L<a>-<b>``, so a verify needs no
memory of the query. Any other document (no source, a remote one, text that
starts or ends inside a line, bytes that are not UTF-8) is a ``doc`` frame of the
document's own text, with the source's URI where there is one, and no provenance
it could not back. ``token_cost`` is always computed from the content (B3); the
packing keeps ``kinds`` (Q1), ``max_frames`` (B4) and ``max_tokens`` (B1).

Scores are by rank (``1/(rank+1)``): provider-local and ordinal (F1, F10), and
the same for the same position in every answer. Pure except for reading the
named source files, which callers do in a worker thread. Imports only
``hostd.protocol`` and ``hostd.provider``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    FrameVerdict,
    Provenance,
    VerdictStatus,
    sha256_digest,
)
from hostd.provider import make_frame, verify_file_range

__all__ = [
    "MAX_SOURCE_BYTES",
    "Retrieved",
    "SourceFiles",
    "frames_of",
    "pack_frames",
    "verify_frame",
]

#: A source file larger than this is not read: its documents become ``doc`` frames.
MAX_SOURCE_BYTES = 16 * 1024 * 1024
#: Metadata keys naming where a document came from, LangChain's then LlamaIndex's.
_SOURCE_KEYS = ("source", "file_path")
#: Metadata keys giving the document's character offset in its source (a hint only).
_START_KEYS = ("start_index", "start_char_idx")
_TITLE_MAX = 120


@dataclass(slots=True, frozen=True)
class Retrieved:
    """One document as a retriever returned it: its text, its metadata, and the
    character offset of the text in its source when the framework knows it."""

    text: str
    metadata: Mapping[str, Any]
    start_hint: int | None = None


def _source_of(metadata: Mapping[str, Any]) -> str | None:
    for key in _SOURCE_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _start_of(item: Retrieved) -> int | None:
    if item.start_hint is not None:
        return item.start_hint
    for key in _START_KEYS:
        value = item.metadata.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _local_path(source: str) -> Path | None:
    """The local file a source names (a path, or a ``file:`` URI), else ``None``."""
    parts = urlsplit(source)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if parts.scheme and len(parts.scheme) > 1:  # http:, s3:, …; one letter is a drive
        return None
    return Path(source)


@dataclass(slots=True, frozen=True)
class _Source:
    """A local source file as read for one answer: its resolved path and bytes."""

    path: Path
    data: bytes


class SourceFiles:
    """The source files one answer reads, each resolved and read once, and every file a
    frame with ``file`` provenance was served from (``served``): verify re-reads only
    those, so a verify request cannot make the provider read (and digest) any other
    file."""

    def __init__(self, served: set[Path] | None = None) -> None:
        self.served: set[Path] = served if served is not None else set()
        self._read: dict[Path, _Source | None] = {}

    def read(self, path: Path) -> _Source | None:
        if path not in self._read:
            resolved = path.resolve()
            data = _read_bounded(resolved)
            self._read[path] = None if data is None else _Source(resolved, data)
        return self._read[path]


def _read_bounded(path: Path) -> bytes | None:
    try:
        if not path.is_file():
            return None  # a directory, a device, a socket: nothing to quote lines of
        with path.open("rb") as fh:
            data = fh.read(MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    return None if len(data) > MAX_SOURCE_BYTES else data


def _whole_lines(data: bytes, needle: bytes, hint: int | None) -> tuple[int, int, slice] | None:
    """``(a, b, where)``: the 1-indexed lines ``needle`` fills whole (whitespace around
    it on those lines aside), at the occurrence nearest ``hint`` (characters, so only a
    guide), and the slice of ``data`` they are: what ``address_line_range(data,
    "L<a>-<b>")`` returns (F17: each line keeps its LF), found without scanning the
    whole file for line starts. ``None`` when it is not there or starts or ends inside
    a line."""
    stripped = needle.strip()
    if not stripped:
        return None
    found: list[int] = []
    pos = data.find(stripped)
    while pos != -1 and len(found) < 64:
        found.append(pos)
        pos = data.find(stripped, pos + 1)
    if hint is not None:
        found.sort(key=lambda p: (abs(p - hint), p))
    for start in found:
        end = start + len(stripped)
        line_start = data.rfind(b"\n", 0, start) + 1
        nl = data.find(b"\n", end)
        line_end = len(data) if nl == -1 else nl
        if data[line_start:start].strip() or data[end:line_end].strip():
            continue  # starts or ends inside a line: no whole-line range says exactly it
        first = data.count(b"\n", 0, line_start) + 1
        last = first + data.count(b"\n", line_start, end - 1)
        return first, last, slice(line_start, len(data) if nl == -1 else nl + 1)
    return None


def _title(item: Retrieved, source: str | None, range_: str | None) -> str:
    title = item.metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()[:_TITLE_MAX]
    if source is not None:
        name = source.rstrip("/").rsplit("/", 1)[-1] or source
        return f"{name} {range_}" if range_ else name
    first = next((line.strip() for line in item.text.splitlines() if line.strip()), "")
    return first[:_TITLE_MAX] or "document"


def _file_frame(
    item: Retrieved, source: str, file: _Source, score: float, kind: str
) -> ContextFrame | None:
    """The frame of whole lines of ``file``, or ``None`` when no line range says exactly
    the document's text (or those lines are not UTF-8)."""
    lines = _whole_lines(file.data, item.text.encode("utf-8", "surrogatepass"), _start_of(item))
    if lines is None:
        return None
    first, last, where = lines
    addressed = file.data[where]
    try:
        content = addressed.decode("utf-8")
    except UnicodeDecodeError:
        return None
    range_ = f"L{first}-{last}"
    uri = file.path.as_uri()
    # Content, content digest and provenance digest are the same bytes (F5, F17).
    prov = Provenance(type="file", uri=uri, range=range_, digest=sha256_digest(addressed))
    return make_frame(
        id=f"{source}#{range_}",
        kind=kind,
        title=_title(item, source, range_),
        content=content,
        citation_label=f"{source} {range_}",
        score=score,
        uri=uri,
        provenance=[prov],
    )


def _frame(
    item: Retrieved, rank: int, name: str, kind: str, files: SourceFiles
) -> ContextFrame | None:
    if not item.text.strip():
        return None  # nothing to offer as evidence
    source = _source_of(item.metadata)
    score = 1.0 / (rank + 1)  # ordinal, provider-local (F1, F10)
    path = _local_path(source) if source is not None else None
    file = files.read(path) if path is not None else None
    uri: str | None = None
    if source is not None and file is not None:
        frame = _file_frame(item, source, file, score, kind)
        if frame is not None:
            files.served.add(file.path)
            return frame
        uri = file.path.as_uri()
    elif source is not None and path is None:
        uri = source  # a remote source: named, never fetched
    digest = sha256_digest(f"{source or ''}\0{item.text}".encode("utf-8", "surrogatepass"))
    short = digest.removeprefix("sha256:")[:16]
    return make_frame(
        id=f"{name}:{short}",
        kind=kind,
        title=_title(item, source, None),
        content=item.text,
        citation_label=f"{source} ({name})" if source is not None else f"{name} {short[:8]}",
        score=score,
        uri=uri,
    )


def frames_of(
    items: Sequence[Retrieved], *, name: str, kind: str, files: SourceFiles
) -> list[ContextFrame]:
    """The frames of ``items`` in the retriever's order, one per distinct id (the first
    keeps its rank); empty documents are left out."""
    frames: list[ContextFrame] = []
    seen: set[str] = set()
    for rank, item in enumerate(items):
        frame = _frame(item, rank, name, kind, files)
        if frame is None or frame.id in seen:
            continue
        seen.add(frame.id)
        frames.append(frame)
    return frames


def pack_frames(frames: Iterable[ContextFrame], query: ContextQuery) -> ContextQueryResult:
    """Best-first frames under the query's limits: only the asked kinds (Q1), at most
    ``max_frames`` (B4), a frame that does not fit the tokens left is skipped and a
    cheaper later one may still fit (B1); ``truncated`` says something was left out."""
    kinds = set(query.kinds)
    remaining = query.max_tokens
    out: list[dict[str, Any]] = []
    dropped = 0
    for frame in frames:
        if kinds and frame.kind not in kinds:
            continue
        if len(out) >= query.max_frames or frame.token_cost > remaining:
            dropped += 1
            continue
        out.append(frame.to_wire())
        remaining -= frame.token_cost
    return ContextQueryResult(
        frames=out, truncated=dropped > 0, dropped_estimate=dropped if dropped else None
    )


def verify_frame(identity: FrameIdentity, served: set[Path]) -> FrameVerdict:
    """Re-read the lines a ``<source>#L<a>-<b>`` id names and judge the held digest (V3).

    ``valid`` only when the digest of those bytes now equals the held one; ``stale``
    (with the current digest) when they changed; ``gone`` when the file or the lines
    are no longer there; ``unknown`` for a ``doc`` frame (nothing to re-read: the host
    asks again, V2), an identity without a digest, or a file this provider never
    served a frame of.
    """
    unknown = FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    source, sep, range_ = identity.frame_id.rpartition("#")
    if not sep or not source or identity.content_digest is None:
        return unknown
    path = _local_path(source)
    if path is None or path.resolve() not in served:
        return unknown
    return verify_file_range(identity, path.resolve(), range_)
