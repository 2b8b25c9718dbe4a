"""One pass of checks over frames: inline digests (D4) and source re-reads (F5, F17).

Sync, and touching the filesystem: the stage runs ``check_frames`` in a worker
thread whenever ``needs_io`` says a frame has ``file`` provenance under a root.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from operator import itemgetter

from hostd.protocol import ContextFrame, FrameId, LineIndex

from ._files import SourceCache
from ._rules import InlineCheck, quick_inline_check
from ._source import SourceCheck, SourceReader

__all__ = [
    "EarlyChecks",
    "FrameChecks",
    "Readers",
    "RootsFor",
    "Sources",
    "check_frames",
    "needs_io",
]

#: ``file`` URI -> the bytes a frame's provenance was matched against (F5, F17), with
#: their lines found (span merging slices them without scanning again).
Sources = dict[str, LineIndex]

#: Provider id -> the roots its ``file`` sources may be re-read under.
RootsFor = Callable[[str], tuple[str | os.PathLike[str], ...]]

#: The source readers of one pass, by the roots they read under.
Readers = dict[tuple[str, ...], SourceReader]

#: One frame's inline check and source check (``None``: no roots or no provenance).
FrameChecks = tuple[InlineCheck, SourceCheck | None]


class EarlyChecks:
    """The checks a turn ran on the frames of legs already in, while other legs were
    still out: each frame's, by the frame itself, and the pass's readers, which the
    turn's last call of ``check_frames`` goes on with (each file looked at once a turn).

    ``skip``: FrameIds a held copy may stand for (D2): such a fresh frame is checked
    only if its held copy falls out, so it is never checked early.
    """

    __slots__ = ("done", "readers", "skip", "sources")

    def __init__(self, skip: frozenset[FrameId] = frozenset()) -> None:
        self.skip = skip
        self.done: dict[int, tuple[ContextFrame, FrameChecks]] = {}
        self.readers: Readers = {}
        self.sources: Sources = {}

    def get(self, frame: ContextFrame) -> FrameChecks | None:
        hit = self.done.get(id(frame))
        return hit[1] if hit is not None and hit[0] is frame else None

    def add(
        self,
        items: Sequence[tuple[str, ContextFrame]],
        checks: Sequence[FrameChecks],
        sources: Sources,
    ) -> None:
        for (_, frame), check in zip(items, checks, strict=True):
            self.done[id(frame)] = (frame, check)
        for uri, lines in sources.items():
            self.sources.setdefault(uri, lines)


def needs_io(items: Sequence[tuple[str, ContextFrame]], roots_for: RootsFor) -> bool:
    """Whether some frame has ``file`` provenance under roots (its provider's, looked
    up once per provider)."""
    rooted: dict[str, bool] = {}
    for pid, frame in items:
        for p in frame.provenance:  # a plain loop: no generator per frame
            if p.type == "file":
                has = rooted.get(pid)
                if has is None:
                    has = rooted[pid] = bool(roots_for(pid))
                if has:
                    return True
                break
    return False


def check_frames(
    items: Sequence[tuple[str, ContextFrame]],
    roots_for: RootsFor,
    max_source_bytes: int,
    cache: SourceCache | None = None,
    inline: Callable[[ContextFrame], InlineCheck] = quick_inline_check,
    readers: Readers | None = None,
) -> tuple[list[FrameChecks], int, Sources]:
    """Each frame's inline check (``inline``: ``quick_inline_check`` or an ``InlineMemo``'s)
    and source check (``None``: no
    roots or no provenance), how many files were read, and the bytes of every source
    some frame was matched against (by URI: span merging quotes a union of lines from
    them, never re-reading). One reader per distinct set of roots, all over ``cache``
    (files kept across passes). ``readers``: the readers of an earlier call of the same
    pass, kept and added to, so each file is still looked at once and the count of
    files read is the pass's whole."""
    by_roots = readers if readers is not None else {}
    by_pid: dict[str, SourceReader | None] = {}
    for pid in dict.fromkeys(map(itemgetter(0), items)):  # each provider once, in order
        roots = roots_for(pid)
        reader = None
        if roots:
            key = tuple(os.fspath(r) for r in roots)
            reader = by_roots.get(key)
            if reader is None:
                reader = by_roots[key] = SourceReader(
                    roots, max_bytes=max_source_bytes, cache=cache
                )
        by_pid[pid] = reader
    if not by_roots:  # no provider has roots: inline digests only (D4)
        return [(inline(frame), None) for _, frame in items], 0, {}
    out: list[FrameChecks] = []
    sources: Sources = {}
    for pid, frame in items:
        reader = by_pid[pid]
        if reader is not None and frame.provenance:
            # A verified frame's sources go into ``sources`` as its check finds them.
            out.append((inline(frame), reader.check_frame(frame, sources)))
        else:
            out.append((inline(frame), None))
    return out, sum(r.reads for r in by_roots.values()), sources
