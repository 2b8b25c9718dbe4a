"""The consent ledger: durable, append-only, per scope (C1, C2, C6)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hostd.engine._gate import missing_consent
from hostd.engine.consent import (
    CONSENT_DB_NAME,
    GENERIC_EGRESS_SCOPE,
    ConsentStore,
    Receipt,
    consent_destination,
    required_scopes,
)
from hostd.protocol import DataFlow, ProviderInfo

REPO = Path(__file__).resolve().parents[2]


def _info(egress: bool, scopes: list[str] | None = None) -> ProviderInfo:
    return ProviderInfo(
        name="p",
        version="1",
        data_flow=DataFlow(reads=True, egress=egress, egress_scopes=scopes or []),
    )


def _ledger(db_path: Path, provider_id: str | None = None) -> list[tuple[int, str, str]]:
    """The raw ledger as stored: (seq, action, at) of every event, in order."""
    raw = sqlite3.connect(db_path)
    try:
        sql = "SELECT seq, action, at FROM consent_events"
        args: tuple[str, ...] = ()
        if provider_id is not None:
            sql, args = sql + " WHERE provider_id = ?", (provider_id,)
        return raw.execute(sql + " ORDER BY seq", args).fetchall()
    finally:
        raw.close()


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 14, 9, 2, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


# -- required scopes (C1, C6) ------------------------------------------------------


def test_local_provider_needs_no_consent() -> None:
    assert required_scopes(_info(False)) == []
    assert required_scopes(_info(False, ["local-only"])) == []


def test_boolean_egress_needs_generic_scope() -> None:
    assert required_scopes(_info(True)) == [GENERIC_EGRESS_SCOPE]
    assert required_scopes(_info(True, ["local-only"])) == [GENERIC_EGRESS_SCOPE]


def test_each_off_machine_scope_needs_its_own_receipt() -> None:
    info = _info(True, ["local-only", "third-party-model", "acme:vault", "third-party-model"])
    assert required_scopes(info) == ["third-party-model", "acme:vault"]


def test_contradictory_scopes_are_still_required() -> None:
    # C5 is refused at the handshake; the gate never waives a declared scope.
    assert required_scopes(_info(False, ["org-tenant"])) == ["org-tenant"]


def test_store_exposes_required_scopes() -> None:
    assert ConsentStore.required_scopes(_info(True, ["org-tenant"])) == ["org-tenant"]


# -- grant, revoke, missing ----------------------------------------------------------


def test_grant_returns_a_live_receipt(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db", clock=_Clock()) as store:
        r = store.grant("cloud", "third-party-model", "ops@example.org")
    assert isinstance(r, Receipt)
    assert (r.provider_id, r.scope, r.grantor) == ("cloud", "third-party-model", "ops@example.org")
    assert r.granted_at == "2026-01-14T09:02:01.000000Z"
    assert r.active and r.revoked_at is None
    assert r.to_wire()["active"] is True


def test_missing_scopes_names_exactly_the_unconsented_ones(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db") as store:
        store.grant("cloud", "org-tenant", "ops")
        store.grant("other", "third-party-model", "ops")
        assert store.missing_scopes("cloud", ["org-tenant", "third-party-model"]) == [
            "third-party-model"
        ]
        assert store.missing_scopes("cloud", []) == []
        # The engine's gate asks for the scopes the handshake's data_flow requires.
        assert missing_consent(store, "cloud", _info(True, ["org-tenant"])) == []
        assert missing_consent(store, "cloud", _info(True)) == [GENERIC_EGRESS_SCOPE]


def test_revoke_after_grant_reopens_the_gate(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db", clock=_Clock()) as store:
        store.grant("cloud", "org-tenant", "ops")
        store.grant("cloud", "org-tenant", "alice")
        closed = store.revoke("cloud", "org-tenant", "bob")
        assert [r.grantor for r in closed] == ["ops", "alice"]
        assert all(r.revoked_by == "bob" and r.revoked_at for r in closed)
        assert store.missing_scopes("cloud", ["org-tenant"]) == ["org-tenant"]
        # A new grant after the revocation is live again; the old ones stay revoked.
        store.grant("cloud", "org-tenant", "carol")
        assert store.missing_scopes("cloud", ["org-tenant"]) == []
        receipts = store.list("cloud")
    assert [(r.grantor, r.active) for r in receipts] == [
        ("ops", False),
        ("alice", False),
        ("carol", True),
    ]


def test_revoke_of_nothing_is_recorded_and_closes_nothing(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db") as store:
        assert store.revoke("cloud", "org-tenant", "bob") == []
    assert [action for _, action, _ in _ledger(tmp_path / "c.db")] == ["revoke"]


def test_revoke_touches_only_its_scope(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db") as store:
        store.grant("cloud", "org-tenant", "ops")
        store.grant("cloud", "third-party-model", "ops")
        store.revoke("cloud", "org-tenant", "ops")
        assert store.missing_scopes("cloud", ["org-tenant", "third-party-model"]) == ["org-tenant"]


def test_blank_fields_are_refused(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db") as store:
        with pytest.raises(ValueError, match="grantor"):
            store.grant("cloud", "org-tenant", " ")
        with pytest.raises(ValueError, match="scope"):
            store.revoke("cloud", "", "ops")
    assert _ledger(tmp_path / "c.db") == []


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    store = ConsentStore(tmp_path / "c.db")
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.list()


# -- durability and append-only ------------------------------------------------------


def test_receipts_survive_reopen(tmp_path: Path) -> None:
    with ConsentStore(tmp_path, clock=_Clock()) as store:
        store.grant("cloud", "org-tenant", "ops")
        store.grant("cloud", "third-party-index", "ops")
        store.revoke("cloud", "third-party-index", "ops")
        before = store.list()
    assert (tmp_path / CONSENT_DB_NAME).is_file()
    with ConsentStore(tmp_path) as again:
        assert again.list() == before
        assert again.missing_scopes("cloud", ["org-tenant", "third-party-index"]) == [
            "third-party-index"
        ]


def test_state_dir_is_created(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "state" / "nested" / "c.db") as store:
        store.grant("cloud", "org-tenant", "ops")
    assert (tmp_path / "state" / "nested" / "c.db").is_file()


def test_history_keeps_every_event_in_order(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db", clock=_Clock()) as store:
        store.grant("cloud", "org-tenant", "ops")
        store.revoke("cloud", "org-tenant", "ops")
        store.grant("cloud", "org-tenant", "ops")
        store.grant("other", "org-tenant", "ops")
    events = _ledger(tmp_path / "c.db", "cloud")
    assert [action for _, action, _ in events] == ["grant", "revoke", "grant"]
    assert [seq for seq, _, _ in events] == sorted(seq for seq, _, _ in events)
    assert events[0][2] < events[1][2] < events[2][2]


def test_ledger_refuses_update_and_delete(tmp_path: Path) -> None:
    db_path = tmp_path / "c.db"
    with ConsentStore(db_path) as store:
        store.grant("cloud", "org-tenant", "ops")
    raw = sqlite3.connect(db_path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("UPDATE consent_events SET grantor = 'mallory'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("DELETE FROM consent_events")
    finally:
        raw.close()
    with ConsentStore(db_path) as store:
        assert [r.grantor for r in store.list()] == ["ops"]


# -- concurrency ---------------------------------------------------------------------


def test_concurrent_threads_lose_no_receipt(tmp_path: Path) -> None:
    store = ConsentStore(tmp_path / "c.db")
    other = ConsentStore(tmp_path / "c.db")
    errors: list[BaseException] = []

    def work(s: ConsentStore, n: int) -> None:
        try:
            for i in range(40):
                s.grant(f"p{n}", f"scope{i}", "ops")
                if i % 4 == 0:
                    s.revoke(f"p{n}", f"scope{i}", "ops")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s, n)) for n, s in enumerate([store, other] * 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        receipts = store.list()
        assert len(receipts) == 6 * 40
        assert sum(not r.active for r in receipts) == 6 * 10
        assert len({r.seq for r in receipts}) == len(receipts)
    finally:
        store.close()
        other.close()


_WRITER = """
import sys
from hostd.engine.consent import ConsentStore
store = ConsentStore(sys.argv[1])
for i in range(50):
    store.grant(sys.argv[2], f"scope{i}", "ops")
