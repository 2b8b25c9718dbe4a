"""Shadow ranking: the daemon records sampled compositions (bounded, 0600, digests unless
content is configured) and ``hostd shadow replay`` compares another policy with the live one."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.client import Client
from hostd.compose import compose_for_prompt
from hostd.protocol import ContextFrame
from hostd.provider import make_frame
from hostd.quality import (
    Composition,
    Feedback,
    Recorded,
    ShadowRecorder,
    ShadowStore,
    build_record,
    hold,
    render_replay,
    replay,
)
from hostd.quality._store import Writable
from tests.compose._helpers import frame_pairs

ROOT = Path(__file__).resolve().parents[2]


def _frames() -> list[tuple[str, ContextFrame]]:
    # alpha's scores fall slowly, beta's fast: score and round_robin disagree.
    out = []
    for name, count in (("alpha", 8), ("beta", 2)):
        for i in range(count):
            frame = make_frame(
                id=f"{name}:{i}",
                kind="snippet",
                title=f"{name} #{i}",
                content=f"{name} {i} " + "x" * 192,
                citation_label=f"{name}-{i}",
                score=round(1.0 - i / (count + 1), 4),
            )
            out.append((name, frame))
    return out


# Room for four of the 50-token frames once the preamble and fences (titles too) are
# counted, and for the few bytes a stand-in of the same canonical cost may add to each.
BUDGET = 400


def _record(request_id: str = "r-1", *, store_content: bool = False) -> Recorded:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    return build_record(
        Composition(request_id, "the secret goal", BUDGET, None, frames, composed),
        store_content=store_content,
    )


def test_replaying_the_live_policy_changes_nothing() -> None:
    result = replay(_record(), "score")
    assert result.overlap == 1.0
    assert result.newly_included == [] and result.newly_excluded == []
    assert result.tokens(result.live) == result.tokens(result.replayed) == 200


def test_replay_names_what_another_policy_would_admit_and_drop() -> None:
    result = replay(_record(), "round_robin")
    assert {c.id for c in result.live} == {"alpha:0", "alpha:1", "alpha:2", "beta:0"}
    assert [c.id for c in result.newly_excluded] == ["alpha:2"]
    assert [c.id for c in result.newly_included] == ["beta:1"]
    assert result.overlap == pytest.approx(3 / 5)
    assert result.mix(result.replayed) == {"alpha": 2, "beta": 2}
    table = render_replay("round_robin", [result])
    assert "r-1" in table and "0.60" in table and "alpha 3 beta 1 → alpha 2 beta 2" in table
    assert "newly excluded under round_robin" in table and "alpha:2" in table


def test_without_store_content_only_digests_are_kept(tmp_path: Path) -> None:
    store = ShadowStore(tmp_path / "state" / "shadow.db")
    store.write(_record())
    raw = (tmp_path / "state" / "shadow.db").read_bytes()
    assert b"secret goal" not in raw and b"xxxxxxxx" not in raw
    (loaded,) = store.load()
    assert loaded.goal is None and loaded.goal_digest.startswith("sha256:")
    assert all(c.content is None for c in loaded.candidates)
    # The stand-ins cost what the frames cost, so the replay is the same as with content.
    assert replay(loaded, "round_robin").to_wire() == replay(_record(), "round_robin").to_wire()
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600

    kept = ShadowStore(tmp_path / "content.db")
    kept.write(_record(store_content=True))
    (loaded,) = kept.load()
    assert loaded.goal == "the secret goal"
    assert all(c.content and c.content.endswith("x" * 192) for c in loaded.candidates)


def test_the_store_keeps_the_newest_requests_within_its_bounds(tmp_path: Path) -> None:
    store = ShadowStore(tmp_path / "shadow.db", max_requests=3)
    for i in range(5):
        store.write(_record(f"r-{i}"))
    assert [r.request_id for r in store.load()] == ["r-2", "r-3", "r-4"]
    assert [r.request_id for r in store.load(limit=1)] == ["r-4"]

    one_body = len(_record().body())
    small = ShadowStore(tmp_path / "small.db", max_bytes=2 * one_body + 10)
    for i in range(4):
        small.write(_record(f"r-{i}"))
    assert [r.request_id for r in small.load()] == ["r-2", "r-3"]

    aging = ShadowStore(tmp_path / "aging.db", retention_days=1)
    old = _record("old")
    aging.write(replace(old, recorded_at=old.recorded_at - 2 * 86400))
    aging.write(_record("new"))
    assert [r.request_id for r in aging.load()] == ["new"]


def test_the_recorder_samples_and_never_fails_a_request(tmp_path: Path) -> None:
    record = _record()
    frames = _frames()
    composed = compose_for_prompt(frames, 200)

    async def offer(recorder: ShadowRecorder) -> bool:
        return await recorder.record(Composition("r", "goal", 200, None, frames, composed))

    never = ShadowRecorder(ShadowStore(tmp_path / "never.db"), sample=0.0)
    assert anyio.run(offer, never) is False and not (tmp_path / "never.db").exists()
    drawn = ShadowRecorder(ShadowStore(tmp_path / "half.db"), sample=0.5, draw=lambda: 0.25)
    assert anyio.run(offer, drawn) is True
    skipped = ShadowRecorder(ShadowStore(tmp_path / "skip.db"), sample=0.5, draw=lambda: 0.75)
    assert anyio.run(offer, skipped) is False
    (tmp_path / "blocked").write_text("a file where the directory should be")
    broken = ShadowRecorder(ShadowStore(tmp_path / "blocked" / "shadow.db"))
    assert anyio.run(offer, broken) is False
    assert record.candidates  # the record itself was fine


def _config(tmp_path: Path, sample: float = 1.0) -> Path:
    def provider(name: str, frames: int) -> str:
        words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", name]
        words += ["--frames", str(frames), "--size", "200"]
        return (
            f'[[provider]]\nid = "{name}"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
            "timeout_ms = 60000\n"  # generous: child start-up is slow on a loaded machine
        )

    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f"[shadow]\nenabled = true\nsample = {sample}\n\n"
        + provider("alpha", 8)
        + provider("beta", 2)
    )
    return path


def test_shadow_replay_end_to_end_through_the_daemon(tmp_path: Path) -> None:
    config = _config(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        for goal in ("first", "second", "third"):
            result = client.call(
                "context/compose", {"goal": goal, "budget": BUDGET, "strategy": "score"}
            )
            assert len(result["citations"]) == 4
    db = tmp_path / "state" / "shadow.db"
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600

    def hostd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hostd", "--config", str(config), "shadow", "replay", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=False,
        )

    # --policy repeats, as eval's does: one report each, in the order given.
    done = hostd("--policy", "round_robin", "--policy", "score", "--json")
    assert done.returncode == 0, done.stderr
    report, same = json.loads(done.stdout)
    assert (report["policy"], same["policy"]) == ("round_robin", "score")
    assert same["requests"] == 3 and same["overlap"] == 1.0
    assert report["requests"] == 3 and report["overlap"] == pytest.approx(0.6)
    for r in report["replays"]:
        assert r["live_policy"] == "score"
        assert [f["id"] for f in r["newly_excluded"]] == ["alpha:2"]
        assert [f["id"] for f in r["newly_included"]] == ["beta:1"]
        assert r["providers"] == {
            "live": {"alpha": 3, "beta": 1},
            "replayed": {"alpha": 2, "beta": 2},
        }
        assert r["tokens"] == {"live": 200, "replayed": 200}

    done = hostd("--policy", "score", "--limit", "2", "--policy", "round_robin")
    assert done.returncode == 0, done.stderr
    heads = [line for line in done.stdout.splitlines() if line.startswith("shadow replay:")]
    assert heads == [
        f"shadow replay: {p} against the live policy on 2 recorded requests "
        "(overlap = included by both / by either)"
        for p in ("score", "round_robin")
    ]
    legend = "kept: included by both; +in: only under score; -out: only in the live prompt;"
    assert legend in done.stdout  # every column the table shows is said
    assert "newly excluded under score (the live policy included them): none" in done.stdout
    assert "newly excluded under round_robin (the live policy included them):\n" in done.stdout


# -- bounds at O(1) per write, and writes off the request path -----------------------------


def _reference_kept(
    sizes: list[int], times: list[float], max_requests: int, max_bytes: int, retention: float
) -> list[int]:
    """The bounds as first written, re-applied after every write: drop rows older than
    the retention, keep the newest ``max_requests``, then the newest rows whose sizes
    fit ``max_bytes`` (the newest always kept)."""
    kept: list[int] = []
    for i, now in enumerate(times):
        kept.append(i)
        kept = [j for j in kept if times[j] >= now - retention * 86400][-max_requests:]
        total = 0
        for position, j in enumerate(reversed(kept)):
            total += sizes[j]
            if total > max_bytes and position > 0:
                kept = kept[len(kept) - position :]
                break
    return kept


def _sized(base: Recorded, i: int, extra: int, at: float) -> Recorded:
    return replace(base, request_id=f"r-{i}", goal="g" * extra, recorded_at=at)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3)), min_size=1, max_size=14),
    st.integers(1, 6),
    st.integers(0, 12_000),
)
def test_the_bounds_keep_exactly_what_the_full_scan_kept(
    writes: list[tuple[int, int]], max_requests: int, max_bytes: int
) -> None:
    base = _record()
    start = base.recorded_at
    records = []
    at = start
    for i, (extra, days) in enumerate(writes):
        at += days * 0.6 * 86400  # some writes age earlier ones past the retention
        records.append(_sized(base, i, extra, at))
    sizes = [len(r.body()) + len(r.goal or "") for r in records]
    expected = _reference_kept(sizes, [r.recorded_at for r in records], max_requests, max_bytes, 1)
    with tempfile.TemporaryDirectory() as tmp:
        store = ShadowStore(
            Path(tmp) / "s.db", max_requests=max_requests, max_bytes=max_bytes, retention_days=1
        )
        for r in records:
            store.write(r)
        store.close()
        assert [r.request_id for r in store.load()] == [f"r-{i}" for i in expected]
        # A batch keeps the bounds once, at its end: the same rows stay.
        batched = ShadowStore(
            Path(tmp) / "b.db", max_requests=max_requests, max_bytes=max_bytes, retention_days=1
        )
        batched.write_many(records)
        batched.close()
        assert [r.request_id for r in batched.load()] == [f"r-{i}" for i in expected]


@settings(max_examples=40, deadline=None)
@given(
    frames=frame_pairs(max_size=12),
    store_content=st.booleans(),
    budget=st.integers(0, 3000),
)
def test_a_held_composition_is_stored_as_its_record_would_be(
    frames: list[tuple[str, ContextFrame]], store_content: bool, budget: int
) -> None:
    composed = compose_for_prompt(frames, budget, strategy="round_robin")
    held = hold(
        Composition("r", "goal", budget, {"*": 0.5}, frames, composed),
        store_content=store_content,
    )
    record = held.record()
    assert held.body() == record.body()
    assert (held.goal_digest, held.stored_goal) == (record.goal_digest, record.goal)
    assert [(c.id, c.cost, c.regions) for c in record.candidates] == [
        (f.id, f.token_cost, tuple((p.type, p.uri, p.range, p.digest) for p in f.provenance))
        for _, f in frames
    ]


def test_a_write_reads_no_stored_body_to_keep_the_bounds(tmp_path: Path) -> None:
    store = ShadowStore(tmp_path / "s.db", max_requests=5, max_bytes=10**9)
    for i in range(8):
        store.write(_record(f"r-{i}"))
    statements: list[str] = []
    store.open()
    assert store._db is not None
    store._db.set_trace_callback(statements.append)
    store.write(_record("r-last"))
    store.close()
    assert statements and not any("length(" in sql for sql in statements)
    assert [r.request_id for r in store.load()] == ["r-4", "r-5", "r-6", "r-7", "r-last"]


def test_a_store_from_before_the_size_column_is_migrated_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    raw.execute(
        "CREATE TABLE requests (seq INTEGER PRIMARY KEY AUTOINCREMENT, request_id TEXT NOT "
        "NULL, recorded_at REAL NOT NULL, goal_digest TEXT NOT NULL, goal TEXT, body TEXT NOT NULL)"
    )
    old = _record()
    for i in range(4):
        raw.execute(
            "INSERT INTO requests (request_id, recorded_at, goal_digest, goal, body) "
            "VALUES (?, ?, ?, ?, ?)",
            (f"old-{i}", old.recorded_at, old.goal_digest, None, old.body()),
        )
    raw.commit()
    raw.close()
    one = len(old.body())
    store = ShadowStore(path, max_bytes=3 * one + 10)
    store.write(_record("new"))
    store.close()
    assert [r.request_id for r in store.load()] == ["old-2", "old-3", "new"]


class _HeldStore(ShadowStore):
    """A store whose writes wait until the test lets them go."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()

    def write_many(
        self,
        records: Sequence[Writable],
        feedback: Sequence[Feedback] = (),
        *,
        durable: bool = False,
    ) -> list[str]:
        assert self.release.wait(60)  # hang guard
        return super().write_many(records, feedback, durable=durable)


