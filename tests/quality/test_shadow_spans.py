"""Shadow records keep what span merging read, so the live policy's replay of a
composition whose windows were merged is the live prompt (docs/eval.md)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from hostd.client import Client
from hostd.compose import compose_for_prompt
from hostd.quality import ShadowStore, recorded_frames, replay
from hostd.quality._record import from_row
from hostd.quality._sources import recorded_sources
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT

LINES = [f"line {n:02d}: the quick brown fox number {n * 7919} jumps\n" for n in range(1, 15)]
BUDGET = 2000


def _window(pid: str, path: Path, *windows: str) -> str:
    command = ["python", "-m", "tests.fixtures.window_provider", "--name", pid, "--file", str(path)]
    for w in windows:
        command += ["--window", w]
    return (
        f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """One composition through the daemon, recorded with content: two providers quote
    overlapping windows of a file under a trusted root (merged), and a third an adjacent
    one (coalesced), then feedback that the answer used its first citation."""
    return _record(tmp_path, store_content=True)


def _record(tmp_path: Path, *, store_content: bool) -> tuple[Path, dict[str, Any]]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = corpus / "module.txt"
    path.write_text("".join(LINES), encoding="utf-8")
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f"trusted_roots = [{json.dumps(str(corpus))}]\n\n"
        f"[shadow]\nenabled = true\nsample = 1.0\nstore_content = {str(store_content).lower()}\n\n"
        + _window("dense", path, "L4-9:0.8")
        + _window("lexical", path, "L1-6:0.4")
        + _window("tail", path, "L10-12:0.3")
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        live = client.call(
            "context/compose",
            {"goal": "the fox", "budget": BUDGET, "strategy": "score", "record": True},
        )
        assert live["recorded"] is True
        used = [live["citations"][0]["label"]]
        client.call("usage/feedback", {"request_id": live["request_id"], "used": used})
    return config, live


def test_the_live_policys_replay_of_merged_spans_is_the_live_prompt(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    config, live = recorded
    entries = live["audit"]["entries"]
    # The live composition did merge: a replay that merged nothing would differ.
    assert [e for e in entries if e.get("reason") == "merged_into"]
    included = [e for e in entries if e["disposition"] == "included"]
    assert len(live["citations"]) == len(included) < 3

    (record,) = ShadowStore(config.parent / "state" / "shadow.db").load()
    assert record.merging is not None
    assert [n for _, n in record.merging.sources] == [len(LINES)]  # a line count, no bytes
    assert {i for _, i, _ in record.merging.verified} == {c.id for c in record.candidates}

    # Through the CLI, as the user ran it.
    done = run_hostd("--config", str(config), "shadow", "replay", "--policy", "score", "--json")
    assert done.returncode == 0, done.stderr
    assert "kept without content" not in done.stderr  # kept with it: nothing to warn of
    (report,) = json.loads(done.stdout)
    (one,) = report["replays"]
    assert one["overlap"] == 1.0
    assert one["newly_included"] == [] and one["newly_excluded"] == []
    assert one["tokens"]["live"] == one["tokens"]["replayed"]

    done = run_hostd(
        "--config", str(config), "eval", "--from-shadow", "--policy", "score", "--json"
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = [o for o in json.loads(done.stdout)["outcomes"] if o["policy"] == "score"]
    assert row["hit"]
    assert (row["tokens"], row["frames"]) == (live["audit"]["tokens_used"], len(included))

    # In process: the same prompt, to the token.
    frames = recorded_frames(record)
    verification, sources, ratio = recorded_sources(record, frames)
    again = compose_for_prompt(
        frames, record.budget, strategy="score", verification=verification, sources=sources
    )
    assert ratio == 2.0
    assert again.tokens_used == live["audit"]["tokens_used"]
    assert [c.frame.frame_id for c in again.citations] == [
        c["frame"]["frame_id"] for c in live["citations"]
    ]


def test_a_record_from_before_merging_was_kept_replays_without_merging(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    config, live = recorded
    (record,) = ShadowStore(config.parent / "state" / "shadow.db").load()
    # The body as written before ``merging`` was kept: the same record less that field.
    raw = orjson.loads(record.body())
    del raw["merging"]
    old = from_row(
        record.request_id,
        record.recorded_at,
        record.goal_digest,
        record.goal,
        orjson.dumps(raw).decode(),
        None,
        None,
    )
    assert old.merging is None and replace(record, merging=None, feedback=None) == old
    frames = recorded_frames(old)
    assert recorded_sources(old, frames) == (None, None, None)
    # Replayed as before: every window stands apart, the absorbed ones newly included.
    result = replay(old, "score")
    apart = compose_for_prompt(frames, old.budget, strategy="score")
    assert [c.id for c in result.replayed] == [c.frame.frame_id for c in apart.citations]
    assert result.newly_included and result.overlap < 1.0
    assert apart.tokens_used != live["audit"]["tokens_used"]


def test_replaying_records_kept_without_content_says_their_spans_are_not_merged(
    tmp_path: Path,
) -> None:
    config, _ = _record(tmp_path, store_content=False)
    for command in (["shadow", "replay", "--policy", "score"], ["eval", "--from-shadow"]):
        done = run_hostd("--config", str(config), *command)
        assert done.returncode == 0, done.stderr
        (note,) = [x for x in done.stderr.splitlines() if "kept without content" in x]
        assert note.startswith("hostd: note: 1 of 1 records were kept without content")
        assert "store_content = true" in note
