"""Durable, append-only consent receipts (C1, C2, C6) in SQLite under the state directory.

A receipt pins who agreed that a provider may send content off the machine under
one scope, and when. The ledger is append-only: a grant appends a ``grant``
event, a revocation appends a ``revoke`` event, and nothing is ever updated or
deleted (triggers refuse it), so the history of consent *is* the audit trail.
The current state is derived from the events: a grant is live until a later
revocation of the same ``(provider_id, scope)``. ``consent_grants`` beside the
ledger keeps, per ``(provider_id, scope, destination)``, the seq of its last grant
and of the last revocation of its ``(provider_id, scope)``; an ``AFTER INSERT``
trigger updates it in the same transaction as each event (whoever writes the
event), so the gate reads one row per scope instead of the provider's whole
history. A ledger from before the table is migrated once, on open, from its events.

A receipt also names its *destination*: for a remote provider (``url``) the origin
its queries go to (``https://search.example.com``), for a child process ``""`` (the
transport cannot see where a process sends what it reads; its scopes say). A store
is opened with the destinations of the config it serves (``destinations``, by
provider id), records each grant with the provider's destination, and counts only
the grants made for that destination: a remote provider pointed at another origin
under the same id needs consent again. A revocation ends every grant of its
``(provider_id, scope)``, whatever its destination. A ledger from before receipts
named a destination is migrated on open: its receipts name none, so they still
cover child processes and no remote provider.

The gate itself is :meth:`ConsentStore.missing_scopes` over the scopes
:func:`required_scopes` derives from a provider's handshake ``data_flow``:
``egress: true`` with no off-machine scope needs consent for the generic
``"egress"`` scope (the legacy boolean gate), each off-machine scope needs its
own receipt (C6), ``local-only`` needs none.

The store is synchronous and cheap (one WAL-mode connection, one lock, each call a
short local transaction), so async callers may call it inline; several stores on
the same file, in one process or many, serialise through SQLite's own locking.
This module owns the ledger only; it does not send, refuse or log queries.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hostd.protocol import ProviderInfo, is_off_machine_scope

__all__ = [
    "CONSENT_DB_NAME",
    "GENERIC_EGRESS_SCOPE",
    "ConsentStore",
    "Receipt",
    "consent_destination",
    "required_scopes",
]

#: File name of the ledger when the store is given a directory.
CONSENT_DB_NAME = "consent.sqlite3"

#: The scope a provider declaring ``egress: true`` without any off-machine scope
#: needs (C1: the boolean flag still gates behind named, revocable consent).
GENERIC_EGRESS_SCOPE = "egress"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS consent_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    action      TEXT    NOT NULL CHECK (action IN ('grant', 'revoke')),
    provider_id TEXT    NOT NULL,
    scope       TEXT    NOT NULL,
    grantor     TEXT    NOT NULL,
    at          TEXT    NOT NULL,
    destination TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS consent_events_provider ON consent_events (provider_id, scope, seq);
CREATE TRIGGER IF NOT EXISTS consent_events_no_update
    BEFORE UPDATE ON consent_events
    BEGIN SELECT RAISE(ABORT, 'consent ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS consent_events_no_delete
    BEFORE DELETE ON consent_events
    BEGIN SELECT RAISE(ABORT, 'consent ledger is append-only'); END;
"""

# Derived from the events, rebuilt from them whenever its shape changes (a ledger from
# before a table or a column): one row per (provider, scope, destination) ever granted,
# with the seq of its last grant and of the last revoke of its (provider, scope).
_STATE = (
    """CREATE TABLE consent_grants (
        provider_id TEXT    NOT NULL,
        scope       TEXT    NOT NULL,
        destination TEXT    NOT NULL,
        last_grant  INTEGER NOT NULL,
        last_revoke INTEGER,
        PRIMARY KEY (provider_id, scope, destination)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER consent_events_keep_grants
        AFTER INSERT ON consent_events
        BEGIN
            INSERT INTO consent_grants (provider_id, scope, destination, last_grant)
            SELECT NEW.provider_id, NEW.scope, NEW.destination, NEW.seq
            WHERE NEW.action = 'grant'
            ON CONFLICT (provider_id, scope, destination) DO UPDATE SET
                last_grant = excluded.last_grant;
            UPDATE consent_grants SET last_revoke = NEW.seq
            WHERE NEW.action = 'revoke' AND provider_id = NEW.provider_id
                AND scope = NEW.scope;
        END""",
    """INSERT INTO consent_grants (provider_id, scope, destination, last_grant, last_revoke)
    SELECT g.provider_id, g.scope, g.destination, MAX(g.seq),
           (SELECT MAX(r.seq) FROM consent_events r WHERE r.provider_id = g.provider_id
            AND r.scope = g.scope AND r.action = 'revoke')
    FROM consent_events g WHERE g.action = 'grant'
    GROUP BY g.provider_id, g.scope, g.destination""",
)

