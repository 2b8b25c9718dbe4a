"""``providers.rerank`` with a tiny locally built cross-encoder, behind a real daemon:
the composition's order is the model's own order of the candidates, mapped back to frames."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from hostd.client import connect
from hostd.compose import rerank_request
from hostd.protocol import ContextFrame, FrameId
from tests.providers.test_rerank import QUERY, expected_order
from tests.server.conftest import ROOT

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("sentence_transformers") is None,
        reason="needs the semantic extra",
    ),
    pytest.mark.slow,  # among the suite's longest: run first (tests/conftest.py)
]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    from tests.fixtures.tiny_cross_encoder import build

    return build(tmp_path / "tiny-ce")


@pytest.mark.slow
@pytest.mark.anyio
async def test_through_the_daemon_the_composition_follows_the_model(
    start_daemon: Any, marker: str, tiny: Path
) -> None:
    from providers.rerank import model_identity

    cmd = ", ".join(
        f'"{w}"'
        for w in ["python", "-m", "providers.rerank", "--model", str(tiny), "--max-length", "64"]
    )
    extra = f'[reranker]\ncommand = [{cmd}, "--batch-size", "3"]\ncwd = "{ROOT}"\n'
    extra += f'env = {{ HOSTD_TEST_TAG = "{marker}" }}\ntimeout_ms = 60000\n'
    daemon = await start_daemon(
        providers={"alpha": {"frames": 4}, "beta": {"frames": 4}},
        extra=extra,
        start_providers="boot",
    )
    # Started with the daemon: its handshake, hence "serving", comes after the model loaded.
    async with connect(daemon.socket) as client:
        result = await client.compose(QUERY, budget=4000, strategy="rerank")
        query = await client.query(QUERY, budget=4000)
    frames = [
        (pid, ContextFrame.model_validate(f))
        for pid in query["frames"]
        for f in query["frames"][pid]
    ]
    request = rerank_request(frames, 100)
    keys = [c["key"] for c in request.candidates]
    texts = [f"{c['title']}\n{c['content']}" for c in request.candidates]
    want = [request.keys[int(k)] for k in expected_order(tiny, QUERY, keys, texts)]
    record = result.audit.policy["strategy_params"]["rerank"]
    assert (record["model"], record["reason"]) == (model_identity(str(tiny)), None)
    assert [FrameId.from_wire(f) for f in record["order"]] == want
    assert await daemon.stop() == 0
