"""The same text served by two providers, one without a place, is one piece of evidence.

The walkthrough's case, with the real cutters: the MCP binding's pieces of a
``read_text_file`` answer (``hostd.mcp._frames``) beside the ``files`` provider's
chunk of the same file (``hostd.chunking``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from hostd.chunking import chunk_file, chunk_frame
from hostd.compose import compose_for_prompt, dedup_cross_provider
from hostd.compose._compose import dedup, placeless
from hostd.compose._same_text import normal_text
from hostd.mcp._frames import Document, frames_for
from hostd.protocol import ContextFrame, ContextQuery, Provenance

from ._helpers import digest_of, frame

PLAIN = (
    "Restart: run `hostd stop`, then `hostd start`.\n"
    "Rotate the token: write it to `token_file`, send SIGHUP.\n"
    "Escalate if a step fails twice.\n"
    "\n"
)
RUNBOOK = (
    "# Runbook\n\n## Restart\n\nRun `hostd stop`, then `hostd start`.\n\n"
    "## Rotate the token\n\nWrite the new token to `token_file`.\nSend SIGHUP.\n\n"
    "Escalate if a step fails twice.\n\n"
)


def files_frames(tmp_path: Path, name: str, text: str) -> list[ContextFrame]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return [chunk_frame(c, 0.5) for c in chunk_file(path, name, text.encode())]


def read_text_file(text: str, goal: str = "restart the token") -> list[ContextFrame]:
    """What the MCP binding makes of a filesystem server's ``read_text_file`` answer."""
    query = ContextQuery(goal=goal, max_tokens=2000, max_frames=16)
    doc = Document("tools/call:read_text_file", text, always=True)
    result = frames_for([doc], query, kind="doc", server="filesystem")
    return [ContextFrame.model_validate(f) for f in result.frames]


def entries(result: Any) -> dict[str, dict[str, Any]]:
    return {e["frame"]["frame_id"]: e for e in result.audit.entry_dicts()}


def lines_in(prompt: str, text: str) -> Counter[str]:
    wanted = {line for line in text.splitlines() if line.strip()}
    return Counter(line for line in prompt.splitlines() if line in wanted)


def test_a_tool_read_and_a_file_chunk_of_the_same_lines_are_one_piece_of_evidence(
    tmp_path: Path,
) -> None:
    (chunk,) = files_frames(tmp_path, "docs/runbook.txt", PLAIN)
    (piece,) = read_text_file(PLAIN)
    # Both end at their last line of text: the same bytes, so the same digest; the
    # piece has no place, the chunk has the file's.
    assert chunk.content == piece.content
    assert chunk.content_digest == piece.content_digest
    assert [p.type for p in piece.provenance] == ["mcp"]
    pairs = [("files", chunk), ("fs", piece)]
    result = compose_for_prompt(pairs, 2000)
    assert set(lines_in(result.prompt, PLAIN).values()) == {1}
    (kept,) = [e for e in result.audit.entry_dicts() if e["disposition"] == "included"]
    assert kept["vouched_by"] == ["files", "fs"]
    (dropped,) = [e for e in result.audit.entry_dicts() if e.get("reason") == "duplicate"]
    assert dropped["detail"]["kept"] == kept["frame"]
    # the survivor carries the file provenance: it can be re-read and checked
    (citation,) = result.citations
    assert {p.type for p in citation.provenance} == {"mcp", "file"}


def test_tool_pieces_inside_an_admitted_file_chunk_are_contained_in_it(tmp_path: Path) -> None:
    (chunk,) = files_frames(tmp_path, "docs/runbook.md", RUNBOOK)
    pieces = read_text_file(RUNBOOK)
    assert len(pieces) == 2 and all(p.content and p.content in str(chunk.content) for p in pieces)
    strong = chunk.model_copy(update={"score": 0.9})  # the chunk ranks first
    result = compose_for_prompt([("files", strong), *[("fs", p) for p in pieces]], 2000)
    assert set(lines_in(result.prompt, RUNBOOK).values()) == {1}
    by_id = entries(result)
    assert by_id[chunk.id]["disposition"] == "included"
    for p in pieces:
        entry = by_id[p.id]
        assert entry["reason"] == "contained_in", entry
        assert entry["detail"] == {"kept": by_id[chunk.id]["frame"], "same_text": True}
        assert entry["rank"] > by_id[chunk.id]["rank"]
    # they took no room: the prompt is the chunk's alone
    assert result.tokens_used == compose_for_prompt([("files", strong)], 2000).tokens_used


