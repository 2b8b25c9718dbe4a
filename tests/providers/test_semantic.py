"""providers.semantic: real embeddings find paraphrases that lexical search misses.

Runs only with the ``semantic`` extra installed (CI installs it); otherwise
every test here is skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.protocol import (
    ContextQuery,
    FrameIdentity,
    address_line_range,
    check_frame,
    sha256_digest,
)
from providers import CorpusOptions, verify_chunk
from providers.files import FileIndex
from providers.semantic import (
    DIM,
    FINGERPRINT,
    EmbeddingCache,
    EmbeddingMismatch,
    MiniLMEmbedder,
    SemanticIndex,
    semantic_unavailable,
)

from ._stdio import StdioPeer

_REASON = semantic_unavailable()
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=f"semantic extra: {_REASON}"),
    pytest.mark.slow,
]

PARAPHRASE = "how are subprocesses shut down cleanly"


def _q(text: str, **kw: object) -> ContextQuery:
    base: dict[str, object] = {"goal": text, "max_frames": 5, "max_tokens": 10_000}
    base.update(kw)
    return ContextQuery.model_validate(base)


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "proc.py").write_text(
        "def terminate_children(pool):\n"
        '    """Send SIGTERM to every worker and reap each one before exiting."""\n'
        "    for worker in pool:\n        worker.kill()\n        worker.join()\n"
    )
    (root / "palette.md").write_text(
        "# Palette\n\nThe theme uses teal and orange accents for buttons and links.\n"
    )
    (root / "money.py").write_text(
        "def convert(amount, rate):\n    # exchange euros into dollars at the given rate\n"
        "    return amount * rate\n"
    )
    return root


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def _index(root: Path, cache: Path, embedder: MiniLMEmbedder) -> SemanticIndex:
    ix = SemanticIndex(
        CorpusOptions(root=root),
        embedder,
        EmbeddingCache(cache, FINGERPRINT, DIM),
        refresh_interval_s=0.0,
    )
    ix.refresh(force=True)
    return ix


def test_paraphrase_finds_what_lexical_search_misses(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    root = _tree(tmp_path / "tree")
    lexical = FileIndex(CorpusOptions(root=root), refresh_interval_s=0.0)
    lexical.refresh(force=True)
    assert [h.chunk.rel for h in lexical.search(PARAPHRASE)] == []
    ix = _index(root, tmp_path / "cache.db", embedder)
    frames = ix.answer(_q(PARAPHRASE)).frames
    assert frames[0].citation_label == "proc.py L1-5"
    scores = [f.score for f in frames]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


def test_frames_digest_the_bytes_on_disk_and_verify(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    root = _tree(tmp_path / "tree")
    ix = _index(root, tmp_path / "cache.db", embedder)
    for f in ix.answer(_q("teal buttons")).frames:
        assert check_frame(f) == []
        (prov,) = f.provenance
        data = (root / f.id.split("#")[0]).read_bytes()
        assert prov.digest == sha256_digest(address_line_range(data, prov.range))
        ident = FrameIdentity(provider_id="s", frame_id=f.id, content_digest=f.content_digest)
        assert verify_chunk(root, ident).status == "valid"


def test_cached_embeddings_are_reused_and_changes_reembedded(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    root = _tree(tmp_path / "tree")
    first = _index(root, tmp_path / "cache.db", embedder)
    assert first.embedded_last == 3
    second = _index(root, tmp_path / "cache.db", embedder)
    assert second.embedded_last == 0  # every vector came from the disk cache
    (root / "money.py").write_text("def convert(amount):\n    return amount\n")
    second.refresh(force=True)
    assert second.embedded_last == 1


def test_query_vector_must_match_the_declared_dimension(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    ix = _index(_tree(tmp_path / "tree"), tmp_path / "cache.db", embedder)
    with pytest.raises(EmbeddingMismatch):
        ix.answer(_q("x", embedding=[0.1, 0.2]))
    vector = [float(x) for x in embedder.encode([PARAPHRASE])[0]]
    frames = ix.answer(_q("unrelated words", embedding=vector)).frames
    assert frames[0].citation_label == "proc.py L1-5"


def test_kinds_filter_binds(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    ix = _index(_tree(tmp_path / "tree"), tmp_path / "cache.db", embedder)
    assert {f.kind for f in ix.answer(_q(PARAPHRASE, kinds=["doc"])).frames} <= {"doc"}
    assert ix.answer(_q(PARAPHRASE, kinds=["fact"])).frames == []


@pytest.mark.anyio
async def test_semantic_provider_serves_a_query_over_stdio(tmp_path: Path) -> None:
    root = _tree(tmp_path / "tree")
    args = ["-m", "providers.semantic", "--root", str(root), "--cache", str(tmp_path / "c.db")]
    async with StdioPeer(args) as peer:
        ack = await peer.handshake()
        assert ack["capabilities"]["embeddings_fingerprint"] == "all-minilm-l6-v2/384/l2"
        result = await peer.call(
            "context/query",
            {"query": {"goal": PARAPHRASE, "max_frames": 2, "max_tokens": 1000}},
            within_s=110,
        )
        assert result["frames"][0]["citation_label"] == "proc.py L1-5"
        bad = await peer.request(
            "context/query",
            {"query": {"goal": "x", "embedding": [1.0], "max_frames": 2, "max_tokens": 1000}},
        )
        assert bad["error"]["data"]["cgp_code"] == "bad_request"


def test_files_and_semantic_serve_the_same_regions_and_compose_quotes_each_once(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    from hostd.compose import compose_for_prompt

    root = tmp_path / "tree"
    root.mkdir()
    (root / "guide.md").write_text(
        "".join(
            f"## Step {i}\n\nShut each worker process down cleanly, then reap it; "
            f"step {i} of the teardown waits for the child to exit before the next.\n\n"
            for i in range(30)
        )
    )
    lexical = FileIndex(CorpusOptions(root=root), refresh_interval_s=0.0)
    lexical.refresh(force=True)
    semantic = _index(root, tmp_path / "cache.db", embedder)
    assert [c.chunk_id for c in lexical.corpus.chunks] == [
        c.chunk_id for c in semantic.corpus.chunks
    ]
    assert len(lexical.corpus.chunks) > 3
    query = _q("how are worker processes shut down", max_frames=50)
    frames = [("files", f) for f in lexical.answer(query).frames]
    frames += [("semantic", f) for f in semantic.answer(query).frames]
    assert len({f.id for _, f in frames}) < len(frames)  # the providers overlap
    composed = compose_for_prompt(frames, 100_000)
    ranges = [c.frame.frame_id for c in composed.citations]
    assert len(ranges) == len(set(ranges))  # every region is quoted once
    duplicates = [e for e in composed.audit.entries if e.reason == "duplicate"]
    assert len(duplicates) == len(frames) - len(ranges)
