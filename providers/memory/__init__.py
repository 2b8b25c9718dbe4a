"""``providers.memory``: durable, bitemporal agent memory (SQLite, FTS5) as a CGP provider.

``python -m providers.memory`` serves; ``add``/``import``/``supersede``/``list``/``forget``
edit the database (``--help`` lists options).
"""

from ._provider import MemoryProvider, default_db_path, main
from ._store import (
    FTS_HALF_SCORE,
    KINDS,
    Entry,
    MemoryStore,
    NewEntry,
    TimestampError,
    timestamp_key,
)

__all__ = [
    "FTS_HALF_SCORE",
    "KINDS",
    "Entry",
    "MemoryProvider",
    "MemoryStore",
    "NewEntry",
    "TimestampError",
    "default_db_path",
    "main",
    "timestamp_key",
]
