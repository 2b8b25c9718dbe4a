"""``hostd eval`` measures evidence per token: tokens per question recalled, the median
frames in a prompt, the ``(trim-oracle)`` ceiling; and it composes what the daemon
composes (verification states and span merges), through real provider processes."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import compose_for_prompt
from hostd.engine import FanOut
from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    FrameId,
    LineIndex,
    Provenance,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
)
from hostd.quality import (
    OFFERED,
    TRIM_ORACLE,
    Asked,
    Gold,
    Policy,
    Verified,
    holds_gold,
    score_asked,
    summarise,
    to_json,
    trim_to_gold,
)
from hostd.quality._sources import rebuilt_sources, verification_of
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT
from tests.fixtures.window_provider import WindowProvider

FILLER = "the {0} subsystem keeps its {0} state in memory and flushes it at exit\n"


def _frame(path: str, start: int, lines: list[str], score: float) -> ContextFrame:
    text = "".join(lines)
    uri = f"file:///srv/corpus/{path}"
    rng = f"L{start}-{start + len(lines) - 1}"
    digest = sha256_digest(text.encode())
    return ContextFrame(
        id=f"{path}#{rng}",
        kind="snippet",
        title=f"{path} {rng}",
        content=text,
        content_digest=digest,
        uri=uri,
        score=score,
        token_cost=canonical_token_cost(text),
        provenance=[Provenance(type="file", uri=uri, range=rng, digest=digest)],
        citation_label=f"{path} {rng}",
    )


# -- the gold lines a perfect line judge keeps ----------------------------------------


def test_a_frame_is_cut_to_the_lines_its_gold_phrase_spans() -> None:
    lines = [FILLER.format(w) for w in ("cache", "index")]
    lines += ["The retry loop GIVES up\n", "   after three\tattempts, then logs.\n"]
    lines += [FILLER.format("socket")]
    frame = _frame("notes.md", 10, lines, 0.5)
    gold = [Gold(file="notes.md", phrase="gives up after three attempts")]

    cut = trim_to_gold(frame, gold)

    assert cut is not None
    kept = "".join(lines[2:4])  # the phrase runs over the third and fourth lines
    assert cut.content == kept
    assert cut.token_cost == canonical_token_cost(kept) < frame.token_cost
    assert cut.content_digest == sha256_digest(kept.encode())
    assert [(p.uri, p.range, p.digest) for p in cut.provenance] == [(frame.uri, "L12-13", None)]
    assert holds_gold(cut, gold)  # what is kept is still the gold passage
    # no gold passage, or the phrase in another file: nothing to keep
    assert trim_to_gold(frame, [Gold(file="notes.md", phrase="teal and orange")]) is None
    assert trim_to_gold(frame, [Gold(file="other.md", phrase="gives up after")]) is None


_WORDS = st.sampled_from(["alpha", "Beta", "gamma", "delta", "ÉPSILON", "zeta"])


@given(
    lines=st.lists(
        st.lists(_WORDS, min_size=0, max_size=5).map(lambda ws: "  ".join(ws) + "\n"),
        min_size=1,
        max_size=12,
    ),
    data=st.data(),
)
def test_the_cut_is_the_frames_lines_that_the_phrase_touches(
    lines: list[str], data: st.DataObject
) -> None:
    words = " ".join(lines).split()
    if not words:
        return
    lo = data.draw(st.integers(0, len(words) - 1))
    hi = data.draw(st.integers(lo + 1, min(len(words), lo + 8)))
    phrase = " ".join(words[lo:hi])
    frame = _frame("f.txt", 1, lines, 0.5)
    gold = [Gold(file="f.txt", phrase=phrase.upper())]

    cut = trim_to_gold(frame, gold)

    assert cut is not None and cut.content and holds_gold(cut, gold)
    kept = cut.content.splitlines(keepends=True)
    # the kept lines are the frame's own, in order ...
    it = iter(lines)
    assert all(any(k == line for line in it) for k in kept)
    # ... and each holds a word of the phrase (a line the phrase does not touch is cut)
    wanted = {w.casefold() for w in phrase.split()}
    assert all(wanted & {w.casefold() for w in k.split()} for k in kept)
    assert len(kept) <= hi - lo


# -- tokens per recalled question, median frames, the oracle row ----------------------


def _asked(question: str, candidates: list[tuple[str, ContextFrame]], gold: list[Gold]) -> Asked:
    return Asked(
        question,
        "lexical",
        BUDGET,
        candidates,
        False,
        [],
        lambda _, frame: holds_gold(frame, gold),
        trim=lambda frame: trim_to_gold(frame, gold),
    )


BUDGET = 300


def _set(gold_rank: int) -> tuple[list[tuple[str, ContextFrame]], list[Gold]]:
    """Four filler chunks of ``notes.md`` and one holding the gold, at ``gold_rank``."""
    gold = [Gold(file="notes.md", phrase="gives up after three attempts")]
    scores = [0.9, 0.8, 0.7, 0.6, 0.5]
    frames = []
    for k, score in enumerate(scores):
        body = [FILLER.format(f"part{k}"), FILLER.format(f"more{k}")]
        if k == gold_rank:
            body.insert(1, "The retry loop gives up after three attempts.\n")
        frames.append(("files", _frame("notes.md", 1 + 10 * k, body, score)))
    return frames, gold


def test_each_row_reports_tokens_per_recalled_question_and_median_frames() -> None:
    # Two questions: gold at the top of the list (recalled) and at the bottom (not).
    sets = {"top": _set(0), "bottom": _set(4)}
    outcomes = []
    for name, (frames, gold) in sets.items():
        outcomes += score_asked(_asked(name, frames, gold), [Policy("score", None)])
    rows = {r.policy: r for r in summarise(outcomes)}

    composed = {n: compose_for_prompt(f, BUDGET, strategy="score") for n, (f, _) in sets.items()}
    hits = {
        n: any(holds_gold(f, sets[n][1]) for _, f in sets[n][0] if _cited(composed[n], f))
        for n in sets
    }
    assert hits == {"top": True, "bottom": False}  # the budget holds the top chunks only
    score = rows["score"]
    assert score.all_hits == 1
    tokens = [c.tokens_used for c in composed.values()]
    assert score.tokens_per_hit == pytest.approx(sum(tokens) / 1)
    assert score.median_frames == statistics.median(len(c.citations) for c in composed.values())

    offered = rows[OFFERED]
    assert offered.all_hits == 2
    assert offered.median_frames == 5
    all_tokens = sum(f.token_cost for s in sets.values() for _, f in s[0])
    assert offered.tokens_per_hit == pytest.approx(all_tokens / 2)

    # The oracle cuts every chunk to its gold lines: the gold chunk's one line is all
    # that is left, and it fits wherever the chunk ranked.
    oracle = rows[TRIM_ORACLE]
    assert oracle.all_hits == 2 and oracle.median_frames == 1
    cut = [
        compose_for_prompt(
            [(p, t) for p, f in s[0] if (t := trim_to_gold(f, s[1])) is not None], BUDGET
        ).tokens_used
        for s in sets.values()
    ]
    assert oracle.tokens_per_hit == pytest.approx(sum(cut) / 2)
    assert oracle.tokens_per_hit is not None and score.tokens_per_hit is not None
    assert oracle.tokens_per_hit < score.tokens_per_hit

    wire = {r["policy"]: r for r in to_json([], outcomes)["table"]}
    assert wire["score"]["tokens_per_hit"] == round(sum(tokens), 1)
    assert wire["score"]["median_frames"] == score.median_frames
    assert [o["frames"] for o in to_json([], outcomes)["outcomes"][:1]] == [
        len(composed["top"].citations)
    ]


def _cited(composed: Any, frame: ContextFrame) -> bool:
    return any(c.frame == FrameId.of("files", frame) for c in composed.citations)


def test_a_row_that_recalls_nothing_has_no_tokens_per_hit() -> None:
    frames, gold = _set(4)
    outcomes = score_asked(_asked("q", frames, gold), [Policy("score", None)])
    (row,) = [r for r in summarise(outcomes) if r.policy == "score"]
    assert row.all_hits == 0 and row.tokens_per_hit is None
    assert row.to_wire()["tokens_per_hit"] is None


def test_gold_in_lines_a_merge_cap_cut_from_the_block_is_not_recalled() -> None:
    # L1-6 and L4-9 overlap; at a merge cap of 1.0 the second block starts after the
    # first's lines: L4-9's block quotes L7-9 only. The budget holds that block alone,
    # so line 5 (gold, in L4-9 as offered) is not in the prompt and nothing recalls it.
    lines = [FILLER.format(f"part{k}") for k in range(1, 10)]
    lines[4] = "The retry loop gives up after three attempts.\n"
    gold = [Gold(file="notes.md", phrase="gives up after three attempts")]
    first = ("files", _frame("notes.md", 1, lines[0:6], 0.5))
    second = ("dense", _frame("notes.md", 4, lines[3:9], 0.9))
    pairs = [first, second]
    verification = {FrameId.of(p, f): dict(VERIFIED) for p, f in pairs}
    assert first[1].uri is not None
    verified = Verified(verification, {first[1].uri: "".join(lines).encode()}, 1.0)
    asked = Asked("q", "lexical", 200, pairs, False, [], lambda _, f: holds_gold(f, gold))
    asked = dataclasses.replace(asked, verified=verified)
    composed = compose_for_prompt(
        pairs, 200, verification=verification, sources=verified.sources, merge_max_ratio=1.0
    )
    (citation,) = composed.citations
    assert citation.frame == FrameId.of(*second) and citation.label == "notes.md L7-9"
    assert "three attempts" not in composed.prompt
    (row,) = [o for o in score_asked(asked, [Policy("score", None)]) if o.policy == "score"]
    assert not row.hit


# -- the sources span merging reads, rebuilt from the query result -------------------

SECRET = "API_KEY=hunter2 (a line no frame quotes)\n"
VERIFIED = {"state": "source_verified"}


def _source(n: int, final_lf: bool) -> bytes:
    lines = [f"row {k:02d} holds the words {k * 7919} and {k * 104729}\n" for k in range(1, n + 1)]
    lines[n // 2] = SECRET
    text = "".join(lines)
    return (text if final_lf else text.rstrip("\n")).encode()


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(6, 30),
    final_lf=st.booleans(),
    windows=st.lists(
        st.tuples(
            st.sampled_from(["dense", "lexical"]),
            st.integers(1, 34),
            st.integers(0, 8),
            st.sampled_from(["source_verified", "content_checked", None]),
        ),
        min_size=2,
        max_size=8,
    ),
)
def test_the_rebuilt_sources_merge_as_the_file_does_and_send_no_unquoted_line(
    n: int, final_lf: bool, windows: list[tuple[str, int, int, str | None]]
) -> None:
    data = _source(n, final_lf)
    uri = "file:///srv/corpus/mod.txt"
    pairs: list[tuple[str, ContextFrame]] = []
    states: dict[FrameId, dict[str, Any]] = {}
    for k, (pid, start, length, state) in enumerate(windows):
        rng = f"L{start}-{start + length}"
        try:
            text = address_line_range(data, rng).decode()
        except ValueError:  # starts past the end: no such window
            continue
        frame = _frame("mod.txt", start, [text], 0.9 - k / 100).model_copy(
            update={"provenance": [Provenance(type="file", uri=uri, range=rng)], "uri": uri}
        )
        pairs.append((pid, frame))
        if state is not None:
            states[FrameId.of(pid, frame)] = {"state": state}
    fan = FanOut(
        ContextQuery(goal="g", max_frames=10, max_tokens=4000),
        4000,
        accepted=pairs,
        verification=dict(states),
        sources={uri: LineIndex(data)},
    )
    wire = json.loads(json.dumps(fan.to_wire()))
    assert wire["sources"] == {uri: n}  # a line count, not the file

    verification = verification_of(wire)
    assert verification == states
    rebuilt = rebuilt_sources(wire, pairs, verification)
    assert rebuilt is not None
    quoted = [f.content or "" for pid, f in pairs if states.get(FrameId.of(pid, f)) == VERIFIED]
    if not any(SECRET in text for text in quoted):  # only what a verified frame quotes
        assert SECRET.encode() not in rebuilt[uri]
    for strategy in ("score", "round_robin"):
        want = compose_for_prompt(
            pairs, 4000, strategy=strategy, verification=states, sources={uri: data}
        )
        got = compose_for_prompt(
            pairs, 4000, strategy=strategy, verification=verification, sources=rebuilt
        )
        assert got.prompt == want.prompt
        assert got.audit.entry_dicts() == want.audit.entry_dicts()


def test_no_source_named_means_no_span_merging() -> None:
    frames, _ = _set(0)
    assert rebuilt_sources({"sources": {}}, frames, {}) is None
    assert rebuilt_sources({}, frames, {}) is None


# -- end to end: real providers, the daemon's span merges ------------------------------

LINES = [f"line {n:02d}: the quick brown fox number {n * 7919} jumps\n" for n in range(1, 13)]
LINES[7] = "line 08: the fox finally rests under the old oak tree\n"


def _window(pid: str, path: Path, window: str) -> str:
    command = ["python", "-m", "tests.fixtures.window_provider", "--name", pid]
    command += ["--file", str(path), "--window", window]
    return (
        f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )


@pytest.fixture
def windows(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two providers quoting shifted six-line windows of one file under a trusted root,
    and a question whose gold is on line 8 (only in the second window)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = corpus / "module.txt"
    path.write_text("".join(LINES), encoding="utf-8")
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f"trusted_roots = [{json.dumps(str(corpus))}]\n\n"
        + _window("dense", path, "L4-9:0.8")
        + _window("lexical", path, "L1-6:0.4")
    )
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps(
            {
                "id": "oak",
                "question": "the fox",
                "gold": [{"file": "module.txt", "phrase": "rests under the old oak tree"}],
                "style": "lexical",
            }
        )
        + "\n"
        # line 2 is quoted only by the window the merge absorbs into the other's block
        + json.dumps(
            {
                "id": "early",
                "question": "the fox",
                "gold": [{"file": "module.txt", "phrase": LINES[1].split(": ")[1].strip()}],
                "style": "lexical",
            }
        )
        + "\n"
    )
    return config, questions, path


@pytest.mark.slow
def test_eval_composes_what_the_daemon_composes_span_merges_included(
    windows: tuple[Path, Path, Path],
) -> None:
    config, questions, path = windows
    budget = "2000"
    # The daemon's merge cap binds the eval's merges too: at 1.0 the two windows' union
    # (nine lines) outgrows the larger (six), so neither composition merges them before
    # ranking (the second block starts after the first's lines); both are admitted and,
    # touching, quoted as one block after packing, in both compositions alike.
    capped = config.with_name("capped.toml")
    capped.write_text(config.read_text().replace("[host]\n", "[host]\nmerge_max_ratio = 1.0\n", 1))
    asked = ("eval", "--questions", str(questions), "--budget", budget, "--policy", "score")
    done = run_hostd("--config", str(capped), "compose", "the fox", "--budget", budget, "--json")
    assert done.returncode == 0, done.stderr
    apart = json.loads(done.stdout)["audit"]
    folded = [e for e in apart["entries"] if e.get("reason") == "merged_into"]
    assert [e["detail"].get("coalesced") for e in folded] == [True]
    done = run_hostd("--config", str(capped), *asked, "--json")
    assert done.returncode == 0, done.stderr
    (score,) = [
        o
        for o in json.loads(done.stdout)["outcomes"]
        if o["policy"] == "score" and o["question"] == "oak"
    ]
    assert (score["tokens"], score["frames"]) == (apart["tokens_used"], 1)

    done = run_hostd("--config", str(config), "compose", "the fox", "--budget", budget, "--json")
    assert done.returncode == 0, done.stderr
    daemon = json.loads(done.stdout)
    merged = [e for e in daemon["audit"]["entries"] if e.get("reason") == "merged_into"]
    assert len(merged) == 1  # the daemon quotes lines 1-9 once
    included = [e for e in daemon["audit"]["entries"] if e["disposition"] == "included"]

    done = run_hostd(
        "--config", str(config), "eval", "--questions", str(questions), "--budget", budget,
        "--policy", "score", "--trim-oracle", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    rows = {o["policy"]: o for o in result["outcomes"] if o["question"] == "oak"}
    early = {o["policy"]: o for o in result["outcomes"] if o["question"] == "early"}
    # the merged block quotes the absorbed window's lines: its gold is in the prompt
    assert early["score"]["hit"] and early[TRIM_ORACLE]["hit"]
    # the same prompt as the daemon's: one merged frame, the same tokens
    assert rows["score"]["tokens"] == daemon["audit"]["tokens_used"]
    assert rows["score"]["frames"] == len(included) == 1
    assert rows["score"]["hit"] and rows[OFFERED]["hit"]
    # the oracle keeps line 8 alone
    (served,) = WindowProvider("dense", path, [("L4-9", 0.8)]).frames
    line8 = address_line_range(path.read_bytes(), "L8").decode()
    cut = served.model_copy(
        update={
            "content": line8,
            "content_digest": sha256_digest(line8.encode()),
            "token_cost": canonical_token_cost(line8),
            "provenance": [
                p.model_copy(update={"range": "L8", "digest": None}) for p in served.provenance
            ],
        }
    )
    alone = compose_for_prompt([("dense", cut)], int(budget))
    assert rows[TRIM_ORACLE]["hit"] and rows[TRIM_ORACLE]["frames"] == 1
    assert rows[TRIM_ORACLE]["tokens"] < rows["score"]["tokens"]
    assert rows[TRIM_ORACLE]["tokens"] == alone.tokens_used


def test_trim_oracle_is_refused_for_recorded_traffic(tmp_path: Path) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/st"\n')
    done = run_hostd("--config", str(config), "eval", "--from-shadow", "--trim-oracle")
    assert done.returncode == 1
    assert "--trim-oracle" in done.stderr and "Traceback" not in done.stderr
