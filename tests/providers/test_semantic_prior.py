"""The ``semantic`` ranking's test prior (``providers._prior``), as ``files`` has it: a
test file's chunks count for less than the code they test, whatever the sign of their
cosine, unless the query asks about tests; an anchor still leads; ``--test-prior 1``
turns it off. In-process indexes with stand-in embedders, and the provider program
with its model (``--test-prior`` on its command line)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hostd.protocol import ContextFrame, ContextQuery
from providers import CorpusOptions
from providers._prior import DEFAULT_TEST_PRIOR
from providers.semantic import (
    Embedder,
    EmbeddingCache,
    SemanticIndex,
    SemanticProvider,
    main,
    semantic_unavailable,
)
from tests.fixtures.bow_embedder import DIM, GatedEmbedder

from ._stdio import StdioPeer

HOW = "how does the runner capture the output of a command"

IMPL = "src/runner.py"
TEST = "tests/test_runner.py"


def _tree(root: Path) -> Path:
    """The code, and a test of it that repeats the question's words more than the code
    does: by cosine alone the test is nearer (checked in each test, not assumed)."""
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / IMPL).write_text(
        "def invoke(self, cli, args):\n"
        '    """Run the command in isolation and return a Result."""\n'
        "    with self.isolation() as (stdout, stderr):\n"
        "        code = cli.main(args=args, standalone_mode=False)\n"
        "    return Result(stdout.getvalue(), stderr.getvalue(), code)\n"
    )
    (root / TEST).write_text(
        "def test_runner_captures_the_output_of_a_command(runner):\n"
        "    # the runner captures the output of a command\n"
        "    result = runner.invoke(hello)\n"
        "    assert result.output == 'hello\\n'\n"
    )
    return root


def _index(
    root: Path,
    cache: Path,
    embedder: Embedder,
    test_prior: float = DEFAULT_TEST_PRIOR,
    min_score: float = 0.0,
) -> SemanticIndex:
    ix = SemanticIndex(
        CorpusOptions(root=root),
        embedder,
        EmbeddingCache(cache, embedder.fingerprint, embedder.dim),
        min_score=min_score,
        refresh_interval_s=0.0,
        test_prior=test_prior,
    )
    ix.refresh(force=True)
    return ix


def _query(goal: str, *anchors: str, query_text: str | None = None) -> ContextQuery:
    return ContextQuery(
        goal=goal,
        query_text=query_text,
        anchors=list(anchors),
        max_frames=20,
        max_tokens=100_000,
    )


def _files(frames: Sequence[ContextFrame]) -> list[str]:
    return [f.id.rpartition("#")[0] for f in frames]


@pytest.mark.anyio
async def test_the_code_outranks_a_test_nearer_the_question(tmp_path: Path) -> None:
    root = _tree(tmp_path / "tree")
    embedder = GatedEmbedder()
    # By cosine alone the test is nearer: it leads.
    plain = _index(root, tmp_path / "plain.db", embedder, test_prior=1.0)
    assert _files(plain.answer(_query(HOW)).frames) == [TEST, IMPL]
    provider = SemanticProvider(_index(root, tmp_path / "prior.db", embedder))
    result = await provider.query(_query(HOW))
    frames = [ContextFrame.model_validate(f) for f in result.frames]
    assert _files(frames) == [IMPL, TEST]
    scores = [f.score for f in frames]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)


def test_a_query_about_tests_ranks_them_by_cosine(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path / "tree"), tmp_path / "c.db", GatedEmbedder())
    assert _files(ix.answer(_query(HOW)).frames)[0] == IMPL  # the prior, as above
    asked = _query("which tests check that the runner captures the output of a command")
    assert _files(ix.answer(asked).frames)[0] == TEST
    # The goal names tests though the text searched does not: the prior is off too.
    named = _query("write tests for it", query_text=HOW)
    assert _files(ix.answer(named).frames)[0] == TEST
    assert ix.search("tests: " + HOW)[0].chunk.rel == TEST


def test_an_anchored_test_file_still_leads(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path / "tree"), tmp_path / "c.db", GatedEmbedder())
    frames = ix.answer(_query(HOW, TEST)).frames
    assert _files(frames) == [TEST, IMPL]
    assert frames[0].score >= 0.5 > frames[1].score  # the anchored band, as without tests


class Flat:
    """Every text the same vector: a query by a vector scores every chunk alike, its
    cosine the sign of the query's one component."""

    dim = DIM
    fingerprint = "flat/64/l2"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        out[:, 0] = 1.0
        return out


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_test_chunk_ranks_below_code_of_the_same_cosine_whatever_its_sign(
    tmp_path: Path, sign: float
) -> None:
    root = tmp_path / "tree"
    (root / "tests").mkdir(parents=True)
    (root / "widget.py").write_text("def widget():\n    return 1\n")
    (root / "tests" / "widget.py").write_text("def widget():\n    return 1\n")
    vector = [sign] + [0.0] * (DIM - 1)
    plain = _index(root, tmp_path / "plain.db", Flat(), test_prior=1.0, min_score=-1.0)
    hits = plain.search(None, vector)
    # Tied, by chunk id: the test's comes first.
    assert [(h.chunk.rel, h.score) for h in hits] == [
        ("tests/widget.py", sign),
        ("widget.py", sign),
    ]
    ix = _index(root, tmp_path / "prior.db", Flat(), min_score=-1.0)
    # -1 multiplied by 0.5 would be -0.5, above the code's -1: a negative one is divided.
    assert [(h.chunk.rel, h.score) for h in ix.search(None, vector)] == [
        ("widget.py", sign),
        ("tests/widget.py", sign * 0.5 if sign > 0 else sign / 0.5),
    ]


@pytest.mark.parametrize("value", ["0", "1.5", "-1", "nan", "half"])
def test_a_test_prior_outside_its_range_is_refused(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--root", str(tmp_path), "--test-prior", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--test-prior: {value} is outside (0, 1]" in err or "not a number: 'half'" in err


_REASON = semantic_unavailable()


#: Each provider's wait for its model and first answer: a hang guard.
_MODEL_GUARD_S = 400


@pytest.mark.slow
@pytest.mark.skipif(_REASON is not None, reason=f"semantic extra: {_REASON}")
@pytest.mark.anyio
@pytest.mark.timeout(2 * _MODEL_GUARD_S + 60)  # two providers, each loading the model
async def test_the_test_prior_is_set_on_the_command_line(tmp_path: Path) -> None:
    # The packaged model, as a user runs it: it too finds the test nearer the question.
    # Two provider processes, each importing torch and loading the model: about ten
    # seconds of CPU each, so a minute or more of wall time with both cores busy. One
    # torch thread: with one per core, its spinning pool fights the suite's other
    # workers and each embedding takes ten times the CPU (a build of two chunks ran
    # 100 s that way).
    root = _tree(tmp_path / "tree")
    query = {"query": {"goal": HOW, "max_frames": 5, "max_tokens": 2000}}
    leads: dict[str, str] = {}
    for prior in ("default", "1"):
        option = [] if prior == "default" else ["--test-prior", prior]
        cache = tmp_path / "c.db"
        args = ["-m", "providers.semantic", "--root", str(root), "--cache", str(cache), *option]
        async with StdioPeer(args, env={"OMP_NUM_THREADS": "1"}) as peer:
            await peer.handshake()
            result = await peer.call("context/query", query, within_s=_MODEL_GUARD_S)
            leads[prior] = result["frames"][0]["citation_label"].split(" ")[0]
    assert leads == {"default": IMPL, "1": TEST}
