"""A cold ``semantic`` provider under the engine: asked again and again with a short
bound while it embeds, it says ``warming`` (with its progress), is never restarted,
and then serves from the same process. Real model, real child process."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.engine import Host, LegStatus, ProviderSpec
from hostd.protocol import ContextQuery
from providers.semantic import semantic_unavailable
from tests.engine._helpers import child_pid

from ._stdio import REPO, child_env

_REASON = semantic_unavailable()
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=f"semantic extra: {_REASON}"),
    pytest.mark.slow,
    pytest.mark.anyio,
]

CHUNKS = 420


def _corpus(root: Path) -> None:
    root.mkdir()
    # One chunk per line (window 1, no merging): CHUNKS chunks, each cheap to embed.
    lines = [f"Note {i}: topic {i % 37} is filed under shelf {i % 11}.\n" for i in range(CHUNKS)]
    (root / "notes.txt").write_text("".join(lines))


@pytest.mark.slow
async def test_a_cold_semantic_provider_warms_without_a_restart_and_shows_progress(
    tmp_path: Path,
) -> None:
    root = tmp_path / "tree"
    _corpus(root)
    command = [sys.executable, "-m", "providers.semantic", "--root", str(root)]
    command += ["--window-lines", "1", "--min-chunk-tokens", "0"]
    command += ["--cache", str(tmp_path / "vectors.db")]
    env = child_env({"XDG_CACHE_HOME": str(tmp_path / "cache")})
    spec = ProviderSpec("semantic", command, env=env, cwd=str(REPO), timeout_ms=30_000)
    notes: list[dict[str, Any]] = []
    heard = anyio.Event()

    def on_progress(provider: str, progress: dict[str, Any]) -> None:
        nonlocal heard
        notes.append(progress)
        heard.set()

    query = ContextQuery(goal="which shelf holds topic 5", max_frames=5, max_tokens=400)
    statuses: list[LegStatus] = []
    partial: list[tuple[str, ...]] = []  # what each ok ask while it warmed lacked
    with anyio.fail_after(600):  # a hang guard for a cold model on a busy machine
        async with Host([spec], start="boot") as host:
            slot = host.pool.slots["semantic"]
            # Every progress note the provider sends (what ``provider.progress`` logs).
            host.pool.progress_listeners.append(on_progress)
            while slot.state.value == "warming":
                fan = await host.query_all(query, 400, timeout_ms=300)
                report = fan.reports["semantic"]
                statuses.append(report.status)
                if report.status is LegStatus.OK:
                    partial.append(report.partial)
                # The next ask comes after the provider's next progress note (an event).
                heard = anyio.Event()
                if slot.state.value == "warming":
                    with anyio.move_on_after(30):  # the model loads without notes
                        await heard.wait()
            pid = child_pid(slot.conn)
            # Ready: a request naming no timeout is served by the same process.
            served = await host.query_all(query, 400)
            served_by = child_pid(slot.conn)
            health = host.health("semantic")
    assert LegStatus.WARMING in statuses
    # Every bounded ask while it warmed said so: warming, or, once a batch was embedded
    # and its start deadline gone by (a busy machine), an answer partial for the warm-up
    # (a busy machine may still miss 300 ms with the very last one, after the index was
    # ready: that one is a plain timeout, or a whole answer).
    assert set(statuses[:-1]) <= {LegStatus.WARMING, LegStatus.OK}
    assert all(causes == ("warming",) for causes in partial[: statuses[:-1].count(LegStatus.OK)])
    assert served.reports["semantic"].status is LegStatus.OK and served.accepted
    assert served_by == pid is not None
    assert (health.starts, health.restarts) == (1, 0)
    embed = [n for n in notes if n.get("phase") == "embed"]
    assert embed and embed[-1].get("total") == CHUNKS

    # A restart is warm: its chunks and vectors come from the caches, nothing is embedded.
    again: list[dict[str, Any]] = []
    with anyio.fail_after(600):  # a hang guard
        async with Host([spec], start="lazy") as host:
            host.pool.progress_listeners.append(lambda _pid, note: again.append(note))
            states = await host.warm_all()
    assert states == {"semantic": "ready"}
    assert not [n for n in again if n.get("phase") == "embed"], again
    assert list(tmp_path.glob("corpus-*.json"))  # noqa: ASYNC240 - the host has stopped


@pytest.mark.slow
@pytest.mark.timeout(400)  # two cold model loads: a generous hang guard on a loaded machine
async def test_a_build_stopped_midway_keeps_its_chunks_and_every_embedded_batch(
    tmp_path: Path,
) -> None:
    # A one-shot command stops its providers when it ends, often mid-build: what was
    # done must be kept, so the next run resumes instead of starting over.
    root = tmp_path / "tree"
    root.mkdir()
    many = 4000  # many batches: the stop lands long before the last one
    lines = [f"Entry {i}: item {i % 53} rests on rack {i % 17}.\n" for i in range(many)]
    (root / "notes.txt").write_text("".join(lines))
    vectors = tmp_path / "vectors.db"
    command = [sys.executable, "-m", "providers.semantic", "--root", str(root)]
    command += ["--window-lines", "1", "--min-chunk-tokens", "0", "--cache", str(vectors)]
    env = child_env({"XDG_CACHE_HOME": str(tmp_path / "cache")})
    spec = ProviderSpec("semantic", command, env=env, cwd=str(REPO), timeout_ms=30_000)
    committed = anyio.Event()

    def on_progress(_pid: str, note: dict[str, Any]) -> None:
        # "embed N/total" is sent before batch N+1: the first N are committed by then.
        if note.get("phase") == "embed" and (note.get("done") or 0) >= 64:
            committed.set()

    with anyio.fail_after(600):  # a hang guard for a cold model on a busy machine
        async with Host([spec], start="boot") as host:
            host.pool.progress_listeners.append(on_progress)
            await committed.wait()
        # the host has stopped: the provider with it, mid-build
    with sqlite3.connect(vectors) as db:
        (kept,) = db.execute("SELECT count(*) FROM vectors").fetchone()
    assert 64 <= kept < many
    assert list(tmp_path.glob("corpus-*.json"))  # noqa: ASYNC240 - the host has stopped

    # The next start embeds only what the first did not reach: its first embed note
    # stands where the first stopped, of the whole index (it is stopped there too).
    resumed: list[dict[str, Any]] = []
    embedding = anyio.Event()

    def on_resume(_pid: str, note: dict[str, Any]) -> None:
        if note.get("phase") == "embed":
            resumed.append(note)
            embedding.set()

    with anyio.fail_after(600):  # a hang guard
        async with Host([spec], start="boot") as host:
            host.pool.progress_listeners.append(on_resume)
            await embedding.wait()
    assert (resumed[0].get("done"), resumed[0].get("total")) == (kept, many)
    assert (
        resumed[0].get("message")
        == f"embedding {many - kept:,} of {many:,} chunks ({kept:,} cached)"
    )
