"""providers.memory: the bitemporal window (Q2), supersede, verify, crash-safety, CLI, stdio."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from hostd.protocol import (
    ContextQuery,
    FrameIdentity,
    check_as_of,
    check_budget,
    check_frame,
    check_kinds,
    frame_in_window,
)
from providers.memory import (
    AlreadyForgotten,
    MemoryStore,
    NewEntry,
    TimestampError,
    default_db_path,
    timestamp_key,
)

from ._stdio import REPO, StdioPeer, child_env

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-02-01T00:00:00Z"
T2 = "2026-03-01T00:00:00Z"


def _q(text: str, **kw: object) -> ContextQuery:
    base: dict[str, object] = {"goal": text, "max_frames": 20, "max_tokens": 100_000}
    base.update(kw)
    return ContextQuery.model_validate(base)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path / "state" / "memory.db") as s:
        yield s


def _ids(store: MemoryStore, text: str, as_of: str | None) -> list[str]:
    return [f.id for f in store.answer(_q(text, as_of=as_of)).frames]


def test_as_of_window_is_half_open(store: MemoryStore) -> None:
    e = store.add("fact", "port", "the daemon listens on port 7000", valid_from=T0, valid_to=T1)
    assert _ids(store, "daemon port", "2025-12-31T23:59:59.999999Z") == []
    assert _ids(store, "daemon port", T0) == [e.frame_id]  # at valid_from: included
    assert _ids(store, "daemon port", "2026-01-31T23:59:59.999999999Z") == [e.frame_id]
    assert _ids(store, "daemon port", T1) == []  # at valid_to: excluded
    q = _q("daemon port", as_of=T0)
    frames = store.answer(q).frames
    assert check_as_of(q, frames) == [] and all(frame_in_window(f, T0) for f in frames)


def test_timestamps_compare_as_instants_not_as_text(store: MemoryStore) -> None:
    # "…:00Z" sorts after "…:00.5Z" as text; the window must still be right.
    e = store.add("fact", "t", "wombat", valid_from="2026-01-01T00:00:00.5Z")
    assert _ids(store, "wombat", "2026-01-01T00:00:00Z") == []
    assert _ids(store, "wombat", "2026-01-01T00:00:00.5Z") == [e.frame_id]
    assert timestamp_key("2026-01-01T00:00:00Z") < timestamp_key("2026-01-01T00:00:00.5Z")


def test_bad_timestamps_and_windows_are_refused(store: MemoryStore) -> None:
    with pytest.raises(TimestampError):
        store.add("fact", "t", "x", valid_from="2026-01-01 00:00:00")
    with pytest.raises(TimestampError):
        store.add("fact", "t", "x", valid_from=T1, valid_to=T1)
    with pytest.raises(ValueError, match="kind"):
        store.add("snippet", "t", "x")
    assert store.count() == 0


def test_dates_and_offsets_are_kept_as_utc_instants(store: MemoryStore) -> None:
    e = store.add(
        "fact", "t", "x", valid_from="2026-11-02", valid_to="2026-11-03T01:30:00.25+02:00"
    )
    assert (e.valid_from, e.valid_to) == ("2026-11-02T00:00:00Z", "2026-11-02T23:30:00.25Z")
    closed, new = store.supersede(e.id, "y", at="2026-11-02T12:00:00-01:00")
    assert closed.valid_to == new.valid_from == "2026-11-02T13:00:00Z"
    assert [x.id for x in store.list(as_of="2026-11-02")] == [e.id]
    for bad in ("2026-13-01", "2026-11-02T10:00:00", "2026-11-02T10:00:00+25:00", "yesterday"):
        with pytest.raises(TimestampError, match="is not a time: give YYYY-MM-DD"):
            store.add("fact", "t", "x", valid_from=bad)


def test_empty_content_is_refused_as_an_empty_title_is(store: MemoryStore) -> None:
    for title, content in (("t", ""), ("t", " \n"), ("", "x")):
        with pytest.raises(ValueError, match="must be non-empty text"):
            store.add("fact", title, content)
    with pytest.raises(ValueError, match="content must be non-empty text"):
        store.supersede(store.add("fact", "t", "x", valid_from=T0).id, "  ", at=T1)
    assert store.count() == 1


def test_forgetting_a_correction_makes_the_old_entry_valid_again(store: MemoryStore) -> None:
    old = store.add("fact", "staging DB", "port 5432", valid_from=T0)
    _, fix = store.supersede(old.id, "port 6543", at=T1)
    gone, reopened = store.forget(fix.id)
    assert gone == fix and reopened is not None and reopened.id == old.id
    assert (reopened.valid_to, reopened.superseded_by) == (None, None)
    assert [e.id for e in store.list()] == [old.id]
    assert _ids(store, "staging port", None) == [old.frame_id]


def test_forgetting_a_middle_correction_hands_its_window_back(store: MemoryStore) -> None:
    a = store.add("fact", "staging DB", "port 5432", valid_from=T0)
    _, b = store.supersede(a.id, "port 6543", at=T1)
    _, c = store.supersede(b.id, "port 7654", at=T2)
    _, reopened = store.forget(b.id)
    assert reopened is not None and (reopened.valid_to, reopened.superseded_by) == (T2, c.id)
    assert store.get(c.id).supersedes == a.id  # type: ignore[union-attr] # c is kept
    assert [e.id for e in store.list(as_of=T1)] == [a.id]
    assert store.forget(c.id)[1] == store.get(a.id) and store.list() == [store.get(a.id)]
    # Forgetting an entry that corrected nothing reopens nothing.
    assert store.forget(a.id)[1] is None and store.count() == 0


def test_forgetting_twice_is_already_forgotten_and_an_id_never_given_out_is_unknown(
    store: MemoryStore,
) -> None:
    a = store.add("fact", "staging DB", "port 5432", valid_from=T0)
    b = store.add("fact", "prod DB", "port 5433", valid_from=T0)
    store.forget(b.id)  # the newest: an id the next entry must still not reuse
    with pytest.raises(AlreadyForgotten, match=f"memory entry {b.id} was already forgotten"):
        store.forget(b.id)
    with pytest.raises(KeyError) as never:
        store.forget(b.id + 1)
    assert not isinstance(never.value, AlreadyForgotten)
    assert store.add("fact", "t", "x").id == b.id + 1  # ids are never reused
    assert [e.id for e in store.list(include_all=True)] == [a.id, b.id + 1]


def test_forgetting_a_correction_again_names_the_entry_its_forget_reopened(
    store: MemoryStore,
) -> None:
    old = store.add("fact", "staging DB", "port 5432", valid_from=T0)
    _, fix = store.supersede(old.id, "port 6543", at=T1)
    assert store.forget(fix.id)[1] == store.get(old.id)
    # A retry (its first answer lost) learns what the first forget did, as the first said it.
    with pytest.raises(AlreadyForgotten) as again:
        store.forget(fix.id)
    assert again.value.reopened == old.id
    store.forget(old.id)
    with pytest.raises(AlreadyForgotten) as plain:
        store.forget(old.id)
    assert plain.value.reopened is None  # its forget reopened nothing
    # Forgotten before the store kept what a forget reopened: already, with nothing more.
    with sqlite3.connect(store.path) as other:
        other.execute("DELETE FROM forgotten")
    with pytest.raises(AlreadyForgotten) as older:
        store.forget(fix.id)
    assert older.value.reopened is None


def _kept_forgets(store: MemoryStore) -> int:
    with closing(sqlite3.connect(store.path)) as other:
        return int(other.execute("SELECT count(*) FROM forgotten").fetchone()[0])


def _forget_a_correction(store: MemoryStore) -> tuple[int, int]:
    """``(old, fix)``: ``fix`` superseded ``old`` and is forgotten, so ``old`` is reopened."""
    old = store.add("fact", "staging DB", "port 5432", valid_from=T0)
    _, fix = store.supersede(old.id, "port 6543", at=T1)
    store.forget(fix.id)
    return old.id, fix.id


def test_the_forgets_kept_stay_bounded_and_a_recent_retry_still_names_what_it_reopened(
    tmp_path: Path,
) -> None:
    with MemoryStore(tmp_path / "memory.db", keep_forgotten=10) as store:
        _, early = _forget_a_correction(store)
        held = []
        for _ in range(40):
            store.forget(store.add("memory", "t", "c").id)
            held.append(_kept_forgets(store))
        # Dropped once a tenth over the bound (one row over, for a bound of 10), not on
        # every forget, and never more than that.
        assert max(held) == 11 and min(held[10:]) == 10
        old, recent = _forget_a_correction(store)
        for _ in range(5):
            store.forget(store.add("memory", "t", "c").id)
        with pytest.raises(AlreadyForgotten) as again:
            store.forget(recent)
        assert again.value.reopened == old
        # One so many forgets ago that its record is dropped: still already forgotten,
        # only what it reopened is no longer known (as before the store kept it).
        with pytest.raises(AlreadyForgotten) as dropped:
            store.forget(early)
        assert dropped.value.reopened is None
        with pytest.raises(KeyError) as never:
            store.forget(store.add("memory", "t", "c").id + 1)
        assert not isinstance(never.value, AlreadyForgotten)


def test_forgets_recorded_before_they_were_ordered_are_kept_and_dropped_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    with MemoryStore(path) as store:
        old, first = _forget_a_correction(store)
    with sqlite3.connect(path) as other:  # the table as the store first made it
        other.execute("DROP TABLE forgotten")
        other.execute("CREATE TABLE forgotten (id INTEGER PRIMARY KEY, reopened INTEGER)")
        other.execute("INSERT INTO forgotten (id, reopened) VALUES (?, ?)", (first, old))
    with MemoryStore(path, keep_forgotten=2) as store:
        with pytest.raises(AlreadyForgotten) as again:
            store.forget(first)
        assert again.value.reopened == old
        newer = [_forget_a_correction(store) for _ in range(2)]
        assert _kept_forgets(store) == 2
        with pytest.raises(AlreadyForgotten) as dropped:
            store.forget(first)
        assert dropped.value.reopened is None
        for reopened, fix in newer:
            with pytest.raises(AlreadyForgotten) as kept:
                store.forget(fix)
            assert kept.value.reopened == reopened


def test_a_store_keeps_no_negative_count_of_forgets(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep_forgotten must be 0 or more"):
        MemoryStore(tmp_path / "memory.db", keep_forgotten=-1)


def test_supersede_closes_the_old_window_and_opens_the_new(store: MemoryStore) -> None:
    old = store.add("fact", "retries", "the retry loop gives up after five attempts", valid_from=T0)
    closed, new = store.supersede(old.id, "the retry loop gives up after three attempts", at=T1)
    assert closed.valid_to == T1 and closed.superseded_by == new.id
    assert new.valid_from == T1 and new.valid_to is None and new.supersedes == old.id
    assert _ids(store, "retry loop", "2026-01-15T00:00:00Z") == [old.frame_id]
    assert _ids(store, "retry loop", T1) == [new.frame_id]
    assert _ids(store, "retry loop", None) == [new.frame_id]  # no as_of: what is true now
    assert [e.id for e in store.list()] == [new.id]
    assert [e.id for e in store.list(include_all=True)] == [old.id, new.id]
    with pytest.raises(ValueError, match="already superseded"):
        store.supersede(old.id, "again", at=T2)
    with pytest.raises(TimestampError):
        store.supersede(new.id, "before it began", at=T0)


def test_frames_are_valid_and_honour_kinds_and_budget(store: MemoryStore) -> None:
    store.add_many(
        [
            NewEntry("fact", "cache", "the cache lives under the state dir " * 5),
            NewEntry("memory", "cache pref", "the user prefers a small cache"),
            NewEntry("episode", "cache wipe", "the cache was wiped on Monday"),
        ]
    )
    frames = store.answer(_q("cache")).frames
    assert len(frames) == 3
    for f in frames:
        assert check_frame(f) == [] and 0 <= f.score <= 1 and f.recorded_at and f.valid_from
    q = _q("cache", kinds=["episode", "memory"])
    assert {f.kind for f in store.answer(q).frames} == {"episode", "memory"}
    assert check_kinds(q, store.answer(q).frames) == []
    q = _q("cache", max_tokens=20)
    out = store.answer(q)
    assert check_budget(q, out.frames) == [] and out.truncated
    assert len(store.answer(_q("cache", max_frames=1)).frames) == 1


def test_query_text_is_data_not_fts_syntax(store: MemoryStore) -> None:
    store.add("fact", "quote", 'he said "NEAR" AND (stop)')
    assert len(store.answer(_q('"NEAR" AND (stop OR * ^')).frames) == 1
    assert store.answer(_q("")).frames == []


def test_stop_words_match_nothing_on_their_own(store: MemoryStore) -> None:
    note = store.add("fact", "team note", "Remember the deploy window is on the weekend.")
    banana = store.add("fact", "fruit", "The banana lives in the blue crate.")
    # "where is the" says nothing: only "banana" is asked, so the note is not a match.
    assert _ids(store, "where is the banana", None) == [banana.frame_id]
    assert _ids(store, "What is THE", None) == []
    assert _ids(store, "when is the deploy window", None) == [note.frame_id]


def test_verify_answers_from_the_stored_digest(store: MemoryStore) -> None:
    a = store.add("fact", "a", "alpha")
    b = store.add("fact", "b", "beta")

    def ident(e_id: str, digest: str | None) -> FrameIdentity:
        return FrameIdentity(provider_id="memory", frame_id=e_id, content_digest=digest)

    assert store.verify_one(ident(a.frame_id, a.content_digest)).status == "valid"
    wrong = store.verify_one(ident(a.frame_id, b.content_digest))
    assert wrong.status == "stale" and wrong.replacement_digest == a.content_digest
    assert store.verify_one(ident(a.frame_id, None)).status == "unknown"
    assert store.verify_one(ident("nonsense", a.content_digest)).status == "unknown"
    store.supersede(a.id, "alpha two")
    assert store.verify_one(ident(a.frame_id, a.content_digest)).status == "stale"
    store.forget(b.id)
    assert store.verify_one(ident(b.frame_id, b.content_digest)).status == "gone"
    # An id no row can have (past SQLite's integers, or past Python's digit limit for
    # int()) is not this store's: unknown, not an error that fails the whole verify.
    for too_big in (str(2**63), "9" * 5000):
        assert store.verify_one(ident(f"mem-{too_big}", a.content_digest)).status == "unknown"


def test_default_db_lives_under_the_state_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/x/state")
    assert default_db_path() == Path("/x/state/hostd/memory.db")
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_db_path() == Path.home() / ".local/state/hostd/memory.db"


_WRITER = """
import sys
from pathlib import Path
from providers.memory import MemoryStore, NewEntry
store = MemoryStore(Path(sys.argv[1]))
batch = int(sys.argv[2])
n = 0
while True:
    entries = store.add_many(
        NewEntry("fact", f"fact {n + i}", f"committed fact number {n + i} " * 20)
        for i in range(batch)
    )
    n += batch
    print(entries[-1].id, flush=True)
