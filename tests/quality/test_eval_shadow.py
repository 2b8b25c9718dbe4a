"""``hostd eval --from-shadow``: recorded traffic with feedback is a question set, scored by
the very function the JSONL sets go through (equal outcomes on the same data)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.compose import compose_for_prompt, strategy_from_wire
from hostd.protocol import ContextFrame
from hostd.provider import file_provenance, make_frame
from hostd.quality import (
    DEFAULT_POLICIES,
    TRAFFIC,
    Composition,
    Feedback,
    Gold,
    Policy,
    Question,
    Recorded,
    ShadowStore,
    build_record,
    recorded_frames,
    render_table,
    resolve_used,
    run_eval,
    run_from_shadow,
    summarise,
)
from tests.fixtures.cli import run_hostd

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 400


def _frames() -> list[tuple[str, ContextFrame]]:
    # alpha's scores fall slowly, beta's fast: the policies disagree on this set.
    out = []
    for name, count in (("alpha", 8), ("beta", 3)):
        for i in range(count):
            content = f"marker-{name}-{i} " + "x" * 192
            uri = f"file:///corpus/{name}/{i}.md"
            frame = make_frame(
                id=f"{name}:{i}",
                kind="snippet",
                title=f"{name} #{i}",
                content=content,
                citation_label=f"{name}-{i}",
                score=round(1.0 - i / (count + 1), 4),
                provenance=[file_provenance(uri, content.encode())],
            )
            out.append((name, frame))
    return out


def _recording(used: dict[str, list[str]]) -> list[Recorded]:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    out = []
    for rid, ids in used.items():
        record = build_record(
            Composition(rid, f"goal {rid}", BUDGET, None, frames, composed), store_content=True
        )
        labels = [c[0] for c in record.citations if c[2] in ids]
        keys = resolve_used(record.citations, labels)
        fb = Feedback.of(rid, 1.0, keys, None, None, store_content=True)
        out.append(replace(record, feedback=fb))
    return out


USED = {"q-1": ["alpha:2"], "q-2": ["beta:0"], "q-3": ["alpha:0", "alpha:1"], "q-4": []}


class _Recorded:
    """A ``context/query`` session answering each question from its recorded candidates."""

    def __init__(self, records: list[Recorded]) -> None:
        self.by_goal = {r.goal: recorded_frames(r) for r in records}

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        assert method == "context/query" and params is not None
        pairs = self.by_goal[params["goal"]]
        wanted = params.get("providers") or sorted({p for p, _ in pairs})
        frames: dict[str, list[Any]] = {}
        for pid, f in pairs:
            if pid in wanted:
                frames.setdefault(pid, []).append(f.model_dump(mode="json", exclude_none=True))
        providers = [{"provider_id": p, "status": "ok"} for p in wanted]
        return {"frames": frames, "providers": providers}


def test_eval_from_shadow_equals_the_jsonl_path_on_the_same_data() -> None:
    records = _recording(USED)
    policies = [Policy(p, strategy_from_wire(p)) for p in DEFAULT_POLICIES]
    questions, traffic = run_from_shadow(records, policies)
    assert [q.id for q in questions] == ["q-1", "q-2", "q-3"]  # q-4 used nothing: no gold
    # The same candidate sets as a JSONL set: each used frame's file and phrase is gold.
    jsonl = [
        Question(
            id=r.request_id,
            question=r.goal or "",
            style="lexical",
            gold=[
                Gold(file=f"{p}/{i.split(':')[1]}.md", phrase=f"marker-{p}-{i.split(':')[1]}")
                for p, i, _ in (r.feedback.used if r.feedback else ())
            ],
        )
        for r in records[:3]
    ]
    asked = anyio.run(lambda: run_eval(_Recorded(records), jsonl, [BUDGET], policies))

    def key(o: Any) -> tuple[Any, ...]:
        return (o.question, o.policy, o.hit, o.tokens, o.degraded)

    assert [key(o) for o in traffic] == [key(o) for o in asked]
    assert {o.style for o in traffic} == {TRAFFIC} and {o.budget for o in traffic} == {0}
    # Known answers: q-1's alpha:2 is what round_robin gives up for beta:1.
    hits = {(o.question, o.policy): o.hit for o in traffic}
    assert hits[("q-1", "score")] and not hits[("q-1", "round_robin")]
    assert hits[("q-2", "round_robin")] and not hits[("q-2", "alpha alone")]
    table = render_table(questions, summarise(traffic))
    assert "budgets as recorded" in table and "3 traffic" in table


def test_eval_from_shadow_through_the_cli(tmp_path: Path) -> None:
    config = _stored(tmp_path, _recording(USED))

    def hostd(*args: str) -> subprocess.CompletedProcess[str]:
        return run_hostd("--config", str(config), "eval", *args)

    done = hostd("--from-shadow", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 3 and report["styles"] == {"traffic": 3}
    score = next(r for r in report["table"] if r["policy"] == "score")
    assert score["recall"]["all"] == {"hits": 3, "total": 3}  # live: every used frame admitted
    # The default policies include calibrated: before `hostd calibrate` it ranks by its
    # fallback, and the run says so rather than showing that row as its own.
    (note,) = [line for line in done.stderr.splitlines() if "ranks as" in line]
    assert note.startswith("hostd: note: calibrated ranks as round_robin here: no calibration")
    assert "ranks as" not in hostd("--from-shadow", "--policy", "score").stderr
    replayed = run_hostd("--config", str(config), "shadow", "replay", "--policy", "calibrated")
    assert replayed.returncode == 0 and "calibrated ranks as round_robin" in replayed.stderr
    refused = hostd("--from-shadow", "--budget", "100")
    assert refused.returncode != 0 and "--budget" in refused.stderr


def _stored(tmp_path: Path, records: list[Recorded]) -> Path:
    """``records`` and their feedback in a shadow store, and a config that reads it."""
    state = tmp_path / "state"
    store = ShadowStore(state / "shadow.db")
    store.write_many([replace(r, feedback=None) for r in records])
    store.write_many([], [r.feedback for r in records if r.feedback])
    store.close()
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nstate_dir = "{state}"\n[shadow]\nenabled = true\n')
    return config


def test_records_in_a_tokenizer_not_set_here_are_said_to_replay_in_canonical_tokens(
    tmp_path: Path,
) -> None:
    records = _recording(USED)
    # One composition was counted in a tokenizer's tokens (its policy names it).
    first = replace(records[0], policy={**records[0].policy, "tokenizer": "tokenizer.json@be50"})
    config = _stored(tmp_path, [first, *records[1:]])
    # eval asks the 3 requests whose feedback used something; replay replays all 4.
    for args, total in (
        (["eval", "--from-shadow"], 3),
        (["shadow", "replay", "--policy", "score"], 4),
    ):
        done = run_hostd("--config", str(config), *args)
        assert done.returncode == 0, done.stderr
        (note,) = [line for line in done.stderr.splitlines() if "canonical tokens" in line]
        assert f"1 of {total} records were composed in tokenizer.json@be50's tokens" in note
        assert note.endswith(
            "no [host] tokenizer is set here (set it to that file to replay them in it)"
        )


@pytest.mark.slow
def test_eval_from_shadow_says_what_its_table_cannot_and_can_leave_the_fit_out(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    store = ShadowStore(state / "shadow.db")
    records = _recording(USED)
    store.write_many([replace(r, feedback=None) for r in records])
    feedback = [r.feedback for r in records if r.feedback]
    store.write_many([], feedback[:2])  # before the fit below
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nstate_dir = "{state}"\n[shadow]\nenabled = true\n')

    def hostd(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_hostd("--config", str(config), *args)
        assert done.returncode == 0, done.stderr
        return done

    fitted = hostd("calibrate", "--min-frames", "1")
    assert "fitted on 2 requests with feedback" in fitted.stdout
    # q-3's feedback arrives after the fit (an hour on, whatever the clock says now).
    later = (state / "calibration.json").stat().st_mtime + 3600
    store.write_many([], [replace(f, recorded_at=later) for f in feedback[2:]])
    store.close()
    done = hostd("eval", "--from-shadow", "--policy", "score", "--policy", "calibrated")
    notes = done.stderr
    assert "that policy's row is at or near 100% by construction" in notes
    assert "live policy showed (score)" in notes
    assert "3 requests with feedback: one request moves a figure by 33 points" in notes
    assert "calibrated was fitted on feedback that includes 2 of these 3 requests" in notes
    assert "ranks as" not in notes  # the fit is real here, not a fallback
    # Out of sample: only q-3 is asked, and nothing is said to be in-sample.
    after = hostd("eval", "--from-shadow", "--since-calibration", "--json")
    assert json.loads(after.stdout)["questions"] == 1
    assert "in-sample" not in after.stderr
    assert "1 request with feedback: one request moves a figure by 100 points" in after.stderr
    newest = hostd("eval", "--from-shadow", "--limit", "2", "--json", "--policy", "score")
    outcomes = json.loads(newest.stdout)["outcomes"]
    assert {o["question"] for o in outcomes} == {"q-2", "q-3"}
    # Without calibrated asked, or with it falling back, no in-sample note.
    assert "in-sample" not in hostd("eval", "--from-shadow", "--policy", "score").stderr
    for wrong in (["--limit", "0"], ["--questions", "x.jsonl", "--limit", "2"]):
        refused = run_hostd(
            "--config",
            str(config),
            "eval",
            *wrong,
            *(["--from-shadow"] if "--questions" not in wrong else []),
        )
        assert refused.returncode != 0 and "--limit" in refused.stderr