store.close()
"""


def test_concurrent_processes_lose_no_receipt(tmp_path: Path) -> None:
    db_path = tmp_path / "c.db"
    ConsentStore(db_path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(db_path), f"writer{n}"],
            cwd=REPO,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    with ConsentStore(db_path) as store:
        receipts = store.list()
        assert len(receipts) == 200
        assert {r.provider_id for r in receipts} == {f"writer{n}" for n in range(4)}
        assert store.missing_scopes("writer3", [f"scope{i}" for i in range(50)]) == []
    integrity = sqlite3.connect(db_path)
    try:
        assert integrity.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        integrity.close()


def test_live_scopes_agree_with_the_receipts(tmp_path: Path) -> None:
    rng = random.Random(7)
    with ConsentStore(tmp_path / "c.db") as store:
        for _ in range(200):
            scope = rng.choice(["a", "b", "c"])
            if rng.random() < 0.5:
                store.grant("p", scope, "ops")
            else:
                store.revoke("p", scope, "ops")
            assert store.active_scopes("p") == {r.scope for r in store.list("p") if r.active}


# -- the current-state table (O(1) gate) ----------------------------------------------

# The ledger as it was before ``consent_state``: events and the append-only triggers.
_LEDGER_BEFORE_STATE = """
CREATE TABLE consent_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    action      TEXT    NOT NULL CHECK (action IN ('grant', 'revoke')),
    provider_id TEXT    NOT NULL,
    scope       TEXT    NOT NULL,
    grantor     TEXT    NOT NULL,
    at          TEXT    NOT NULL
);
CREATE INDEX consent_events_provider ON consent_events (provider_id, scope, seq);
CREATE TRIGGER consent_events_no_update BEFORE UPDATE ON consent_events
    BEGIN SELECT RAISE(ABORT, 'consent ledger is append-only'); END;
