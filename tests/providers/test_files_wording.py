"""providers.files: a file is found by the words people use for it, not only by its own.

The ranking tests run over a fixed corpus (``_go_monorepo``), so they are deterministic:
the same chunks, the same BM25 scores, the same order, whatever the machine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import STOPWORDS, _terms, surface_forms, tokenize
from providers import CorpusOptions
from providers.files import FileIndex
from providers.files._paths import path_terms

from ._go_monorepo import GO_MONOREPO


@pytest.mark.parametrize(
    "words",
    [
        "generate generates generated generating",
        "make makes making",
        "retry retries",
        "policy policies",
        "cache caches cached caching",
    ],
)
def test_a_words_forms_are_one_term(words: str) -> None:
    assert len({t for w in words.split() for t in tokenize(w)}) == 1


@given(st.from_regex(r"[a-z]{1,14}", fullmatch=True))
def test_every_term_of_a_word_is_found_by_a_surface_form_in_it(word: str) -> None:
    # The MCP binding tokenizes only the runs that hold a surface form of a query term.
    for term in tokenize(word):
        assert any(form in word for form in surface_forms(term)), (word, term)
    assert all(form not in STOPWORDS for term in tokenize(word) for form in surface_forms(term))


@pytest.mark.parametrize(
    ("rel", "words"),
    [
        ("services/payments/Dockerfile", "docker image"),
        ("Dockerfile.dev", "docker image"),
        ("deploy/payments.Dockerfile", "docker image"),
        ("Makefile", "make target"),
        ("src/GNUmakefile", "make target"),
        ("Jenkinsfile", "jenkins pipeline"),
    ],
)
def test_a_well_known_file_name_adds_the_words_for_it(rel: str, words: str) -> None:
    assert set(tokenize(words)) <= set(path_terms(rel))
    assert path_terms(rel)[: len(tokenize(rel))] == tokenize(rel)


def test_a_name_that_only_ends_in_file_adds_no_words() -> None:
    assert path_terms("src/profile.go") == tokenize("src/profile.go")


@pytest.fixture(scope="module")
def monorepo(tmp_path_factory: pytest.TempPathFactory) -> FileIndex:
    root = tmp_path_factory.mktemp("monorepo")
    for rel, text in GO_MONOREPO.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    index = FileIndex(CorpusOptions(root=root), cache_path=None)
    index.build()
    return index


def _file_rank(index: FileIndex, question: str, answer: str) -> int | None:
    """Where ``answer`` comes among the files the ranking names, by its best chunk."""
    files: list[str] = []
    for hit in index.search(question):
        if hit.chunk.rel not in files:
            files.append(hit.chunk.rel)
    return files.index(answer) if answer in files else None


@pytest.mark.parametrize(
    ("question", "answer", "within"),
    [
        # "generates" is "generate" (the target runs ``buf generate``), "make" the name's.
        ("make target that generates proto code", "Makefile", 1),
        # "docker" and "image" are the name's words; the Terraform template, all about
        # the payments instances' images, still leads.
        ("how is the payments Docker image built", "services/payments/Dockerfile", 2),
        # Not the name's words alone: "regenerate" and "protobuf" are in no line of it
        # (buf.gen.yaml and go.mod come first); kept from falling further.
        ("how do I regenerate the protobuf Go code", "Makefile", 3),
        # The Go code that reads the retry settings comes first; kept from falling further.
        (
            "where is the retry policy for the payments client configured",
            "deploy/payments/config.yaml",
            4,
        ),
    ],
)
def test_the_answering_file_ranks_near_the_top(
    monorepo: FileIndex, question: str, answer: str, within: int
) -> None:
    rank = _file_rank(monorepo, question, answer)
    assert rank is not None and rank < within, rank


def test_terms_cached_before_the_path_words_are_derived_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "Dockerfile").write_text("FROM golang:1.22\nRUN go build ./...\n")
    cache = tmp_path / "cache" / "corpus.json"
    # The tag a cache had when it was keyed by the tokenizer's source alone.
    alone = hashlib.sha256(Path(_terms.__file__).read_bytes()).hexdigest()[:32]
    with monkeypatch.context() as patch:
        patch.setattr("providers.files._index._TERMS_TAG", alone)
        FileIndex(CorpusOptions(root=tmp_path / "tree"), cache_path=cache).build()
    again = FileIndex(CorpusOptions(root=tmp_path / "tree"), cache_path=cache)
    again.build()
    assert again.loaded_from_cache and again.tokenized_last == again.chunk_count > 0
    assert [h.chunk.rel for h in again.search("docker image")] == ["Dockerfile"]
