"""The shadow store: sampled compositions and their full candidate sets, in SQLite.

Opt-in (``[shadow] enabled``). A recorded request keeps what a replay needs
to compose it again under another policy: the budget the frames contested
(after floors), the caps, the live policy and what it included, and every
candidate with its provider and that provider's own score (F10), its
identity, canonical cost and ``file`` regions (so dedup, D2, works the same on
replay). Frame content and the goal are stored only when ``store_content`` is
set; otherwise a digest stands for the goal and the content digest for the
frame. With content, a record also keeps what span merging read (each merged
source's line count and which candidates were ``source_verified``, ``Merging``), so a
replay merges as the live composition did. The file is mode 0600 under the state
directory; rows older than ``retention_days`` and beyond ``max_requests`` or
``max_bytes`` are deleted on every write, oldest first.

Keeping those bounds costs the same whatever the store holds: each row carries
its ``size`` (the characters of its body and goal), triggers keep the row count
and the total size in ``totals``, and a write deletes only what it pushes past
a bound, oldest first, through the primary key and a ``recorded_at`` index. A
file from before the ``size`` column is migrated once, when first written.

A write someone waits on (``write_many(durable=True)``: acknowledged feedback, a
composition that asked for its record) is committed with ``synchronous = FULL``,
so it survives a power cut as well as a killed process; sampled records nobody
waits for keep the cheaper ``NORMAL``. A file that cannot be read (damaged, not a
database, a record of the wrong shape) is ``ShadowUnavailable`` naming the file
and what to do, never a traceback. The records themselves are ``_record``'s.

Compositions held for feedback and not yet written when the daemon stops
(``ShadowRecorder.close``) are set aside in ``pending``, apart from ``requests``:
replay, eval and calibration read ``requests`` only, so a composition nobody gave
feedback on counts for nothing, as before. Feedback on one (``load_pending``)
writes it to ``requests`` beside the feedback, and its pending row goes. The table
keeps the newest ``HELD`` rows (as the daemon's memory does) and none older than
``retention_days``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from hostd.errors import ShadowUnavailable

from ._feedback import FEEDBACK_SCHEMA, Feedback
from ._record import Recorded, from_row

__all__ = ["ShadowStore", "Writable", "unavailable"]


def unavailable(path: Path, problem: str) -> ShadowUnavailable:
    """The one error for a shadow store that cannot be used: one line, naming the file,
    what is wrong and what to do."""
    return ShadowUnavailable(
        f"{path}: {problem}; move the file aside (a new store is created on the next "
        "recording) or restore it from a backup",
        file=str(path),
        problem=problem,
    )


_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    goal_digest TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    goal TEXT,
    body TEXT NOT NULL
)
"""

# The O(1) bounds: a size per row, the running count and total beside the rows.
# Split on ";\n" and run one statement at a time, inside the writer's transaction.
_BOUNDS = """
CREATE INDEX IF NOT EXISTS requests_recorded_at ON requests (recorded_at);
CREATE TABLE IF NOT EXISTS totals (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    requests INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS requests_counted AFTER INSERT ON requests
    BEGIN UPDATE totals SET requests = requests + 1, size = size + NEW.size; END;
CREATE TRIGGER IF NOT EXISTS requests_uncounted AFTER DELETE ON requests
    BEGIN UPDATE totals SET requests = requests - 1, size = size - OLD.size; END;
"""

# Held compositions set aside at a stop, waiting for feedback: outside ``totals`` (the
# newest ``keep`` rows at most, ``write_pending``), never read by replay or eval.
_PENDING = """
CREATE TABLE IF NOT EXISTS pending (
    request_id TEXT PRIMARY KEY,
    recorded_at REAL NOT NULL,
    goal_digest TEXT NOT NULL,
    goal TEXT,
    body TEXT NOT NULL
);
"""


class Writable(Protocol):
    """What the store writes of a composition: a ``Recorded``, or a held one (``Held``)."""

    @property
    def request_id(self) -> str: ...
    @property
    def recorded_at(self) -> float: ...
    @property
    def goal_digest(self) -> str: ...
    @property
    def stored_goal(self) -> str | None: ...
    def body(self) -> str: ...