CREATE TRIGGER consent_events_no_delete BEFORE DELETE ON consent_events
    BEGIN SELECT RAISE(ABORT, 'consent ledger is append-only'); END;
"""


def _decided_from_events(db_path: Path, provider_id: str, scopes: list[str]) -> list[str]:
    """The gate as first written: missing scopes decided by walking the provider's events."""
    raw = sqlite3.connect(db_path)
    try:
        live = {
            row[0]
            for row in raw.execute(
                "SELECT scope FROM consent_events WHERE provider_id = ? GROUP BY scope "
                "HAVING MAX(CASE WHEN action = 'grant' THEN seq END) > "
                "COALESCE(MAX(CASE WHEN action = 'revoke' THEN seq END), 0)",
                (provider_id,),
            )
        }
    finally:
        raw.close()
    return [s for s in scopes if s not in live]


PROVIDERS = ["p", "q"]
SCOPES = ["a", "b", "c", GENERIC_EGRESS_SCOPE]


def _old_ledger(tmp_path: Path, schema: str, *, seed: int, events: int) -> Path:
    """A ledger of an earlier version's ``schema``, with random grants and revokes."""
    db_path = tmp_path / "old.sqlite3"
    raw = sqlite3.connect(db_path)
    raw.executescript(schema)
    rng = random.Random(seed)
    for _ in range(events):
        raw.execute(
            "INSERT INTO consent_events (action, provider_id, scope, grantor, at) "
            "VALUES (?, ?, ?, 'ops', '2026-01-14T09:02:00Z')",
            (rng.choice(["grant", "revoke"]), rng.choice(PROVIDERS), rng.choice(SCOPES)),
        )
    raw.commit()
    raw.close()
    return db_path


