"""Source re-reads (F5, F17): a ``file`` provenance digest covers exactly the bytes
its range addresses, and a source is re-read only under a host-trusted root.

``SourceReader`` is the one piece of the verify stage that touches the
filesystem; it is sync on purpose so the async stage runs it in a worker thread
(``anyio.to_thread.run_sync``), never on the event loop. The URI is resolved with
symlinks and ``..`` followed, and a path that leaves every root is refused before
anything is opened. A file whose identity (``stat``) is the one the stage's
``SourceCache`` holds is not read again (``_files``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote, urlsplit

from hostd.protocol import (
    ContextFrame,
    LineIndex,
    Provenance,
    UnverifiableRange,
    is_sha256_digest,
)

from ._files import SourceCache, SourceFile

__all__ = [
    "DEFAULT_MAX_SOURCE_BYTES",
    "NOT_RE_READ",
    "SourceCheck",
    "SourceOutcome",
    "SourceReader",
    "Unverifiable",
    "file_uri_path",
]

#: Largest source file re-read whole (bytes); a larger one is ``too_large``.
DEFAULT_MAX_SOURCE_BYTES = 16 * 1024 * 1024


class Unverifiable(StrEnum):
    """Why a frame or source could not be checked."""

    NO_CONTENT_DIGEST = "no_content_digest"
    NO_INLINE_CONTENT = "no_inline_content"
    NO_URI = "no_uri"
    UNSUPPORTED_URI = "unsupported_uri"
    UNTRUSTED_PATH = "untrusted_path"
    #: The state's reason for a frame kept (``untrusted = "include"``) although its
    #: ``file`` provenance resolves outside every trusted root (``untrusted_path``).
    OUTSIDE_TRUSTED_ROOTS = "outside_trusted_roots"
    #: A ``file`` provenance of a provider with no trusted root at all (its own or the
    #: host's): its source is never re-read, so its digest is taken on trust.
    NO_TRUSTED_ROOT = "no_trusted_root"
    UNREADABLE = "unreadable"
    NOT_A_FILE = "not_a_file"
    TOO_LARGE = "too_large"
    # F17 range problems keep the protocol's own names.
    UNRECOGNISED = "unrecognised"
    INVERTED = "inverted"
    START_PAST_END = "start_past_end"


class SourceOutcome(StrEnum):
    VERIFIED = "source_verified"
    MISMATCH = "source_mismatch"
    UNVERIFIABLE = "unverifiable"


@dataclass(slots=True, frozen=True)
class SourceCheck:
    """The outcome of re-reading one frame's ``file`` provenance (all entries together)."""

    outcome: SourceOutcome
    reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


#: The source check of a frame that cites a file its provider has no root to re-read it
#: under: unverifiable, so the frame is fenced ``verified="no"`` (its inline digest may
#: hold, but the citation's does not get checked at all).
NOT_RE_READ = SourceCheck(SourceOutcome.UNVERIFIABLE, Unverifiable.NO_TRUSTED_ROOT.value)


def file_uri_path(uri: str | None) -> tuple[str | None, Unverifiable | None]:
    """The absolute local path a ``file:`` URI names, or why it names none.

    Accepts ``file:///abs``, ``file://localhost/abs`` and ``file:/abs``,
    percent-decoded. Another scheme or host, a query or fragment, a relative
    path or a NUL byte is ``unsupported_uri``.
    """
    if not uri:
        return None, Unverifiable.NO_URI
    if uri.startswith("file:///") and not ("%" in uri or "?" in uri or "#" in uri or "\x00" in uri):
        return uri[7:], None  # the common spelling, nothing to decode
    return parse_file_uri(uri)


