"""Durable, bitemporal agent memory in SQLite: storage, full-text search, verify.

Every entry is immutable text with a validity window ``[valid_from, valid_to)``
(when it was true in the world) and a ``recorded_at`` (when it was written),
all kept in the F4 profile (a date or a time with an offset is taken and kept as
its UTC instant: ``utc_timestamp``). Superseding closes the old window and opens a new entry
in one transaction. Writes are transactions in WAL mode with
``synchronous=FULL``: a crash mid-write loses only the uncommitted transaction.
Search is BM25 over title and content, filtered by the half-open window at
``as_of`` (Q2): FTS5 matches, stems and weighs term frequency, and the IDF is
Lucene's, which stays positive for a word most entries share (see ``search``).
An answer gives entries that say the same thing one frame, the newest's, and
ranks ties newest first (``ranked``).
This module knows nothing of the wire runtime.
"""

from __future__ import annotations

import builtins
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path

from hostd.chunking import STOPWORDS
from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    FrameIdentity,
    FrameVerdict,
    Provenance,
    VerdictStatus,
    canonical_token_cost,
    parse_timestamp,
    sha256_digest,
)
from hostd.protocol import utc_timestamp as to_utc

from .._frames import Packed, now_timestamp, pack, query_text, saturate

__all__ = [
    "FTS_HALF_SCORE",
    "KEEP_FORGOTTEN",
    "KINDS",
    "LIST_PAGE",
    "AlreadyForgotten",
    "Entry",
    "MemoryStore",
    "NewEntry",
    "TimestampError",
    "NEW_ENTRY_KEYS",
    "checked_entry",
    "entry_id",
    "parse_keep_forgotten",
    "timestamp_key",
    "utc_timestamp",
]

KINDS = ("fact", "memory", "episode")
#: The raw BM25 score (``MemoryStore.search``) that maps to 0.5 (F1); scores stay ordinal (F10).
FTS_HALF_SCORE = 4.0
#: FTS5's floor for a phrase's IDF when its own formula gives <= 0 (fts5_aux.c, bm25()).
_FTS5_MIN_IDF = 1e-6
#: Ids per ``IN (...)`` when reading the hits' entries: under every SQLite's variable limit.
_IDS_PER_READ = 500
#: Entries per statement when listing (``MemoryStore.entries``): what is held at once,
#: whatever the store's size.
LIST_PAGE = 500
_FRACTION_DIGITS = 9
_WORD_RE = re.compile(r"\w+", re.UNICODE)
#: Row ids are SQLite integers (at most 2**63 - 1, 19 digits): a longer id is no row's.
_ID_RE = re.compile(r"mem-([1-9][0-9]{0,18})")
_MAX_ROW_ID = 2**63 - 1
#: How many forgets' records (``forgotten``) a store keeps, the newest: a retry comes
#: when a reply was lost, seconds or minutes after its forget, never 10,000 forgets later.
#: Counted, not dated, so the table's size is bounded whatever the rate of forgets.
KEEP_FORGOTTEN = 10_000


def parse_keep_forgotten(text: str) -> int:
    """``--keep-forgotten N``: how many forgets' records a store keeps, a whole number,
    0 or more (0: none, so a retried forget answers ``already`` without ``reopened``);
    a ``ValueError`` saying so for anything else."""
    value = text.strip()
    if not value.isdecimal() or not value.isascii():
        raise ValueError(
            f"--keep-forgotten takes a whole number, 0 or more (how many forgets' "
            f"records to keep), not {text!r}"
        )
    return int(value)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT NOT NULL CHECK (kind IN ('fact', 'memory', 'episode')),
    title          TEXT NOT NULL CHECK (length(title) > 0),
    content        TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    valid_from     TEXT NOT NULL,
    valid_from_key TEXT NOT NULL,
    valid_to       TEXT,
    valid_to_key   TEXT,
    recorded_at    TEXT NOT NULL,
    supersedes     INTEGER REFERENCES entries(id),
    superseded_by  INTEGER REFERENCES entries(id)
);
CREATE INDEX IF NOT EXISTS entries_window ON entries (valid_from_key, valid_to_key);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    title, content, content='entries', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts (rowid, title, content) VALUES (new.id, new.title, new.content);
END;
CREATE TRIGGER IF NOT EXISTS entries_ad AFTER DELETE ON entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, title, content)
    VALUES ('delete', old.id, old.title, old.content);
