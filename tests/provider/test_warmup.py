"""The provider runtime's warm-up: handshake at once, ``unavailable`` (warming) queries,
``context/progress`` notes, then frames (in memory; ``tests/engine/test_warming.py``
drives real child processes)."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest

from hostd.protocol import PROTOCOL_VERSION, ContextQuery, ProviderInfo
from hostd.provider import Progress, Provider, ProviderServer, make_frame


class _Gated(Provider):
    info = ProviderInfo(name="gated", version="1.0")

    def __init__(self, fail: bool = False) -> None:
        self.open = threading.Event()
        self.fail = fail

    def warm(self, progress: Progress) -> None:
        progress(1, 2, phase="build")
        self.open.wait(60)  # a hang guard: the test opens it
        if self.fail:
            raise RuntimeError("no index today")
        progress(2, 2, phase="build")

    async def query(self, query: ContextQuery) -> list[Any]:
        return [make_frame(id="g", kind="fact", title="t", content="c", citation_label="g")]


def _req(method: str, params: dict[str, Any], id_: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


async def _ask(server: ProviderServer, line: bytes) -> Any:
    """The decoded reply to a request line (a request always gets one)."""
    raw = await server.handle_line(line)
    assert raw is not None
    return json.loads(raw)


_HANDSHAKE = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "t", "version": "0"}}
_QUERY = {"query": {"goal": "g", "max_frames": 2, "max_tokens": 100}}


@pytest.mark.anyio
async def test_a_warming_provider_handshakes_at_once_refuses_queries_and_then_serves() -> None:
    provider = _Gated()
    server = ProviderServer(provider)
    notes: list[dict[str, Any]] = []
    ended = anyio.Event()
    token = anyio.lowlevel.current_token()

    def notify(line: bytes) -> None:
        note = json.loads(line)  # judged by itself: another thread may append after it
        notes.append(note)
        if note["params"]["state"] != "warming":
            anyio.from_thread.run_sync(ended.set, token=token)

    thread = server.start_warming(notify)
    assert thread is not None
    ack = await _ask(server, _req("context/handshake", _HANDSHAKE, 1))
    assert ack["result"]["ready"] is False
    refused = await _ask(server, _req("context/query", _QUERY, 2))
    error = refused["error"]
    assert error["data"]["cgp_code"] == "unavailable" and error["data"]["warming"] is True
    assert error["data"]["progress"]["phase"] in ("start", "build")
    provider.open.set()
    with anyio.fail_after(30):  # a hang guard
        await ended.wait()
    served = await _ask(server, _req("context/query", _QUERY, 3))
    assert [f["id"] for f in served["result"]["frames"]] == ["g"]
    assert {n["method"] for n in notes} == {"context/progress"}
    assert notes[-1]["params"]["state"] == "ready"
    again = await _ask(server, _req("context/handshake", _HANDSHAKE, 4))
    assert "ready" not in again["result"]


@pytest.mark.anyio
async def test_a_failed_warm_up_is_named_on_every_query_and_is_no_longer_warming() -> None:
    provider = _Gated(fail=True)
    server = ProviderServer(provider)
    ended = anyio.Event()
    token = anyio.lowlevel.current_token()

    def notify(line: bytes) -> None:
        if json.loads(line)["params"]["state"] == "failed":
            anyio.from_thread.run_sync(ended.set, token=token)

    server.start_warming(notify)
    provider.open.set()
    with anyio.fail_after(30):  # a hang guard
        await ended.wait()
    reply = await _ask(server, _req("context/query", _QUERY, 1))
    assert reply["error"]["data"]["cgp_code"] == "unavailable"
    assert "warming" not in reply["error"]["data"]
    assert "no index today" in reply["error"]["message"]


class _Loading(Provider):
    """A warm-up with one long step: it reports it once, then nothing until the test
    lets it end (a model load)."""

    info = ProviderInfo(name="loading", version="1.0")
    progress_beat_s = 0.01  # the provider's pacing; the test counts notes, not time

    def __init__(self) -> None:
        self.open = threading.Event()

    def warm(self, progress: Progress) -> None:
        progress(0, None, phase="load model")
        self.open.wait(60)  # a hang guard: the test opens it

    async def query(self, query: ContextQuery) -> list[Any]:
        return []


@pytest.mark.anyio
async def test_a_long_silent_step_is_said_again_with_its_seconds_until_it_ends() -> None:
    provider = _Loading()
    server = ProviderServer(provider)
    notes: list[dict[str, Any]] = []
    beats, ended = anyio.Event(), anyio.Event()
    token = anyio.lowlevel.current_token()

    def notify(line: bytes) -> None:
        # Each note is judged by itself, never by ``notes[-1]``: the beat thread and the
        # warm-up thread both call this, and one's note may land after the other's (the
        # beat thread would then set ``ended`` for the ready note, maybe once the test's
        # loop has finished).
        note = json.loads(line)["params"]
        notes.append(note)
        if "elapsed_s" in note and sum("elapsed_s" in n for n in notes) == 3:
            anyio.from_thread.run_sync(beats.set, token=token)
        if note["state"] != "warming":
            anyio.from_thread.run_sync(ended.set, token=token)

    server.start_warming(notify)
    with anyio.fail_after(30):  # a hang guard
        await beats.wait()  # three beats while the step still runs: it has not ended
        said = [dict(n) for n in notes]
        provider.open.set()
        await ended.wait()
    first, *again = [n for n in said if n["phase"] == "load model"]
    assert "elapsed_s" not in first  # the step itself, as the provider reported it
    assert len(again) >= 3
    for note in again:  # the same step, with how long its phase has run
        assert {k: v for k, v in note.items() if k != "elapsed_s"} == first
        assert isinstance(note["elapsed_s"], int) and note["elapsed_s"] >= 0
    # Ended: no beat is sent any more, whenever one would be due.
    count = len(notes)
    server.readiness.beat(0.0)
    assert len(notes) == count and notes[-1]["state"] == "ready"


class _Meanwhile(Provider):
    """Searchable from its first batch on: it says so, then builds until let go."""

    info = ProviderInfo(name="meanwhile", version="1.0")

    def __init__(self) -> None:
        self.open = threading.Event()

    def warm(self, progress: Progress) -> None:
        progress(1, 4, phase="embed")
        progress.answer_meanwhile()
        self.open.wait(60)  # a hang guard: the test opens it
        progress(4, 4, phase="embed")

    async def query(self, query: ContextQuery) -> list[Any]:
        return [make_frame(id="m", kind="fact", title="t", content="c", citation_label="m")]


@pytest.mark.anyio
async def test_a_warm_up_answering_meanwhile_says_so_at_once_and_in_each_answer() -> None:
    provider = _Meanwhile()
    server = ProviderServer(provider)
    notes: list[dict[str, Any]] = []
    answering, ended = anyio.Event(), anyio.Event()
    token = anyio.lowlevel.current_token()

    def notify(line: bytes) -> None:
        note = json.loads(line)["params"]  # judged by itself (two threads call this)
        notes.append(note)
        if note.get("answering"):
            anyio.from_thread.run_sync(answering.set, token=token)
        if note["state"] != "warming":
            anyio.from_thread.run_sync(ended.set, token=token)

    server.start_warming(notify)
    with anyio.fail_after(30):  # a hang guard
        await answering.wait()  # said at once, not at the next step or beat
        meanwhile = await _ask(server, _req("context/query", _QUERY, 1))
        provider.open.set()
        await ended.wait()
    said = [n for n in notes if n.get("answering")]
    assert said[0] == {
        "state": "warming",
        "phase": "embed",
        "done": 1,
        "total": 4,
        "answering": True,
    }
    assert "answering" not in notes[-1] and notes[-1]["state"] == "ready"
    result = meanwhile["result"]
    assert [f["id"] for f in result["frames"]] == ["m"]
    assert result["warming"] == {"phase": "embed", "done": 1, "total": 4}
    whole = await _ask(server, _req("context/query", _QUERY, 2))
    assert "warming" not in whole["result"]


class _Holding(Provider):
    """No warm-up, but a ready message: what it holds, which a query may change."""

    info = ProviderInfo(name="holding", version="1.0")

    def __init__(self) -> None:
        self.held = 3

    def ready_message(self) -> str:
        return f"{self.held} entries"

    async def query(self, query: ContextQuery) -> list[Any]:
        self.held += 1
        return []


@pytest.mark.anyio
async def test_a_provider_with_nothing_to_warm_says_what_it_holds_at_its_start() -> None:
    provider = _Holding()
    server = ProviderServer(provider)
    notes: list[dict[str, Any]] = []
    # Said from start_warming itself, in this thread: no warm-up thread to wait for.
    assert server.start_warming(lambda line: notes.append(json.loads(line)["params"])) is None
    assert notes == [{"state": "ready", "phase": "ready", "message": "3 entries"}]
    ack = await _ask(server, _req("context/handshake", _HANDSHAKE, 1))
    assert "ready" not in ack["result"]  # ready at once, as before
    await _ask(server, _req("context/query", _QUERY, 2))
    assert notes[-1]["message"] == "4 entries"


class _Rechecking(Provider):
    """What it holds changes behind its back (another process's write to its database):
    ``recheck`` looks, and may fail as a locked database does."""

    info = ProviderInfo(name="rechecking", version="1.0")
    recheck_every_s = 0.01

    def __init__(self) -> None:
        self.held = 3  # what it says it holds
        self.there = 3  # what is there now
        self.failing = False
        self.failures = 0
        self.failed_thrice = threading.Event()
        self.lock = threading.Lock()  # the test changes the world between two looks

    def ready_message(self) -> str:
        return f"{self.held} entries"

    def recheck(self) -> None:
        with self.lock:
            if self.failing:
                self.failures += 1
                if self.failures == 3:
                    self.failed_thrice.set()
                raise OSError("database is locked")
            self.held = self.there

    async def query(self, query: ContextQuery) -> list[Any]:
        return []


@pytest.mark.anyio
async def test_a_change_behind_the_provider_s_back_is_said_without_a_query(
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider = _Rechecking()
    server = ProviderServer(provider)
    notes: list[str] = []
    said = anyio.Event()

    def notify(line: bytes) -> None:  # the loop's own thread: restated there
        nonlocal said
        notes.append(json.loads(line)["params"]["message"])
        said.set()

    async def said_next() -> str:
        nonlocal said
        with anyio.fail_after(30):  # a hang guard
            await said.wait()
        said = anyio.Event()
        return notes[-1]

    server.start_warming(notify)
    assert await said_next() == "3 entries"
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run_rechecks)
        provider.there = 5  # another process wrote
        assert await said_next() == "5 entries"
        with provider.lock:
            provider.failing, provider.there = True, 7
        await anyio.to_thread.run_sync(provider.failed_thrice.wait, 30)  # a hang guard
        assert notes == ["3 entries", "5 entries"]  # failing, it says nothing new
        with provider.lock:
            provider.failing = False  # and it still serves: the next turn says it
        assert await said_next() == "7 entries"
        tg.cancel_scope.cancel()
    # A recheck that fails alike is said once, not at every turn.
    failed = [line for line in capsys.readouterr().err.splitlines() if "recheck" in line]
    assert failed == ["provider: recheck failed: OSError: database is locked"]


@pytest.mark.anyio
async def test_a_provider_without_recheck_is_never_rechecked() -> None:
    server = ProviderServer(_Holding())
    with anyio.fail_after(30):  # a hang guard: it returns at once
        await server.run_rechecks()
