"""Replays count the tokens a record was composed in: a composition made with ``[host]
tokenizer`` is composed again in that tokenizer (``replay``, ``score_asked`` and, through
the CLI, ``shadow replay`` and ``eval --from-shadow``), so it packs as it did live; one
whose tokenizer cannot be had here is replayed in canonical tokens, and the run says so.

MiniLM's ``tokenizer.json`` stands in for the model's, on CJK prose, whose canonical
cost (bytes / 4) undercounts its tokens: at ``BUDGET`` the canonical replay admits more
frames than the live composition did, so a replay in the wrong unit shows.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hostd._tokenizer import HfTokenizer, load_tokenizer
from hostd.compose import ComposedPrompt, compose_for_prompt, strategy_from_wire
from hostd.quality import (
    Composition,
    Feedback,
    Policy,
    Recorded,
    ShadowStore,
    asked_from_shadow,
    build_record,
    recorded_frames,
    replay,
    replay_all,
    resolve_used,
    score_asked,
)
from tests.compose._token_fixtures import cjk_frames, minilm_tokenizer_path
from tests.fixtures.cli import run_hostd

BUDGET = 600
#: Another tokenizer's name, as a record made with another file would hold it.
OTHER = "tokenizer.json@000000000000"
NOTE = "replayed in canonical tokens"


@pytest.fixture(scope="module")
def minilm() -> HfTokenizer:
    return load_tokenizer(minilm_tokenizer_path())


def _record(
    rid: str, tokenizer: HfTokenizer | None, *, store_content: bool = True
) -> tuple[Recorded, ComposedPrompt]:
    """A composition of the CJK frames at ``BUDGET`` (in ``tokenizer``'s tokens, when
    given) as the daemon records it, with feedback: the answer used its first citation."""
    frames = cjk_frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score", tokenizer=tokenizer)
    record = build_record(
        Composition(rid, f"goal {rid}", BUDGET, None, frames, composed),
        store_content=store_content,
    )
    used = resolve_used(record.citations, [record.citations[0][0]])
    feedback = Feedback.of(rid, 1.0, used, None, None, store_content=store_content)
    return replace(record, feedback=feedback), composed


def _keys(composed: ComposedPrompt) -> list[tuple[str, str, str | None]]:
    return [
        (c.frame.provider_id, c.frame.frame_id, c.frame.content_digest) for c in composed.citations
    ]


def _replayed_keys(frames: Sequence[Any]) -> list[tuple[str, str, str | None]]:
    return [(c.provider, c.id, c.digest) for c in frames]


def _score(asked: Any) -> dict[str, Any]:
    """``score_asked`` of ``asked`` under ``score``: each row's (tokens, frames)."""
    outcomes = score_asked(asked, [Policy("score", strategy_from_wire("score"))])
    return {o.policy: (o.tokens, o.frames) for o in outcomes}


# -- the library: replay and score_asked take the tokenizer ---------------------------------


def test_a_record_replayed_in_its_tokenizer_packs_as_the_live_composition(
    minilm: HfTokenizer,
) -> None:
    record, composed = _record("t-1", minilm)
    assert record.policy["tokenizer"] == minilm.name
    mine = replay(record, "score", tokenizer=minilm)
    assert _replayed_keys(mine.replayed) == _keys(composed) == list(record.included)
    assert mine.overlap == 1.0 and mine.live_replayed == mine.replayed
    # The same record in canonical tokens packs another set: the test can tell them apart.
    canonical = replay(record, "score")
    assert len(canonical.replayed) > len(mine.replayed)
    assert canonical.overlap < 1.0


def test_eval_rows_of_a_record_are_composed_in_its_tokenizer(minilm: HfTokenizer) -> None:
    record, composed = _record("t-1", minilm)
    _, (asked,) = asked_from_shadow([record])
    rows = _score(replace(asked, tokenizer=minilm))
    # identical units, identical packing: the live composition's tokens_used and frames
    assert rows["score"] == (composed.tokens_used, len(composed.citations))
    candidates = [f.content or "" for _, f in recorded_frames(record)]
    assert rows["(offered)"][0] == sum(minilm(c) for c in candidates)
    canonical = _score(asked)
    assert canonical["score"] != rows["score"]
    assert canonical["score"][1] > len(composed.citations)


def test_a_canonical_record_replays_as_composing_it_without_a_tokenizer() -> None:
    record, composed = _record("c-1", None)
    assert "tokenizer" not in record.policy
    for policy in ("score", "round_robin", "rrf", "mmr"):
        direct = compose_for_prompt(
            recorded_frames(record), record.budget, strategy=policy, caps=record.caps
        )
        (replayed,) = replay_all([record], policy, tokenizer_of=lambda _: None)
        assert _replayed_keys(replayed.replayed) == _keys(direct), policy
    _, (asked,) = asked_from_shadow([record])
    direct = compose_for_prompt(recorded_frames(record), record.budget, strategy="score")
    assert _score(asked)["score"] == (direct.tokens_used, len(direct.citations))
    assert _score(asked)["(offered)"][0] == sum(c.cost for c in record.candidates)


# -- the CLI: the [host] tokenizer here, loaded as the daemon loads it -----------------------


def _store(state: Path, records: Sequence[Recorded]) -> None:
    store = ShadowStore(state / "shadow.db")
    store.write_many([replace(r, feedback=None) for r in records])
    store.write_many([], [r.feedback for r in records if r.feedback])
    store.close()


def _config(tmp_path: Path, state: Path, tokenizer: Path | None) -> Path:
    config = tmp_path / ("hostd.toml" if tokenizer is None else "hostd-tokenizer.toml")
    host = f'state_dir = "{state}"\n'
    if tokenizer is not None:
        host += f'tokenizer = "{tokenizer}"\n'
    config.write_text(f"[host]\n{host}[shadow]\nenabled = true\n", encoding="utf-8")
    return config


