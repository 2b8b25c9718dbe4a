"""``hostd eval --policy rerank`` and ``--pool-budget``; ``shadow replay`` of a reranker's
verdict. Real provider and reranker processes (``tests.fixtures.reranker``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hostd.client import Client
from tests.fixtures.cli import run_hostd as _hostd
from tests.server.test_rerank import reranker_table

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [
    {
        "id": "retries",
        "question": "when does the retry loop give up",
        "gold": [{"file": "notes.md", "phrase": "gives up after three attempts"}],
        "style": "lexical",
    },
    {
        "id": "accents",
        "question": "teal orange accents",
        "gold": [{"file": "palette.md", "phrase": "teal and orange"}],
        "style": "lexical",
    },
]


def _setup(tmp_path: Path, mode: str) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three attempts.\n")
    (tree / "palette.md").write_text("# Palette\n\nThe theme uses teal and orange accents.\n")
    for i in range(30):  # decoys no longer than the gold: "retry loop", not "give up"
        (tree / f"decoy{i}.md").write_text(f"# D{i}\n\nThe retry loop {i}.\n")
    command = ["python", "-m", "providers.files", "--root", str(tree)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(command)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n\n" + reranker_table(mode, "eval")
    )
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return config, questions


def _eval(config: Path, questions: Path, *args: str) -> dict[str, Any]:
    return _eval_said(config, questions, *args)[0]


def _eval_said(config: Path, questions: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The report, and what ``eval`` said on stderr."""
    done = _hostd("--config", str(config), "eval", "--questions", str(questions), *args, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result, done.stderr


def test_eval_reranks_each_candidate_set_and_a_larger_pool_is_measurable(tmp_path: Path) -> None:
    config, questions = _setup(tmp_path, "reverse")
    args = ("--budget", "130", "--policy", "rerank", "--policy", "score")
    plain, said = _eval_said(config, questions, *args)
    pooled = _eval(config, questions, *args, "--pool-budget", "2000")
    # The reranker ranked every row: no note says it fell back.
    assert "round_robin" not in said, said
    for result in (plain, pooled):
        rows = [(r["budget"], r["policy"]) for r in result["table"]]
        assert rows == [(130, p) for p in ("rerank", "score", "files alone", "(offered)")]
        assert result["degraded"] == 0  # the reranker gave every verdict

    def row(result: dict[str, Any], policy: str) -> dict[str, Any]:
        return next(r for r in result["table"] if r["policy"] == policy)

    # The pool is asked for 2,000 tokens (every decoy is offered), each prompt packs 130.
    assert row(pooled, "(offered)")["mean_tokens"] > row(plain, "(offered)")["mean_tokens"]
    assert row(pooled, "score")["mean_tokens"] <= 130
    hits = {(o["question"], o["policy"]) for o in pooled["outcomes"] if o["hit"]}
    # BM25 ranks the gold first; the reverse verdict puts it last of a larger pool.
    assert ("retries", "score") in hits and ("retries", "rerank") not in hits
    assert ("retries", "(offered)") in hits


def test_a_failing_reranker_degrades_only_the_rerank_rows(tmp_path: Path) -> None:
    config, questions = _setup(tmp_path, "crash")
    args = ("--budget", "300", "--policy", "rerank", "--policy", "score")
    result, said = _eval_said(config, questions, *args)
    degraded = {(o["policy"], o["degraded"]) for o in result["outcomes"]}
    # What happened, counted over the questions: the reranker (restarted after its
    # backoff, within the generous timeout_ms) crashed at each ask.
    (note,) = [line for line in said.splitlines() if "round_robin" in line]
    assert note == "hostd: note: rerank ranked as round_robin in 2 of 2 compositions: crashed 2"
    assert ("rerank", True) in degraded and ("score", False) in degraded
    assert ("files alone", False) in degraded


def test_shadow_replay_compares_the_recorded_verdict(tmp_path: Path) -> None:
    config, _ = _setup(tmp_path, "reverse")
    config.write_text(config.read_text() + "\n[shadow]\nenabled = true\nsample = 1.0\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        live = client.compose("the retry loop and the theme", budget=60, strategy="rerank")
        client.compose("the retry loop and the theme", budget=60, strategy="score")
    record = live.audit.policy["strategy_params"]["rerank"]
    assert record["model"] == "fixture@1" and record["reason"] is None

    def replay(policy: str) -> dict[str, Any]:
        done = _hostd("--config", str(config), "shadow", "replay", "--policy", policy, "--json")
        assert done.returncode == 0, done.stderr
        (report,) = json.loads(done.stdout)  # one report per --policy
        assert isinstance(report, dict)
        return report

    def by_live(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {r["live_policy"]: r for r in report["replays"]}

    # Each record replays its own recorded verdict: the reranked one composes the same
    # frames again; the one the live policy ranked by score has none, so round_robin.
    reranked = by_live(replay("rerank"))
    assert reranked["rerank"]["overlap"] == 1.0 and reranked["rerank"]["newly_included"] == []
    assert reranked["score"] == by_live(replay("round_robin"))["score"]
    # Its note counts what ranked by the fallback: the one record with no verdict.
    done = _hostd("--config", str(config), "shadow", "replay", "--policy", "rerank")
    notes = [line for line in done.stderr.splitlines() if line.startswith("hostd: note: rerank")]
    assert notes == [
        "hostd: note: rerank replays each record's recorded verdict; 1 of 2 records hold none "
        "(composed under another policy) and rank as round_robin"
    ], done.stderr
