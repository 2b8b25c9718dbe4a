"""``providers.memory``: durable, bitemporal agent memory (SQLite, FTS5) as a CGP provider.

``python -m providers.memory`` serves; ``add``/``import``/``supersede``/``list``/``forget``
edit the database: without ``--db``, the one of the memory provider in the hostd config
``--config`` names, else the one found from the current directory (``--help`` lists
options).
"""

from ._database import DatabaseChoiceError, default_db_path
from ._provider import MemoryProvider, main
from ._store import (
    FTS_HALF_SCORE,
    KINDS,
    AlreadyForgotten,
    Entry,
    MemoryStore,
    NewEntry,
    TimestampError,
    timestamp_key,
)

__all__ = [
    "FTS_HALF_SCORE",
    "KINDS",
    "AlreadyForgotten",
    "DatabaseChoiceError",
    "Entry",
    "MemoryProvider",
    "MemoryStore",
    "NewEntry",
    "TimestampError",
    "default_db_path",
    "main",
    "timestamp_key",
]
