"""providers.files: a file is found by the words people use for it, not only by its own."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import STOPWORDS, surface_forms, tokenize


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
