"""A directory tree as a set of text chunks: walking, ignoring, refreshing, verifying.

Shared by the ``files`` (lexical) and ``semantic`` (embedding) providers. It
owns which files are read (``.gitignore`` at every level, include/exclude
globs, no binaries, no huge files) and the verdict on a held chunk (V3, V4);
how a file becomes chunks is ``_chunk``'s, one chunker for both providers. It
knows nothing about ranking or about the wire.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from hostd.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_MIN_CHUNK_TOKENS,
    DEFAULT_WINDOW_LINES,
    DOC_SUFFIXES,
    Chunk,
    chunk_file,
    chunk_frame,
    parse_chunk_id,
    split_lines,
)
from hostd.protocol import (
    FrameIdentity,
    FrameVerdict,
    VerdictStatus,
)
from hostd.provider import verify_file_range

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MIN_CHUNK_TOKENS",
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
# Never indexed, whatever the ignore files say: VCS internals and tool caches.
_ALWAYS_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".ruff_cache"}
)


@dataclass(slots=True, frozen=True)
class CorpusOptions:
    """What to read under ``root``. Globs use ``.gitignore`` syntax, relative to ``root``."""

    root: Path
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    window_lines: int = DEFAULT_WINDOW_LINES
    honour_gitignore: bool = True
    #: Word pieces a chunk's embedding input may take (the model's window, ``_chunk``).
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    #: Chunks under this many word pieces are merged with a neighbour (0: never).
    min_chunk_tokens: int = DEFAULT_MIN_CHUNK_TOKENS


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
        self._reads = 0

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

    def refresh(self, progress: Callable[[int, int], None] | None = None) -> bool:
        """Bring the chunks up to date with the disk; ``True`` when anything changed.

        ``progress(done, total)`` is told of every file read (the walk comes first then,
        so the total is known)."""
        seen: dict[str, _FileState] = {}
        changed = False
        walk: Iterable[tuple[str, Path, os.stat_result]] = self._walk()
        total = 0
        if progress is not None:
            walk = list(walk)
            total = len(walk)
            progress(0, total)
        for n, (rel, path, st) in enumerate(walk, 1):
            if progress is not None and (n % 50 == 0 or n == total):
                progress(n, total)
            old = self._files.get(rel)
            if old is not None and old.mtime_ns == st.st_mtime_ns and old.size == st.st_size:
                seen[rel] = old
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            opts = self.options
            chunks = chunk_file(
                path,
                rel,
                data,
                opts.window_lines,
                max_tokens=opts.chunk_tokens,
                min_tokens=opts.min_chunk_tokens,
            )
            seen[rel] = _FileState(st.st_mtime_ns, st.st_size, chunks)
            self._reads += 1
            changed = True
        if set(seen) != set(self._files):
            changed = True
        if changed:
            self._files = seen
            self.chunks = [c for rel in sorted(seen) for c in seen[rel].chunks]
        return changed

    @property
    def file_count(self) -> int:
        return len(self._files)

    @property
    def reads(self) -> int:
        """Files read (chunked) since this corpus was made: 0 after a warm restart."""
        return self._reads

    def state(self) -> dict[str, tuple[int, int, list[Chunk]]]:
        """Every file's ``(mtime_ns, size, chunks)``, for a cache (``_corpus_cache``)."""
        return {rel: (f.mtime_ns, f.size, f.chunks) for rel, f in self._files.items()}

    def adopt(self, state: dict[str, tuple[int, int, list[Chunk]]]) -> None:
        """Take a cached state; the next ``refresh`` re-reads only files whose
        ``(mtime_ns, size)`` differ from it."""
        self._files = {rel: _FileState(m, n, chunks) for rel, (m, n, chunks) in state.items()}
        self.chunks = [c for rel in sorted(self._files) for c in self._files[rel].chunks]


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
    return verify_file_range(identity, path, range_)
