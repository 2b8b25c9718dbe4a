"""The test-file prior of the ``files`` and ``semantic`` rankings: which paths are
tests, which queries ask about them, and how a test chunk's score is lowered.

A test repeats the words of the code it tests many times over (every call, every
assertion, every fixture names them), so BM25 ranks a project's tests above the code
a developer asked about: on Django, "how does prefetch_related avoid N+1 queries" gave
15 test chunks of 17, and "how is the password hasher chosen and upgraded" none of
``django/contrib/auth/hashers.py``. An embedding does the same for the same reason: on
click, "how does CliRunner.invoke capture the output of a command" drew 12 chunks of
``tests/test_testing.py`` above ``src/click/testing.py``. A developer asking how
something works wants the code first; one asking about tests says so. So a test file's
chunks have their score scaled down (``DEFAULT_TEST_PRIOR``, ``lower_tests``) unless
the query names tests.

Both rules read names only, never a file's text: a chunk is a test by its path, or by
the code item it sits in where a language keeps unit tests inside the file they test
(Rust's ``#[cfg(test)] mod tests``), the same on every machine and at every rebuild.
"""

from __future__ import annotations

import argparse
import re

import numpy as np

from hostd.chunking import tokenize

__all__ = [
    "DEFAULT_TEST_PRIOR",
    "asks_about_tests",
    "is_test_chunk",
    "is_test_path",
    "lower_tests",
    "parse_test_prior",
]

#: The factor a test chunk's score is scaled by when the query does not ask about
#: tests; 1 leaves the ranking as the scores alone have it. Chosen for BM25 on ten
#: Django goals and the repository eval (docs/eval.md, "Tests in the ranking").
DEFAULT_TEST_PRIOR = 0.5

#: Directories that hold tests by the conventions of most ecosystems: ``tests/`` and
#: ``test/`` (Python, Rust, Java's ``src/test/``, Swift's ``Tests/``), ``__tests__/``
#: (Jest), ``spec/`` and ``specs/`` (RSpec, Jasmine, WebdriverIO's ``test/specs/``),
#: ``e2e/`` (end-to-end suites: Cypress's ``cypress/e2e/``, Playwright's, Angular's).
#: Compared case-folded. ``testing/`` is not one: it is as often a library's test
#: helpers that the library ships (``numpy/testing``). The one definition: the
#: ``files`` and ``semantic`` priors and ``semantic``'s build order all read it.
_TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec", "specs", "e2e"})

#: File names that are tests wherever they are, by each test runner's own discovery
#: rule: pytest's ``test_*.py``, ``*_test.py`` and its ``conftest.py``, Django's
#: ``tests.py``; Go's ``*_test.go``; Jest's, Vitest's and Mocha's ``*.test.js`` and
#: ``*.spec.js`` (and ``ts``, ``jsx``, ``tsx``, ``mjs``, ``cjs``); JUnit's
#: ``*Test.java`` and ``*Tests.java`` (and Kotlin's ``.kt``); RSpec's ``*_spec.rb``
#: and minitest's ``*_test.rb``. Case matters, as it does to those runners:
#: ``Contest.java`` is no test.
_TEST_NAME = re.compile(
    r"test_.*\.py|.*_test\.(?:py|go|rb)|conftest\.py|tests\.py|.*_spec\.rb"
    r"|.*\.(?:test|spec)\.(?:[cm]?js|jsx|ts|tsx)"
    r"|.*Tests?\.(?:java|kt)"
)

#: Query terms (as ``tokenize`` makes them, so "testing", "tested" and ``test_views``
#: count) that say the question is about tests: then tests are what it wants, ranked
#: as BM25 has them.
_TEST_TERMS = frozenset(
    term
    for word in (
        "test tests testing tested testcase unittest pytest conftest spec specs fixture fixtures"
    ).split()
    for term in tokenize(word)
)


#: The code item (``Chunk.item``, as ``code_items`` names it: ``mod tests › fn adds``)
#: of a unit-test module kept inside the file it tests: Rust's convention, a
#: ``#[cfg(test)] mod tests`` (or ``mod test``) at the end of the source file, whose
#: assertions repeat the file's names as a test file's do. Only Rust names an item
#: ``mod``.
_TEST_ITEM = re.compile(r"(?:.* › )?mod tests?(?: › .*)?")


def is_test_path(rel: str) -> bool:
    """Whether ``rel`` (a POSIX path relative to the root) is a test file: under a test
    directory (``_TEST_DIRS``) or named as one (``_TEST_NAME``)."""
    *dirs, name = rel.split("/")
    return any(d.lower() in _TEST_DIRS for d in dirs) or _TEST_NAME.fullmatch(name) is not None


def is_test_chunk(rel: str, item: str | None) -> bool:
    """Whether a chunk of ``rel`` whose first line sits in code item ``item`` is a
    test: its file is one (``is_test_path``), or it is inside a unit-test module of a
    source file (``_TEST_ITEM``: Rust's ``mod tests``)."""
    return is_test_path(rel) or (item is not None and _TEST_ITEM.fullmatch(item) is not None)


def asks_about_tests(*texts: str | None) -> bool:
    """Whether any of ``texts`` (a query's goal, its query text) names tests as a word."""
    return any(not _TEST_TERMS.isdisjoint(tokenize(text)) for text in texts if text)


def lower_tests(scores: np.ndarray, tests: np.ndarray, prior: float) -> np.ndarray:
    """``scores`` with each test chunk's (``tests``, a mask of the same length) moved
    down by ``prior`` (in ``(0, 1]``): a positive score multiplied by it, a negative
    one divided by it. A cosine can be negative (a ``--min-score`` below 0 keeps such
    chunks), and multiplied it would rise toward 0, above the code it tied with; so a
    test chunk ends below a non-test chunk of the same score whatever its sign (at 0
    both stay 0, tied as any two chunks are, by chunk id). Scaled, not lowered by a
    constant: one factor serves BM25 (unbounded) and cosine (-1 to 1) alike, where a
    constant would have to be chosen again on each scale. Scores of 0 and up, BM25's,
    come out exactly ``scores * prior`` where a test."""
    lowered = np.where(scores > 0, scores * prior, scores / prior)
    return np.where(tests, lowered, scores)


def parse_test_prior(text: str) -> float:
    """``--test-prior``: a number above 0 and at most 1 (0 would drop every test chunk
    from the ranking, even for a query that matches nothing else; above 1 would put
    tests first, the trouble it is there to fix)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"{text} is outside (0, 1]: a test chunk's score is multiplied by it (1: no prior)"
        )
    return value
