"""Shadow records keep which candidates hostd could not check, so a replay fences
them ``verified="no"`` as the live prompt did and prices them the same: the live
policy's replay admits what the live composition admitted, at the budget's edge too
(docs/eval.md)."""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import orjson

from hostd.client import Client
from hostd.compose import compose_for_prompt
from hostd.quality import ShadowStore, recorded_frames, replay
from hostd.quality._record import Recorded, from_row
from hostd.quality._sources import recorded_sources
from tests.fixtures.procs import ROOT

LINES = [f"line {n:02d}: the quick brown fox number {n * 7919} jumps\n" for n in range(1, 15)]
WINDOWS = ("L1-3:0.9", "L5-7:0.7", "L9-11:0.5", "L13-14:0.3")


def _spawn(tmp_path: Path) -> AbstractContextManager[Client]:
    """A daemon whose one provider quotes a file outside the trusted roots, kept
    (``untrusted = "include"``) and so fenced ``verified="no"``; every composition
    recorded, without content."""
    outside, trusted = tmp_path / "outside", tmp_path / "trusted"
    outside.mkdir()
    trusted.mkdir()
    path = outside / "module.txt"
    path.write_text("".join(LINES), encoding="utf-8")
    command = ["python", "-m", "tests.fixtures.window_provider", "--name", "far"]
    command += ["--file", str(path)]
    for w in WINDOWS:
        command += ["--window", w]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'trusted_roots = [{json.dumps(str(trusted))}]\nuntrusted = "include"\n\n'
        "[shadow]\nenabled = true\nsample = 1.0\n\n"
        f'[[provider]]\nid = "far"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return Client.spawn(config, env=env, cwd=ROOT)


def _compose(client: Client, budget: int) -> dict[str, Any]:
    params = {"goal": "the fox", "budget": budget, "strategy": "score", "record": True}
    live: dict[str, Any] = client.call("context/compose", params)
    assert live["recorded"] is True
    return live


def _without_unverifiable(record: Recorded) -> Recorded:
    """The record as kept before ``unverifiable`` was: its body less that field."""
    raw = orjson.loads(record.body())
    del raw["unverifiable"]
    body = orjson.dumps(raw).decode()
    return from_row(
        record.request_id, record.recorded_at, record.goal_digest, None, body, None, None
    )


def _edge(record: Recorded) -> int:
    """A budget at which the fenced blocks admit at least one frame, and one fewer
    than unmarked ones would."""
    frames = recorded_frames(record)
    verification, _, _ = recorded_sources(record, frames)
    for budget in range(40, 400):
        marked = compose_for_prompt(frames, budget, strategy="score", verification=verification)
        plain = compose_for_prompt(frames, budget, strategy="score")
        if 0 < len(marked.citations) < len(plain.citations):
            return budget
    raise AssertionError("no budget where the verified mark decides admission")


def test_a_replay_fences_and_prices_unverifiable_frames_as_the_live_prompt(
    tmp_path: Path,
) -> None:
    with _spawn(tmp_path) as client:
        first = _compose(client, 2000)
        assert first["prompt"].count(' verified="no">') == len(WINDOWS)
        store = ShadowStore(tmp_path / "state" / "shadow.db")
        (record,) = store.load()
        assert {i for _, i, _ in record.unverifiable} == {c.id for c in record.candidates}
        assert all(c.content is None for c in record.candidates)  # kept without content
        edge = _edge(record)
        live = _compose(client, edge)
    records = {r.request_id: r for r in store.load()}
    at_edge = records[live["request_id"]]
    assert at_edge.budget == edge  # no floor: the frames contested the whole budget
    shown = [c["frame"]["frame_id"] for c in live["citations"]]
    assert 0 < len(shown) < len(WINDOWS)

    again = replay(at_edge, "score")
    assert [c.id for c in again.replayed] == shown
    assert again.newly_included == [] and again.overlap == 1.0

    # The same record read as before the field was kept: unmarked blocks are cheaper,
    # and its replay admits one frame the live composition could not fit.
    old = _without_unverifiable(at_edge)
    assert old.unverifiable == ()
    assert len(replay(old, "score").replayed) == len(shown) + 1
