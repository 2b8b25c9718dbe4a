"""``usage/feedback``: validated against the request's citation map, kept beside its shadow
record within the store's bounds, from the client library and through a real daemon."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.client import Client, RpcError
from hostd.compose import compose_for_prompt
from hostd.errors import ShadowUnavailable, UnknownCitation, UnknownRequest
from hostd.quality import (
    Composition,
    Feedback,
    Recorded,
    ShadowRecorder,
    ShadowStore,
    render_replay,
    replay_all,
    replay_json,
    resolve_used,
    used_summary,
)
from hostd.quality._store import Writable
from tests.fixtures.cli import run_hostd

from .test_shadow import BUDGET, ROOT, _frames, _record


def test_labels_and_frame_ids_resolve_to_the_cited_frames_in_render_order() -> None:
    record = _record()
    labels = [c[0] for c in record.citations]
    assert len(labels) == 4
    last = record.citations[-1]
    used = resolve_used(
        record.citations, [labels[-1], {"provider_id": last[1], "frame_id": last[2]}, labels[0]]
    )
    assert used == tuple((p, i, d) for _, p, i, d in (record.citations[0], last))


def test_unknown_labels_are_one_error_naming_every_one() -> None:
    record = _record()
    with pytest.raises(UnknownCitation) as caught:
        resolve_used(
            record.citations,
            ["nope", record.citations[0][0], {"provider_id": "beta", "frame_id": "zz"}],
        )
    assert caught.value.data["unknown"] == ["nope", "beta/zz"]
    assert caught.value.reason == "unknown_citation"
    # A frame offered but not cited is not in the citation map either.
    offered = {c.id for c in record.candidates} - {c[2] for c in record.citations}
    with pytest.raises(UnknownCitation):
        resolve_used(record.citations, [{"provider_id": "alpha", "frame_id": sorted(offered)[0]}])


def test_feedback_on_an_undrawn_request_writes_its_record_then_the_feedback(
    tmp_path: Path,
) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    recorder = ShadowRecorder(ShadowStore(tmp_path / "s.db"), sample=0.0)

    async def main() -> Feedback:
        assert not await recorder.record(Composition("r-1", "goal", BUDGET, None, frames, composed))
        assert not (tmp_path / "s.db").exists()  # nothing is written until feedback comes
        with pytest.raises(UnknownRequest):
            await recorder.feedback("r-2", [])
        fb = await recorder.feedback(
            "r-1", [composed.citations[1].label], helpful=True, note="private"
        )
        await recorder.aclose()
        return fb

    fb = anyio.run(main)
    (stored,) = ShadowStore(tmp_path / "s.db").load()
    assert stored.request_id == "r-1" and stored.feedback is not None
    assert (
        stored.feedback.used
        == fb.used
        == (tuple(composed.citations[1].frame)[:2] + (composed.citations[1].frame.content_digest,),)
    )
    assert stored.feedback.helpful is True
    assert stored.feedback.note is None and stored.feedback.note_chars == 7  # no store_content
    assert stat.S_IMODE(os.stat(tmp_path / "s.db").st_mode) == 0o600


class _GatedStore(ShadowStore):
    """A store whose writes wait until the test lets them go, and say when they start;
    ``fail`` makes the next write raise as a damaged file would."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = False
        self.durable: list[bool] = []

    def write_many(
        self,
        records: Sequence[Writable],
        feedback: Sequence[Feedback] = (),
        *,
        durable: bool = False,
    ) -> list[str]:
        self.entered.set()
        assert self.release.wait(60)  # hang guard
        self.durable.append(durable)
        if self.fail:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return super().write_many(records, feedback, durable=durable)


