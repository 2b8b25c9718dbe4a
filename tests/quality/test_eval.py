"""``hostd eval``: question sets are read strictly, gold is matched by file and phrase,
and the harness runs end to end through real provider processes."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from hostd.chunking._tokens import counter_identity
from hostd.quality import (
    Gold,
    Outcome,
    QuestionSetError,
    load_questions,
    paired,
    parse_questions,
    render_paired,
    render_table,
    summarise,
    to_json,
)
from hostd.quality import holds_gold as holds
from providers import chunk_file
from tests.fixtures.cli import run_hostd as _hostd
from tests.fixtures.file_frames import file_frame

ROOT = Path(__file__).resolve().parents[2]

LINE = {
    "id": "q1",
    "question": "when does the retry loop give up",
    "gold": [{"file": "notes.md", "phrase": "gives up after three attempts"}],
    "style": "lexical",
}


def _lines(*objs: object) -> str:
    return "\n".join(json.dumps(o) for o in objs) + "\n"


def test_a_question_set_reads_every_line() -> None:
    other = {**LINE, "id": "q2", "style": "paraphrase"}
    questions = parse_questions(_lines(LINE, other) + "\n")
    assert [(q.id, q.style) for q in questions] == [("q1", "lexical"), ("q2", "paraphrase")]
    assert questions[0].gold == [Gold(file="notes.md", phrase="gives up after three attempts")]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json\n", "q.jsonl:1: not JSON"),
        (_lines(LINE, {**LINE, "hint": "x"}), "q.jsonl:2: hint: unknown member"),
        (_lines({**LINE, "style": "vague"}), "q.jsonl:1: style:"),
        (_lines({**LINE, "gold": []}), "q.jsonl:1: gold:"),
        (_lines(LINE, LINE), "q.jsonl:2: id 'q1' repeats"),
        ("\n\n", "q.jsonl: no questions"),
    ],
    ids=["json", "unknown-member", "style", "no-gold", "repeated-id", "empty"],
)
def test_a_bad_question_set_names_the_line_and_member(text: str, problem: str) -> None:
    with pytest.raises(QuestionSetError) as exc:
        parse_questions(text, source="q.jsonl")
    assert str(exc.value).startswith(problem)


def test_gold_needs_the_file_and_the_phrase() -> None:
    gold = [Gold(file="docs/notes.md", phrase="Gives up  after\nthree")]
    assert holds(file_frame("docs/notes.md", "the loop gives up after three tries\n"), gold)
    # the same words in another file, or a file that only ends in the same name
    assert not holds(file_frame("docs/other.md", "the loop gives up after three tries\n"), gold)
    assert not holds(file_frame("xdocs/notes.md", "the loop gives up after three tries\n"), gold)
    assert not holds(file_frame("docs/notes.md", "the loop never gives up\n"), gold)


def test_the_table_counts_recall_per_style_and_budget() -> None:
    questions = parse_questions(_lines(LINE, {**LINE, "id": "q2", "style": "paraphrase"}))
    outcomes = [
        Outcome("q1", "lexical", 500, "score", True, 400),
        Outcome("q2", "paraphrase", 500, "score", False, 200),
        Outcome("q1", "lexical", 100, "score", False, 90),
        Outcome("q2", "paraphrase", 100, "score", False, 80),
    ]
    rows = summarise(outcomes)
    assert [(r.budget, r.policy, r.all_hits, r.mean_tokens) for r in rows] == [
        (100, "score", 0, 85.0),
        (500, "score", 1, 300.0),
    ]
    table = render_table(questions, rows)
    assert "budget 100" in table and table.index("budget 100") < table.index("budget 500")
    assert "score   1/1 100%      0/1   0%      1/2  50%      300" in table


def test_paired_counts_the_questions_two_policies_disagree_on() -> None:
    outcomes = [
        Outcome("q1", "lexical", 500, "score", True, 1),
        Outcome("q2", "lexical", 500, "score", False, 1),
        Outcome("q3", "paraphrase", 500, "score", True, 1),
        Outcome("q1", "lexical", 500, "rrf", False, 1),  # lost
        Outcome("q2", "lexical", 500, "rrf", True, 1),  # gained
        Outcome("q3", "paraphrase", 500, "rrf", True, 1),  # same
        Outcome("q1", "lexical", 500, "(offered)", True, 1),  # never a row of its own
        Outcome("q2", "lexical", 900, "rrf", True, 1),  # no baseline at 900: no pair
    ]
    (pair,) = paired(outcomes, "score")  # nothing at 900: score has no row there
    assert (pair.budget, pair.policy) == (500, "rrf")
    assert pair.gained == {"lexical": 1, "paraphrase": 0}
    assert pair.lost == {"lexical": 1, "paraphrase": 0}
    # equal recall (1 of 2 lexical each) hides two disagreements; the table shows them
    assert "rrf     +1 -1" in render_paired([pair])
    assert paired(outcomes, "margin") == []  # no baseline row at all
    assert to_json([], outcomes)["paired"][0]["lost"] == {"lexical": 1, "paraphrase": 0}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three attempts.\n")
    (tree / "palette.md").write_text("# Palette\n\nThe theme uses teal and orange accents.\n")
    command = ["python", "-m", "providers.files", "--root", str(tree)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(command)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"  # generous: the leg's deadline includes a lazy start
    )
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        _lines(
            LINE,
            {
                "id": "colours",
                "question": "which colours decorate the interface",
                "gold": [{"file": "palette.md", "phrase": "teal and orange"}],
                "style": "paraphrase",
            },
            {
                "id": "accents",
                "question": "teal orange accents",
                "gold": [{"file": "palette.md", "phrase": "teal and orange"}],
                "style": "lexical",
            },
        )
    )
    return config, questions


def test_eval_without_the_baseline_says_why_no_paired_table(setup: tuple[Path, Path]) -> None:
    config, questions = setup
    args = ["--config", str(config), "eval", "--questions", str(questions), "--budget", "300"]
    alone = _hostd(*args, "--policy", "rrf")
    assert alone.returncode == 0, alone.stderr
    assert "question by question" not in alone.stdout
    (note,) = [x for x in alone.stderr.splitlines() if "+gained -lost table" in x]
    assert note.endswith("which was not run: add --policy score to see it")
    both = _hostd(*args, "--policy", "rrf", "--policy", "score")
    assert "against score, question by question" in both.stdout
    assert "+gained -lost table" not in both.stderr


def test_a_question_whose_gold_no_provider_offers_is_named(setup: tuple[Path, Path]) -> None:
    config, questions = setup
    typo = {
        "id": "typo",
        "question": "teal orange accents",
        "gold": [{"file": "palette.md", "phrase": "teal and ornage"}],
        "style": "lexical",
    }
    questions.write_text(questions.read_text() + json.dumps(typo) + "\n")
    args = ["--config", str(config), "eval", "--questions", str(questions), "--budget", "300"]
    done = _hostd(*args, "--policy", "rrf")
    assert done.returncode == 0, done.stderr
    (note,) = [x for x in done.stderr.splitlines() if "no provider offered the gold" in x]
    # The paraphrase no lexical provider finds is named too: nothing could recall it.
    assert "of 2 question(s) at any budget (colours, typo)" in note, note
    assert "check their gold file and phrase" in note


def test_eval_runs_end_to_end_and_prints_recall(setup: tuple[Path, Path]) -> None:
    config, questions = setup
    args = ["--config", str(config), "eval", "--questions", str(questions)]
    done = _hostd(*args, "--budget", "300", "--budget", "5", "--policy", "rrf", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["styles"] == {"lexical": 2, "paraphrase": 1}
    table = {(r["budget"], r["policy"]): r["recall"] for r in result["table"]}
    assert list(table) == [
        (5, "rrf"),
        (5, "files alone"),
        (5, "(offered)"),
        (300, "rrf"),
        (300, "files alone"),
        (300, "(offered)"),
    ]
    # Lexical search finds both lexical questions and not the paraphrase; a
    # 5-token budget holds neither passage, though the providers offered them.
    for policy in ("rrf", "files alone", "(offered)"):
        assert table[300, policy]["lexical"] == {"hits": 2, "total": 2}
        assert table[300, policy]["paraphrase"] == {"hits": 0, "total": 1}
    assert table[5, "rrf"]["all"] == {"hits": 0, "total": 3}
    hits = {(o["question"], o["budget"], o["policy"]) for o in result["outcomes"] if o["hit"]}
    assert ("accents", 300, "rrf") in hits and ("colours", 300, "rrf") not in hits

    done = _hostd(*args, "--budget", "300")
    assert done.returncode == 0, done.stderr
    recall, against = done.stdout.split("\n\nagainst score, question by question")
    lines = recall.splitlines()
    assert lines[2:4] == ["budget 300", lines[3]] and lines[3].startswith("policy ")
    assert [line.split()[0] for line in lines[4:]] == [
        "score",
        "round_robin",
        "quota:1",
        "rrf",
        "margin",
        "mmr",
        "calibrated",  # no calibration file here: round_robin, as its audit says
        "files",
        "(offered)",
    ]
    # every other row against the default, question by question ((offered) is no policy)
    rows = against.splitlines()[4:]
    others = ["round_robin", "quota:1", "rrf", "margin", "mmr", "calibrated", "files"]
    assert [r.split()[0] for r in rows] == others
    assert all(re.fullmatch(r"\S+( alone)? +(\+\d+ -\d+ *){3}", r) for r in rows), rows


def test_eval_refuses_a_misspelt_policy_or_question_set(setup: tuple[Path, Path]) -> None:
    config, questions = setup
    done = _hostd(
        "--config", str(config), "eval", "--questions", str(questions), "--policy", "best"
    )
    assert done.returncode == 2  # a usage error, as --strategy's
    assert "--policy: unknown strategy 'best'" in done.stderr and "Traceback" not in done.stderr
    questions.write_text(_lines({**LINE, "gold": "notes.md"}))
    done = _hostd("--config", str(config), "eval", "--questions", str(questions))
    assert done.returncode == 1
    assert f"{questions}:1: gold:" in done.stderr and "Traceback" not in done.stderr


def test_a_provider_that_fails_is_reported_not_hidden(setup: tuple[Path, Path]) -> None:
    config, questions = setup
    broken = ["python", "-c", "import sys; sys.exit(3)"]
    config.write_text(
        config.read_text()
        + f'\n[[provider]]\nid = "broken"\ncommand = {json.dumps(broken)}\ncwd = "{ROOT}"\n'
    )
    args = ["--config", str(config), "eval", "--questions", str(questions), "--budget", "300"]
    done = _hostd(*args, "--policy", "rrf", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    rows = {r["policy"]: r["recall"]["lexical"] for r in result["table"]}
    assert rows["rrf"] == rows["files alone"] == {"hits": 2, "total": 2}
    assert rows["broken alone"] == {"hits": 0, "total": 2}
    assert result["degraded"] == 3 * 3  # rrf, (offered) and broken alone, per question
    assert "compositions had a provider that did not answer ok" in done.stderr
    assert "broken alone at 300" in done.stderr and "files alone" not in done.stderr


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _repo_corpus_module() -> Any:
    spec = importlib.util.spec_from_file_location("repo_corpus", ROOT / "evals" / "repo_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=["repo", "stdlib"])
def public_corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """A public set's name and its corpus: the repository's pinned commit, exported as
    evals/repo_corpus.py does, or this interpreter's standard library."""
    name: str = request.param
    if name == "stdlib":
        if sys.version_info[:2] != (3, 11):
            pytest.skip("evals/stdlib.jsonl quotes CPython 3.11's sources")
        return name, Path(sysconfig.get_paths()["stdlib"])
    repo_corpus = _repo_corpus_module()
    target = tmp_path_factory.mktemp("repo-corpus")
    try:
        repo_corpus.export(repo_corpus.PINNED, target)
    except OSError as exc:  # not a git checkout, or a shallow one
        pytest.skip(f"the pinned corpus commit cannot be read: {exc}")
    return name, target