def parse_file_uri(uri: str) -> tuple[str | None, Unverifiable | None]:
    """``file_uri_path`` of a non-empty ``uri`` by the general parse (no shortcut)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return None, Unverifiable.UNSUPPORTED_URI
    if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
        return None, Unverifiable.UNSUPPORTED_URI
    if parts.query or parts.fragment:
        return None, Unverifiable.UNSUPPORTED_URI
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path:
        return None, Unverifiable.UNSUPPORTED_URI
    return path, None


def _within(path: str, root: str) -> bool:
    """Whether resolved ``path`` is ``root`` or below it (both already resolved)."""
    if root == os.sep:
        return path.startswith(os.sep)
    return path == root or path.startswith(root + os.sep)


_ReadResult = tuple[SourceFile | None, Unverifiable | None, str]


def _key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class SourceReader:
    """Re-reads ``file`` provenance under trusted roots. Sync: run it in a worker thread.

    Roots are resolved once (symlinks followed) when the reader is made. A
    candidate path is resolved the same way and must land inside a root before
    it is opened; it is then opened without following a final symlink, must be
    a regular file and at most ``max_bytes`` long. Each file is looked at once per
    reader (one reader per verification pass), so many frames from one file
    cost one read; with a ``cache`` shared across passes, a file whose ``stat``
    identity is unchanged (and settled) costs a ``stat`` and no read.
    """

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]],
        *,
        max_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
        cache: SourceCache | None = None,
    ) -> None:
        self.roots = tuple(dict.fromkeys(os.path.realpath(os.fspath(r)) for r in roots))
        # ``_within`` for every root in one ``str.startswith`` (a root itself matches by
        # equality: ``root + sep`` is not a prefix of ``root``).
        self._prefixes = tuple(os.sep if r == os.sep else r + os.sep for r in self.roots)
        self.max_bytes = max_bytes
        self.cache = cache if cache is not None else SourceCache(0)  # 0: keeps nothing
        self._files: dict[str, _ReadResult] = {}
        self._dirs: dict[str, str] = {}
        #: ``file`` URI -> its file as read this pass (each URI parsed once a pass; only
        #: URIs that name a path, looked up only after their digest was found usable).
        self._by_uri: dict[str, _ReadResult] = {}
        #: Files read this pass (not served from the cache).
        self.reads = 0

    def read(self, path: str) -> _ReadResult:
        """``(file, None, real)`` or ``(None, reason, real)``; never reads outside roots."""
        cached = self._files.get(path)
        if cached is not None:
            return cached
        result = self._read(path)
        self._files[path] = result
        return result

    def _resolve(self, path: str) -> tuple[str, os.stat_result | None]:
        """``os.path.realpath`` with the directory part cached for this reader's pass,
        and the resolved path's ``lstat`` when resolving took it (``None``: not taken).

        Symlinks and ``..`` are resolved exactly as ``realpath`` does; only a plain
        final component (not ``.``/``..``, not a symlink) skips re-walking its directory.
        """
        # ``os.path.split`` and ``join`` by hand (POSIX): ``head`` may keep a doubled
        # slash, which ``realpath`` folds as ``split`` would have.
        head, _, name = path.rpartition("/")
        if not head or name in ("", ".", ".."):
            return os.path.realpath(path), None
        real_dir = self._dirs.get(head)
        if real_dir is None:
            real_dir = self._dirs[head] = self._real_dir(head)
        candidate = real_dir + "/" + name if real_dir != "/" else "/" + name
        try:
            st = os.lstat(candidate)
        except OSError:
            return candidate, None
        if stat.S_ISLNK(st.st_mode):
            return os.path.realpath(candidate), None
        return candidate, st

    def _inside(self, real: str) -> bool:
        """``_within`` some root (``real`` resolved)."""
        return real in self.roots or real.startswith(self._prefixes)

    def _real_dir(self, head: str) -> str:
        """``os.path.realpath(head)``, walking only the components below a root.

        A root was resolved by ``realpath`` when this pass's reader was made, so it and
        every directory above it named no symlink this pass; whoever could swap one of
        those could as well swap the root itself, which the next pass follows wherever
        it points (F5: roots and sources are resolved each pass, never across passes).
        Below the root each component is ``lstat``ed now, as ``realpath`` would: a
        symlink, ``.``, ``..`` or an empty component hands the whole path to ``realpath``.
        """
        for root, prefix in zip(self.roots, self._prefixes, strict=True):
            if head == root:
                return root
            if head.startswith(prefix):
                cur = prefix[:-1]
                for name in head[len(prefix) :].split("/"):
                    if name in ("", ".", ".."):
                        return os.path.realpath(head)
                    cur += "/" + name
                    try:
                        mode = os.lstat(cur).st_mode
                    except OSError:
                        continue  # as ``realpath``: a missing component is taken as named
                    if stat.S_ISLNK(mode):
                        return os.path.realpath(head)
                return head
        return os.path.realpath(head)

    def _read(self, path: str) -> _ReadResult:
        real, st = self._resolve(path)
        if not self._inside(real):
            return None, Unverifiable.UNTRUSTED_PATH, real
        if st is None:
            try:
                # Not following a final symlink, as the open below does not.
                st = os.stat(real, follow_symlinks=False)
            except OSError:
                st = None
        # Else ``st`` is the ``lstat`` that just found ``real`` no symlink: the same call
        # again would only move the moment the identity is taken (F5: still every pass).
        if st is not None and stat.S_ISREG(st.st_mode):
            cached = self.cache.get(real, _key(st))
            if cached is not None:
                return cached, None, real
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        # O_NONBLOCK so a FIFO planted under a root cannot hang the worker thread.
        flags |= getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(real, flags)
        except OSError:
            return None, Unverifiable.UNREADABLE, real
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None, Unverifiable.NOT_A_FILE, real
            if st.st_size > self.max_bytes:
                return None, Unverifiable.TOO_LARGE, real
            chunks: list[bytes] = []
            left = self.max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
            if len(data) > self.max_bytes:
                return None, Unverifiable.TOO_LARGE, real
            self.reads += 1
            # Keyed by the identity taken before the read: a write during it changes the
            # file's mtime after that, so the next pass reads it again.
            return self.cache.put(real, _key(st), data), None, real
        except OSError:
            return None, Unverifiable.UNREADABLE, real
        finally:
            os.close(fd)

    def _verify(self, prov: Provenance, uri: str | None) -> SourceFile | SourceCheck:
        """One ``file`` provenance: its file when the digest of the range it addresses
        (F17) is its own, else the ``SourceCheck`` saying why not. The verified case
        allocates nothing. ``uri``: the entry's own, else its frame's."""
        digest = prov.digest
        got = self._by_uri.get(uri) if uri is not None else None
        if got is None:
            path, problem = file_uri_path(uri)
            if path is None:
                assert problem is not None
                return _unverifiable(prov, uri, problem.value)
        # A URI read this pass parsed as a path: the digest is tested next either way.
        if not is_sha256_digest(digest):
            # F5 is the leg audit's to enforce; here it only means nothing to compare.
            return _unverifiable(prov, uri, Unverifiable.NO_CONTENT_DIGEST.value)
        if got is None:
            assert uri is not None and path is not None
            got = self._by_uri[uri] = self.read(path)
        source, problem, _real = got
        if source is None:
            assert problem is not None
            return _unverifiable(prov, uri, problem.value)
        try:
            computed = source.digest(prov.range)
        except UnverifiableRange as exc:
            base = {"uri": uri, "range": prov.range, "detail": exc.detail}
            return SourceCheck(SourceOutcome.UNVERIFIABLE, exc.reason.value, base)
        if computed == digest:
            return source
        # ``expected``: the digest the provenance must carry, computed from the file's
        # bytes now; ``actual``: the one it carries (as for an inline digest mismatch).
        return SourceCheck(
            SourceOutcome.MISMATCH,
            None,
            {"uri": uri, "range": prov.range, "expected": computed, "actual": digest},
        )

    def check_provenance(self, prov: Provenance, frame_uri: str | None) -> SourceCheck:
        """One ``file`` provenance: re-read, address the range (F17), compare the digest."""
        uri = prov.uri or frame_uri
        got = self._verify(prov, uri)
        if isinstance(got, SourceCheck):
            return got
        base = {"uri": uri, "range": prov.range}
        return SourceCheck(SourceOutcome.VERIFIED, None, base)

    def check_frame(
        self, frame: ContextFrame, keep: dict[str, LineIndex] | None = None
    ) -> SourceCheck | None:
        """All ``file`` provenance of a frame, or ``None`` when there is none or no root.

        Any mismatch makes the frame a mismatch; all verified makes it verified;
        otherwise it is unverifiable with the first reason. Every entry is checked
        (each file looked at once a pass whatever the outcome). ``keep``: when the
        frame is verified, each of its sources' lines by URI, unless already there.
        """
        if not self.roots:
            return None
        frame_uri = frame.uri
        n = 0
        mismatch: SourceCheck | None = None
        unverifiable: SourceCheck | None = None
        found: list[tuple[str, SourceFile]] = []
        for p in frame.provenance:
            if p.type != "file":
                continue
            uri = p.uri or frame_uri
            got = self._verify(p, uri)
            if got.__class__ is SourceFile:
                if uri is not None:  # verified: it has one
                    found.append((uri, got))
            else:
                assert isinstance(got, SourceCheck)
                if got.outcome == SourceOutcome.MISMATCH:
                    if mismatch is None:
                        mismatch = SourceCheck(got.outcome, None, {**got.detail, "provenance": n})
                elif unverifiable is None:
                    unverifiable = SourceCheck(
                        got.outcome, got.reason, {**got.detail, "provenance": n}
                    )
            n += 1
        if not n:
            return None
        if mismatch is not None:
            return mismatch
        if unverifiable is not None:
            return unverifiable
        if keep is not None:
            for uri, source in found:
                if uri not in keep:
                    keep[uri] = source.lines
        return _verified(n)


def _unverifiable(prov: Provenance, uri: str | None, reason: str) -> SourceCheck:
    return SourceCheck(SourceOutcome.UNVERIFIABLE, reason, {"uri": uri, "range": prov.range})


_VERIFIED: dict[int, SourceCheck] = {}


def _verified(n: int) -> SourceCheck:
    """The verified check of a frame with ``n`` ``file`` entries: one shared, read-only
    value per count (nothing reads a verified check's detail but a reader of the audit)."""
    got = _VERIFIED.get(n)
    if got is None:
        got = SourceCheck(SourceOutcome.VERIFIED, None, MappingProxyType({"provenance_checked": n}))
        if n <= 64:
            _VERIFIED[n] = got
    return got


# --- the per-frame decision ---------------------------------------------------------
