"""The test-file prior of the ``files`` ranking: which paths are tests, and which
queries ask about them.

A test repeats the words of the code it tests many times over (every call, every
assertion, every fixture names them), so BM25 ranks a project's tests above the code
a developer asked about: on Django, "how does prefetch_related avoid N+1 queries" gave
15 test chunks of 17, and "how is the password hasher chosen and upgraded" none of
``django/contrib/auth/hashers.py``. A developer asking how something works wants the
code first; one asking about tests says so. So a test file's chunks have their BM25
score scaled down (``DEFAULT_TEST_PRIOR``) unless the query names tests.

Both rules read names only, never a file's text, so a chunk's verdict is decided by
its path alone, the same on every machine and at every rebuild.
"""

from __future__ import annotations

import re

from hostd.chunking import tokenize

__all__ = ["DEFAULT_TEST_PRIOR", "asks_about_tests", "is_test_path"]

#: The factor a test chunk's BM25 score is scaled by when the query does not ask about
#: tests; 1 leaves the ranking as BM25 alone has it. Chosen on ten Django goals and
#: the repository eval (docs/eval.md, "Tests in the ranking").
DEFAULT_TEST_PRIOR = 0.5

#: Directories that hold tests by the conventions of most ecosystems: ``tests/`` and
#: ``test/`` (Python, Rust, Java's ``src/test/``, Swift's ``Tests/``), ``__tests__/``
#: (Jest), ``spec/`` (RSpec, Jasmine). Compared case-folded. ``testing/`` is not one:
#: it is as often a library's test helpers that the library ships (``numpy/testing``).
_TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec"})

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


def is_test_path(rel: str) -> bool:
    """Whether ``rel`` (a POSIX path relative to the root) is a test file: under a test
    directory (``_TEST_DIRS``) or named as one (``_TEST_NAME``)."""
    *dirs, name = rel.split("/")
    return any(d.lower() in _TEST_DIRS for d in dirs) or _TEST_NAME.fullmatch(name) is not None


def asks_about_tests(*texts: str | None) -> bool:
    """Whether any of ``texts`` (a query's goal, its query text) names tests as a word."""
    return any(not _TEST_TERMS.isdisjoint(tokenize(text)) for text in texts if text)