def test_feedback_is_answered_only_after_its_commit(tmp_path: Path) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    store = _GatedStore(tmp_path / "s.db")
    recorder = ShadowRecorder(store, sample=0.0)
    answered = anyio.Event()
    label = composed.citations[0].label

    async def main() -> None:
        await recorder.record(Composition("r-1", "goal", BUDGET, None, frames, composed))

        async def send() -> None:
            await recorder.feedback("r-1", [label])
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            with anyio.fail_after(60):  # hang guard
                await anyio.to_thread.run_sync(store.entered.wait)
            # The writer holds the transaction open: the feedback is not answered yet.
            assert not answered.is_set()
            assert not ShadowStore(store.path).load()
            store.release.set()
            with anyio.fail_after(60):
                await answered.wait()
            # Answered: the record and its feedback are in the file, synced.
            (stored,) = ShadowStore(store.path).load()
            assert stored.feedback is not None and store.durable == [True]
        await recorder.aclose()

    anyio.run(main)


def test_a_failed_write_refuses_the_feedback_and_loses_nothing(tmp_path: Path) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    store = _GatedStore(tmp_path / "s.db")
    store.release.set()
    store.fail = True
    recorder = ShadowRecorder(store, sample=0.0)
    label = composed.citations[0].label

    async def main() -> None:
        await recorder.record(Composition("r-1", "goal", BUDGET, None, frames, composed))
        with pytest.raises(ShadowUnavailable) as refused:
            await recorder.feedback("r-1", [label])
        assert refused.value.reason == "shadow_unavailable"
        assert refused.value.data["file"] == str(store.path)
        assert "malformed" in refused.value.data["problem"]
        # The record was not written either: the next feedback writes it again.
        store.fail = False
        await recorder.feedback("r-1", [label])
        await recorder.aclose()

    anyio.run(main)
    (stored,) = ShadowStore(store.path).load()
    assert stored.request_id == "r-1" and stored.feedback is not None


def test_feedback_on_an_older_request_is_checked_against_the_store_and_replaces(
    tmp_path: Path,
) -> None:
    store = ShadowStore(tmp_path / "s.db")
    store.write(_record("old"))
    recorder = ShadowRecorder(ShadowStore(tmp_path / "s.db"), sample=1.0, store_content=True)
    label = _record().citations[0][0]

    async def main() -> None:
        await recorder.feedback("old", [label], note="first")
        await recorder.feedback("old", [], helpful=False, note="second")
        with pytest.raises(UnknownCitation):
            await recorder.feedback("old", ["missing"])
        await recorder.aclose()

    anyio.run(main)
    (stored,) = store.load()
    assert stored.feedback is not None
    assert stored.feedback.used == () and stored.feedback.helpful is False
    assert stored.feedback.note == "second"  # store_content: the note is kept


def test_feedback_counts_against_the_bounds_and_goes_with_its_request(tmp_path: Path) -> None:
    store = ShadowStore(tmp_path / "s.db", max_requests=2)
    label = _record().citations[0][0]
    for rid in ("a", "b"):
        store.write(_record(rid))
    keys = resolve_used(_record().citations, [label])
    assert (
        store.write_many([], [Feedback.of("a", 1.0, keys, None, None, store_content=False)]) == []
    )
    with sqlite3.connect(tmp_path / "s.db") as db:
        size_with = db.execute("SELECT size FROM totals").fetchone()[0]
        rows = db.execute("SELECT sum(length(body)) FROM requests").fetchone()[0]
        assert size_with == rows + db.execute("SELECT size FROM feedback").fetchone()[0]
    store.write(_record("c"))  # "a" is pushed out, and its feedback with it
    orphans = store.write_many([], [Feedback.of("a", 2.0, keys, None, None, store_content=False)])
    assert orphans == ["a"]  # feedback for a pruned request is not kept
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM feedback").fetchone()[0] == 0
        assert (
            db.execute("SELECT size FROM totals").fetchone()[0]
            == db.execute("SELECT sum(size) FROM requests").fetchone()[0]
        )
    assert [r.request_id for r in store.load()] == ["b", "c"]


