"""A query's anchors in the files and semantic providers (``providers._anchors``): the
files they name lead the answer, in any of the forms agents send, and a query without
anchors (or with none that names an indexed file) is answered as it always was."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.protocol import ContextFrame, ContextQuery
from providers import CorpusOptions, saturate
from providers._anchors import MAX_ANCHORS
from providers.files import BM25_HALF_SCORE, FileIndex
from providers.semantic import EmbeddingCache, SemanticIndex
from tests.fixtures.bow_embedder import DIM, GatedEmbedder

GOAL = "why does the retry loop give up"


def _q(*anchors: str, goal: str = GOAL) -> ContextQuery:
    return ContextQuery(goal=goal, anchors=list(anchors), max_frames=20, max_tokens=100_000)


def _tree(root: Path) -> Path:
    (root / "src" / "http").mkdir(parents=True)
    (root / "docs").mkdir()
    # net.py says "retry loop" often; client.py once, in a longer text: it ranks below.
    (root / "src" / "net.py").write_text(
        "def retry_loop(attempts):\n    # the retry loop gives up: retry loop, retry loop\n"
        "    return attempts\n"
    )
    (root / "src" / "http" / "client.py").write_text(
        "def fetch(url):\n    # sends the request once; the caller owns the retry loop\n"
        "    return open_connection(url, timeout=30, headers=default_headers())\n"
    )
    (root / "docs" / "my notes.md").write_text("# Notes\n\nWhen a retry gives up, log it.\n")
    (root / "docs" / "guide.md").write_text(
        "# Guide\n\nInstall the wombat.\n\n## Usage\n\nFeed the wombat daily.\n"
    )
    return root


def _files(root: Path) -> FileIndex:
    ix = FileIndex(CorpusOptions(root=root), refresh_interval_s=0.0)
    ix.refresh(force=True)
    return ix


def _ids(frames: list[ContextFrame]) -> list[str]:
    return [f.id for f in frames]


def _rel(frame: ContextFrame) -> str:
    return frame.id.rpartition("#")[0]


def test_an_anchored_chunk_with_a_lower_score_ranks_first(tmp_path: Path) -> None:
    ix = _files(_tree(tmp_path))
    plain = ix.answer(_q()).frames
    assert _rel(plain[0]) == "src/net.py"  # the strongest match without anchors
    anchored = ix.answer(_q("src/http/client.py")).frames
    assert _rel(anchored[0]) == "src/http/client.py"
    # Its score leads too, as a host ranks by score; the rest keep their order below it.
    assert anchored[0].score > max(f.score for f in anchored[1:])
    assert _ids(anchored[1:]) == [i for i in _ids(plain) if not i.startswith("src/http/")]
    assert sorted(_ids(anchored)) == sorted(_ids(plain))


@pytest.mark.parametrize(
    "form",
    [
        "relative",
        "dot-relative",
        "absolute",
        "absolute through ..",
        "file URI",
        "file URI with a range",
        "file://localhost URI",
    ],
)
def test_every_form_of_an_anchor_names_the_same_file(tmp_path: Path, form: str) -> None:
    root = _tree(tmp_path / "p")
    path = (root / "docs" / "my notes.md").resolve()
    anchor = {
        "relative": "docs/my notes.md",
        "dot-relative": "./docs/../docs/my notes.md",
        "absolute": str(path),
        "absolute through ..": f"{root}/src/../docs/my notes.md",
        "file URI": path.as_uri(),  # percent-encoded: my%20notes.md
        "file URI with a range": path.as_uri() + "#L1-3",
        "file://localhost URI": "file://localhost" + path.as_uri().removeprefix("file://"),
    }[form]
    ix = _files(root)
    assert _rel(ix.answer(_q()).frames[0]) != "docs/my notes.md"
    assert _rel(ix.answer(_q(anchor)).frames[0]) == "docs/my notes.md"


def test_an_absolute_anchor_through_a_link_to_the_root_names_its_file(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (tmp_path / "link").symlink_to(root)
    ix = _files(root)
    anchor = str(tmp_path / "link" / "src" / "http" / "client.py")
    assert _rel(ix.answer(_q(anchor)).frames[0]) == "src/http/client.py"


def test_a_directory_anchor_anchors_the_files_under_it(tmp_path: Path) -> None:
    ix = _files(_tree(tmp_path))
    frames = ix.answer(_q("docs/")).frames
    matched = [_rel(f) for f in frames]
    # docs/my notes.md matches and leads; docs/guide.md matches nothing and is not
    # offered (a directory's unmatched files would crowd the answer).
    assert matched[0] == "docs/my notes.md"
    assert "docs/guide.md" not in matched
    # A name's prefix is not its directory: "src/ht" anchors nothing.
    assert _ids(ix.answer(_q("src/ht")).frames) == _ids(ix.answer(_q()).frames)


def test_a_named_file_that_matches_nothing_still_offers_its_first_chunk(
    tmp_path: Path,
) -> None:
    ix = _files(_tree(tmp_path))
    assert "docs/guide.md" not in {_rel(f) for f in ix.answer(_q()).frames}
    frames = ix.answer(_q("docs/guide.md", "src/http/client.py")).frames
    # The anchored match first, then the named file's first chunk (its first section),
    # then the rest.
    assert [_rel(f) for f in frames[:2]] == ["src/http/client.py", "docs/guide.md"]
    assert frames[1].title == "docs/guide.md § Guide"
    assert frames[1].score > max(f.score for f in frames[2:])
    # A goal of words too common to search for still gets the file it names.
    assert ix.answer(_q(goal="what is this")).frames == []
    (only,) = ix.answer(_q("docs/guide.md", goal="what is this")).frames
    assert only.title == "docs/guide.md § Guide"


def test_anchors_that_name_nothing_indexed_change_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (tmp_path / "elsewhere.py").write_text("retry loop\n")
    ix = _files(root)
    plain = ix.answer(_q()).frames
    ignored = [
        "nope.py",  # not in the tree
        "retry_loop",  # a symbol name
        "https://example.com/src/net.py",  # another scheme
        "file://build-host/" + str(root / "src" / "net.py"),  # another machine's file
        str(tmp_path / "elsewhere.py"),  # outside the root
        "../elsewhere.py",
        ".",  # the root: anchoring every file is anchoring none
        str(root),
        "/" + "a/" * 2047,  # as long as a client may send
        "/bad\x00path",
        "",
    ]
    assert ix.answer(_q(*ignored)).frames == plain


def test_a_query_without_anchors_is_ranked_by_its_lexical_score_alone(tmp_path: Path) -> None:
    ix = _files(_tree(tmp_path))
    hits = ix.search(GOAL)
    frames = ix.answer(_q()).frames
    assert _ids(frames) == [h.chunk.chunk_id for h in hits]
    assert [f.score for f in frames] == [round(saturate(h.raw, BM25_HALF_SCORE), 6) for h in hits]
    assert [h.raw for h in hits] == sorted((h.raw for h in hits), reverse=True)


def test_only_the_first_anchors_are_read(tmp_path: Path) -> None:
    ix = _files(_tree(tmp_path))
    filler = [f"missing{i}.py" for i in range(MAX_ANCHORS - 1)]
    read = ix.answer(_q(*filler, "src/http/client.py")).frames
    assert _rel(read[0]) == "src/http/client.py"
    past = ix.answer(_q(*filler, "nope.py", "src/http/client.py")).frames
    assert past == ix.answer(_q()).frames


def _semantic(root: Path, cache: Path) -> SemanticIndex:
    embedder = GatedEmbedder()
    ix = SemanticIndex(
        CorpusOptions(root=root),
        embedder,
        EmbeddingCache(cache, embedder.fingerprint, DIM),
        min_score=0.3,
        refresh_interval_s=0.0,
    )
    ix.refresh(force=True)
    return ix


def test_semantic_ranks_an_anchored_chunk_first_and_offers_a_named_file(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "close.md").write_text("retry loop gives up\n")
    (root / "far.md").write_text("the retry loop is elsewhere, with more words around it\n")
    (root / "other.md").write_text("wombats eat grass\n")
    ix = _semantic(root, tmp_path / "cache.db")
    goal = "retry loop gives up"
    plain = ix.answer(_q(goal=goal)).frames
    assert [_rel(f) for f in plain] == ["close.md", "far.md"]  # other.md is below min_score
    assert ix.answer(_q("nope.md", goal=goal)).frames == plain
    frames = ix.answer(_q("far.md", "other.md", goal=goal)).frames
    assert [_rel(f) for f in frames] == ["far.md", "other.md", "close.md"]
    assert frames[0].score > frames[1].score > frames[2].score
