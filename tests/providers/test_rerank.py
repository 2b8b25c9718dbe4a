"""``providers.rerank``: a real cross-encoder (tiny, random, built here) behind hostd's reranker.

The order must follow the model's own scores, computed in the test with the same
model through sentence-transformers' ``CrossEncoder``; equal scores fall back to the
key. (Through the daemon: ``tests/server/test_rerank_model.py``.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from hostd.provider import ProviderServer

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("sentence_transformers") is None,
        reason="needs the semantic extra",
    ),
    pytest.mark.slow,  # among the suite's longest: run first (tests/conftest.py)
]

QUERY = "why does the cache miss"
TEXTS = ["the cache miss", "alpha beta gamma", "config load 3", "a frame budget", "rank order"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.fixtures.tiny_cross_encoder import build

    return build(tmp_path_factory.mktemp("tiny-ce"))


def expected_order(model_dir: Path, query: str, keys: list[str], texts: list[str]) -> list[str]:
    from sentence_transformers import CrossEncoder

    scores = CrossEncoder(str(model_dir), device="cpu", max_length=64).predict(
        [(query, t) for t in texts], show_progress_bar=False
    )
    return [k for _, k in sorted(zip((-float(s) for s in scores), keys, strict=True))]


def test_the_order_follows_the_models_own_scores(tiny: Path) -> None:
    from providers.rerank import CrossEncoderJudge, model_identity, order_by_scores

    judge = CrossEncoderJudge(str(tiny), max_length=64, batch_size=2)  # several batches
    keys = [str(i) for i in range(len(TEXTS))]
    scores = judge.scores(QUERY, TEXTS)
    assert len(set(scores)) == len(TEXTS)  # distinct: the order is the model's, not the keys'
    assert order_by_scores(keys, scores) == expected_order(tiny, QUERY, keys, TEXTS)
    assert judge.model == model_identity(str(tiny)) and judge.model.startswith(tiny.name + "@")


def test_equal_scores_are_ordered_by_key_and_nan_goes_last() -> None:
    from providers.rerank import order_by_scores

    assert order_by_scores(["b", "a", "d", "c"], [1.0, 1.0, float("nan"), 2.0]) == [
        "c",
        "a",
        "b",
        "d",
    ]


def test_the_input_read_is_bounded(tiny: Path) -> None:
    from providers.rerank import CrossEncoderJudge

    judge = CrossEncoderJudge(str(tiny), max_length=16)
    long = "the cache miss " * 100_000  # 1.5 MB: cut to max_chars, then to 16 word pieces
    assert judge.scores(QUERY, [long]) == judge.scores(QUERY, [long[: judge.max_chars]])
    assert judge.scores(QUERY, [long]) == judge.scores(QUERY, ["the cache miss " * 4])


@pytest.mark.anyio
async def test_the_rerank_method_answers_on_the_provider_runtime() -> None:
    from providers.rerank import RerankProvider

    class Flat:
        model = "flat@1"

        def scores(self, query: str, texts: Any) -> list[float]:
            return [0.0 if "b" in t else 1.0 for t in texts]

    server = ProviderServer(RerankProvider(Flat()))
    line = (
        b'{"jsonrpc":"2.0","id":1,"method":"rerank","params":{"query":"q","candidates":'
        b'[{"key":"2","content":"b"},{"key":"1","content":"b"},{"key":"0","content":"a"}]}}'
    )
    reply = await server.handle_line(line)
    assert reply is not None and b'"order":["0","1","2"]' in reply and b'"model":"flat@1"' in reply


def test_a_model_that_cannot_load_exits_3_saying_so(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "providers.rerank", "--model", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3 and "providers.rerank: cannot load" in done.stderr