def _pending(path: Path) -> list[str]:
    """The request ids set aside in ``pending``, oldest first."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT request_id FROM pending ORDER BY recorded_at").fetchall()
    db.close()
    return [r[0] for r in rows]


def test_a_held_composition_gets_feedback_after_a_graceful_stop(tmp_path: Path) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    label = composed.citations[1].label
    path = tmp_path / "s.db"

    async def before_the_stop() -> None:
        recorder = ShadowRecorder(ShadowStore(path), sample=0.0)
        for rid in ("r-1", "r-2"):
            await recorder.record(Composition(rid, "goal", BUDGET, None, frames, composed))
        await recorder.aclose()

    async def after_it() -> Feedback:
        recorder = ShadowRecorder(ShadowStore(path), sample=0.0)
        fb = await recorder.feedback("r-1", [label], helpful=True)
        await recorder.aclose()
        return fb

    anyio.run(before_the_stop)
    fb = anyio.run(after_it)
    # Only the request with feedback is recorded: replay, eval and calibration read no other.
    (stored,) = ShadowStore(path).load()
    assert stored.request_id == "r-1" and stored.feedback is not None
    assert stored.feedback.used == fb.used == resolve_used(stored.citations, [label])
    assert [c.id for c in stored.candidates] == [f.id for _, f in frames]
    # Its pending row went with the feedback's write; the other still waits for its own.
    assert _pending(path) == ["r-2"]


def test_a_composition_past_its_feedback_window_is_not_kept_across_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hostd.quality import _recorder

    monkeypatch.setattr(_recorder, "HELD", 2)
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    label = composed.citations[0].label
    path = tmp_path / "s.db"

    async def serve(*ids: str) -> None:
        recorder = ShadowRecorder(ShadowStore(path), sample=0.0)
        for rid in ids:
            await recorder.record(Composition(rid, "goal", BUDGET, None, frames, composed))
        await recorder.aclose()

    async def feedback(rid: str, retention_days: float = 7.0) -> str:
        recorder = ShadowRecorder(ShadowStore(path, retention_days=retention_days), sample=0.0)
        try:
            await recorder.feedback(rid, [label])
        except UnknownRequest as exc:
            return exc.message
        finally:
            await recorder.aclose()
        return "kept"

    def gone(rid: str) -> None:
        said = anyio.run(feedback, rid)
        assert said.startswith(f"no shadow record of request {rid!r}: ")
        assert "past the 2 newest compositions" in said and "retention_days = 7" in said

    anyio.run(serve, "a", "b", "c")
    assert anyio.run(feedback, "c") == "kept"
    gone("a")  # it left the ring before the stop
    anyio.run(serve, "d", "e", "f")
    gone("b")  # the rows set aside keep the newest HELD across stops too
    assert _pending(path) == ["e", "f"]
    # Past the store's retention, a row set aside is not found, and the next stop drops it.
    old = replace(_record("old"), recorded_at=time.time() - 2 * 86400)
    ShadowStore(path).write_pending([old], keep=3)
    assert _pending(path) == ["old", "e", "f"]
    assert "retention_days = 1" in anyio.run(feedback, "old", 1.0)
    ShadowStore(path, retention_days=1).write_pending([], keep=3)
    assert _pending(path) == ["e", "f"]
    assert [r.request_id for r in ShadowStore(path).load()] == ["c"]


def _config(tmp_path: Path, shadow: str) -> Path:
    words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "alpha"]
    words += ["--frames", "6", "--size", "200"]
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f"{shadow}\n"
        f'[[provider]]\nid = "alpha"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"
    )
    return path


def test_the_client_reports_used_evidence_to_a_daemon_that_sampled_nothing(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, "[shadow]\nenabled = true\nsample = 0.0\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as hostd:
        result = hostd.compose("first", budget=BUDGET)
        hostd.compose("second", budget=BUDGET)  # no feedback: never written
        first = result.citations[0]
        reply = hostd.feedback(result, used=[first.label], helpful=True)
        assert reply == {
            "request_id": result.request_id,
            "used": [first.frame.to_wire()],
            "helpful": True,
        }
        with pytest.raises(RpcError) as bad:
            hostd.feedback(result, used=["no such label", first.label])
        assert bad.value.rpc_code == -32602
        assert bad.value.rpc_data["reason"] == "unknown_citation"
        assert bad.value.rpc_data["unknown"] == ["no such label"]
        with pytest.raises(RpcError) as unknown:
            hostd.feedback("zz-999", used=[])
        assert unknown.value.remote_reason == "unknown_request"
        with pytest.raises(RpcError) as malformed:
            hostd.call("usage/feedback", {"request_id": result.request_id, "used": [3]})
        assert malformed.value.remote_reason == "invalid_params"
    (stored,) = ShadowStore(tmp_path / "state" / "shadow.db").load()
    assert stored.request_id == result.request_id and stored.feedback is not None
    assert [list(k) for k in stored.feedback.used] == [
        [
            first.frame.provider_id,
            first.frame.frame_id,
            first.frame.content_digest,
        ]
    ]


def test_a_one_shot_compose_sets_its_composition_aside_for_feedback_through_a_daemon(
    tmp_path: Path,
) -> None:
    # A one-shot command prints its request id and ends: feedback on it can only come
    # later, through a daemon (or hostd mcp) on the same state directory, which finds
    # it in ``pending``. One that composed nothing writes nothing, not even the file.
    config = _config(tmp_path, "[shadow]\nenabled = true\nsample = 0.0\n")
    db = tmp_path / "state" / "shadow.db"
    refused = run_hostd("--config", str(config), "compose", "g", "--providers", "nosuch")
    assert refused.returncode != 0 and "unknown provider" in refused.stderr, refused.stderr
    assert not db.exists()
    done = run_hostd("--config", str(config), "compose", "first", "--budget", str(BUDGET), "--json")
    assert done.returncode == 0, done.stderr
    composed = json.loads(done.stdout)
    request_id, label = composed["request_id"], composed["citations"][0]["label"]
    assert ShadowStore(db).load_pending(request_id) is not None
    assert ShadowStore(db).load() == []  # set aside, not counted as a record
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as hostd:
        reply = hostd.feedback(request_id, used=[label], helpful=True)
    assert reply["request_id"] == request_id and reply["helpful"] is True
    (stored,) = ShadowStore(db).load()
    assert stored.request_id == request_id and stored.feedback is not None
    assert ShadowStore(db).load_pending(request_id) is None


def test_feedback_without_shadow_is_a_typed_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(_config(tmp_path, ""), env=env, cwd=ROOT) as hostd:
        result = hostd.compose("first", budget=BUDGET)
        with pytest.raises(RpcError) as off:
            hostd.feedback(result, used=[])
        with pytest.raises(RpcError) as kept:
            hostd.call("context/compose", {"goal": "g", "budget": BUDGET, "record": True})
    assert off.value.remote_reason == "shadow_disabled"
    assert kept.value.remote_reason == "shadow_disabled"


# -- replay measures the used evidence kept ------------------------------------------------


def _with_feedback(request_id: str, used_ids: list[str]) -> Recorded:
    record = _record(request_id)
    labels = [c[0] for c in record.citations if c[2] in used_ids]
    keys = resolve_used(record.citations, labels)
    return replace(
        record, feedback=Feedback.of(request_id, 1.0, keys, None, None, store_content=False)
    )


def test_replay_reports_the_used_evidence_a_policy_keeps_with_known_answers(
    tmp_path: Path,
) -> None:
    # Live (score) admits alpha:0-2 and beta:0; round_robin swaps alpha:2 for beta:1.
    records = [
        _with_feedback("r-1", ["alpha:0", "alpha:2"]),  # round_robin keeps 1 of 2
        _with_feedback("r-2", ["beta:0"]),  # kept by both
        _with_feedback("r-3", []),  # the answer used none of it
        _record("r-4"),  # no feedback: overlap only
    ]
    replays = replay_all(records, "round_robin")
    assert [r.has_feedback for r in replays] == [True, True, True, False]
    first = replays[0]
    assert [c.id for c in first.used_kept] == ["alpha:0"]
    assert [c.id for c in first.used_dropped] == ["alpha:2"]
    assert (len(first.used_live), first.gained, first.lost) == (2, 0, 1)
    summary = used_summary(replays)
    assert summary == {
        "requests": 3,
        "used": 3,
        "kept": 2,
        "kept_live": 3,
        "share": 0.6667,
        "share_live": 1.0,
        "gained": 0,
        "lost": 1,
        "credited": {"alpha": 2, "beta": 1},
        "tokens": {"live": 600, "replayed": 600},
    }
    # The live policy against itself keeps every used frame and disagrees on none.
    same = used_summary(replay_all(records, "score"))
    assert (same["kept"], same["gained"], same["lost"]) == (3, 0, 0)
    text = render_replay("round_robin", replays)
    assert "round_robin keeps 2/3 (0.67), the live policy replayed keeps 3/3 (1.00)" in text
    assert "+0 -1" in text
    dropped = text.split("used frames round_robin would drop:")[1].splitlines()
    assert [line.split()[:3] for line in dropped[2:] if line] == [["r-1", "alpha", "alpha:2"]]
    wire = replay_json("round_robin", replays)
    assert wire["used"] == summary and "feedback" not in wire["replays"][3]
    assert wire["replays"][0]["feedback"]["dropped"][0]["id"] == "alpha:2"


def test_replay_through_the_cli_reads_feedback_from_the_store(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = ShadowStore(state / "shadow.db")
    store.write_many([_record("r-1"), _record("r-2")])
    label = next(c[0] for c in _record().citations if c[2] == "alpha:2")
    keys = resolve_used(_record().citations, [label])
    store.write_many([], [Feedback.of("r-1", 1.0, keys, True, None, store_content=False)])
    store.close()
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nstate_dir = "{state}"\n[shadow]\nenabled = true\n')
    done = run_hostd(
        "--config", str(config), "shadow", "replay", "--policy", "round_robin", "--json"
    )
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)
    assert report["requests"] == 2
    assert report["used"]["requests"] == 1
    assert (report["used"]["kept"], report["used"]["lost"]) == (0, 1)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("record"), st.integers(0, 2000)),
            st.tuples(st.just("feedback"), st.integers(0, 12)),
        ),
        min_size=1,
        max_size=16,
    ),
    st.integers(1, 5),
    st.integers(4096, 14_000),
)
def test_feedback_stays_within_the_stores_bounds_and_totals(
    steps: list[tuple[str, int]], max_requests: int, max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = ShadowStore(Path(tmp) / "s.db", max_requests=max_requests, max_bytes=max_bytes)
        base = _record()
        keys = resolve_used(base.citations, [base.citations[0][0]])
        written = 0
        for kind, n in steps:
            if kind == "record":
                store.write(replace(base, request_id=f"r-{written}", goal="g" * n))
                written += 1
            else:
                note = "n" * 4096
                fb = Feedback.of(f"r-{n}", 1.0, keys, True, note, store_content=True)
                store.write_many([], [fb])
        store.close()
        with sqlite3.connect(Path(tmp) / "s.db") as db:
            count, size = db.execute("SELECT requests, size FROM totals").fetchone()
            rows = db.execute("SELECT count(*), ifnull(sum(size), 0) FROM requests").fetchone()
            fb_size = db.execute("SELECT ifnull(sum(size), 0) FROM feedback").fetchone()[0]
            orphans = db.execute(
                "SELECT count(*) FROM feedback WHERE request_id NOT IN "
                "(SELECT request_id FROM requests)"
            ).fetchone()[0]
        assert (count, size) == (rows[0], rows[1] + fb_size)
        assert orphans == 0 and count <= max_requests
        assert size <= max_bytes or count == 1
