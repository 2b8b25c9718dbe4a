"""providers.memory's ready message (what ``hostd status`` shows beside ``ready``): how
many entries of each kind, and the database, the home directory written ``~``."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.memory import MemoryStore, NewEntry

from ._stdio import StdioPeer

_QUERY = {"query": {"goal": "port", "max_frames": 4, "max_tokens": 500}}


@pytest.mark.anyio
async def test_the_ready_message_counts_each_kind_and_names_the_database(tmp_path: Path) -> None:
    db = tmp_path / ".local" / "state" / "hostd" / "memory" / "x.db"
    with MemoryStore(db) as store:
        store.add_many([NewEntry("fact", "port", "staging listens on 5432")] * 2)
        store.add("episode", "deploy", "deployed staging")
        store.supersede(1, "staging listens on 6543")  # a closed entry is still held
    shown = "~/.local/state/hostd/memory/x.db"
    env = {"HOME": str(tmp_path)}
    async with StdioPeer(["-m", "providers.memory", "--db", str(db)], env=env) as peer:
        await peer.handshake()
        # Said at its start: no query needed for `hostd status` to name the database.
        assert peer.notes[-1] == {
            "state": "ready",
            "phase": "ready",
            "message": f"4 entries: 3 facts, 1 episode, in {shown}",
        }
        with MemoryStore(db) as other:  # another process's write (as the CLI's)
            other.add("memory", "pref", "the user prefers port numbers in hex")
        await peer.call("context/query", _QUERY)
        # Said again before the reply, so a host that read the reply has it.
        assert peer.notes[-1]["message"] == f"5 entries: 3 facts, 1 memory, 1 episode, in {shown}"
        count = len(peer.notes)
        await peer.call("context/query", _QUERY)
        assert len(peer.notes) == count  # nothing changed: nothing said
        # A write through the provider itself is said with its reply, no query needed.
        remember = {"kind": "fact", "title": "tz", "content": "the servers run in UTC"}
        await peer.call("memory/remember", remember)
        assert peer.notes[-1]["message"] == f"6 entries: 4 facts, 1 memory, 1 episode, in {shown}"
        await peer.call("memory/forget", {"id": "mem-6"})
        assert peer.notes[-1]["message"] == f"5 entries: 3 facts, 1 memory, 1 episode, in {shown}"


@pytest.mark.anyio
async def test_an_empty_database_outside_home_is_named_whole(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    env = {"HOME": str(tmp_path / "home")}
    async with StdioPeer(["-m", "providers.memory", "--db", str(db)], env=env) as peer:
        await peer.handshake()
        assert peer.notes[-1]["message"] == f"0 entries in {db}"