END;
-- One row per forgotten entry: its id and the entry its forget made valid again, never
-- its text (forgotten means gone), so a retried forget answers as the first did. ``seq``
-- orders the forgets (the newest highest): only the newest are kept (``KEEP_FORGOTTEN``).
CREATE TABLE IF NOT EXISTS forgotten (
    id       INTEGER PRIMARY KEY,
    reopened INTEGER,
    seq      INTEGER
);
"""
#: After ``_SCHEMA``: ``forgotten``'s order, on a table from before it had one too.
_FORGOTTEN_ORDER = "CREATE INDEX IF NOT EXISTS forgotten_seq ON forgotten (seq)"


class TimestampError(ValueError):
    """A timestamp outside the F4 profile, or a window that closes before it opens."""


class AlreadyForgotten(KeyError):
    """No entry under an id the store did give out once: it has been forgotten (ids are
    never reused), so forgetting it again has nothing left to do. ``reopened``: the
    entry that first forget made valid again, as it answered then (``None``: none, or
    forgotten before the store kept that record, or so many forgets ago that the record
    is no longer kept: ``KEEP_FORGOTTEN``)."""

    def __init__(self, message: str, *, reopened: int | None = None) -> None:
        super().__init__(message)
        self.reopened = reopened


#: What a user may write for an instant (``utc_timestamp``), as the messages say it.
_STAMP_FORMS = (
    "YYYY-MM-DD (midnight UTC), YYYY-MM-DDTHH:MM:SS(.f)Z, or the same with an offset such as +01:00"
)


def utc_timestamp(value: str) -> str:
    """``value`` as the F4 stamp the store keeps (hostd's ``utc_timestamp``: a date as
    its midnight UTC, a time with an offset as its UTC instant); ``TimestampError`` for
    anything else."""
    stamp = to_utc(value)
    if stamp is None:
        raise TimestampError(f"{value!r} is not a time: give {_STAMP_FORMS}")
    return stamp


def timestamp_key(value: str) -> str:
    """A key that sorts like the instant: the F4 stamp with a fixed 9-digit fraction.

    F4 strings do not sort as text (``…:00Z`` sorts after ``…:00.5Z``), so the
    window filter compares these keys instead.
    """
    parsed = parse_timestamp(value)
    if parsed is None:
        raise TimestampError(f"{value!r} is not YYYY-MM-DDTHH:MM:SS(.f)Z, UTC")
    whole, frac = parsed
    digits = str(frac)[2:] if frac else ""
    if len(digits) > _FRACTION_DIGITS:
        raise TimestampError(f"{value!r}: more than {_FRACTION_DIGITS} fractional digits")
    return whole.strftime("%Y-%m-%dT%H:%M:%S.") + digits.ljust(_FRACTION_DIGITS, "0")


def entry_id(frame_id: str) -> int | None:
    """The row id a frame id (``mem-3``) names; ``None`` for one no row could have."""
    m = _ID_RE.fullmatch(frame_id)
    if m is None or int(m.group(1)) > _MAX_ROW_ID:
        return None
    return int(m.group(1))


@dataclass(slots=True, frozen=True)
class NewEntry:
    kind: str
    title: str
    content: str
    valid_from: str | None = None  # default: the recording instant
    valid_to: str | None = None  # default: open


#: The members an entry to add has (``NewEntry``'s fields), as ``import`` lines name them.
NEW_ENTRY_KEYS = tuple(f.name for f in fields(NewEntry))


def checked_entry(new: NewEntry) -> NewEntry:
    """``new`` as the store would add it (timestamps as ``utc_timestamp`` has them), or
    the ``ValueError`` (``TimestampError``) that says why it would not be."""
    if new.kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {new.kind!r}")
    for name in ("title", "content"):
        value = getattr(new, name)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be non-empty text")
    lo = None if new.valid_from is None else utc_timestamp(new.valid_from)
    hi = None if new.valid_to is None else utc_timestamp(new.valid_to)
    if lo is not None and hi is not None and timestamp_key(hi) <= timestamp_key(lo):
        raise TimestampError(f"valid_to {hi} is not after valid_from {lo}")
    return replace(new, valid_from=lo, valid_to=hi)


@dataclass(slots=True, frozen=True)
class Entry:
    id: int
    kind: str
    title: str
    content: str
    content_digest: str
    valid_from: str
    valid_to: str | None
    recorded_at: str
    supersedes: int | None
    superseded_by: int | None

    @property
    def frame_id(self) -> str:
        return f"mem-{self.id}"

    @property
    def citation_label(self) -> str:
        return f"{self.kind} #{self.id}"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "frame_id": self.frame_id,
            "kind": self.kind,
            "title": self.title,
            "content": self.content,
            "content_digest": self.content_digest,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "recorded_at": self.recorded_at,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
        }


_COLUMNS = (
    "id, kind, title, content, content_digest, valid_from, valid_to, recorded_at, "
    "supersedes, superseded_by"
)


def _entry(row: Sequence[object]) -> Entry:
    return Entry(*row)  # type: ignore[arg-type] # columns are selected in field order


def _fts5_idf(n: int, total: int) -> float:
    """The IDF FTS5's ``bm25()`` gives a phrase in ``n`` of ``total`` rows, its floor included."""
    idf = math.log((total - n + 0.5) / (n + 0.5))
    return idf if idf > 0.0 else _FTS5_MIN_IDF


