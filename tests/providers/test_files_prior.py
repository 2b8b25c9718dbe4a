"""The ``files`` ranking's test prior (``providers._prior``): a test file's chunks
count for less than the code they test, unless the query asks about tests; an anchor
still leads; ``--test-prior 1`` turns it off."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.protocol import ContextFrame, ContextQuery
from providers import CorpusOptions
from providers._prior import DEFAULT_TEST_PRIOR, asks_about_tests, is_test_chunk, is_test_path
from providers.files import FileIndex, main

from ._stdio import StdioPeer

HOW = "how is the password hasher chosen"


@pytest.mark.parametrize(
    "rel",
    [
        "tests/auth_tests/test_hashers.py",  # a test directory at the top
        "pkg/tests/helpers.py",  # ... or below, whatever the file's name
        "src/test/java/org/app/Parser.java",  # Maven's src/test/
        "Tests/AppTests/Parser.swift",  # SwiftPM's, any case
        "web/__tests__/button.jsx",  # Jest's
        "spec/models/user.rb",  # RSpec's
        "wdio/specs/login.js",  # a specs/ folder (WebdriverIO's test/specs/)
        "cypress/e2e/checkout.cy.js",  # an end-to-end suite's e2e/
        "E2E/smoke.py",
        "app/test_views.py",  # pytest's names, anywhere
        "app/views_test.py",
        "conftest.py",
        "blog/tests.py",  # Django's
        "net/http/server_test.go",
        "src/button.test.tsx",
        "src/api.spec.ts",
        "lib/util.test.mjs",
        "src/main/java/org/app/ParserTest.java",
        "src/main/kotlin/ParserTests.kt",
        "lib/user_spec.rb",
    ],
)
def test_a_test_file_is_told_by_its_path(rel: str) -> None:
    assert is_test_path(rel)


@pytest.mark.parametrize(
    "rel",
    [
        "django/contrib/auth/hashers.py",
        "src/testing/helpers.py",  # a library's test helpers it ships: not a test dir
        "src/contest.py",
        "src/latest_test_results.md",  # "test" inside a name is not a test
        "src/main/java/org/app/Contest.java",  # case matters, as it does to JUnit
        "src/testimony.ts",
        "docs/spec.md",  # a spec named by its file, not under spec/
        "tests",  # a file named so, at the root
        "src/attest/verify.go",
    ],
)
def test_code_and_docs_are_not_tests(rel: str) -> None:
    assert not is_test_path(rel)


@pytest.mark.parametrize(
    ("item", "test"),
    [
        ("mod tests › fn adds", True),  # Rust's unit tests, inside the file they test
        ("mod tests", True),
        ("mod test › fn adds", True),
        ("mod parser › mod tests › fn nested", True),  # a module's own tests
        ("impl Parser › fn tests", False),  # a function named so is code
        ("mod testsuite › fn run", False),
        ("mod contests", False),
        ("fn parse", False),
        (None, False),
    ],
)
def test_a_rust_unit_test_module_is_a_test(item: str | None, test: bool) -> None:
    assert is_test_chunk("src/parse.rs", item) is test
    assert is_test_chunk("tests/parse.rs", item)  # a test file's chunks, whatever the item


@pytest.mark.parametrize(
    "goal",
    [
        "which tests cover the password hasher",
        "Testing the session middleware",
        "what does test_hashers check",  # an identifier's parts count
        "where is the PasswordTestCase",
        "update the spec for the parser",
        "load the fixtures for the blog",
    ],
)
def test_a_query_that_names_tests_asks_about_them(goal: str) -> None:
    assert asks_about_tests(goal)
    assert asks_about_tests("how does it work", goal)  # the goal or the text searched


@pytest.mark.parametrize(
    "goal", [HOW, "the latest contest results", "attestation of a build", "", None]
)
def test_a_query_that_does_not_name_tests_does_not_ask_about_them(goal: str | None) -> None:
    assert not asks_about_tests(goal)


def _tree(root: Path) -> Path:
    (root / "auth").mkdir()
    (root / "tests").mkdir()
    # The code says "password hasher" twice among other words; its test many times over.
    (root / "auth" / "hashers.py").write_text(
        "def get_hasher(algorithm):\n"
        "    # the password hasher is chosen from settings.PASSWORD_HASHERS by its algorithm\n"
        "    for hasher in load_hashers(settings):\n"
        "        if hasher.algorithm == algorithm:\n"
        "            return hasher\n"
        "    raise ValueError('unknown password hasher')\n"
    )
    (root / "tests" / "test_hashers.py").write_text(
        "def test_password_hasher_chosen():\n"
        "    # the password hasher: password hasher chosen, password hasher chosen\n"
        "    assert get_hasher('pbkdf2').algorithm == 'pbkdf2'  # password hasher\n"
    )
    return root


def _index(root: Path, test_prior: float = DEFAULT_TEST_PRIOR) -> FileIndex:
    ix = FileIndex(
        CorpusOptions(root=root), refresh_interval_s=0.0, refresh_wait_s=60, test_prior=test_prior
    )
    ix.refresh(force=True)
    return ix


def _answer(ix: FileIndex, goal: str, *anchors: str) -> list[ContextFrame]:
    query = ContextQuery(goal=goal, anchors=list(anchors), max_frames=20, max_tokens=100_000)
    return ix.answer(query).frames


def _files(frames: list[ContextFrame]) -> list[str]:
    return [f.id.rpartition("#")[0] for f in frames]


def test_a_code_chunk_outranks_a_test_chunk_that_matches_more(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    # By BM25 alone the test matches more: it leads.
    assert _files(_answer(_index(root, test_prior=1.0), HOW)) == [
        "tests/test_hashers.py",
        "auth/hashers.py",
    ]
    frames = _answer(_index(root), HOW)
    assert _files(frames) == ["auth/hashers.py", "tests/test_hashers.py"]
    scores = [f.score for f in frames]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)


def test_a_query_about_tests_ranks_them_as_bm25_does(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    assert _files(_answer(ix, HOW))[0] == "auth/hashers.py"  # the prior, as above
    asked = _answer(ix, "which tests cover the password hasher")
    assert _files(asked)[0] == "tests/test_hashers.py"
    # The goal names tests though the text searched does not: the prior is off too.
    query = ContextQuery(
        goal="write tests for it", query_text=HOW, max_frames=20, max_tokens=100_000
    )
    assert _files(ix.answer(query).frames)[0] == "tests/test_hashers.py"
    assert ix.search("tests of the password hasher")[0].chunk.rel == "tests/test_hashers.py"


def test_an_anchored_test_file_still_leads(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    assert _files(_answer(ix, HOW))[0] == "auth/hashers.py"
    frames = _answer(ix, HOW, "tests/test_hashers.py")
    assert _files(frames) == ["tests/test_hashers.py", "auth/hashers.py"]
    assert frames[0].score >= 0.5 > frames[1].score  # the anchored band, as without tests


#: A Rust source file as crates keep them: the code, then its unit tests in a
#: ``#[cfg(test)] mod tests`` that names the code's words over and over.
_RUST = """\
/// Increments the nesting depth; past the nest limit, the parser gives up.
pub fn increment_depth(&mut self) -> Result<(), Error> {
    let new = self.depth.checked_add(1).ok_or_else(|| self.error(NestLimitExceeded))?;
    if new > self.nest_limit {
        return Err(self.error(ErrorKind::NestLimitExceeded(self.nest_limit)));
    }
    self.depth = new;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nest_limit_exceeded() {
        // the nest limit exceeded: nest limit exceeded, the nest limit error
        assert_eq!(parse_nest_limit(1), Err(ErrorKind::NestLimitExceeded(1)));
        assert_eq!(parse_nest_limit(2), Err(ErrorKind::NestLimitExceeded(2)));
    }
}
"""


def test_a_rust_code_chunk_outranks_its_own_unit_tests(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "parse.rs").write_text(_RUST)
    goal = "where is the nest limit exceeded error raised"
    tests_from = _RUST.splitlines().index("#[cfg(test)]") + 1  # the module's first line

    def first_line(frames: list[ContextFrame]) -> int:  # of the leading frame's range
        return int(str(frames[0].citation_label).rpartition(" L")[2].split("-")[0])

    # By BM25 alone the unit test, which repeats the words, leads; with the prior the
    # function that raises the error does; a question about tests is ranked by BM25.
    assert first_line(_answer(_index(tmp_path, test_prior=1.0), goal)) > tests_from
    assert first_line(_answer(_index(tmp_path), goal)) < tests_from
    about = "which tests check the nest limit exceeded error"
    bm25 = [f.id for f in _answer(_index(tmp_path, test_prior=1.0), about)]
    assert [f.id for f in _answer(_index(tmp_path), about)] == bm25


@pytest.mark.anyio
async def test_the_test_prior_is_set_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    root = _tree(tmp_path / "tree")
    query = {"query": {"goal": HOW, "max_frames": 5, "max_tokens": 2000}}
    leads: dict[str, str] = {}
    for prior in ("default", "1"):
        option = [] if prior == "default" else ["--test-prior", prior]
        args = ["-m", "providers.files", "--root", str(root), "--no-cache", *option]
        async with StdioPeer(args) as peer:
            await peer.handshake()
            result = await peer.call("context/query", query)
            leads[prior] = result["frames"][0]["citation_label"].split(" ")[0]
    assert leads == {"default": "auth/hashers.py", "1": "tests/test_hashers.py"}


@pytest.mark.parametrize("value", ["0", "1.5", "-1", "nan", "half"])
def test_a_test_prior_outside_its_range_is_refused(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--root", str(tmp_path), "--test-prior", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--test-prior: {value} is outside (0, 1]" in err or "not a number: 'half'" in err