ROLLOUT = "".join(
    f"## Step {n}\n\nRun step {n} of the rollout, then check gauge {n * 7919}.\n"
    f"It should read {n * 31} within a minute.\n\n"
    for n in range(1, 13)
)


def whole_read(text: str, score: float) -> ContextFrame:
    """A placeless frame of a whole file's text, as a tool's answer that is one piece."""
    return frame(
        "t:whole",
        score,
        text.rstrip("\n"),
        with_digest=True,
        provenance=[Provenance(type="mcp", range="L1-60", method="tools/call:read_text_file")],
    )


def test_a_file_chunk_admitted_first_is_left_out_when_a_later_block_quotes_it(
    tmp_path: Path,
) -> None:
    first, *_ = files_frames(tmp_path, "docs/rollout.md", ROLLOUT)
    chunk = first.model_copy(update={"score": 0.9})
    whole = whole_read(ROLLOUT, 0.1)
    pairs = [("files", chunk), ("fs", whole)]
    result = compose_for_prompt(pairs, 2000, strategy="score")
    assert set(lines_in(result.prompt, ROLLOUT).values()) == {1}
    by_id = entries(result)
    assert by_id["t:whole"]["disposition"] == "included"
    left = by_id[chunk.id]
    assert (left["reason"], left["rank"]) == ("contained_in", 0)
    assert left["detail"] == {"kept": by_id["t:whole"]["frame"], "same_text": True}
    assert chunk.id not in result.prompt and [c.frame.frame_id for c in result.citations] == [
        "t:whole"
    ]
    # the lines are paid once: the prompt is what the whole read alone costs
    alone = compose_for_prompt([("fs", whole)], 2000)
    assert result.tokens_used == alone.tokens_used
    assert result.audit.tokens_other + by_id["t:whole"]["tokens"] == result.tokens_used


def test_text_is_compared_only_between_a_place_and_another_providers_placeless_text() -> None:
    text = "alpha line\nbeta line\n"
    inner = "beta line\n"
    uri = "file:///srv/a.txt"
    placed = frame("c", 0.9, text, with_digest=True, provenance=[file_prov(uri, "L1-2", text)])
    placed_inner = frame(
        "d", 0.5, inner, with_digest=True, provenance=[file_prov("file:///srv/b.txt", "L2", inner)]
    )
    placeless = frame("a", 0.9, text, with_digest=True)
    placeless_inner = frame("b", 0.5, inner, with_digest=True)
    apart = [
        [("p", placed), ("p", placeless_inner)],  # one provider
        [("p", placed), ("q", placed_inner)],  # two places: their ranges' business
        [("p", placeless), ("q", placeless_inner)],  # two texts without a place
    ]
    for pairs in apart:
        out = compose_for_prompt(pairs, 2000)
        assert {e["disposition"] for e in out.audit.entry_dicts()} == {"included"}, pairs
    across = compose_for_prompt([("p", placed), ("q", placeless_inner)], 2000)
    assert entries(across)["b"]["reason"] == "contained_in"


def file_prov(uri: str, rng: str, text: str) -> Provenance:
    return Provenance(type="file", uri=uri, range=rng, digest=digest_of(text))


def test_only_whole_lines_are_contained() -> None:
    text = "max_retry = 3\ntimeout = 5\n"
    place = file_prov("file:///srv/c.toml", "L1-2", text)
    outer = frame("a", 0.9, text, with_digest=True, provenance=[place])
    inner = frame("b", 0.5, "retry = 3\n", with_digest=True)
    result = compose_for_prompt([("p", outer), ("q", inner)], 2000)
    assert entries(result)["b"]["disposition"] == "included"


def test_normal_text_changes_only_what_carries_no_meaning() -> None:
    assert normal_text("\n\n  a = 1  \r\n\tb = 2\t\n\n \n") == "  a = 1\n\tb = 2"
    assert normal_text("x  y\n") == "x  y"  # spaces inside a line stay
    assert normal_text(" \n\t\n") == ""