"""


def test_a_killed_writer_loses_nothing_it_committed(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    batch = 50
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db), str(batch)],
        cwd=REPO,
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        reported = [int(proc.stdout.readline()) for _ in range(5)]
        # Killed while it is (almost surely) in the middle of the next batch.
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    with MemoryStore(db) as store:
        assert store._db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        count = store.count()
        ids = {e.id for e in store.list(include_all=True)}
        # Every reported commit is there, and no batch is there in part.
        assert set(range(1, reported[-1] + 1)) <= ids
        assert count % batch == 0 and ids == set(range(1, count + 1))
        assert len(store.answer(_q(f"number {reported[-1]}")).frames) >= 1


def _cli(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "providers.memory", *args, "--db", str(db)],
        cwd=REPO,
        env=child_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_adds_imports_supersedes_and_lists(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    r = _cli(db, "add", "--title", "port", "--valid-from", T0, "--json", "port is 7000")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    lines = "\n".join(
        json.dumps({"kind": k, "title": k, "content": f"{k} entry"}) for k in ("memory", "episode")
    )
    r = _cli(db, "import", "--json", stdin=lines)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2
    r = _cli(db, "supersede", str(first["id"]), "--at", T1, "--json", "port is 7001")
    old, new = (json.loads(x) for x in r.stdout.splitlines())
    assert old["valid_to"] == T1 and new["valid_from"] == T1
    r = _cli(db, "list", "--as-of", "2026-01-15T00:00:00Z", "--json")
    assert [json.loads(x)["content"] for x in r.stdout.splitlines()] == ["port is 7000"]
    r = _cli(db, "add", "--title", "t", "--valid-from", "yesterday", "x")
    assert r.returncode == 2 and "'yesterday' is not a time: give YYYY-MM-DD" in r.stderr
    assert "F4" not in r.stderr


def test_cli_forget_says_what_it_forgot_and_what_is_valid_again(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    assert _cli(db, "add", "--title", "staging DB", "--valid-from", T0, "port 5432").returncode == 0
    assert _cli(db, "supersede", "#1", "--at", T1, "port 6543").returncode == 0
    r = _cli(db, "forget", "mem-2")  # as a composition cites it
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        f"forgot #2 fact [{T1}, …)\n    staging DB: port 6543\n"
        f"valid again (#2 had superseded it): #1 fact [{T0}, …)\n    staging DB: port 5432\n"
    )
    r = _cli(db, "forget", "#2")  # run twice: what was asked holds, and what it did
    assert (r.returncode, r.stdout) == (
        0,
        "#2 was already forgotten (it made #1 valid again)\n",
    ), r.stderr
    r = _cli(db, "forget", "99")
    assert r.returncode == 1 and r.stderr.splitlines()[-1] == "providers.memory: no memory entry 99"
    r = _cli(db, "forget", "mem-x")
    assert r.returncode == 2 and "not an entry id: give 12, #12 or mem-12" in r.stderr


def test_cli_forget_keeps_as_many_forgets_as_keep_forgotten_says(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    assert _cli(db, "add", "--title", "staging DB", "--valid-from", T0, "port 5432").returncode == 0
    assert _cli(db, "supersede", "#1", "--at", T1, "port 6543").returncode == 0
    assert _cli(db, "forget", "--keep-forgotten", "0", "2").returncode == 0  # none kept
    r = _cli(db, "forget", "2")
    assert (r.returncode, r.stdout) == (0, "#2 was already forgotten\n"), r.stderr
    for bad in ("-1", "x", "1.5"):
        r = _cli(db, "forget", "--keep-forgotten", bad, "2")
        assert r.returncode == 2 and r.stdout == "", bad
        assert f"--keep-forgotten: not a whole number, 0 or more: '{bad}'" in r.stderr


def test_cli_import_names_the_line_it_refuses(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    good = json.dumps({"kind": "fact", "title": "a", "content": "b"})
    cases = {
        json.dumps({"kind": "fact", "title": "a", "content": "b", "tags": ["x"]}): (
            "line 3: unknown key 'tags' (an entry has kind, title, content, valid_from, valid_to)"
        ),
        json.dumps({"kind": "fact", "title": "a"}): "line 3: missing key 'content'",
        json.dumps({"kind": "fact", "title": "a", "content": ""}): (
            "line 3: content must be non-empty text"
        ),
        json.dumps({"kind": "fact", "title": 5, "content": "b"}): "line 3: title must be text",
        "[1]": "line 3: not a JSON object",
        "{oops": "line 3: not a JSON object",
    }
    for bad, said in cases.items():
        r = _cli(db, "import", stdin=f"{good}\n\n{bad}\n")
        assert r.returncode == 2 and said in r.stderr.splitlines()[-1], r.stderr
        assert "Traceback" not in r.stderr and "__init__" not in r.stderr
    assert _cli(db, "list").stdout == ""  # one transaction: nothing of a refused import


def test_the_cli_creates_its_database_private_whatever_the_umask(tmp_path: Path) -> None:
    import os
    import stat

    db = tmp_path / "state" / "memory.db"
    old = os.umask(0o022)  # the usual umask: a file its creator leaves alone is 0644
    try:
        r = _cli(db, "add", "--title", "t", "secret memory")
        assert r.returncode == 0, r.stderr
        r = _cli(db, "list")
        assert "secret memory" in r.stdout
    finally:
        os.umask(old)
    made = sorted(p for p in db.parent.iterdir())
    assert db in made
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in made} == dict.fromkeys(
        (p.name for p in made), 0o600
    )
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    # A file its owner opened up on purpose is left as it is.
    db.chmod(0o640)
    assert _cli(db, "list").returncode == 0 and stat.S_IMODE(db.stat().st_mode) == 0o640


def test_help_lists_the_options() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "providers.memory", "--help"],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--db" in r.stdout and "supersede" in r.stdout


@pytest.mark.anyio
async def test_memory_provider_serves_a_query_and_verify_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        e = store.add("fact", "retries", "the retry loop gives up after three attempts")
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    async with StdioPeer(["-m", "providers.memory", "--db", str(db)], env=env) as peer:
        ack = await peer.handshake()
        assert ack["capabilities"]["query"]["kinds"] == ["fact", "memory", "episode"]
        result = await peer.call(
            "context/query", {"query": {"goal": "retry loop", "max_frames": 4, "max_tokens": 500}}
        )
        (frame,) = result["frames"]
        assert frame["id"] == e.frame_id and frame["content_digest"] == e.content_digest
        # The only entry, so every word is in all of them: still a real score, not FTS5's
        # IDF floor (0.000001), which ranked a first memory below every other frame.
        assert frame["score"] > 0.01
        ident = {
            "provider_id": "memory",
            "frame_id": e.frame_id,
            "content_digest": e.content_digest,
        }
        verified = await peer.call("context/verify", {"frames": [ident]})
        assert verified["verdicts"] == [{"frame": ident, "status": "valid"}]
        # A write from another process while the provider serves is seen by the next query.
        r = _cli(db, "supersede", str(e.id), "the retry loop gives up after four attempts")
        assert r.returncode == 0, r.stderr
        result = await peer.call(
            "context/query", {"query": {"goal": "retry loop", "max_frames": 4, "max_tokens": 500}}
        )
        assert [f["content"] for f in result["frames"]] == [
            "the retry loop gives up after four attempts"
        ]
        verified = await peer.call("context/verify", {"frames": [ident]})
        assert verified["verdicts"] == [{"frame": ident, "status": "stale"}]
    # No --db: a fresh database under XDG_STATE_HOME is created and served.
    async with StdioPeer(["-m", "providers.memory"], env=env) as peer:
        await peer.handshake()
        result = await peer.call(
            "context/query", {"query": {"goal": "retry", "max_frames": 4, "max_tokens": 500}}
        )
        assert result["frames"] == []
    assert (tmp_path / "state" / "hostd" / "memory.db").exists()
