"""``memory/remember`` and ``memory/forget`` end to end: a real ``hostd serve`` over its
Unix socket, a real ``providers.memory`` child, and a provider that stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostd.client import AsyncClient, RpcError, connect
from providers.memory import MemoryStore
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-02-01T00:00:00Z"
BETWEEN = "2026-01-15T00:00:00Z"


def memory_table(pid: str, db: Path) -> str:
    # The database's path carries the test's marker: a leftover child is found by it.
    return (
        f'\n[[provider]]\nid = "{pid}"\n'
        f'command = ["python", "-m", "providers.memory", "--db", "{db}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )


async def _memory_ids(client: AsyncClient, goal: str, **options: Any) -> list[str]:
    result = await client.compose(goal, budget=2000, providers=["memory"], **options)
    return sorted(e.frame_id for e in result.evidence)


async def test_an_agent_remembers_supersedes_and_forgets(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    db = workdir / f"memory-{marker}.db"
    # alpha stores nothing: the write goes to the one provider that declares it.
    daemon = await start_daemon({"alpha": {}}, extra=memory_table("memory", db))
    async with connect(daemon.socket) as client:
        first = await client.call(
            "memory/remember",
            {
                "kind": "fact",
                "title": "deploys",
                "content": "Deploys happen on Tuesdays.",
                "valid_from": T0,
            },
        )
        assert (first["provider"], first["id"], first["valid_from"]) == ("memory", "mem-1", T0)
        # Answered after the commit: another connection to the database reads it now.
        with MemoryStore(db) as other:
            assert [e.frame_id for e in other.list(include_all=True)] == ["mem-1"]
        assert await _memory_ids(client, "when do deploys happen") == ["mem-1"]

        second = await client.call(
            "memory/remember",
            {
                "kind": "fact",
                "title": "deploys",
                "content": "Deploys happen on Wednesdays.",
                "valid_from": T1,
                "supersedes": "mem-1",
                "provider": "memory",
            },
        )
        assert (second["id"], second["supersedes"]) == ("mem-2", "mem-1")
        assert await _memory_ids(client, "when do deploys happen") == ["mem-2"]
        # The old entry is still what was true before the new one's valid_from (Q2).
        assert await _memory_ids(client, "when do deploys happen", as_of=BETWEEN) == ["mem-1"]

        gone = await client.call("memory/forget", {"id": "mem-2"})
        assert gone == {
            "provider": "memory",
            "forgotten": "mem-2",
            "reopened": "mem-1",
            "request_id": gone["request_id"],
        }
        # A retry whose first reply was lost learns the same, and that nothing was done now.
        again = await client.call("memory/forget", {"id": "mem-2"})
        assert (again["already"], again["reopened"]) == (True, "mem-1")
        # Forgetting the correction undoes it: the entry it closed is true again.
        assert await _memory_ids(client, "when do deploys happen") == ["mem-1"]
        gone = await client.call("memory/forget", {"id": "mem-1"})
        assert "reopened" not in gone
        assert await _memory_ids(client, "when do deploys happen") == []
    assert await daemon.stop() == 0
    remembered = daemon.events("memory.remembered")
    assert [(e["provider"], e["id"]) for e in remembered] == [
        ("memory", "mem-1"),
        ("memory", "mem-2"),
    ]


async def test_a_write_to_a_provider_that_stores_nothing_is_not_supported(
    start_daemon: Any,
) -> None:
    daemon = await start_daemon({"alpha": {}})
    async with connect(daemon.socket) as client:
        params = {"kind": "fact", "title": "t", "content": "c", "provider": "alpha"}
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", params)
        assert caught.value.remote_reason == "not_supported"
        assert "'alpha' does not store memories" in caught.value.message
        # Named by none: no configured provider stores memories, and the error says so.
        del params["provider"]
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", params)
        assert caught.value.rpc_code == -32602
        assert "no configured provider stores memories" in caught.value.message
        assert "alpha" in caught.value.message
    assert await daemon.stop() == 0


async def test_a_write_the_provider_refuses_names_the_field_and_stores_nothing(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    db = workdir / f"memory-{marker}.db"
    daemon = await start_daemon({}, extra=memory_table("memory", db))
    async with connect(daemon.socket) as client:
        params = {"kind": "fact", "title": "t", "content": "c", "supersedes": "mem-9"}
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", params)
        error = caught.value
        assert (error.rpc_code, error.remote_reason) == (-32602, "write_refused")
        assert error.message == (
            "invalid params: supersedes: provider 'memory' refused the write: no such entry"
        )
        assert (error.rpc_data["field"], error.rpc_data["problem"]) == (
            "supersedes",
            "unknown_entry",
        )
        with pytest.raises(RpcError) as caught:
            await client.call("memory/forget", {"id": "mem-9"})
        assert caught.value.remote_reason == "write_refused"
        # The daemon refuses what it can judge itself: an unknown member, a bad time.
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", {**params, "colour": "red"})
        assert caught.value.rpc_code == -32602 and "colour" in caught.value.message
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", {**params, "valid_from": "yesterday"})
        assert caught.value.message.startswith("invalid params: valid_from:")
    assert await daemon.stop() == 0
    with MemoryStore(db) as store:
        assert store.count() == 0


async def test_two_providers_that_store_memories_must_be_named(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    tables = memory_table("notes", workdir / f"a-{marker}.db") + memory_table(
        "diary", workdir / f"b-{marker}.db"
    )
    daemon = await start_daemon({}, extra=tables)
    async with connect(daemon.socket) as client:
        params = {"kind": "episode", "title": "t", "content": "c"}
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", params)
        assert caught.value.rpc_code == -32602
        assert "several providers store memories (diary, notes)" in caught.value.message
        done = await client.call("memory/remember", {**params, "provider": "diary"})
        assert (done["provider"], done["id"]) == ("diary", "mem-1")
    assert await daemon.stop() == 0


async def test_a_write_waits_for_consent_as_a_query_does(start_daemon: Any, marker: str) -> None:
    table = (
        '\n[[provider]]\nid = "cloud"\ncommand = ["python", "-m", '
        f'"tests.fixtures.remembering_provider", "--name", "cloud-{marker}", '
        '"--egress-scope", "net:notes.example"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    daemon = await start_daemon({}, extra=table)
    async with connect(daemon.socket) as client:
        params = {"kind": "fact", "title": "t", "content": "c"}
        with pytest.raises(RpcError) as caught:
            await client.call("memory/remember", params)
        assert caught.value.remote_reason == "no_consent"  # nothing was sent
        assert caught.value.rpc_data["missing_scopes"] == ["net:notes.example"]
        assert "hostd consent grant cloud net:notes.example" in caught.value.message
        await client.consent_grant("cloud", "net:notes.example")
        done = await client.call("memory/remember", params)
        assert (done["provider"], done["id"]) == ("cloud", "e-1")
    assert await daemon.stop() == 0