def test_requests_never_wait_for_the_write_and_close_writes_every_queued_record(
    tmp_path: Path,
) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    store = _HeldStore(tmp_path / "held.db")
    recorder = ShadowRecorder(store, sample=1.0)

    async def main() -> list[bool]:
        with anyio.fail_after(60):  # hang guard: a record that awaited its write would stop here
            queued = [
                await recorder.record(Composition(f"r-{i}", "goal", BUDGET, None, frames, composed))
                for i in range(20)
            ]
        store.release.set()  # the writer has not written one of them yet
        await recorder.aclose()
        return queued

    assert anyio.run(main) == [True] * 20
    assert [r.request_id for r in ShadowStore(store.path).load()] == [f"r-{i}" for i in range(20)]


def test_a_full_queue_drops_the_newest_record_and_a_closed_recorder_records_nothing(
    tmp_path: Path,
) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    store = _HeldStore(tmp_path / "held.db")
    recorder = ShadowRecorder(store, sample=1.0, pending=3)

    async def main() -> list[bool]:
        out = [
            await recorder.record(Composition(f"r-{i}", "goal", BUDGET, None, frames, composed))
            for i in range(6)
        ]
        store.release.set()
        await recorder.aclose()
        out.append(
            await recorder.record(Composition("late", "goal", BUDGET, None, frames, composed))
        )
        return out

    queued = anyio.run(main)
    # The writer may have taken the first record off the queue before it was full.
    assert queued[:3] == [True] * 3 and queued[-1] is False and False in queued
    kept = [r.request_id for r in ShadowStore(store.path).load()]
    assert kept == [f"r-{i}" for i, ok in enumerate(queued[:6]) if ok]