# What ledgers of earlier versions kept beside their events, dropped when ``_STATE`` is built.
_OLD_STATE = (
    "DROP TRIGGER IF EXISTS consent_events_keep_state",
    "DROP TABLE IF EXISTS consent_state",
)


def consent_destination(url: str | None) -> str:
    """Where a provider's queries go, as its receipts name it: the origin of a remote
    provider's ``url`` (scheme, host, and a port that is not the scheme's own; never
    a credential, a path or a query), ``""`` for a child process."""
    if not url:
        return ""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"https": 443, "http": 80}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _stamp(at: datetime) -> str:
    """An F4 timestamp (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) of an aware or naive-UTC time."""
    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True, frozen=True)
class Receipt:
    """One grant and, once revoked, who revoked it and when."""

    seq: int
    provider_id: str
    scope: str
    grantor: str
    granted_at: str
    revoked_at: str | None = None
    revoked_by: str | None = None
    #: The origin the grant was made for (``""``: a child process, or a receipt from
    #: before receipts named one).
    destination: str = ""

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_wire(self) -> dict[str, Any]:
        return {
            "receipt": self.seq,
            "provider_id": self.provider_id,
            "scope": self.scope,
            "grantor": self.grantor,
            "granted_at": self.granted_at,
            "revoked_at": self.revoked_at,
            "revoked_by": self.revoked_by,
            "destination": self.destination or None,
            "active": self.active,
        }


def required_scopes(info: ProviderInfo) -> list[str]:
    """The scopes a provider needs a live receipt for before any payload (C1, C2, C6).

    Every off-machine scope in ``egress_scopes`` needs its own receipt (C6; an
    unrecognised custom scope counts as off-machine). ``egress: true`` with no
    off-machine scope needs the generic ``"egress"`` receipt (C1). ``local-only``
    alone, or ``egress: false``, needs none. C5 (an off-machine scope with
    ``egress: false``) is refused at the handshake; should such info reach here
    anyway its scopes are still required, never waived.
    """
    flow = info.data_flow
    scopes: list[str] = []
    for scope in flow.egress_scopes:
        if is_off_machine_scope(scope) and scope not in scopes:
            scopes.append(scope)
    if flow.egress and not scopes:
        scopes.append(GENERIC_EGRESS_SCOPE)
    return scopes