def _hostd(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_hostd("--config", str(config), *args)
    assert done.returncode == 0, done.stderr
    return done


def _replay(config: Path, *policies: str) -> tuple[dict[str, Any], list[str]]:
    """``shadow replay --json``: the first policy's replays by request, and the notes."""
    spelt = [a for p in policies or ("score",) for a in ("--policy", p)]
    done = _hostd(config, "shadow", "replay", *spelt, "--json")
    report = json.loads(done.stdout)[0]
    return {r["request_id"]: r for r in report["replays"]}, _notes(done.stderr)


def _eval(config: Path) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """``eval --from-shadow --policy score --json``: score's (tokens, frames) by request."""
    done = _hostd(config, "eval", "--from-shadow", "--policy", "score", "--json")
    outcomes = json.loads(done.stdout)["outcomes"]
    rows = {o["question"]: (o["tokens"], o["frames"]) for o in outcomes if o["policy"] == "score"}
    return rows, _notes(done.stderr)


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if NOTE in line]


def test_both_commands_replay_a_record_in_the_configured_tokenizer_it_names(
    tmp_path: Path, minilm: HfTokenizer
) -> None:
    state = tmp_path / "state"
    record, composed = _record("t-1", minilm)
    _store(state, [record])
    config = _config(tmp_path, state, minilm_tokenizer_path())
    replays, notes = _replay(config)
    assert replays["t-1"]["overlap"] == 1.0 and replays["t-1"]["newly_included"] == []
    assert notes == []
    rows, notes = _eval(config)
    assert rows["t-1"] == (composed.tokens_used, len(composed.citations))
    assert notes == []
    # Without the tokenizer here both replay in canonical tokens, and say so.
    bare = _config(tmp_path, state, None)
    replays, notes = _replay(bare)
    assert replays["t-1"]["overlap"] < 1.0 and replays["t-1"]["newly_included"]
    (note,) = notes
    assert f"1 of 1 records were composed in {minilm.name}'s tokens" in note, note
    assert "no [host] tokenizer is set here" in note, note
    rows, notes = _eval(bare)
    assert rows["t-1"] != (composed.tokens_used, len(composed.citations))
    assert len(notes) == 1 and "no [host] tokenizer is set here" in notes[0], notes


def test_a_record_naming_another_tokenizer_replays_in_canonical_tokens_with_a_note(
    tmp_path: Path, minilm: HfTokenizer
) -> None:
    state = tmp_path / "state"
    mine, composed = _record("t-1", minilm)
    other, _ = _record("t-2", minilm)
    other = replace(other, policy={**other.policy, "tokenizer": OTHER})
    canonical, _ = _record("c-1", None)
    _store(state, [mine, other, canonical])
    config = _config(tmp_path, state, minilm_tokenizer_path())
    # Two policies replay each record twice: the note counts records, not replays.
    replays, notes = _replay(config, "score", "round_robin")
    assert replays["t-1"]["overlap"] == 1.0
    expected = replay(other, "score")  # canonical tokens
    assert replays["t-2"]["overlap"] == round(expected.overlap, 4) < 1.0
    assert replays["c-1"]["overlap"] == 1.0
    (note,) = notes
    assert f"1 of 3 records were composed in {OTHER}'s tokens" in note, note
    assert f"the [host] tokenizer here is {minilm.name}" in note, note
    rows, notes = _eval(config)
    assert rows["t-1"] == (composed.tokens_used, len(composed.citations))
    _, (asked,) = asked_from_shadow([other])
    assert rows["t-2"] == _score(asked)["score"]
    assert len(notes) == 1 and f"1 of 3 records were composed in {OTHER}'s" in notes[0]


def test_a_tokenizer_that_cannot_be_loaded_or_counted_falls_back_with_a_note(
    tmp_path: Path, minilm: HfTokenizer
) -> None:
    state = tmp_path / "state"
    kept, _ = _record("t-1", minilm)
    # Without store_content a record holds stand-ins of its frames' canonical cost:
    # a tokenizer would count their spaces, so it is replayed in canonical tokens.
    digests, _ = _record("t-2", minilm, store_content=False)
    _store(state, [kept, digests])
    broken = tmp_path / "model" / "tokenizer.json"
    broken.parent.mkdir()
    broken.write_text("{}", encoding="utf-8")  # a file, but no tokenizer the library reads
    config = _config(tmp_path, state, broken)
    for run in (_replay, _eval):
        _, notes = run(config)
        assert len(notes) == 2, notes
        loaded, counted = sorted(notes, key=lambda n: "store_content" in n)
        assert f"1 of 2 records were composed in {minilm.name}'s tokens" in loaded, loaded
        assert f"{broken}, cannot be loaded: unreadable tokenizer" in loaded, loaded
        assert f"1 of 2 records were composed in {minilm.name}'s tokens" in counted, counted
        assert "keep no frame content ([shadow] store_content is off)" in counted, counted


def test_canonical_records_replay_byte_for_byte_with_a_tokenizer_configured(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    _store(state, [_record("c-1", None)[0], _record("c-2", None)[0]])
    with_tokenizer = _config(tmp_path, state, minilm_tokenizer_path())
    outputs = []
    for config in (with_tokenizer, _config(tmp_path, state, None)):
        shadow = _hostd(config, "shadow", "replay", "--policy", "round_robin", "--json")
        ev = _hostd(config, "eval", "--from-shadow", "--json")
        assert _notes(shadow.stderr) == [] and _notes(ev.stderr) == []
        outputs.append((shadow.stdout, ev.stdout))
    assert outputs[0] == outputs[1]