def test_every_gold_phrase_of_a_public_set_is_in_its_file(
    public_corpus: tuple[str, Path],
) -> None:
    name, corpus = public_corpus
    questions = load_questions(ROOT / "evals" / f"{name}.jsonl")
    styles = {q.style for q in questions}
    assert styles == {"lexical", "paraphrase"}
    missing = [
        (q.id, g.file)
        for q in questions
        for g in q.gold
        if not (corpus / g.file).is_file()
        or _fold(g.phrase) not in _fold((corpus / g.file).read_text(encoding="utf-8"))
    ]
    assert missing == []


def test_every_question_has_a_gold_phrase_inside_one_chunk(
    public_corpus: tuple[str, Path],
) -> None:
    """A phrase cut by a chunk boundary is in no frame: no policy could recall it, so
    such a question would only lower every row alike. The chunks are the bundled
    providers' (the model tokenizer's count, so it needs the semantic extra)."""
    if counter_identity() == "estimate":
        pytest.skip("chunk boundaries follow the model tokenizer (the semantic extra)")
    name, corpus = public_corpus
    questions = load_questions(ROOT / "evals" / f"{name}.jsonl")
    chunks: dict[str, list[str]] = {}
    for q in questions:
        for g in q.gold:
            if g.file not in chunks:
                path = corpus / g.file
                chunks[g.file] = [
                    _fold(c.text) for c in chunk_file(path, g.file, path.read_bytes())
                ]
    cut = [
        q.id
        for q in questions
        if not any(_fold(g.phrase) in text for g in q.gold for text in chunks[g.file])
    ]
    assert cut == []