class ConsentStore:
    """The append-only consent ledger in one SQLite file.

    ``path`` is the database file, or a directory (the state directory) in which
    ``consent.sqlite3`` is used. Parent directories are created.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] = _utc_now,
        destinations: Mapping[str, str] | None = None,
    ) -> None:
        p = Path(path)
        if p.is_dir():
            p = p / CONSENT_DB_NAME
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # The ledger is the user's alone: created 0600 before SQLite opens it, and SQLite
        # gives its -wal and -shm files the database file's mode.
        os.close(os.open(p, os.O_RDWR | os.O_CREAT, 0o600))
        os.chmod(p, 0o600)
        self.path = p
        self._clock = clock
        #: Each provider's destination (:func:`consent_destination`), by id; ``""`` for
        #: one not named.
        self.destinations: dict[str, str] = dict(destinations or {})
        self._lock = threading.Lock()
        # isolation_level=None: explicit BEGIN IMMEDIATE per write, so concurrent
        # writers queue on SQLite's lock instead of failing a deferred upgrade.
        self._db: sqlite3.Connection | None = sqlite3.connect(
            p, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._migrate(self._db)
        finally:
            if self._db.in_transaction:
                self._db.execute("COMMIT")

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        """The schema, in the open transaction: a ledger of an earlier version gains the
        ``destination`` column (its receipts name none) and its derived state is rebuilt
        from its events, once."""
        columns = {row[1] for row in db.execute("PRAGMA table_info(consent_events)")}
        if columns and "destination" not in columns:
            db.execute("ALTER TABLE consent_events ADD COLUMN destination TEXT NOT NULL DEFAULT ''")
        for stmt in _SCHEMA.split(";\n"):
            if stmt.strip():
                db.execute(stmt)
        built = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'consent_grants'"
        ).fetchone()
        if built is None:
            for stmt in (*_OLD_STATE, *_STATE):
                db.execute(stmt)

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> ConsentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ConsentStore({str(self.path)!r})"

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("consent store is closed")
        return self._db

    # -- writes ------------------------------------------------------------------

    def _append(
        self, action: str, provider_id: str, scope: str, grantor: str
    ) -> tuple[int, str, list[int]]:
        """Append one event; returns its seq, its time and (for a revoke) the grants it closed.

        One ``BEGIN IMMEDIATE`` transaction, so no other writer (thread or process)
        can slip a grant between reading the live grants and appending the revoke.
        """
        for name, value in (("provider_id", provider_id), ("scope", scope), ("grantor", grantor)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"consent {name} must be a non-empty string")
        at = _stamp(self._clock())
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                closed: list[int] = []
                if action == "revoke":
                    rows = db.execute(
                        "SELECT seq FROM consent_events WHERE provider_id = ? AND scope = ? "
                        "AND action = 'grant' AND seq > COALESCE((SELECT MAX(seq) FROM "
                        "consent_events WHERE provider_id = ? AND scope = ? "
                        "AND action = 'revoke'), 0) ORDER BY seq",
                        (provider_id, scope, provider_id, scope),
                    ).fetchall()
                    closed = [row[0] for row in rows]
                cur = db.execute(
                    "INSERT INTO consent_events "
                    "(action, provider_id, scope, grantor, at, destination) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (action, provider_id, scope, grantor, at, self.destination(provider_id)),
                )
                seq = cur.lastrowid
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        assert seq is not None
        return seq, at, closed

    def destination(self, provider_id: str) -> str:
        """Where ``provider_id``'s queries go, as its receipts name it (``""``: a process)."""
        return self.destinations.get(provider_id, "")

    def grant(self, provider_id: str, scope: str, grantor: str) -> Receipt:
        """Record consent for ``provider_id`` under ``scope``, for its destination; returns
        the new receipt."""
        seq, at, _ = self._append("grant", provider_id, scope, grantor)
        return Receipt(
            seq, provider_id, scope, grantor, at, destination=self.destination(provider_id)
        )

    def revoke(self, provider_id: str, scope: str, grantor: str) -> list[Receipt]:
        """Revoke every live grant of ``(provider_id, scope)``; returns those receipts, closed.

        The revocation is appended even when nothing was live, so the intent is
        on record; the returned list is then empty.
        """
        _, _, closed = self._append("revoke", provider_id, scope, grantor)
        wanted = set(closed)
        return [r for r in self._receipts(provider_id) if r.seq in wanted]

    # -- reads -------------------------------------------------------------------

    def _events(self, provider_id: str | None) -> list[tuple[Any, ...]]:
        sql = "SELECT seq, action, provider_id, scope, grantor, at, destination FROM consent_events"
        args: tuple[str, ...] = ()
        if provider_id is not None:
            sql += " WHERE provider_id = ?"
            args = (provider_id,)
        sql += " ORDER BY seq"
        with self._lock:
            return self._conn().execute(sql, args).fetchall()

    def _receipts(self, provider_id: str | None) -> list[Receipt]:
        receipts: dict[int, Receipt] = {}
        live: dict[tuple[str, str], list[int]] = {}
        for seq, action, pid, scope, who, at, where in self._events(provider_id):
            key = (pid, scope)
            if action == "grant":
                receipts[seq] = Receipt(seq, pid, scope, who, at, destination=where)
                live.setdefault(key, []).append(seq)
            else:  # a revocation ends every live grant of its scope, whatever its destination
                for open_seq in live.pop(key, []):
                    receipts[open_seq] = replace(receipts[open_seq], revoked_at=at, revoked_by=who)
        return [receipts[s] for s in sorted(receipts)]

    def active_scopes(self, provider_id: str) -> set[str]:
        """Scopes of ``provider_id`` with a grant for its destination later than their
        last revocation.

        Read from ``consent_grants``: one row per scope, whatever the ledger's length."""
        with self._lock:
            rows = (
                self._conn()
                .execute(
                    "SELECT scope FROM consent_grants WHERE provider_id = ? "
                    "AND destination = ? AND last_grant > COALESCE(last_revoke, 0)",
                    (provider_id, self.destination(provider_id)),
                )
                .fetchall()
            )
        return {row[0] for row in rows}

    def missing_scopes(self, provider_id: str, scopes: Iterable[str]) -> list[str]:
        """The scopes in ``scopes`` with no live receipt for ``provider_id`` at its
        destination, in given order."""
        wanted = list(dict.fromkeys(scopes))
        if not wanted:
            return []
        have = self.active_scopes(provider_id)
        return [s for s in wanted if s not in have]

    required_scopes = staticmethod(required_scopes)

    def list(self, provider_id: str | None = None) -> list[Receipt]:  # noqa: A003 - interface name
        """Every receipt (live and revoked) in grant order, optionally of one provider."""
        return self._receipts(provider_id)
