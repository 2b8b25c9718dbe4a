"""A tool's answer that is a sequence of records is cut into whole records.

Recorded texts: ``mcp-server-git``'s ``git_log`` (its exact layout: ``Commit:``,
``Author:``, ``Date:``, ``Message:`` and the message with its blank lines), a
numbered list whose items hold blank lines, and prose, which keeps the blank-line
cut. A record's frame id and label depend on the record, never on where the answer
puts it.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import DEFAULT_WINDOW_LINES, chunk_text, estimate_pieces, split_lines
from hostd.mcp import Document, cut, frames_for
from hostd.protocol import ContextQuery, address_line_range, parse_frame, sha256_digest
from tests.server.conftest import ROOT

_DOC = " ".join((ROOT / "docs" / "mcp.md").read_text(encoding="utf-8").split())
SHAS = [f"{i:x}" * 40 for i in (10, 11, 12, 13)]  # aaaa…, bbbb…, cccc…, dddd…


def _entry(sha: str, subject: str, body: str) -> str:
    """One ``git_log`` entry as ``mcp-server-git`` prints it (``Message: {message}\\n``,
    the message ending in its own newline)."""
    return (
        f"Commit: {sha}\nAuthor: Dev\nDate: 2025-03-0{int(sha[0], 16) % 9 + 1} 10:00:00+00:00\n"
        f"Message: {subject}\n\n{body}\n\n"
    )


def _body(i: int) -> str:
    return (
        f"A changed chunker must never serve old chunks (step {i}): a held range would"
        " address other bytes than the ones it was cut from.\n\n"
        f"commit {SHAS[3][:7]} broke this once; the digest check now catches it, step {i}."
    )


def _log(shas: list[str]) -> str:
    """A ``git_log`` answer, newest first; commit ``SHAS[i]`` says step ``i``."""
    entries = [
        _entry(sha, f"Keep records whole, step {SHAS.index(sha)}", _body(SHAS.index(sha)))
        for sha in shas
    ]
    return "Commit history:\n" + "\n".join(entries)


def _git_log(text: str) -> Document:
    return Document(method="tools/call:git_log", text=text, always=True)


def test_each_git_log_entry_is_one_piece_with_its_message_and_commit_id() -> None:
    pieces = list(cut(_git_log(_log(SHAS[:3]))))
    # Not a piece for the caption, one per commit: header and every paragraph together.
    assert [p.label for p in pieces] == [f"commit {sha[:7]}" for sha in SHAS[:3]]
    for i, (piece, sha) in enumerate(zip(pieces, SHAS, strict=False)):
        assert piece.text.startswith(f"Commit: {sha}\nAuthor: Dev\nDate: ")
        assert f"Message: Keep records whole, step {i}\n\n" in piece.text
        assert piece.text.endswith(_body(i) + "\n")  # the blank lines after it are not in it
        assert piece.text.count("Commit: ") == 1


def test_a_record_over_the_limit_is_cut_within_itself_each_part_named_by_it() -> None:
    long_body = "\n\n".join(
        f"Paragraph {n} of a long message about the chunker and its cache of old chunks."
        for n in range(40)
    )
    text = "Commit history:\n" + "\n".join(
        [
            _entry(SHAS[0], "Short change", _body(0)),
            _entry(SHAS[1], "Long change", long_body),
            _entry(SHAS[2], "Short change again", _body(2)),
        ]
    )
    pieces = list(cut(_git_log(text)))
    long = [p for p in pieces if p.label.startswith(f"commit {SHAS[1][:7]}")]
    n = len(long)
    assert n > 1
    assert [p.label for p in long] == [f"commit {SHAS[1][:7]} ({k}/{n})" for k in range(1, n + 1)]
    assert long[0].text.startswith(f"Commit: {SHAS[1]}\n")
    assert "".join(p.text for p in long).count("Paragraph ") == 40  # all of it, once
    assert pieces[0].label == f"commit {SHAS[0][:7]}" and pieces[-1].label == (
        f"commit {SHAS[2][:7]}"
    )


def test_a_commits_diff_is_labelled_apart_from_its_log_entry() -> None:
    # git_log's entry and git_show's answer for one commit are two pieces of evidence
    # (the message; the message and its diff): each says which, not "commit d42b21d #2".
    show = Document(
        method="tools/call:git_show",
        text=(
            f"commit {SHAS[0]}\nAuthor: Dev <dev@example.com>\nDate:   Mon Mar 3 2025\n\n"
            "    Keep records whole\n\n--- a/src/cache.py\n+++ b/src/cache.py\n"
            "@@ -1 +1 @@\n-old = 1\n+new = 2\n"
        ),
        always=True,
    )
    (diff,) = cut(show)
    (entry, _) = cut(_git_log(_log(SHAS[:2])))
    assert entry.label == f"commit {SHAS[0][:7]}"
    assert diff.label == f"commit {SHAS[0][:7]}: src/cache.py"


def test_a_record_keeps_its_frame_id_and_label_when_the_answer_shifts() -> None:
    before = cut(_git_log(_log(SHAS[1:4])))
    after = cut(_git_log(_log(SHAS[0:4])))  # one more commit on top: every entry moves down
    old = {p.label: (p.key, p.digest, p.range) for p in before}
    new = {p.label: (p.key, p.digest, p.range) for p in after}
    assert len(old) == 3 and len(new) == 4
    for label, (key, digest, range_) in old.items():
        assert label in new
        assert new[label][:2] == (key, digest)
        assert new[label][2] != range_  # the lines moved; the frame did not
    # The range still addresses the piece's bytes in the answer it came from (F17).
    data = _log(SHAS[0:4]).encode()
    for p in after:
        assert address_line_range(data, p.range) == p.text.encode()


ITEMS = "Found 4 results:\n" + "".join(
    f"{i}. Chunk cache rule {i}\n\n"
    f"   A changed chunker invalidates every held chunk of rule {i}; ranges are"
    f" recomputed from the new cut, never reused.\n\n"
    for i in range(1, 5)
)


def test_numbered_items_with_blank_lines_inside_are_one_piece_each() -> None:
    pieces = list(cut(Document(method="tools/call:search", text=ITEMS, always=True)))
    assert len(pieces) == 4
    for i, piece in enumerate(pieces, start=1):
        assert piece.text.startswith(f"{i}. Chunk cache rule {i}\n\n   A changed chunker")
        assert piece.text.rstrip().endswith("never reused.")
        # Named by what it is, without its number (the number is its place in the list).
        assert piece.label == f"search § Chunk cache rule {i}"


PROSE = "\n\n".join(
    f"The chunker cuts paragraph {n} of the notes at its blank lines; note: a held chunk"
    f" of a changed text is never served, paragraph {n} says."
    for n in range(5)
)


def test_prose_keeps_the_blank_line_cut_and_a_paragraph_keeps_its_id_when_it_moves() -> None:
    doc = Document(method="tools/call:notes", text=PROSE, always=True)
    pieces = list(cut(doc))
    paragraphs = chunk_text(
        PROSE.encode(), "notes", sections="paragraphs", min_tokens=16, counter=estimate_pieces
    )
    assert [(p.start, p.end) for p in pieces] == [(c.start, c.end) for c in paragraphs]
    assert [p.label for p in pieces] == [f"notes {p.range}" for p in pieces]
    intro = "An introduction long enough to stand as a paragraph of its own, not a fragment.\n\n"
    moved = list(cut(Document(method="tools/call:notes", text=intro + PROSE, always=True)))
    assert len(moved) == len(pieces) + 1
    assert {p.key for p in pieces} <= {p.key for p in moved}  # the same text, the same id


def test_other_record_shapes_are_found_by_their_recurring_header() -> None:
    def records(text: str) -> list[str]:
        return [p.text for p in cut(Document(method="tools/call:t", text=text, always=True))]

    jsonl = "".join(f'{{"id": {i}, "text": "chunk {i} of the cache"}}\n' for i in range(3))
    assert records(jsonl) == [
        f'{{"id": {i}, "text": "chunk {i} of the cache"}}\n' for i in range(3)
    ]
    ruled = "".join(
        f"---\nIssue {i}: stale chunks\n\nServed after a change, {i}.\n\n" for i in range(3)
    )
    assert records(ruled) == [
        f"---\nIssue {i}: stale chunks\n\nServed after a change, {i}.\n" for i in range(3)
    ]
    native = "".join(
        f"commit {sha}\nAuthor: Dev <dev@example.com>\n\n    Subject {i}\n\n    Body {i}.\n\n"
        for i, sha in enumerate(SHAS[:3])
    )
    native_pieces = list(cut(Document(method="tools/call:t", text=native, always=True)))
    assert [p.label for p in native_pieces] == [f"commit {sha[:7]}" for sha in SHAS[:3]]
    assert all(p.text.rstrip().endswith(f"Body {i}.") for i, p in enumerate(native_pieces))
    # Trailers after a blank line recur too; the header that comes first wins.
    trailed = "Commit history:\n" + "\n".join(
        _entry(sha, f"Change {i}", f"Body {i}.\n\nSigned-off-by: Dev <dev@example.com>")
        for i, sha in enumerate(SHAS[:3])
    )
    assert [t.count("Signed-off-by") for t in records(trailed)] == [1, 1, 1]
    # Headings in a tool's answer (no markdown type): one record per section.
    headed = "".join(f"## Rule {i}\n\nNever serve a stale chunk, {i}.\n\n" for i in range(3))
    labels = [p.label for p in cut(Document(method="tools/call:t", text=headed, always=True))]
    assert labels == [f"t § Rule {i}" for i in range(3)]


def test_a_heading_alone_opens_the_section_after_it_never_a_piece_of_its_own() -> None:
    text = (
        "# Cache runbook\n\n## Symptoms\n\nMany misses, slow prices.\n\n"
        "## Fix\n\n### Steps\n\nRaise the capacity and redeploy.\n\n## Later\n\n"
    )
    doc = Document(method="resources/read", text=text, uri="ops://runbook", title="runbook")
    pieces = list(cut(doc))
    assert [(p.label, p.range) for p in pieces] == [
        ("runbook § Symptoms", "L1-5"),
        ("runbook § Steps", "L7-11"),
    ]
    assert pieces[0].text.startswith("# Cache runbook\n\n## Symptoms\n")
    assert pieces[1].text.startswith("## Fix\n\n### Steps\n")
    # ``## Later`` ends the text with nothing under it: no piece at all.
    assert all(address_line_range(text.encode(), p.range) == p.text.encode() for p in pieces)
    # A text of headings alone (a list of contents) is one piece, not one per heading.
    contents = "# Runbook\n\n## Symptoms\n\n## Fix\n"
    (whole,) = cut(Document(method="tools/call:toc", text=contents, always=True))
    assert (whole.text, whole.label) == (contents, "toc § Runbook")


def test_a_repeated_heading_is_named_with_its_parent_and_numbered_only_if_that_repeats() -> None:
    def part(title: str) -> str:
        return (
            f"## {title}\n\nWhat {title} is about, in a sentence of its own.\n\n"
            f"### Checklist\n\n- check {title} first\n- then deploy\n\n"
        )

    long = "A part whose heading is far longer than any label should ever quote " * 2
    text = "# Handbook\n\n" + "".join(part(t) for t in ("2. Cache", "3. Inventory", "3. Inventory"))
    text += part(long.strip())
    labels = [p.label for p in cut(Document(method="tools/call:handbook", text=text, always=True))]
    assert labels[:6] == [
        "handbook § 2. Cache",
        "handbook § 2. Cache › Checklist",
        "handbook § Handbook › 3. Inventory (1/2)",  # the path repeats too: numbered
        "handbook § 3. Inventory › Checklist (1/2)",
        "handbook § Handbook › 3. Inventory (2/2)",
        "handbook § 3. Inventory › Checklist (2/2)",
    ]
    parent, checklist = labels[7].removeprefix("handbook § ").split(" › ")
    assert parent.endswith("…") and len(parent) < len(long) and checklist == "Checklist"


def test_frames_of_records_pass_the_frame_rules_and_name_their_lines() -> None:
    text = _log(SHAS[:3])
    goal = "why must a changed chunker never serve old chunks"
    query = ContextQuery(goal=goal, max_frames=10, max_tokens=4000)
    result = frames_for([_git_log(text)], query, kind="episode", server="mcp-git")
    labels = sorted(f["citation_label"] for f in result.frames)
    assert labels == [f"commit {s[:7]}" for s in SHAS[:3]]
    for frame in result.frames:
        parsed, violations = parse_frame(frame)
        assert parsed is not None and violations == []
        (prov,) = frame["provenance"]
        assert prov["type"] == "mcp" and prov["method"] == "tools/call:git_log"
        assert address_line_range(text.encode(), prov["range"]) == frame["content"].encode()
        assert frame["content_digest"] == sha256_digest(frame["content"].encode())


_RECORD = st.builds(
    lambda sha, paras: f"Commit: {sha}\nAuthor: Dev\nMessage: " + "\n\n".join(paras) + "\n",
    st.text(alphabet="0123456789abcdef", min_size=40, max_size=40),
    st.lists(st.text(alphabet="ab c\n", min_size=1, max_size=60), min_size=1, max_size=6),
)


@given(st.lists(_RECORD, min_size=2, max_size=6), _RECORD, st.integers(3, 40))
def test_a_record_cuts_the_same_wherever_it_sits_and_no_line_is_lost(
    records: list[str], extra: str, window: int
) -> None:
    def chunks(text: str) -> list[tuple[str, int | None]]:
        data = text.encode()
        out = chunk_text(data, "git_log", window, sections="records", min_tokens=16)
        lines = split_lines(data)
        covered: set[int] = set()
        for c in out:
            assert c.text.encode() == address_line_range(data, c.range)
            assert c.end - c.start + 1 <= window
            covered |= set(range(c.start, c.end + 1))
        assert {i for i, ln in enumerate(lines, 1) if ln.strip()} <= covered
        assert sum(c.end - c.start + 1 for c in out) == len(covered)
        return [(c.digest, c.record) for c in out]

    old = chunks("Commit history:\n" + "\n".join(records))
    new = chunks("Commit history:\n" + "\n".join([extra, *records]))
    assert {d for d, r in old if r is not None} <= {d for d, r in new if r is not None}


def test_the_docs_state_the_record_bounds_as_the_code_has_them() -> None:
    from hostd.mcp._frames import _RECORD_TOKENS

    bounds = f"A record of at most {DEFAULT_WINDOW_LINES} lines and {_RECORD_TOKENS} word pieces"
    assert bounds in _DOC