def _titled_frames() -> list[tuple[str, ContextFrame]]:
    # Content of a multiple of four bytes, so a stand-in of its cost is its size.
    titles = [
        "src/a.py L1-9 · in class Cache › def evict",  # a code chunk's item
        "docs/a.md § Rotating the keys",  # a markdown chunk's section
        "the secret plan: ship on friday",  # a memory's headline (content)
        "src/b.py L1-9",  # its label: nothing shown
        '"' * 200 + "\u4e2d" * 50,  # escaped and cut on its fence
    ]
    labels = ["src/a.py L1-9", "docs/a.md L1-9", "decision #1", "src/b.py L1-9", "x.md L1"]
    return [
        (
            "p",
            make_frame(
                id=f"f{i}",
                kind="snippet",
                title=title,
                content=f"body {i} " + "y" * 93,
                citation_label=label,
                score=round(0.9 - i / 10, 2),
            ),
        )
        for i, (title, label) in enumerate(zip(titles, labels, strict=True))
    ]


def test_a_replay_shows_each_title_as_the_live_prompt_did(tmp_path: Path) -> None:
    from hostd.quality._frames import recorded_frames

    frames = _titled_frames()
    budget = 500  # room for some of them: what fits depends on each title's bytes
    live = compose_for_prompt(frames, budget, strategy="score")
    assert ' in="class Cache › def evict">' in live.prompt
    for store_content in (True, False):
        store = ShadowStore(tmp_path / f"{store_content}.db")
        record = build_record(
            Composition("r", "goal", budget, None, frames, live), store_content=store_content
        )
        store.write(record)
        (loaded,) = store.load()
        again = compose_for_prompt(recorded_frames(loaded), budget, strategy="score")
        assert again.tokens_used == live.tokens_used
        assert [c.frame for c in again.citations] == [c.frame for c in live.citations]
        raw = (tmp_path / f"{store_content}.db").read_bytes()
        if store_content:
            assert again.prompt == live.prompt  # the same bytes, titles and all
        else:  # only stand-ins of the same size: no title's text is kept
            assert b"secret plan" not in raw and b"evict" not in raw and b"Rotating" not in raw
