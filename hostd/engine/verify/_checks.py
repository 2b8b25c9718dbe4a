"""One pass of checks over frames: inline digests (D4) and source re-reads (F5, F17).

Sync, and touching the filesystem: the stage runs ``check_frames`` in a worker
thread whenever ``needs_io`` says a frame has ``file`` provenance under a root.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from hostd.protocol import ContextFrame, LineIndex

from ._files import SourceCache
from ._rules import InlineCheck, check_inline_digest
from ._source import SourceCheck, SourceOutcome, SourceReader, file_uri_path

__all__ = ["CheckPass", "Checks", "RootsFor", "Sources", "check_frames", "needs_io"]

#: ``file`` URI -> the bytes a frame's provenance was matched against (F5, F17), with
#: their lines found (span merging slices them without scanning again).
Sources = dict[str, LineIndex]

#: Provider id -> the roots its ``file`` sources may be re-read under.
RootsFor = Callable[[str], tuple[str | os.PathLike[str], ...]]


def needs_io(items: Sequence[tuple[str, ContextFrame]], roots_for: RootsFor) -> bool:
    return any(
        frame.provenance and roots_for(pid) and any(p.type == "file" for p in frame.provenance)
        for pid, frame in items
    )


#: One frame's checks: its inline digest (D4) and its source check (``None``: no roots
#: or no provenance).
Checks = tuple[InlineCheck, "SourceCheck | None"]


class CheckPass:
    """One verification pass: one reader per distinct set of roots, all over ``cache``
    (files kept across passes), so each file is looked at once per pass however many
    calls of ``check`` ask for it. Not thread-safe: one call at a time."""

    __slots__ = ("_by_pid", "_by_roots", "cache", "max_source_bytes", "roots_for")

    def __init__(
        self, roots_for: RootsFor, max_source_bytes: int, cache: SourceCache | None = None
    ) -> None:
        self.roots_for = roots_for
        self.max_source_bytes = max_source_bytes
        self.cache = cache
        self._by_roots: dict[tuple[str, ...], SourceReader] = {}
        self._by_pid: dict[str, SourceReader | None] = {}

    def _reader(self, pid: str) -> SourceReader | None:
        if pid in self._by_pid:
            return self._by_pid[pid]
        roots = self.roots_for(pid)
        reader = None
        if roots:
            key = tuple(os.fspath(r) for r in roots)
            reader = self._by_roots.get(key)
            if reader is None:
                reader = self._by_roots[key] = SourceReader(
                    roots, max_bytes=self.max_source_bytes, cache=self.cache
                )
        self._by_pid[pid] = reader
        return reader

    @property
    def reads(self) -> int:
        """Files read this pass (not served from the cache)."""
        return sum(r.reads for r in self._by_roots.values())

    def check(self, items: Sequence[tuple[str, ContextFrame]]) -> list[Checks]:
        """Each frame's inline check and source check, in ``items`` order."""
        out: list[Checks] = []
        for pid, frame in items:
            reader = self._reader(pid)
            source = reader.check_frame(frame) if reader is not None and frame.provenance else None
            out.append((check_inline_digest(frame), source))
        return out

    def sources(
        self, items: Sequence[tuple[str, ContextFrame]], checks: Sequence[Checks]
    ) -> Sources:
        """The bytes of every source a verified frame of ``items`` was matched against, by
        URI, first quoted first. Reads nothing: a verified frame's files were looked at
        this pass (``check``), and each reader keeps what it looked at."""
        sources: Sources = {}
        for (pid, frame), (_, source) in zip(items, checks, strict=True):
            if source is not None and source.outcome == SourceOutcome.VERIFIED:
                reader = self._reader(pid)
                assert reader is not None
                _keep_bytes(reader, frame, sources)
        return sources


def check_frames(
    items: Sequence[tuple[str, ContextFrame]],
    roots_for: RootsFor,
    max_source_bytes: int,
    cache: SourceCache | None = None,
) -> tuple[list[Checks], int, Sources]:
    """Each frame's inline check and source check (``None``: no roots or no provenance),
    how many files were read, and the bytes of every source some frame was matched
    against (by URI: span merging quotes a union of lines from them, never re-reading).
    One pass (``CheckPass``) over ``cache`` (files kept across passes)."""
    one = CheckPass(roots_for, max_source_bytes, cache)
    checks = one.check(items)
    return checks, one.reads, one.sources(items, checks)


def _keep_bytes(reader: SourceReader, frame: ContextFrame, sources: Sources) -> None:
    """The bytes (as read once this pass, no copy) of each source ``frame`` matched."""
    for p in frame.provenance:
        uri = p.uri or frame.uri
        if p.type != "file" or uri is None or uri in sources:
            continue
        path, _ = file_uri_path(uri)
        if path is not None:
            source, _, _ = reader.read(path)  # cached by the reader: looked at once per pass
            if source is not None:
                sources[uri] = source.lines
