"""A directory tree as a set of text chunks: walking, ignoring, chunking, refreshing.

Shared by the ``files`` (lexical) and ``semantic`` (embedding) providers. It
owns which files are read (``.gitignore`` at every level, include/exclude
globs, no binaries, no huge files), how a file becomes line-window chunks
(markdown by heading), and the F17 addressing of each chunk: a chunk's text is
exactly the bytes ``address_line_range(file, "L<a>-<b>")`` returns, so its
provenance digest is checkable against the file on disk (F5, F17). It knows
nothing about ranking or about the wire.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from hostd.protocol import (
    ContextFrame,
    FrameIdentity,
    FrameVerdict,
    Provenance,
    UnverifiableRange,
    VerdictStatus,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_WINDOW_LINES",
    "DOC_SUFFIXES",
    "Chunk",
    "Corpus",
    "CorpusOptions",
    "chunk_file",
    "chunk_frame",
    "parse_chunk_id",
    "split_lines",
    "verify_chunk",
]

DEFAULT_MAX_FILE_BYTES = 1 << 20
DEFAULT_WINDOW_LINES = 40
#: Prose files: served as ``doc`` frames and chunked by heading when markdown.
DOC_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
# Never indexed, whatever the ignore files say: VCS internals and tool caches.
_ALWAYS_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".ruff_cache"}
)
_HEADING_RE = re.compile(rb"#{1,6}[ \t]+\S")
_FENCE_RE = re.compile(rb"(```|~~~)")
_BINARY_SNIFF_BYTES = 8192


@dataclass(slots=True, frozen=True)
class CorpusOptions:
    """What to read under ``root``. Globs use ``.gitignore`` syntax, relative to ``root``."""

    root: Path
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    window_lines: int = DEFAULT_WINDOW_LINES
    honour_gitignore: bool = True


@dataclass(slots=True, frozen=True)
class Chunk:
    """A run of whole lines ``start..end`` (1-indexed, inclusive) of one file."""

    rel: str  # POSIX path relative to the corpus root
    path: Path  # absolute
    start: int
    end: int
    text: str  # exactly the addressed bytes, decoded (UTF-8, nothing normalised)
    digest: str  # sha256 of exactly those bytes (F5, F17)
    heading: str | None
    kind: str  # "doc" or "snippet"

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
        return f"{self.rel} {self.range}"

    @property
    def title(self) -> str:
        if self.heading:
            return f"{self.rel} § {self.heading}"
        return f"{self.rel} {self.range}"


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
        provenance=[Provenance(type="file", uri=chunk.uri, range=chunk.range, digest=chunk.digest)],
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


def _windows(start: int, end: int, lines: Sequence[bytes], size: int) -> Iterator[tuple[int, int]]:
    """Cut ``start..end`` into windows of at most ``size`` lines, preferring to end at a blank."""
    pos = start
    while pos <= end:
        hi = min(pos + size - 1, end)
        if hi < end:
            # Back off to a blank line in the last quarter so a window ends between blocks.
            for j in range(hi, max(pos + (3 * size) // 4, pos) - 1, -1):
                if not lines[j - 1].strip():
                    hi = j
                    break
        yield pos, hi
        pos = hi + 1


def chunk_file(path: Path, rel: str, data: bytes, window_lines: int) -> list[Chunk]:
    """The chunks of one file's bytes; empty for binary or non-UTF-8 content."""
    if b"\0" in data[:_BINARY_SNIFF_BYTES]:
        return []
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    lines = split_lines(data)
    if not lines:
        return []
    suffix = path.suffix.lower()
    kind = "doc" if suffix in DOC_SUFFIXES else "snippet"
    if suffix in _MARKDOWN_SUFFIXES:
        sections = _markdown_sections(lines)
    else:
        sections = [(1, len(lines), None)]
    chunks: list[Chunk] = []
    for s_start, s_end, heading in sections:
        for a, b in _windows(s_start, s_end, lines, window_lines):
            raw = b"".join(lines[a - 1 : b])
            if not raw.strip():
                continue  # whitespace carries no evidence
            chunks.append(
                Chunk(
                    rel=rel,
                    path=path,
                    start=a,
                    end=b,
                    text=raw.decode("utf-8"),
                    digest=sha256_digest(raw),
                    heading=heading,
                    kind=kind,
                )
            )
    return chunks


@dataclass(slots=True)
class _Ignore:
    """One ``.gitignore`` and the directory (relative, POSIX, '' for root) it governs."""

    base: str
    spec: pathspec.GitIgnoreSpec