def _lucene_idf(n: int, total: int) -> float:
    """Lucene's BM25 IDF: above 0 for any ``n <= total``, and falling as ``n`` grows."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))


_COUNT_SQL = "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?"
#: Phrases summed by one statement: SQLite allows 500 terms in a compound SELECT.
_PHRASES_PER_STATEMENT = 400


def _score_sql(phrases: int, bounded: bool) -> str:
    """One statement scoring every valid entry a phrase matches: each phrase's
    ``-bm25()`` times its rescale (``?``, then the phrase), summed per entry, best first
    (``LIMIT ?`` when ``bounded``); then the ``as_of`` key twice."""
    one = (
        "SELECT rowid AS id, -bm25(entries_fts) * ? AS part "
        "FROM entries_fts WHERE entries_fts MATCH ?"
    )
    # LIMIT -1 (none) keeps SQLite from flattening a one-phrase subquery into the join,
    # where bm25() cannot run ("unable to use function bm25 in the requested context").
    parts = " UNION ALL ".join([one] * phrases) + " LIMIT -1"
    return (
        f"SELECT e.id, sum(m.part) AS score FROM ({parts}) m JOIN entries e ON e.id = m.id "
        "WHERE e.valid_from_key <= ? AND (e.valid_to_key IS NULL OR e.valid_to_key > ?) "
        "GROUP BY e.id ORDER BY score DESC, e.id" + (" LIMIT ?" if bounded else "")
    )


#: Frame scores are said to this many decimals: scores equal to them are a tie (``ranked``).
_SCORE_DIGITS = 6
#: What a tied frame's score loses for each newer one of its tie ranked before it. A tie
#: holds at most ``search``'s 200 hits, so it stays above the next lower score.
_TIE_STEP = 1e-9


def _wire_score(raw: float) -> float:
    return round(saturate(raw, FTS_HALF_SCORE), _SCORE_DIGITS)


def _said_key(entry: Entry) -> tuple[str, str, str]:
    """What an entry says: its kind, and its title and content lower-cased with every
    run of blank space one space. Entries with one key say the same thing."""
    return (
        entry.kind,
        " ".join(entry.title.lower().split()),
        " ".join(entry.content.lower().split()),
    )


def ranked(hits: Iterable[tuple[Entry, float]]) -> list[tuple[Entry, float]]:
    """``search``'s ``(entry, raw)`` hits as frames are ranked: ``(entry, frame score)``.

    Entries that say the same thing (``_said_key``) are one frame, the newest's, with
    the best score among them: one fact said ten times takes one slot of the prompt.
    Scores equal to the decimals a frame carries are a tie, and the newest entry (the
    highest id: ids grow as entries are recorded, and none is reused) ranks first, as
    likelier current. A host ranks a provider's frames by score and breaks ties by
    frame id, so each tied frame after the first carries ``_TIE_STEP`` less than the
    one before it (never below 0): the newest first, whoever ranks them. A pure
    function of the hits, so the same store gives the same frames, byte for byte.
    """
    kept: dict[tuple[str, str, str], tuple[Entry, float]] = {}
    for entry, raw in hits:
        key, score = _said_key(entry), _wire_score(raw)
        held = kept.get(key)
        if held is not None:
            entry = entry if entry.id > held[0].id else held[0]
            score = max(score, held[1])
        kept[key] = (entry, score)
    order = sorted(kept.values(), key=lambda hit: (-hit[1], -hit[0].id))
    out: list[tuple[Entry, float]] = []
    tie, behind = -1.0, 0
    for entry, score in order:
        behind = behind + 1 if score == tie else 0
        tie = score
        out.append((entry, max(0.0, round(score - behind * _TIE_STEP, _SCORE_DIGITS + 3))))
    return out


class MemoryStore:
    """One SQLite memory database. Safe to share between threads; many processes may open it.

    ``keep_forgotten``: how many of the newest forgets' records it keeps, for their
    retries to name what each reopened (``forget``)."""

    def __init__(self, path: Path, *, keep_forgotten: int = KEEP_FORGOTTEN) -> None:
        if keep_forgotten < 0:
            raise ValueError(f"keep_forgotten must be 0 or more, not {keep_forgotten}")
        self.path = path
        self.keep_forgotten = keep_forgotten
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Memories are the user's alone, like hostd's own databases: a new file is created
        # 0600 before SQLite opens it (SQLite gives its -wal and -shm files the same mode).
        # An existing file keeps the mode its owner gave it.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        # Autocommit mode: every write below opens its own explicit transaction.
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        self._db.execute("PRAGMA busy_timeout = 10000")
        self._db.execute("PRAGMA journal_mode = WAL")
        # FULL: a committed transaction survives a crash or power loss, not only a process kill.
        self._db.execute("PRAGMA synchronous = FULL")
        self._db.execute("PRAGMA foreign_keys = ON")
        with self._lock:
            # executescript commits whatever is pending first, so the script carries
            # its own transaction: two processes creating the schema at once is safe.
            self._db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
        with self._write() as db:  # looked at and changed in one transaction, as above
            columns = {row[1] for row in db.execute("PRAGMA table_info(forgotten)")}
            if "seq" not in columns:  # a table from before forgets were ordered
                db.execute("ALTER TABLE forgotten ADD COLUMN seq INTEGER")
                # The order they were made in is not known: the entries' own stands in.
                db.execute("UPDATE forgotten SET seq = id")
            db.execute(_FORGOTTEN_ORDER)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits, or none of it does."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # --- writes ----------------------------------------------------------------------

    def _insert(self, db: sqlite3.Connection, new: NewEntry, recorded_at: str, **link: int) -> int:
        new = checked_entry(new)
        valid_from = new.valid_from or recorded_at
        from_key = timestamp_key(valid_from)
        to_key = timestamp_key(new.valid_to) if new.valid_to is not None else None
        if to_key is not None and to_key <= from_key:
            raise TimestampError(f"valid_to {new.valid_to} is not after valid_from {valid_from}")
        cur = db.execute(
            "INSERT INTO entries (kind, title, content, content_digest, valid_from, "
            "valid_from_key, valid_to, valid_to_key, recorded_at, supersedes) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                new.kind,
                new.title,
                new.content,
                sha256_digest(new.content.encode("utf-8")),
                valid_from,
                from_key,
                new.valid_to,
                to_key,
                recorded_at,
                link.get("supersedes"),
            ),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def add_many(self, entries: Iterable[NewEntry]) -> list[Entry]:
        """Add every entry in one transaction; on any error none is added."""
        recorded_at = now_timestamp()
        with self._write() as db:
            ids = [self._insert(db, e, recorded_at) for e in entries]
        return [self._get(i) for i in ids]

    def add(
        self,
        kind: str,
        title: str,
        content: str,
        *,
        valid_from: str | None = None,
        valid_to: str | None = None,
    ) -> Entry:
        (entry,) = self.add_many([NewEntry(kind, title, content, valid_from, valid_to)])
        return entry

    def supersede(
        self,
        entry_id: int,
        content: str,
        *,
        title: str | None = None,
        kind: str | None = None,
        at: str | None = None,
        valid_to: str | None = None,
    ) -> tuple[Entry, Entry]:
        """Close ``entry_id``'s window at ``at`` (default now) and open its successor there,
        until ``valid_to`` (default: where the old window ended).

        Both in one transaction. Returns ``(closed_old, new)``.
        """
        recorded_at = now_timestamp()
        at = recorded_at if at is None else utc_timestamp(at)
        at_key = timestamp_key(at)
        with self._write() as db:
            old = self._get(entry_id)
            if old.superseded_by is not None:
                raise ValueError(f"entry {entry_id} was already superseded by {old.superseded_by}")
            if old.valid_to is not None and timestamp_key(old.valid_to) <= at_key:
                raise TimestampError(f"entry {entry_id} was no longer valid at {at}")
            if timestamp_key(old.valid_from) >= at_key:
                raise TimestampError(f"entry {entry_id} only became valid at {old.valid_from}")
            new_id = self._insert(
                db,
                NewEntry(
                    kind or old.kind, title or old.title, content, at, valid_to or old.valid_to
                ),
                recorded_at,
                supersedes=entry_id,
            )
            db.execute(
                "UPDATE entries SET valid_to = ?, valid_to_key = ?, superseded_by = ? WHERE id = ?",
                (at, at_key, new_id, entry_id),
            )
        return self._get(entry_id), self._get(new_id)

    def forget(self, entry_id: int) -> tuple[Entry, Entry | None]:
        """Delete an entry (its frames then verify ``gone``); links to it are cleared.

        Forgetting a correction undoes it: the entry it superseded, if nothing else has
        superseded that one since, is valid again for the forgotten one's window (open,
        or up to its own successor, which then supersedes it), in the same transaction.
        Returns ``(forgotten, reopened)``, ``reopened`` ``None`` when none was. An entry
        forgotten before raises ``AlreadyForgotten`` (with what its forget reopened, kept
        in the same transaction: a retry answers as the first did, while that record is
        among the newest ``keep_forgotten``); an id no entry ever had, ``KeyError``."""
        with self._write() as db:
            gone = self.get(entry_id)
            if gone is None:
                raise self._missing(db, entry_id)
            reopened = None
            if gone.supersedes is not None:
                # Only while the older one is still closed by this one: never reopen an
                # entry a later correction closed.
                cur = db.execute(
                    "UPDATE entries SET valid_to = ?, valid_to_key = ?, superseded_by = ? "
                    "WHERE id = ? AND superseded_by = ?",
                    (
                        gone.valid_to,
                        None if gone.valid_to is None else timestamp_key(gone.valid_to),
                        gone.superseded_by,
                        gone.supersedes,
                        entry_id,
                    ),
                )
                if cur.rowcount:
                    reopened = gone.supersedes
                    db.execute(
                        "UPDATE entries SET supersedes = ? WHERE supersedes = ?",
                        (reopened, entry_id),
                    )
            db.execute("UPDATE entries SET supersedes = NULL WHERE supersedes = ?", (entry_id,))
            db.execute(
                "UPDATE entries SET superseded_by = NULL WHERE superseded_by = ?", (entry_id,)
            )
            db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
            db.execute(
                "INSERT INTO forgotten (id, reopened, seq) "
                "VALUES (?, ?, (SELECT ifnull(max(seq), 0) + 1 FROM forgotten))",
                (entry_id, reopened),
            )
            self._prune_forgotten(db)
        return gone, None if reopened is None else self._get(reopened)

    def _prune_forgotten(self, db: sqlite3.Connection) -> None:
        """Keep only the newest ``keep_forgotten`` forgets' records, in the forget's own
        transaction: once they are a tenth over, so the delete runs once every tenth of
        the bound's forgets, never on each. A retry of one dropped still answers
        ``AlreadyForgotten`` (its id is below ``sqlite_sequence``'s), without ``reopened``."""
        keep = self.keep_forgotten
        held = int(db.execute("SELECT count(*) FROM forgotten").fetchone()[0])
        if held <= keep + keep // 10:
            return
        # A row without ``seq`` was written by a process from before forgets were
        # ordered, still running: it goes first, as its order is not known.
        db.execute(
            "DELETE FROM forgotten WHERE seq IS NULL OR seq <= "
            "(SELECT seq FROM forgotten ORDER BY seq DESC LIMIT 1 OFFSET ?)",
            (keep,),
        )

    @staticmethod
    def _missing(db: sqlite3.Connection, entry_id: int) -> KeyError:
        """Why there is no entry ``entry_id``: ``AlreadyForgotten`` when the store gave that
        id out (AUTOINCREMENT never hands an id out twice, and only ``forget`` deletes),
        else a ``KeyError``: it never was an entry."""
        said = f"memory entry {entry_id} was already forgotten"
        kept = db.execute("SELECT reopened FROM forgotten WHERE id = ?", (entry_id,)).fetchone()
        if kept is not None:
            return AlreadyForgotten(said, reopened=kept[0])
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
        if row is not None and entry_id <= int(row[0]):
            # Forgotten before the store kept the record, or its record since dropped
            # (``_prune_forgotten``): what that forget reopened is not known.
            return AlreadyForgotten(said)
        return KeyError(f"no memory entry {entry_id}")

    # --- reads -----------------------------------------------------------------------

    def _get(self, entry_id: int) -> Entry:
        entry = self.get(entry_id)
        if entry is None:
            raise KeyError(f"no memory entry {entry_id}")
        return entry

    def get(self, entry_id: int) -> Entry | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE id = ?", (entry_id,)
            ).fetchone()
        return _entry(row) if row else None

    def list(self, *, as_of: str | None = None, include_all: bool = False) -> builtins.list[Entry]:
        """Entries valid at ``as_of`` (default now), oldest first; all with ``include_all``."""
        return builtins.list(self.entries(as_of=as_of, include_all=include_all))

    def entries(
        self, *, as_of: str | None = None, include_all: bool = False, page: int = LIST_PAGE
    ) -> Iterator[Entry]:
        """``list``'s entries, oldest first, read ``page`` at a time (one statement each,
        from the id the last one ended at), so a store of any size is listed in bounded
        memory and its first entries come at once. The lock is held only while a page is
        read: the provider's queries and writes go on between pages. Each page is read as
        the database is then; entries recorded after the listing began are left out (ids
        above the highest there was), so a listing ends even while writes go on."""
        if page < 1:
            raise ValueError(f"page must be 1 or more, not {page}")
        where = "id > ? AND id <= ?"
        window: tuple[str, ...] = ()
        if not include_all:
            where += " AND valid_from_key <= ? AND (valid_to_key IS NULL OR valid_to_key > ?)"
            key = timestamp_key(now_timestamp() if as_of is None else utc_timestamp(as_of))
            window = (key, key)
        sql = f"SELECT {_COLUMNS} FROM entries WHERE {where} ORDER BY id LIMIT ?"
        with self._lock:
            last = self._db.execute("SELECT max(id) FROM entries").fetchone()[0]
        after = 0
        while last is not None:
            with self._lock:
                rows = self._db.execute(sql, (after, last, *window, page)).fetchall()
            yield from (_entry(row) for row in rows)
            if len(rows) < page:  # short: the last page, so no statement to find none left
                return
            after = int(rows[-1][0])

    def data_version(self) -> int:
        """SQLite's ``data_version``: it changes when another connection (another
        process, the CLI) commits to the database, never for this one's own writes."""
        with self._lock:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])

    def counts(self) -> dict[str, int]:
        """How many entries of each kind it holds, closed ones too (``list --all``)."""
        with self._lock:
            rows = self._db.execute("SELECT kind, count(*) FROM entries GROUP BY kind").fetchall()
        return {kind: int(n) for kind, n in rows}

    def search(
        self, text: str, *, as_of: str | None = None, limit: int = 200
    ) -> builtins.list[tuple[Entry, float]]:
        """``(entry, raw BM25)`` best first among entries valid at ``as_of`` (Q2, half-open).

        Each distinct query word is one quoted FTS5 phrase; an entry's score is the
        sum over the phrases it matches of ``idf * tfnorm``, with FTS5's own
        ``tfnorm`` (k1 = 1.2, b = 0.75, title and content as one document) and
        Lucene's IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``. FTS5's ``bm25()`` uses
        ``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6: a word in half the entries
        or more (every word of a store of one or two) would score about nothing, and
        its frames would be the first the ``score`` ranking policy drops.

        A single-phrase MATCH makes ``-bm25()`` that phrase's FTS5 IDF times the row's
        ``tfnorm``, and that IDF follows from ``n`` and ``N``: so each phrase's scores
        are rescaled by ``idf_lucene / idf_fts5``, exactly, with FTS5 still doing all
        tokenizing and counting. The work is bounded by the query's distinct words
        times the entries each matches: one ``bm25()`` for each such pair.
        """
        # Stop words are not searched for: "where is the banana" must not match every
        # entry that says "the" (only "banana" is asked; nothing, when that is all).
        words = [w for w in _WORD_RE.findall(text) if w.lower() not in STOPWORDS]
        if not words:
            return []
        key = timestamp_key(as_of or now_timestamp())
        # Quoted: the user's text is data, never FTS5 query syntax.
        phrases = ['"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words)]
        with self._snapshot() as db:
            # N as FTS5 counts it (its index's rows: the triggers keep them one per entry).
            total = int(db.execute("SELECT count(*) FROM entries").fetchone()[0])
            # n counts every entry a phrase matches, valid at as_of or not: FTS5's IDF
            # does, and the rescaling must divide out exactly that IDF.
            weighted: list[tuple[str, float]] = []
            for phrase in phrases:
                n = int(db.execute(_COUNT_SQL, (phrase,)).fetchone()[0])
                if n:
                    weighted.append((phrase, _lucene_idf(n, total) / _fts5_idf(n, total)))
            # SQLite sums each entry's phrases and keeps the best ``limit`` (a query of
            # more phrases than one compound statement holds is summed here instead).
            scores: dict[int, float] = {}
            groups = range(0, len(weighted), _PHRASES_PER_STATEMENT)
            for start in groups:
                group = weighted[start : start + _PHRASES_PER_STATEMENT]
                params: list[object] = [p for phrase, rescale in group for p in (rescale, phrase)]
                bounded = len(groups) == 1
                rows = db.execute(
                    _score_sql(len(group), bounded), (*params, key, key, *((limit,) * bounded))
                )
                for entry_id, score in rows:
                    scores[entry_id] = scores.get(entry_id, 0.0) + float(score)
            best = sorted(scores.items(), key=lambda hit: (-hit[1], hit[0]))[:limit]
            entries = self._entries(db, [entry_id for entry_id, _ in best])
        return [(entries[entry_id], score) for entry_id, score in best]

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every statement in it sees the same database (WAL)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield self._db
            finally:
                self._db.execute("COMMIT")

    @staticmethod
    def _entries(db: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Entry]:
        """The entries of ``ids``, a few hundred per statement (SQLite bounds its variables)."""
        found: dict[int, Entry] = {}
        for start in range(0, len(ids), _IDS_PER_READ):
            chunk = ids[start : start + _IDS_PER_READ]
            marks = ", ".join("?" * len(chunk))
            rows = db.execute(f"SELECT {_COLUMNS} FROM entries WHERE id IN ({marks})", chunk)
            found.update((row[0], _entry(row)) for row in rows)
        return found

    # --- the provider's two answers --------------------------------------------------

    def frame(self, entry: Entry, raw: float) -> ContextFrame:
        return self._frame(entry, _wire_score(raw))

    @staticmethod
    def _frame(entry: Entry, score: float) -> ContextFrame:
        uri = f"memory:{entry.frame_id}"
        return ContextFrame(
            id=entry.frame_id,
            kind=entry.kind,
            title=entry.title,
            content=entry.content,
            content_digest=entry.content_digest,
            uri=uri,
            score=score,
            token_cost=canonical_token_cost(entry.content),
            valid_from=entry.valid_from,
            valid_to=entry.valid_to,
            recorded_at=entry.recorded_at,
            provenance=[Provenance(type="memory", uri=uri)],
            citation_label=entry.citation_label,
        )

    def answer(self, query: ContextQuery) -> Packed:
        """The frames for one query: window at ``as_of`` (Q2), kinds (Q1), budget (B1, B4)."""
        if query.max_frames == 0:
            return Packed([], False, 0)
        hits = ranked(self.search(query_text(query), as_of=query.as_of))
        return pack(hits, query, kind_of=lambda h: h[0].kind, build=lambda h: self._frame(*h))

    def verify_one(self, identity: FrameIdentity) -> FrameVerdict:
        """From the stored digest (V3, V4): ``gone`` if deleted, ``stale`` if changed or superseded.

        A superseded entry answers ``stale`` (without a replacement digest: its
        successor is another frame): the held copy's open window is no longer true.
        """
        row = entry_id(identity.frame_id)
        if row is None or identity.content_digest is None:
            return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
        entry = self.get(row)
        if entry is None:
            return FrameVerdict(frame=identity, status=VerdictStatus.GONE.value)
        if entry.content_digest != identity.content_digest:
            return FrameVerdict(
                frame=identity,
                status=VerdictStatus.STALE.value,
                replacement_digest=entry.content_digest,
            )
        if entry.superseded_by is not None:
            return FrameVerdict(frame=identity, status=VerdictStatus.STALE.value)
        return FrameVerdict(frame=identity, status=VerdictStatus.VALID.value)

    def verify(self, identities: Iterable[FrameIdentity]) -> builtins.list[FrameVerdict]:
        return [self.verify_one(i) for i in identities]