def test_a_random_grant_revoke_replay_decides_exactly_as_the_event_walk(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "c.db"
    for seed in range(5):
        rng = random.Random(seed)
        with ConsentStore(db_path) as store:
            for _ in range(120):
                pid, scope = rng.choice(PROVIDERS), rng.choice(SCOPES)
                if rng.random() < 0.55:
                    store.grant(pid, scope, "ops")
                else:
                    store.revoke(pid, scope, "ops")
                for who in PROVIDERS:
                    wanted = rng.sample(SCOPES, rng.randint(1, len(SCOPES)))
                    assert store.missing_scopes(who, wanted) == _decided_from_events(
                        db_path, who, wanted
                    )


def test_a_ledger_from_before_the_state_table_is_migrated_on_open(tmp_path: Path) -> None:
    db_path = _old_ledger(tmp_path, _LEDGER_BEFORE_STATE, seed=3, events=300)
    with ConsentStore(db_path) as store:
        for who in PROVIDERS:
            assert store.missing_scopes(who, SCOPES) == _decided_from_events(db_path, who, SCOPES)
            assert store.active_scopes(who) == {r.scope for r in store.list(who) if r.active}
        # Events appended after the migration keep the state current, too.
        store.grant("p", "a", "ops")
        store.revoke("q", "b", "ops")
        for who in PROVIDERS:
            assert store.missing_scopes(who, SCOPES) == _decided_from_events(db_path, who, SCOPES)
    # Reopening migrates nothing twice: the history is unchanged and decisions agree.
    with ConsentStore(db_path) as store:
        assert store.missing_scopes("p", SCOPES) == _decided_from_events(db_path, "p", SCOPES)
    assert len(_ledger(db_path)) == 302


def test_the_gate_reads_the_state_table_not_the_event_history(tmp_path: Path) -> None:
    with ConsentStore(tmp_path / "c.db") as store:
        for _ in range(50):
            store.grant("p", "a", "ops")
            store.revoke("p", "a", "ops")
        store.grant("p", "a", "ops")
        statements: list[str] = []
        store._conn().set_trace_callback(statements.append)
        assert store.missing_scopes("p", ["a", "b"]) == ["b"]
        store._conn().set_trace_callback(None)
    assert statements and not any("consent_events" in sql for sql in statements)


# -- destinations: a remote provider's receipts name the origin it is sent to ---------

# The ledger as the version before destinations wrote it: the state table and its trigger.
_LEDGER_WITH_STATE = """
CREATE TABLE IF NOT EXISTS consent_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    action      TEXT    NOT NULL CHECK (action IN ('grant', 'revoke')),
    provider_id TEXT    NOT NULL,
    scope       TEXT    NOT NULL,
    grantor     TEXT    NOT NULL,
    at          TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS consent_events_provider ON consent_events (provider_id, scope, seq);
CREATE TRIGGER IF NOT EXISTS consent_events_no_update
    BEFORE UPDATE ON consent_events
    BEGIN SELECT RAISE(ABORT, 'consent ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS consent_events_no_delete
    BEFORE DELETE ON consent_events
    BEGIN SELECT RAISE(ABORT, 'consent ledger is append-only'); END;
CREATE TABLE IF NOT EXISTS consent_state (
    provider_id TEXT    NOT NULL,
    scope       TEXT    NOT NULL,
    last_grant  INTEGER,
    last_revoke INTEGER,
    PRIMARY KEY (provider_id, scope)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS consent_events_keep_state
    AFTER INSERT ON consent_events
    BEGIN
        INSERT INTO consent_state (provider_id, scope, last_grant, last_revoke)
        VALUES (NEW.provider_id, NEW.scope,
                CASE WHEN NEW.action = 'grant' THEN NEW.seq END,
                CASE WHEN NEW.action = 'revoke' THEN NEW.seq END)
        ON CONFLICT (provider_id, scope) DO UPDATE SET
            last_grant = COALESCE(excluded.last_grant, last_grant),
            last_revoke = COALESCE(excluded.last_revoke, last_revoke); END;
"""


def _decided_for(db_path: Path, provider_id: str, destination: str, scopes: list[str]) -> list[str]:
    """The gate by walking the events: a grant counts at the destination it was made for,
    a revocation ends every grant of its scope."""
    raw = sqlite3.connect(db_path)
    try:
        live: set[str] = set()
        for action, scope, where in raw.execute(
            "SELECT action, scope, destination FROM consent_events WHERE provider_id = ? "
            "ORDER BY seq",
            (provider_id,),
        ):
            if action == "revoke":
                live.discard(scope)
            elif where == destination:
                live.add(scope)
    finally:
        raw.close()
    return [s for s in scopes if s not in live]


def test_a_remote_providers_receipt_counts_only_at_the_origin_it_was_granted_for(
    tmp_path: Path,
) -> None:
    db = tmp_path / "c.db"
    with ConsentStore(db, destinations={"cloud": "https://a.example"}) as store:
        receipt = store.grant("cloud", "egress", "ops")
        assert receipt.destination == "https://a.example"
        assert receipt.to_wire()["destination"] == "https://a.example"
        assert store.missing_scopes("cloud", ["egress"]) == []
    # The same id pointed at another origin: the receipt does not follow it.
    with ConsentStore(db, destinations={"cloud": "https://b.example"}) as store:
        assert store.missing_scopes("cloud", ["egress"]) == ["egress"]
        assert [(r.destination, r.active) for r in store.list("cloud")] == [
            ("https://a.example", True)
        ]
        store.grant("cloud", "egress", "ops")
        assert store.missing_scopes("cloud", ["egress"]) == []
        # A revocation ends the grants of every destination.
        revoked = store.revoke("cloud", "egress", "ops")
        assert sorted(r.destination for r in revoked) == ["https://a.example", "https://b.example"]
    with ConsentStore(db, destinations={"cloud": "https://a.example"}) as store:
        assert store.missing_scopes("cloud", ["egress"]) == ["egress"]
    # A child process (no destination) is not covered by a remote origin's receipt.
    with ConsentStore(db) as store:
        store.destinations = {"cloud": "https://a.example"}
        store.grant("cloud", "org-tenant", "ops")
        store.destinations = {}
        assert store.missing_scopes("cloud", ["org-tenant"]) == ["org-tenant"]
        assert store.list("cloud")[-1].to_wire()["destination"] == "https://a.example"


def test_random_grants_at_random_destinations_decide_as_the_event_walk(tmp_path: Path) -> None:
    db_path = tmp_path / "c.db"
    origins = ["", "https://a.example", "https://b.example:8443"]
    rng = random.Random(11)
    with ConsentStore(db_path) as store:
        for _ in range(300):
            pid, scope = rng.choice(PROVIDERS), rng.choice(SCOPES)
            store.destinations = {p: rng.choice(origins) for p in PROVIDERS}
            if rng.random() < 0.6:
                store.grant(pid, scope, "ops")
            else:
                store.revoke(pid, scope, "ops")
            for who in PROVIDERS:
                where = store.destination(who)
                assert store.missing_scopes(who, SCOPES) == _decided_for(
                    db_path, who, where, SCOPES
                )


def test_a_ledger_of_the_version_before_destinations_is_migrated_on_open(
    tmp_path: Path,
) -> None:
    # Written through the old trigger, as that version did.
    db_path = _old_ledger(tmp_path, _LEDGER_WITH_STATE, seed=5, events=200)
    with ConsentStore(db_path) as store:
        for who in PROVIDERS:
            # A child process keeps every receipt it had: they name no destination.
            assert store.missing_scopes(who, SCOPES) == _decided_from_events(db_path, who, SCOPES)
        assert {r.destination for r in store.list()} == {""}
        # A remote provider is covered by none of them.
        store.destinations = {"p": "https://a.example"}
        assert store.missing_scopes("p", SCOPES) == SCOPES
        store.grant("p", "a", "ops")
        store.revoke("q", "b", "ops")
        assert store.missing_scopes("p", SCOPES) == _decided_for(
            db_path, "p", "https://a.example", SCOPES
        )
    raw = sqlite3.connect(db_path)
    try:
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    finally:
        raw.close()
    assert "consent_state" not in tables and "consent_events_keep_state" not in tables
    # Reopening migrates nothing twice.
    with ConsentStore(db_path) as store:
        assert store.missing_scopes("q", SCOPES) == _decided_for(db_path, "q", "", SCOPES)
    assert len(_ledger(db_path)) == 202


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        (None, ""),
        ("https://Search.Example.COM/v1/cgp?x=1", "https://search.example.com"),
        ("https://search.example.com:443/", "https://search.example.com"),
        ("https://user:secret@search.example.com:8443/p", "https://search.example.com:8443"),
        ("http://127.0.0.1:9000/cgp", "http://127.0.0.1:9000"),
        ("https://[::1]:8443/", "https://[::1]:8443"),
    ],
)
def test_a_destination_is_the_urls_origin_and_never_its_credential(
    url: str | None, origin: str
) -> None:
    assert consent_destination(url) == origin
