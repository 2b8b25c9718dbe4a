"""Source files kept across verification passes (F5, F17), keyed by what the file is now.

Re-reading every ``file`` source on every composition costs a read and a scan of
the whole file per frame; the files rarely change between two compositions. A
``SourceCache`` keeps each file's bytes with its line starts (``LineIndex``) and
the digest of every range already addressed, under the file's resolved path and
its identity as ``stat`` gives it: device, inode, size, modification and change
time (ns). A pass still resolves the path under the trusted roots and ``stat``s
it; only when that identity is the one cached, and settled, are the bytes reused.

Settled: a file's timestamps are as coarse as the kernel's clock tick, so a write
of the same size within the tick of our read would leave every field unchanged.
A file changed less than ``SETTLE_NS`` before it was read is therefore read again
on every pass until it has been quiet that long (the "racily clean" rule of
git's index). The cache is bounded in bytes (the bytes and 8 per line start),
least recently used out first, and shared by the worker threads of concurrent
compositions (one lock around its table).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from hostd.protocol import LineIndex, UnverifiableRange, sha256_digest

__all__ = ["DEFAULT_CACHE_BYTES", "SETTLE_NS", "FileKey", "SourceCache", "SourceFile"]

#: Bytes of sources (and their line starts) kept across passes.
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024
#: A file whose mtime or ctime is this recent when read is not reused (coarse clocks).
SETTLE_NS = 2_000_000_000
#: Digests kept per file: a provider cannot grow one file's table without bound.
_MAX_DIGESTS = 4096

#: ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``.
FileKey = tuple[int, int, int, int, int]


@dataclass(slots=True, eq=False)
class SourceFile:
    """One file as read: its lines found once, each range's digest computed once."""

    key: FileKey
    lines: LineIndex
    #: Whether its timestamps were older than ``SETTLE_NS`` when it was read.
    settled: bool
    _digests: dict[str | None, str | UnverifiableRange] = field(default_factory=dict)

    @property
    def data(self) -> bytes:
        return self.lines.data

    def digest(self, range_: str | None) -> str:
        """The digest of the bytes ``range_`` addresses (F17); ``UnverifiableRange``
        when it addresses nothing (that outcome is kept too)."""
        known = self._digests.get(range_)
        if known is None:
            try:
                known = sha256_digest(self.lines.address(range_))
            except UnverifiableRange as exc:
                known = exc
            if len(self._digests) >= _MAX_DIGESTS:
                self._digests.clear()
            self._digests[range_] = known
        if isinstance(known, UnverifiableRange):
            raise known
        return known

    @property
    def cost(self) -> int:
        return len(self.lines.data) + 8 * len(self.lines.starts)


class SourceCache:
    """Resolved path -> the file as last read, while its identity is unchanged."""

    def __init__(
        self, max_bytes: int = DEFAULT_CACHE_BYTES, *, clock: Callable[[], int] = time.time_ns
    ) -> None:
        self.max_bytes = max_bytes
        self._clock = clock
        self._files: OrderedDict[str, SourceFile] = OrderedDict()
        self._lock = threading.Lock()
        self.size = 0
        #: Files served from the cache and files read (cumulative).
        self.hits = 0
        self.reads = 0

    def __len__(self) -> int:
        return len(self._files)

    def get(self, real: str, key: FileKey) -> SourceFile | None:
        """The cached file at ``real`` when it is still ``key`` and settled."""
        with self._lock:
            cached = self._files.get(real)
            if cached is None or cached.key != key or not cached.settled:
                return None
            self._files.move_to_end(real)
            self.hits += 1
            return cached

    def put(self, real: str, key: FileKey, data: bytes) -> SourceFile:
        """``data`` just read at ``real`` (identity ``key``, taken before the read)."""
        changed = max(key[3], key[4])
        read = SourceFile(key, LineIndex(data), self._clock() - changed >= SETTLE_NS)
        with self._lock:
            self.reads += 1
            old = self._files.pop(real, None)
            if old is not None:
                self.size -= old.cost
            if read.cost <= self.max_bytes:
                self._files[real] = read
                self.size += read.cost
                while self.size > self.max_bytes:
                    _, evicted = self._files.popitem(last=False)
                    self.size -= evicted.cost
        return read
