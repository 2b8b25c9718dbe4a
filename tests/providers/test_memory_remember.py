"""providers.memory stores what a host sends: ``memory/remember`` and ``memory/forget``
(hostd's extension of the provider wire), in memory and as a real child process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostd.protocol import PROTOCOL_VERSION
from hostd.provider import ProviderServer
from providers.memory import MemoryProvider, MemoryStore
from tests.fixtures.healthy_provider import HealthyProvider

from ._stdio import StdioPeer

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-02-01T00:00:00Z"
HANDSHAKE = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "t", "version": "0"}}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "memory.db"


@pytest.fixture
def server(db: Path) -> Iterator[ProviderServer]:
    with MemoryStore(db) as store:
        yield ProviderServer(MemoryProvider(store))


async def _ask(server: ProviderServer, method: str, params: Any) -> Any:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    raw = await server.handle_line(line.encode() + b"\n")
    assert raw is not None
    return json.loads(raw)


def _stored(db: Path) -> list[dict[str, object]]:
    """What another connection to the database reads: only what was committed."""
    with MemoryStore(db) as other:
        return [e.to_json() for e in other.list(include_all=True)]


@pytest.mark.anyio
async def test_the_handshake_declares_the_kinds_it_stores(server: ProviderServer) -> None:
    reply = await _ask(server, "context/handshake", HANDSHAKE)
    caps = reply["result"]["capabilities"]
    assert caps["remember"] == {"kinds": ["fact", "memory", "episode"]}


@pytest.mark.anyio
async def test_remember_answers_once_the_entry_is_committed(
    server: ProviderServer, db: Path
) -> None:
    params = {"kind": "fact", "title": "deploys", "content": "Deploys happen on Tuesdays."}
    result = (await _ask(server, "memory/remember", {**params, "valid_from": T0}))["result"]
    assert result["id"] == "mem-1" and result["valid_from"] == T0
    assert result["recorded_at"].endswith("Z") and "valid_to" not in result
    (row,) = _stored(db)
    assert (row["frame_id"], row["content"], row["recorded_at"]) == (
        "mem-1",
        params["content"],
        result["recorded_at"],
    )


@pytest.mark.anyio
async def test_remember_supersedes_an_entry_at_the_new_one_s_valid_from(
    server: ProviderServer, db: Path
) -> None:
    first = {"kind": "fact", "title": "port", "content": "port 7000", "valid_from": T0}
    await _ask(server, "memory/remember", first)
    second = {**first, "content": "port 8000", "valid_from": T1, "supersedes": "mem-1"}
    result = (await _ask(server, "memory/remember", second))["result"]
    assert (result["id"], result["supersedes"], result["valid_from"]) == ("mem-2", "mem-1", T1)
    old, new = _stored(db)
    assert (old["valid_to"], old["superseded_by"], new["supersedes"]) == (T1, 2, 1)


@pytest.mark.anyio
async def test_forget_deletes_the_entry(server: ProviderServer, db: Path) -> None:
    await _ask(server, "memory/remember", {"kind": "memory", "title": "t", "content": "c"})
    assert (await _ask(server, "memory/forget", {"id": "mem-1"}))["result"] == {
        "forgotten": "mem-1"
    }
    assert _stored(db) == []


@pytest.mark.anyio
async def test_forgetting_again_answers_already_and_an_id_never_given_out_is_refused(
    server: ProviderServer, db: Path
) -> None:
    await _ask(server, "memory/remember", {"kind": "memory", "title": "t", "content": "c"})
    await _ask(server, "memory/forget", {"id": "mem-1"})
    # A retry whose first reply was lost: the entry is gone, as asked.
    again = await _ask(server, "memory/forget", {"id": "mem-1"})
    assert again["result"] == {"forgotten": "mem-1", "already": True}
    never = (await _ask(server, "memory/forget", {"id": "mem-2"}))["error"]
    assert (never["data"]["field"], never["data"]["problem"]) == ("id", "unknown_entry")
    assert _stored(db) == []


@pytest.mark.anyio
async def test_forgetting_a_correction_again_still_names_the_entry_valid_again(
    server: ProviderServer, db: Path
) -> None:
    first = {"kind": "fact", "title": "port", "content": "port 7000", "valid_from": T0}
    await _ask(server, "memory/remember", first)
    second = {**first, "content": "port 8000", "valid_from": T1, "supersedes": "mem-1"}
    await _ask(server, "memory/remember", second)
    said = (await _ask(server, "memory/forget", {"id": "mem-2"}))["result"]
    assert said == {"forgotten": "mem-2", "reopened": "mem-1"}
    # A host whose first reply was lost asks again: it learns the same, and that it is old.
    again = (await _ask(server, "memory/forget", {"id": "mem-2"}))["result"]
    assert again == {"forgotten": "mem-2", "reopened": "mem-1", "already": True}
    assert [row["frame_id"] for row in _stored(db)] == ["mem-1"]


@pytest.mark.anyio
async def test_a_retry_of_a_forget_whose_record_was_dropped_answers_already_alone(
    db: Path,
) -> None:
    with MemoryStore(db, keep_forgotten=1) as store:
        server = ProviderServer(MemoryProvider(store))
        first = {"kind": "fact", "title": "port", "content": "port 7000", "valid_from": T0}
        await _ask(server, "memory/remember", first)
        second = {**first, "content": "port 8000", "valid_from": T1, "supersedes": "mem-1"}
        await _ask(server, "memory/remember", second)
        said = (await _ask(server, "memory/forget", {"id": "mem-2"}))["result"]
        assert said == {"forgotten": "mem-2", "reopened": "mem-1"}
        await _ask(server, "memory/forget", {"id": "mem-1"})  # the newest forget kept now
        again = (await _ask(server, "memory/forget", {"id": "mem-2"}))["result"]
        assert again == {"forgotten": "mem-2", "already": True}
        newest = (await _ask(server, "memory/forget", {"id": "mem-1"}))["result"]
        assert newest == {"forgotten": "mem-1", "already": True}


@pytest.mark.parametrize(
    ("method", "params", "field", "problem"),
    [
        (
            "memory/remember",
            {"kind": "graph", "title": "t", "content": "c"},
            "kind",
            "unknown_kind",
        ),
        ("memory/remember", {"kind": "fact", "title": "  ", "content": "c"}, "title", "blank"),
        ("memory/remember", {"kind": "fact", "title": "t", "content": " "}, "content", "blank"),
        (
            "memory/remember",
            {"kind": "fact", "title": "t", "content": "", "supersedes": "mem-1"},
            "content",
            "blank",
        ),
        (
            "memory/remember",
            {"kind": "fact", "title": "t", "content": "c", "valid_from": "yesterday"},
            "valid_from",
            "not_a_timestamp",
        ),
        (
            "memory/remember",
            {"kind": "fact", "title": "t", "content": "c", "valid_from": T1, "valid_to": T0},
            "valid_to",
            "not_after_valid_from",
        ),
        (
            "memory/remember",
            {"kind": "fact", "title": "t", "content": "c", "supersedes": "7"},
            "supersedes",
            "not_an_entry_id",
        ),
        (
            "memory/remember",
            {"kind": "fact", "title": "t", "content": "c", "supersedes": "mem-9"},
            "supersedes",
            "unknown_entry",
        ),
        ("memory/forget", {"id": "mem-9"}, "id", "unknown_entry"),
    ],
)
@pytest.mark.anyio
async def test_a_write_it_will_not_store_is_refused_with_its_field_and_problem(
    server: ProviderServer,
    db: Path,
    method: str,
    params: dict[str, Any],
    field: str,
    problem: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = (await _ask(server, method, params))["error"]
    assert error["code"] == -32602
    assert error["data"]["cgp_code"] == "bad_request"
    assert (error["data"]["field"], error["data"]["problem"]) == (field, problem)
    assert _stored(db) == []
    assert "Traceback" not in capsys.readouterr().err  # a refusal, never a crash


@pytest.mark.anyio
async def test_a_write_missing_a_member_is_invalid_params(server: ProviderServer) -> None:
    error = (await _ask(server, "memory/remember", {"kind": "fact", "content": "c"}))["error"]
    assert error["code"] == -32602 and error["data"]["cgp_code"] == "bad_request"


@pytest.mark.anyio
async def test_a_provider_that_stores_nothing_has_no_such_method() -> None:
    server = ProviderServer(HealthyProvider())
    reply = await _ask(server, "memory/remember", {"kind": "fact", "title": "t", "content": "c"})
    assert reply["error"]["code"] == -32601
    reply = await _ask(server, "context/handshake", HANDSHAKE)
    assert "remember" not in reply["result"]["capabilities"]


@pytest.mark.anyio
async def test_a_child_process_remembers_then_serves_the_entry(db: Path) -> None:
    async with StdioPeer(["-m", "providers.memory", "--db", str(db)]) as peer:
        await peer.handshake()
        params = {"kind": "fact", "title": "deploys", "content": "Deploys happen on Tuesdays."}
        added = await peer.call("memory/remember", params)
        query = {"goal": "when do deploys happen", "max_frames": 4, "max_tokens": 500}
        found = await peer.call("context/query", {"query": query})
        assert [f["id"] for f in found["frames"]] == [added["id"]]
        assert await peer.call("memory/forget", {"id": added["id"]}) == {"forgotten": "mem-1"}
        found = await peer.call("context/query", {"query": query})
        assert found["frames"] == []


@pytest.mark.anyio
async def test_keep_forgotten_on_its_command_bounds_the_forgets_a_child_records(
    db: Path,
) -> None:
    command = ["-m", "providers.memory", "--db", str(db), "--keep-forgotten", "1"]
    async with StdioPeer(command) as peer:
        await peer.handshake()
        first = {"kind": "fact", "title": "port", "content": "port 7000", "valid_from": T0}
        await peer.call("memory/remember", first)
        second = {**first, "content": "port 8000", "valid_from": T1, "supersedes": "mem-1"}
        await peer.call("memory/remember", second)
        said = await peer.call("memory/forget", {"id": "mem-2"})
        assert said == {"forgotten": "mem-2", "reopened": "mem-1"}
        await peer.call("memory/forget", {"id": "mem-1"})  # the one forget it keeps now
        # With the default 10,000 kept, this retry would still name mem-1.
        again = await peer.call("memory/forget", {"id": "mem-2"})
        assert again == {"forgotten": "mem-2", "already": True}
