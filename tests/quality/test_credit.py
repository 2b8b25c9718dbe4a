"""Feedback credits every provider that served the used evidence: when two providers offer
the same evidence and dedup keeps one copy, the copy that lost the tie is credited too, in
``hostd calibrate``, ``shadow replay`` and ``eval --from-shadow``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hostd.compose import compose_for_prompt, strategy_from_wire
from hostd.protocol import ContextFrame
from hostd.provider import make_frame
from hostd.quality import (
    Composition,
    Feedback,
    Policy,
    Recorded,
    ShadowStore,
    build_record,
    credited,
    fit_calibration,
    members_of,
    replay_all,
    resolve_used,
    run_from_shadow,
    used_summary,
)
from tests.fixtures.cli import run_hostd

BUDGET = 380
SHARED = "the same evidence, served twice " + "s" * 160


def _frames() -> list[tuple[str, ContextFrame]]:
    """alpha and beta both offer SHARED (one digest); alpha's copy scores higher and wins
    the dedup tie. Each also offers frames of its own."""
    out: list[tuple[str, ContextFrame]] = []
    for name, shared_score in (("alpha", 0.9), ("beta", 0.8)):
        out.append(
            (
                name,
                make_frame(
                    id=f"{name}:shared",
                    kind="snippet",
                    title="shared",
                    content=SHARED,
                    citation_label=f"{name}-shared",
                    score=shared_score,
                ),
            )
        )
        for i in range(2):
            out.append(
                (
                    name,
                    make_frame(
                        id=f"{name}:{i}",
                        kind="snippet",
                        title=f"{name} {i}",
                        content=f"{name} own {i} " + "x" * 180,
                        citation_label=f"{name}-{i}",
                        score=round(0.7 - i / 10, 2),
                    ),
                )
            )
    return out


def _recording(n: int, *, members: bool = True) -> list[Recorded]:
    """``n`` requests whose answers each used the shared evidence (under alpha's label)."""
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    out = []
    for i in range(n):
        record = build_record(
            Composition(f"r-{i}", f"goal {i}", BUDGET, None, frames, composed), store_content=True
        )
        keys = resolve_used(record.citations, ["alpha-shared"])
        fb = Feedback.of(record.request_id, 1.0, keys, True, None, store_content=True)
        # members=None: a record from before members were kept (they are recomputed).
        out.append(replace(record, feedback=fb, members=record.members if members else None))
    return out


BETA_SHARED = ("beta", "beta:shared", make_frame(
    id="beta:shared", kind="snippet", title="shared", content=SHARED, citation_label="b"
).content_digest)  # fmt: skip


def test_the_record_names_the_copy_dedup_folded_into_the_shown_one() -> None:
    (record,) = _recording(1)
    alpha = next((p, i, d) for _, p, i, d in record.citations if i == "alpha:shared")
    assert all(i != "beta:shared" for _, _, i, _ in record.citations)  # one copy shown
    assert record.members == ((alpha, (BETA_SHARED,)),)
    assert members_of(record)[alpha] == (alpha, BETA_SHARED)
    assert credited(record, [alpha]) == (alpha, BETA_SHARED)
    # An older record without members has them recomputed by the same dedup.
    (older,) = _recording(1, members=False)
    assert credited(older, [alpha]) == (alpha, BETA_SHARED)


def test_the_members_survive_the_store(tmp_path: Path) -> None:
    records = _recording(2)
    store = ShadowStore(tmp_path / "s.db")
    store.write_many(records, [r.feedback for r in records if r.feedback is not None])
    store.close()
    loaded = store.load()
    assert [r.members for r in loaded] == [r.members for r in records]
    assert [r.feedback for r in loaded] == [r.feedback for r in records]


def test_calibrate_credits_both_providers_of_the_used_evidence() -> None:
    for records in (_recording(3), _recording(3, members=False)):
        fitted = fit_calibration(records, min_frames=1, min_requests=1)
        # beta's copy of the shared evidence was shown (folded into alpha's) and used.
        assert fitted["providers"]["beta"]["used"] == 3
        assert fitted["providers"]["alpha"]["used"] == 3
        assert fitted["providers"]["beta"]["samples"] >= 3


def test_replay_names_every_provider_that_served_the_used_evidence() -> None:
    replays = replay_all(_recording(2), "round_robin")
    summary = used_summary(replays)
    assert summary["credited"] == {"alpha": 2, "beta": 2}
    assert summary["used"] == 2 and summary["kept"] == summary["kept_live"] == 2
    assert replays[0].to_wire()["feedback"]["credited"] == {"alpha": 1, "beta": 1}


def test_eval_from_shadow_takes_every_copy_of_the_used_evidence_as_gold() -> None:
    policies = [Policy("score", strategy_from_wire("score"))]
    questions, outcomes = run_from_shadow(_recording(1), policies)
    (question,) = questions
    assert {(f.provider_id, f.frame_id) for f in question.gold} == {
        ("alpha", "alpha:shared"),
        ("beta", "beta:shared"),
    }
    hits = {o.policy: o.hit for o in outcomes}
    # beta alone offered the used evidence too: it is credited with a hit.
    assert hits["alpha alone"] and hits["beta alone"] and hits["score"]


def test_calibrate_through_the_cli_credits_both_and_warns_on_few_requests(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    records = _recording(4)
    store = ShadowStore(state / "shadow.db")
    store.write_many(records, [r.feedback for r in records if r.feedback is not None])
    store.close()
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nstate_dir = "{state}"\n[shadow]\nenabled = true\n')
    done = run_hostd("--config", str(config), "calibrate", "--min-frames", "1", "--json")
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    assert written["providers"]["beta"]["used"] == 4
    # 4 requests with feedback, below the default --min-samples (50): said on stderr and
    # kept in the file.
    assert written["fitted_from"] == {"requests": 4, "min_frames": 1, "min_requests": 50}
    assert written["warning"].startswith("fitted on 4 requests with feedback, fewer than 50")
    assert done.stderr.startswith("hostd: warning: fitted on 4 requests")
    assert len(done.stderr.splitlines()) == 1
    quiet = run_hostd("--config", str(config), "calibrate", "--min-samples", "4")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert "warning" not in json.loads((state / "calibration.json").read_text())
    help_text = run_hostd("calibrate", "--help").stdout
    assert "(default 50)" in help_text and "(default 20)" in help_text