def test_equal_text_of_two_providers_is_grouped_whatever_the_order() -> None:
    place = frame("f", 0.4, "one\ntwo\n\n", with_digest=True, provenance=[])
    placed = place.model_copy(
        update={"provenance": [file_prov("file:///srv/x.md", "L1-3", "one\ntwo\n\n")]}
    )
    tool = frame("t", 0.8, "one\r\ntwo  ", with_digest=True)
    same_provider = frame("t2", 0.2, "one\ntwo", with_digest=True)
    pairs = [("files", placed), ("fs", tool), ("fs", same_provider)]
    outs = {
        repr((out.kept.frames, out.dropped))
        for out in map(dedup_cross_provider, itertools.permutations(pairs))
    }
    assert len(outs) == 1
    out = dedup_cross_provider(pairs)
    assert [f.id for f in out.kept.frames] == ["t"]  # the best survives ...
    assert {p.type for p in out.kept.frames[0].provenance} == {"file"}  # ... with the place
    assert {d.dropped.frame_id for d in out.dropped} == {"f", "t2"}


def test_the_placeless_column_dedup_hands_on_is_the_survivors_own() -> None:
    # dedup knows which pool frames have no place; a survivor that took its group's
    # provenance (the tool's text, now with the file's place) has one
    place = frame("f", 0.4, "one\ntwo\n\n", with_digest=True, provenance=[])
    placed = place.model_copy(
        update={"provenance": [file_prov("file:///srv/x.md", "L1-3", "one\ntwo\n\n")]}
    )
    tool = frame("t", 0.8, "one\r\ntwo  ", with_digest=True)
    alone = frame("a", 0.5, "three\n", with_digest=True)
    for perm in itertools.permutations([("files", placed), ("fs", tool), ("fs", alone)]):
        survivors = dedup(list(perm))
        assert survivors.mixed
        assert survivors.placeless == placeless(survivors.cands)
        assert sorted(zip(survivors.cands.ids, survivors.placeless, strict=True)) == [
            ("a", True),
            ("t", False),
        ]


def test_the_prompt_is_a_pure_function_of_the_frame_set(tmp_path: Path) -> None:
    chunks = files_frames(tmp_path, "docs/runbook.md", RUNBOOK)
    pieces = read_text_file(RUNBOOK)
    whole = whole_read(RUNBOOK, 0.3).model_copy(update={"id": "t:runbook"})
    other = frame("n1", 0.6, "Deploys happen on Tuesdays.\n", with_digest=True)
    pairs = [
        *[("files", c) for c in chunks],
        *[("fs", p) for p in pieces],
        ("notes", whole),
        ("notes", other),
    ]
    seen = set()
    for perm in itertools.permutations(pairs):
        out = compose_for_prompt(list(perm), 2000)
        seen.add((out.prompt, repr(out.audit.entry_dicts())))
    assert len(seen) == 1


def test_a_tool_read_of_the_same_lines_under_another_digest_is_one_piece_of_evidence(
    tmp_path: Path,
) -> None:
    # A server that trims the text it answers with, or one that answers with CRLF line
    # endings (a Windows host): the same lines as the file's chunk, other bytes, so
    # another digest. Equal text (``normal_text``) groups them all the same.
    (chunk,) = files_frames(tmp_path, "docs/runbook.txt", PLAIN)
    for served in (PLAIN.rstrip("\n"), PLAIN.replace("\n", "\r\n")):
        (piece,) = read_text_file(served)
        assert piece.content != chunk.content
        assert piece.content_digest != chunk.content_digest
        assert normal_text(str(piece.content)) == normal_text(str(chunk.content))
        strong = piece.model_copy(update={"score": 0.9})  # the tool's read ranks first
        result = compose_for_prompt([("files", chunk), ("fs", strong)], 2000)
        quoted = result.prompt.replace("\u240d", "")  # a carriage return, as its picture
        assert set(lines_in(quoted, PLAIN).values()) == {1}
        by_id = entries(result)
        kept, dropped = by_id[piece.id], by_id[chunk.id]
        assert kept["disposition"] == "included" and kept["vouched_by"] == ["files", "fs"]
        assert (dropped["reason"], dropped["detail"]["kept"]) == ("duplicate", kept["frame"])
        # the survivor carries the file's place: it can be re-read and checked
        (citation,) = result.citations
        assert citation.frame.frame_id == piece.id
        assert {p.type for p in citation.provenance} == {"mcp", "file"}
