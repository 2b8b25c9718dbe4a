"""How the terms of a git log score: a commit hash is one term, not the numbers and
letters inside it, and a number in the goal is weak evidence beside its words.

The log is a recording of the walkthrough's ``mcp-server-git`` ``git_log`` answer over a
docs project: an import commit, five commits to the tutorial, one to the notebooks."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import tokenize
from hostd.mcp import Document, frames_for
from hostd.mcp._frames import _Bm25
from hostd.protocol import ContextQuery

COMMITS = [
    ("d42b21df9edccba1a2fb6fcab1bb3ee94fbc7daf", "notebooks: mention intersphinx_resolve_self"),
    ("0c41ed3e651741b751df9b29a3106d85744b8074", "tutorial: link the directives reference"),
    ("17d08b0d54c345663716ae6383d969755205a6d2", "tutorial: tip on autodoc_typehints"),
    ("f7e85cad6d31182a248e6c323938f7c50412b0e4", "tutorial: deprecate the --sep layout"),
    ("d71b431a7e8c686704b11939db0afd42bbeeb826", "tutorial: add a GitLab Pages section"),
    ("b69e0b271b7859dae714ff8663947189d9905bfa", "tutorial: show html_title next to furo"),
    # Its hash holds a lone "5" between letters ("…68ee5a18…").
    ("c174e703659b2fd942f68ee5a18204bc58d7590e", "Import Sphinx 9.0.4 documentation"),
]
QUESTION = "What changed in the last 5 commits to the tutorial?"
TUTORIAL = {f"commit {sha[:7]}" for sha, message in COMMITS if message.startswith("tutorial")}


def _log(commits: list[tuple[str, str]]) -> Document:
    entries = [
        f"Commit: {sha}\nAuthor: Docs <d@x>\nDate: 2026-12-07 15:58:42+00:00\nMessage: {msg}\n"
        for sha, msg in commits
    ]
    return Document(
        method="tools/call:git_log", text="Commit history:\n" + "\n".join(entries), always=True
    )


def _ranked(goal: str, doc: Document) -> list[tuple[str, float]]:
    query = ContextQuery.model_validate({"goal": goal, "max_frames": 20, "max_tokens": 3000})
    frames = frames_for([doc], query, kind="episode", server="git").frames
    return [(str(f["citation_label"]), float(str(f["score"]))) for f in frames]


def test_a_hex_id_is_one_term_and_its_first_seven_digits_another() -> None:
    assert tokenize("Commit: c174e703659b2fd942f68ee5a18204bc58d7590e") == [
        "commit",
        "c174e703659b2fd942f68ee5a18204bc58d7590e",
        "c174e70",
    ]
    assert tokenize("3fa9ded") == ["3fa9ded"]  # not stemmed: "…ed" is hex, not a tense
    # Shorter than 7, or letters or digits only: words and numbers as before.
    assert tokenize("abc123 deadbeef 1234567") == ["abc123", "abc", "123", "deadbeef", "1234567"]


def test_a_hex_literal_is_one_term_whichever_way_it_is_spelled() -> None:
    # 7 digits or more: a hex identifier, the ``0x`` dropped, so either spelling finds it.
    assert tokenize("MAGIC = 0x1F2E3D4C;") == ["magic", "1f2e3d4c", "1f2e3d4"]
    assert tokenize("0x1f2e3d4c") == tokenize("1f2e3d4c") == ["1f2e3d4c", "1f2e3d4"]
    assert tokenize("0xdeadbeef") == ["deadbeef", "deadbee"]
    # Shorter: one term with its prefix, never ``0`` and the letters after ``x``.
    assert tokenize("mask 0xff, 0X10") == ["mask", "0xff", "0x10"]
    # A suffix makes it no literal (``0x1fUL``): cut as before.
    assert tokenize("0x1fUL")[:2] == ["0", "x1ful"]


def test_a_hex_literal_scores_for_a_goal_that_spells_it_either_way() -> None:
    text = "Header: the magic number is 0x1f2e3d4c at offset 16"
    for goal in ("where is 0x1f2e3d4c set", "where is 1f2e3d4c set"):
        bm25 = _Bm25(goal)
        assert bm25.terms == ["1f2e3d4", "1f2e3d4c", "set"]
        assert bm25.counts(text) == [1, 1, 0]
    assert _Bm25("0x1f2e3d4c").counts("digest 1f2e3d4c") == [1, 1]


def test_the_commits_to_the_tutorial_come_first_not_one_whose_hash_holds_the_number() -> None:
    ranked = _ranked(QUESTION, _log(COMMITS))
    assert {label for label, _ in ranked[:5]} == TUTORIAL
    assert all(score > 0 for _, score in ranked[:5])


def test_a_short_hash_in_the_goal_names_the_commit_whose_full_hash_is_served() -> None:
    doc = _log(COMMITS)
    # Neither the label ("commit c174e70") nor a word: the 10-digit form is in no text.
    ranked = _ranked("what did c174e70365 bring", doc)
    assert ranked[0][0] == "commit c174e70"


def test_a_number_the_other_pieces_lack_does_not_make_the_goals_words_no_match() -> None:
    # The import commit now holds "5" as a word of its own (a version): the goal's only
    # rarer term. The commits to the tutorial still match by "tutorial", and rank above.
    commits = [*COMMITS[:-1], (COMMITS[-1][0], "Import Sphinx 9.0.5 documentation")]
    ranked = _ranked(QUESTION, _log(commits))
    assert {label for label, _ in ranked[:5]} == TUTORIAL
    assert all(score > 0 for _, score in ranked[:5])
    scores = dict(ranked)
    assert scores["commit c174e70"] <= min(scores[label] for label in TUTORIAL)


def test_a_number_tells_pieces_apart_when_no_word_of_the_goal_does() -> None:
    issues = "\n\n".join(
        f"Issue: {n}\nStatus: open\nTitle: crash on start" for n in range(1230, 1236)
    )
    doc = Document(method="tools/call:issues", text=issues, always=True)
    ranked = _ranked("status of issue 1234", doc)
    assert ranked[0][0] == "issues § Issue: 1234"
    assert all(score < ranked[0][1] for _, score in ranked[1:])


# Hashes cut at every length, beside the runs the old cut made of them.
_HEX_FRAGMENTS = [
    "c174e70",
    "c174e703659b",
    "5",
    "ee5a",
    "3fa9ded",
    "3fa9ded9",
    "abcdeed",
    "e",
    "70",
    "x",
    "0x",
    "0x1f2e3d4c",
    "0xff",
    "0X1F",
]


@given(
    st.lists(st.sampled_from(_HEX_FRAGMENTS), min_size=1, max_size=3),
    st.lists(st.tuples(st.sampled_from(_HEX_FRAGMENTS), st.sampled_from(["", " ", "_", ":"]))),
)
def test_a_hex_id_counts_in_any_text_as_the_files_tokenizer_counts_it(
    goal: list[str], text: list[tuple[str, str]]
) -> None:
    bm25 = _Bm25(" ".join(goal))
    served = "".join(f + sep for f, sep in text)
    found = Counter(tokenize(served))
    assert bm25.counts(served) == [found[t] for t in bm25.terms]
