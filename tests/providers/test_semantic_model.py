"""``providers.semantic --model``: another embedding model, named by its own fingerprint (E1)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from providers._model_id import model_identity

from ._stdio import StdioPeer

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None, reason="needs the semantic extra"
)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_model_of_its_own_is_embedded_with_and_declared(tmp_path: Path) -> None:
    from tests.fixtures.tiny_cross_encoder import build

    model = build(tmp_path / "tiny-bi", head=False)  # 32 dimensions, random weights
    root = tmp_path / "tree"
    root.mkdir()
    (root / "notes.md").write_text("# Cache\n\nthe cache miss is a frame budget\n")
    args = ["-m", "providers.semantic", "--root", str(root), "--cache", str(tmp_path / "c.db")]
    async with StdioPeer([*args, "--model", str(model), "--min-score", "-1"]) as peer:
        ack = await peer.handshake()
        fingerprint = f"{model_identity(str(model))}/32/l2"
        assert ack["capabilities"]["embeddings_fingerprint"] == fingerprint
        result = await peer.call(
            "context/query",
            {"query": {"goal": "the cache miss", "max_frames": 2, "max_tokens": 1000}},
            within_s=110,
        )
        assert result["frames"] and result["frames"][0]["uri"].endswith("notes.md")
