"""What an MCP server served, kept for reuse: bounded by entries and bytes, least recently
used out first.

A listing is kept for the server's ``ttlMs`` (else the configured default); a read
also past that while its resource still reports the ``lastModified`` it had when it
was read (the server says it has not changed). Nothing a server does can grow it past
its bounds: a listing that keeps naming new resources only turns the cache over
(the oldest use goes first), and a value larger than the byte bound alone is not
kept at all. Loop-owned: only the event loop's thread touches it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_ENTRIES", "ReadCache"]

DEFAULT_MAX_ENTRIES = 1024
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(slots=True, frozen=True)
class _Entry:
    value: object
    size: int
    expires: float
    last_modified: str | None


class ReadCache:
    """Listings and reads by key, within ``max_entries`` and ``max_bytes`` (LRU)."""

    def __init__(
        self,
        clock: Callable[[], float],
        default_ttl_s: float,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._clock = clock
        self._default = default_ttl_s
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        #: Entries pushed out to stay within the bounds (not expiries).
        self.evicted = 0

    def __repr__(self) -> str:
        return (
            f"<ReadCache {len(self._entries)}/{self.max_entries} entries "
            f"{self._bytes}/{self.max_bytes} bytes evicted={self.evicted}>"
        )

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The sizes of what is held, as given to ``put``."""
        return self._bytes

    def get(self, key: str, last_modified: str | None = None) -> object | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._clock() < entry.expires or (
            last_modified is not None and last_modified == entry.last_modified
        ):
            self._entries.move_to_end(key)
            return entry.value
        self._drop(key)
        return None

    def put(
        self,
        key: str,
        value: object,
        *,
        size: int,
        ttl_ms: int | None,
        last_modified: str | None = None,
    ) -> None:
        """Keep ``value`` (``size`` bytes) under ``key``, pushing out the least recently
        used entries until both bounds hold; a value over the byte bound is not kept."""
        self._drop(key)
        if size > self.max_bytes or self.max_entries < 1:
            return
        ttl = ttl_ms / 1000 if ttl_ms else self._default
        self._entries[key] = _Entry(value, size, self._clock() + ttl, last_modified)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)
            self.evicted += 1

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size