class ShadowStore:
    """``shadow.db`` under the state directory.

    Writes go through one connection, opened on the first write and kept until
    ``close()`` (so the bounds are kept without re-opening the file each time);
    ``load`` opens and closes its own.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_requests: int = 1000,
        max_bytes: int = 64 * 1024 * 1024,
        retention_days: float = 7.0,
    ) -> None:
        self.path = path
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.retention_days = retention_days
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self, *, create: bool) -> sqlite3.Connection:
        if create:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Created 0600 before SQLite opens it; SQLite gives its journal the same mode.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            os.chmod(self.path, 0o600)
        elif not self.path.exists():
            raise FileNotFoundError(f"no shadow recordings at {self.path}")
        # The writer's connection moves to the recorder's thread; the lock serialises it.
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout = 5000")
        return db

    def _set_journal(self, db: sqlite3.Connection) -> None:
        # WAL with synchronous=NORMAL: a commit costs no fsync (0.08 against 0.55 ms
        # of CPU a write measured, 0.5 against 13 ms wall). A power cut may lose the
        # last recordings, never the file's consistency: a fair trade for a sample.
        # The -wal and -shm files get the database file's mode (0600).
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")

    def _writer(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        db = self._connect(create=True)
        try:
            self._set_journal(db)
            db.execute("BEGIN IMMEDIATE")
            db.execute(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(requests)")}
            if "size" not in columns:  # a store from before the size column: sized once
                db.execute("ALTER TABLE requests ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
                db.execute("UPDATE requests SET size = length(body) + ifnull(length(goal), 0)")
            counted = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'totals'"
            ).fetchone()
            for stmt in (_BOUNDS + FEEDBACK_SCHEMA + _PENDING).split(";\n"):
                if stmt.strip():
                    db.execute(stmt)
            if counted is None:  # totals are new: count what the file holds, once
                db.execute(
                    "INSERT INTO totals (one, requests, size) "
                    "SELECT 1, count(*), ifnull(sum(size), 0) FROM requests"
                )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            db.close()
            raise
        self._db = db
        return db

    def open(self) -> None:
        """Open (and if need be create or migrate) the file for writing now; a store
        that cannot be written fails here with ``OSError`` or ``sqlite3.Error``."""
        with self._lock:
            self._writer()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def write(self, record: Recorded) -> None:
        self.write_many([record])

    def write_many(
        self,
        records: Sequence[Writable],
        feedback: Sequence[Feedback] = (),
        *,
        durable: bool = False,
    ) -> list[str]:
        """Append ``records`` in order, then keep the bounds, then add ``feedback``
        (each replacing its request's earlier one), in one transaction; the request ids
        whose feedback found no recorded request (pruned meanwhile) and was not kept.
        ``durable``: someone waits on this commit, so it is synced to the disk.

        The bounds are kept once for the batch: deleting oldest first until they hold
        leaves what keeping them after each record would have left (every bound is a
        suffix of the rows by age, and the batch's suffix is the last record's)."""
        rows = []
        for record in records:
            body = record.body()
            goal = record.stored_goal
            # SQLite's length() of TEXT: characters, as the bound has always counted them.
            size = len(body) + (len(goal) if goal is not None else 0)
            rows.append(
                (record.request_id, record.recorded_at, record.goal_digest, goal, body, size)
            )
        with self._transaction(durable=durable) as db:
            db.executemany(
                "INSERT INTO requests "
                "(request_id, recorded_at, goal_digest, goal, body, size) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            if rows:
                self._prune(db, max(row[1] for row in rows))
            orphans = [f.request_id for f in feedback if not self._feedback(db, f)]
        return orphans

    @contextlib.contextmanager
    def _transaction(self, *, durable: bool) -> Iterator[sqlite3.Connection]:
        """One write transaction on the writer's connection, committed when the block
        ends, rolled back when it raises. ``durable``: synced to the disk."""
        with self._lock:
            db = self._writer()
            if durable:  # the WAL is synced before the commit returns
                db.execute("PRAGMA synchronous = FULL")
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            finally:
                if durable:
                    db.execute("PRAGMA synchronous = NORMAL")

    def write_pending(self, records: Sequence[Writable], *, keep: int) -> None:
        """Set ``records`` aside for feedback (compositions held, never written, when the
        daemon stops), in one synced transaction: the newest ``keep`` pending rows are
        kept, with those of earlier stops, and none older than ``retention_days``."""
        rows = [
            (r.request_id, r.recorded_at, r.goal_digest, r.stored_goal, r.body()) for r in records
        ]
        with self._transaction(durable=True) as db:
            db.executemany(
                "INSERT OR REPLACE INTO pending "
                "(request_id, recorded_at, goal_digest, goal, body) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            db.execute("DELETE FROM pending WHERE recorded_at < ?", (self._oldest(),))
            db.execute(
                "DELETE FROM pending WHERE request_id NOT IN "
                "(SELECT request_id FROM pending ORDER BY recorded_at DESC LIMIT ?)",
                (keep,),
            )

    def _oldest(self) -> float:
        """The oldest ``recorded_at`` retention keeps, now."""
        return time.time() - self.retention_days * 86400

    def _feedback(self, db: sqlite3.Connection, feedback: Feedback) -> bool:
        db.execute("DELETE FROM feedback WHERE request_id = ?", (feedback.request_id,))
        # Its record is in ``requests`` by now (written earlier, or in this transaction
        # before the feedback): a copy set aside at a stop is needed no longer.
        db.execute("DELETE FROM pending WHERE request_id = ?", (feedback.request_id,))
        body = feedback.body()
        kept = db.execute(
            "INSERT INTO feedback (request_id, recorded_at, size, body) "
            "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM requests WHERE request_id = ?)",
            (feedback.request_id, feedback.recorded_at, len(body), body, feedback.request_id),
        ).rowcount
        if kept:  # feedback counts against max_bytes like the records do
            count, size = db.execute("SELECT requests, size FROM totals").fetchone()
            self._trim(db, count, size)
        return bool(kept)

    def _prune(self, db: sqlite3.Connection, now: float) -> None:
        # Through the recorded_at index: nothing is read unless something is stale.
        db.execute(
            "DELETE FROM requests WHERE recorded_at < ?", (now - self.retention_days * 86400,)
        )
        count, size = db.execute("SELECT requests, size FROM totals").fetchone()
        if count > self.max_requests:
            db.execute(
                "DELETE FROM requests WHERE seq IN (SELECT seq FROM requests ORDER BY seq LIMIT ?)",
                (count - self.max_requests,),
            )
            count, size = db.execute("SELECT requests, size FROM totals").fetchone()
        self._trim(db, count, size)

    def _trim(self, db: sqlite3.Connection, count: int, size: int) -> None:
        # Oldest first until the bodies fit; the newest record is always kept. Each
        # row is deleted once, so this loop is O(1) amortised per write. The totals
        # are read again: a request's feedback goes with it (a trigger).
        while size > self.max_bytes and count > 1:
            db.execute("DELETE FROM requests WHERE seq = (SELECT min(seq) FROM requests)")
            count, size = db.execute("SELECT requests, size FROM totals").fetchone()

    def load(self, limit: int | None = None, *, request_id: str | None = None) -> list[Recorded]:
        """Recorded requests with their feedback, oldest first (the newest ``limit``
        when given; only ``request_id``'s newest when given).

        ``FileNotFoundError`` when there is no store; ``ShadowUnavailable`` when the file
        cannot be read as one (damaged, not a database, a record of the wrong shape)."""
        try:
            rows = self._rows(limit, request_id)
        except sqlite3.Error as exc:
            raise unavailable(self.path, f"not a readable shadow store ({exc})") from None
        out = []
        for seq, *row in rows:
            try:
                out.append(from_row(*row))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                problem = f"record {seq} cannot be read ({type(exc).__name__})"
                raise unavailable(self.path, problem) from None
        return out

    def load_pending(self, request_id: str) -> Recorded | None:
        """``request_id``'s record as set aside at a stop (``write_pending``), or None
        when there is none within ``retention_days``. Errors as ``load``'s."""
        try:
            db = self._connect(create=False)
            try:
                row: tuple[Any, ...] | None = None
                # A file from before pending records were kept has no such table.
                if db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pending'"
                ).fetchone():
                    # No feedback yet: it is written with the record, to ``requests``.
                    row = db.execute(
                        "SELECT request_id, recorded_at, goal_digest, goal, body, NULL, NULL "
                        "FROM pending WHERE request_id = ? AND recorded_at >= ?",
                        (request_id, self._oldest()),
                    ).fetchone()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise unavailable(self.path, f"not a readable shadow store ({exc})") from None
        if row is None:
            return None
        try:
            return from_row(*row)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            problem = f"pending record {request_id!r} cannot be read ({type(exc).__name__})"
            raise unavailable(self.path, problem) from None

    def _rows(self, limit: int | None, request_id: str | None) -> list[tuple[Any, ...]]:
        db = self._connect(create=False)
        try:
            db.execute(_SCHEMA)
            has_feedback = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'feedback'"
            ).fetchone()
            feedback = "f.recorded_at, f.body" if has_feedback else "NULL, NULL"
            join = "LEFT JOIN feedback f USING (request_id) " if has_feedback else ""
            where, args = ("WHERE r.request_id = ? ", [request_id]) if request_id else ("", [])
            rows: list[tuple[Any, ...]] = db.execute(
                "SELECT r.seq, r.request_id, r.recorded_at, r.goal_digest, r.goal, r.body, "
                f"{feedback} FROM requests r {join}{where}ORDER BY r.seq DESC LIMIT ?",
                (*args, 1 if request_id else (-1 if limit is None else limit)),
            ).fetchall()
        finally:
            db.close()
        return rows[::-1]