async def _eval_in_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, states: dict[str, str]
) -> list[str]:
    """``hostd eval``'s steps against a session that records each call, and a
    ``run_eval`` that records its own start: the order they came in."""
    import contextlib

    from hostd import quality
    from hostd.cli import _quality
    from hostd.cli._main import build_parser
    from hostd.config import Config

    steps: list[str] = []

    class _Recording:
        async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
            steps.append(method)
            return {"providers": states} if method == "providers/warm" else {}

    @contextlib.asynccontextmanager
    async def session(*_: Any, **__: Any) -> Any:
        yield _Recording()

    async def run_eval(*_: Any, **__: Any) -> list[Any]:
        steps.append("questions")
        return []

    monkeypatch.setattr(_quality, "session", session)
    monkeypatch.setattr(quality, "run_eval", run_eval)
    questions = tmp_path / "q.jsonl"
    questions.write_text(_lines(LINE))
    args = build_parser().parse_args(["eval", "--questions", str(questions), "--json"])
    await _quality.eval_command(Config(), args)
    return steps


@pytest.mark.anyio
async def test_eval_asks_its_questions_once_every_index_is_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A provider answering from what it has built so far (semantic while it embeds)
    # would make the figures depend on how far its build got: warmed first.
    states = {"files": "ready", "semantic": "ready"}
    assert await _eval_in_process(monkeypatch, tmp_path, states) == [
        "providers/warm",
        "questions",
    ]
    assert "not ready" not in capsys.readouterr().err
    states = {"files": "ready", "semantic": "failed: no model"}
    await _eval_in_process(monkeypatch, tmp_path, states)
    err = capsys.readouterr().err
    assert "not ready before the questions: semantic (failed: no model)" in err