def _ignored(rel: str, is_dir: bool, stack: Iterable[_Ignore]) -> bool:
    # Later (deeper) files override earlier ones, as git reads them.
    verdict = False
    for ig in stack:
        sub = rel[len(ig.base) + 1 :] if ig.base else rel
        if is_dir:
            sub += "/"
        result = ig.spec.check_file(sub)
        if result.include is not None:
            verdict = result.include
    return verdict


@dataclass(slots=True)
class _FileState:
    mtime_ns: int
    size: int
    chunks: list[Chunk] = field(default_factory=list)


class Corpus:
    """The chunks of every eligible file under ``options.root``, refreshed by mtime.

    ``refresh()`` re-walks the tree and re-reads only files whose ``(mtime_ns,
    size)`` changed; it returns whether anything changed so an index built on
    ``chunks`` knows when to rebuild.
    """

    def __init__(self, options: CorpusOptions) -> None:
        self.options = options
        self.root = options.root.resolve()
        self._include = (
            pathspec.GitIgnoreSpec.from_lines(options.include) if options.include else None
        )
        self._exclude = pathspec.GitIgnoreSpec.from_lines(options.exclude)
        self._files: dict[str, _FileState] = {}
        self.chunks: list[Chunk] = []
        self.generation = 0  # bumped on every change

    def _walk(self) -> Iterator[tuple[str, Path, os.stat_result]]:
        opts = self.options
        stack: list[_Ignore] = []

        def visit(dir_path: Path, dir_rel: str) -> Iterator[tuple[str, Path, os.stat_result]]:
            pushed = False
            if opts.honour_gitignore:
                gi = dir_path / ".gitignore"
                try:
                    text = gi.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    text = None
                if text is not None:
                    stack.append(
                        _Ignore(dir_rel, pathspec.GitIgnoreSpec.from_lines(text.splitlines()))
                    )
                    pushed = True
            try:
                entries = sorted(os.scandir(dir_path), key=lambda e: e.name)
            except OSError:
                entries = []
            for entry in entries:
                rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
                try:
                    if entry.is_symlink():
                        continue  # a link may leave the root; never follow one
                    if entry.is_dir():
                        if entry.name in _ALWAYS_SKIP_DIRS or _ignored(rel, True, stack):
                            continue
                        if self._exclude.match_file(rel + "/"):
                            continue
                        yield from visit(Path(entry.path), rel)
                        continue
                    if not entry.is_file() or _ignored(rel, False, stack):
                        continue
                    if self._exclude.match_file(rel):
                        continue
                    if self._include is not None and not self._include.match_file(rel):
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                if st.st_size > opts.max_file_bytes or st.st_size == 0:
                    continue
                yield rel, Path(entry.path), st
            if pushed:
                stack.pop()

        yield from visit(self.root, "")

    def refresh(self) -> bool:
        """Bring the chunks up to date with the disk; ``True`` when anything changed."""
        seen: dict[str, _FileState] = {}
        changed = False
        for rel, path, st in self._walk():
            old = self._files.get(rel)
            if old is not None and old.mtime_ns == st.st_mtime_ns and old.size == st.st_size:
                seen[rel] = old
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            seen[rel] = _FileState(
                st.st_mtime_ns, st.st_size, chunk_file(path, rel, data, self.options.window_lines)
            )
            changed = True
        if set(seen) != set(self._files):
            changed = True
        if changed:
            self._files = seen
            self.chunks = [c for rel in sorted(seen) for c in seen[rel].chunks]
            self.generation += 1
        return changed

    @property
    def file_count(self) -> int:
        return len(self._files)


def verify_chunk(root: Path, identity: FrameIdentity) -> FrameVerdict:
    """Re-read the file a chunk id names and judge the held digest (V3, V4).

    ``gone`` when the file or the addressed lines no longer exist; ``stale``
    (with the current digest) when the bytes changed; ``valid`` only when the
    held digest equals the digest of the bytes on disk now; ``unknown`` when
    the identity carries no digest or is not one of ours.
    """
    parsed = parse_chunk_id(identity.frame_id)
    if parsed is None or identity.content_digest is None:
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    rel, range_ = parsed
    root = root.resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FrameVerdict(frame=identity, status=VerdictStatus.GONE.value)
    except OSError:
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    try:
        current = sha256_digest(address_line_range(data, range_))
    except UnverifiableRange:
        # The lines the frame addressed are no longer there (F17 start_past_end).
        return FrameVerdict(frame=identity, status=VerdictStatus.GONE.value)
    if current == identity.content_digest:
        return FrameVerdict(frame=identity, status=VerdictStatus.VALID.value)
    return FrameVerdict(
        frame=identity, status=VerdictStatus.STALE.value, replacement_digest=current
    )
