"""``list`` of a large memory database: every entry, oldest first, read a page at a
time and printed as each page comes, so no more than a page is held and the first
lines come at once. Paging is shown by events (a write between two pages shows in
what the later page reads), never by timing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from providers.memory import MemoryStore, NewEntry, main
from providers.memory._store import LIST_PAGE

from ._stdio import REPO, child_env

#: More entries than a few pages hold.
MANY = 3 * LIST_PAGE + 7


def _filled(db: Path, n: int) -> None:
    with MemoryStore(db) as store:
        store.add_many(NewEntry("fact", f"title {i}", f"entry number {i}") for i in range(n))


def test_entries_come_oldest_first_a_page_at_a_time(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _filled(db, 7)
    with MemoryStore(db) as store, MemoryStore(db) as other:
        listing = store.entries(include_all=True, page=3)
        first_page = [next(listing).id for _ in range(3)]
        other.forget(5)  # between two pages: the next page is read after it
        other.add("fact", "later", "recorded after the listing began")
        rest = [e.id for e in listing]
        assert first_page + rest == [1, 2, 3, 4, 6, 7]
        assert [e.id for e in store.list(include_all=True)] == [1, 2, 3, 4, 6, 7, 8]
        with pytest.raises(ValueError, match="page must be 1 or more"):
            next(store.entries(page=0))


def test_entries_valid_at_an_instant_are_paged_as_every_entry_is(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        for i in range(5):
            store.add("fact", f"t{i}", f"c{i}", valid_from="2026-01-01", valid_to="2026-02-01")
            store.add("fact", f"u{i}", f"d{i}", valid_from="2026-03-01")
        valid = [e.id for e in store.entries(as_of="2026-01-15", page=2)]
        assert valid == [1, 3, 5, 7, 9] == [e.id for e in store.list(as_of="2026-01-15")]


class _Printed(io.StringIO):
    """stdout that forgets ``victim`` (from another connection) on the first line
    printed: what is read after that line is read after the forget."""

    def __init__(self, db: Path, victim: int) -> None:
        super().__init__()
        self.db, self.victim, self.done = db, victim, False

    def write(self, text: str) -> int:
        if not self.done:
            self.done = True
            with MemoryStore(self.db) as other:
                other.forget(self.victim)
        return super().write(text)


def test_list_prints_each_page_before_it_reads_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    _filled(db, MANY)
    victim = LIST_PAGE + 1  # on the second page
    out = _Printed(db, victim)
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["list", "--all", "--json", "--db", str(db)]) == 0
    ids = [json.loads(line)["id"] for line in out.getvalue().splitlines()]
    # Read all at once before printing, the victim would be listed.
    assert ids == [i for i in range(1, MANY + 1) if i != victim]


def test_list_all_of_thousands_of_entries_is_complete_and_in_order(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _filled(db, MANY)
    with MemoryStore(db) as store:
        expected = [e.to_json() for e in store.list(include_all=True)]
    done = subprocess.run(
        [sys.executable, "-m", "providers.memory", "list", "--all", "--json", "--db", str(db)],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]  # each line one object
    assert listed == expected and [e["id"] for e in listed] == list(range(1, MANY + 1))
    text = subprocess.run(
        [sys.executable, "-m", "providers.memory", "list", "--all", "--db", str(db)],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    heads = [line for line in text.stdout.splitlines() if line.startswith("#")]
    assert [int(h.split()[0][1:]) for h in heads] == list(range(1, MANY + 1))


def _closed_after_one_line(args: list[str], stdin: str | None = None) -> tuple[int, str]:
    """Run ``python -m providers.memory ARGS`` with a stdout whose reader reads one line
    and closes the pipe (``| head -1``): its exit status and its stderr."""
    with subprocess.Popen(
        [sys.executable, "-m", "providers.memory", *args],
        cwd=REPO,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        assert child.stderr is not None
        if stdin is not None:
            child.stdin.write(stdin)
        child.stdin.close()
        assert child.stdout.readline()
        child.stdout.close()  # the reader has gone
        status = child.wait(timeout=120)  # a hang guard
        return status, child.stderr.read()


def test_a_listing_whose_reader_goes_away_ends_quietly(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _filled(db, MANY)  # more than a pipe's buffer holds, printed
    status, err = _closed_after_one_line(["list", "--all", "--db", str(db)])
    assert status == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_an_import_whose_reader_goes_away_still_imports_every_entry(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    lines = "".join(
        json.dumps({"kind": "fact", "title": f"t{i}", "content": f"imported {i}"}) + "\n"
        for i in range(MANY)
    )
    status, err = _closed_after_one_line(["import", "--db", str(db)], stdin=lines)
    assert status == 0, err
    assert "Traceback" not in err, err
    with MemoryStore(db) as store:
        assert len(store.list(include_all=True)) == MANY  # nothing cut short by the pipe
