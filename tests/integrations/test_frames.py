"""A retriever's documents as frames (``hostd.integrations._frames``): provenance where the
bytes back it, doc frames otherwise, the budget rules kept, verdicts that re-read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import audit_leg
from hostd.integrations import Retrieved
from hostd.integrations import _frames as frames_module
from hostd.integrations._frames import SourceFiles, frames_of, pack_frames, verify_frame
from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    FrameIdentity,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
)

TEXT = (
    "# Retries\n"
    "\n"
    "The retry loop gives up after three attempts.\n"
    "    It waits two seconds between attempts.\n"
    "\n"
    "The retry loop gives up after three attempts.\n"
)


def _file(tmp_path: Path, text: str | bytes = TEXT) -> Path:
    path = tmp_path / "notes.md"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _frames(items: list[Retrieved], served: set[Path] | None = None) -> list[ContextFrame]:
    return frames_of(items, name="lc", kind="doc", files=SourceFiles(served))


def _query(**kw: object) -> ContextQuery:
    return ContextQuery.model_validate(
        {"goal": "retry", "max_frames": 8, "max_tokens": 10**6, **kw}
    )


def test_whole_lines_of_a_readable_source_become_a_file_frame_of_exactly_those_bytes(
    tmp_path: Path,
) -> None:
    path = _file(tmp_path)
    # As a splitter hands it over: the lines' own indentation and newline stripped.
    text = (
        "The retry loop gives up after three attempts.\n    It waits two seconds between attempts."
    )
    (frame,) = _frames([Retrieved(text, {"source": str(path)})])
    addressed = address_line_range(path.read_bytes(), "L3-4")
    assert frame.id == f"{path}#L3-4" and frame.uri == path.resolve().as_uri()
    assert frame.content == addressed.decode()
    assert frame.content_digest == sha256_digest(addressed)
    (prov,) = frame.provenance
    assert (prov.type, prov.uri, prov.range, prov.digest) == (
        "file",
        frame.uri,
        "L3-4",
        sha256_digest(addressed),
    )
    assert frame.token_cost == canonical_token_cost(frame.content)
    # The daemon's own leg audit accepts it as it is.
    audit = audit_leg("lc", _query(), [frame.to_wire()])
    assert [f.id for f in audit.accepted] == [frame.id] and audit.violations == ()


@given(
    lines=st.lists(st.text(alphabet="ab \t\r", max_size=6), min_size=1, max_size=8),
    final_newline=st.booleans(),
    data=st.data(),
)
def test_a_run_of_whole_lines_is_found_as_exactly_the_bytes_its_range_addresses(
    lines: list[str], final_newline: bool, data: st.DataObject
) -> None:
    raw = ("\n".join(lines) + ("\n" if final_newline else "")).encode()
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(i, len(lines) - 1))
    needle = "\n".join(lines[i : j + 1]).encode()
    found = frames_module._whole_lines(raw, needle, None)
    if not needle.strip():
        assert found is None  # nothing but whitespace: no evidence
        return
    assert found is not None
    first, last, where = found
    # F17: the slice is what the range addresses, and it says the text, whitespace aside.
    assert raw[where] == address_line_range(raw, f"L{first}-{last}")
    assert raw[where].strip() == needle.strip()


def test_a_start_hint_picks_which_of_two_equal_passages_is_meant(tmp_path: Path) -> None:
    path = _file(tmp_path)
    line = "The retry loop gives up after three attempts."
    second = TEXT.rindex(line)
    ids = [
        f.id
        for hint in ({}, {"start_index": second}, {"start_char_idx": second})
        for f in _frames([Retrieved(line, {"file_path": str(path), **hint})])
    ]
    assert ids == [f"{path}#L3-3", f"{path}#L6-6", f"{path}#L6-6"]
    (by_node,) = _frames([Retrieved(line, {"source": str(path)}, start_hint=second)])
    assert by_node.id == f"{path}#L6-6"


@pytest.mark.parametrize(
    ("text", "metadata", "uri"),
    [
        # Starts inside a line: no whole-line range says exactly this text.
        ("loop gives up after three attempts.", "file", "file"),
        # Not in the file at all (a transformed chunk).
        ("THE RETRY LOOP", "file", "file"),
        ("Deploys happen on Tuesdays.", None, None),
        ("Deploys happen on Tuesdays.", "https://wiki.example/deploys", "remote"),
        ("Deploys happen on Tuesdays.", "missing.md", None),
    ],
)
def test_a_document_no_line_range_backs_is_a_doc_frame_of_its_own_text(
    tmp_path: Path, text: str, metadata: str | None, uri: str | None
) -> None:
    path = _file(tmp_path)
    source = str(path) if metadata == "file" else metadata
    (frame,) = _frames([Retrieved(text, {"source": source} if source else {})])
    assert frame.content == text and frame.provenance == []
    assert frame.content_digest == sha256_digest(text.encode())
    expected = {"file": path.resolve().as_uri(), "remote": source, None: None}[uri]
    assert frame.uri == expected and "#" not in frame.id
    assert audit_leg("lc", _query(), [frame.to_wire()]).violations == ()


def test_lines_that_are_not_utf8_are_never_served_as_file_content(tmp_path: Path) -> None:
    path = _file(tmp_path, b"caf\xe9 prices\nThe retry loop gives up.\n")
    (frame,) = _frames([Retrieved("caf prices", {"source": str(path)})])
    assert frame.provenance == []
    (ok,) = _frames([Retrieved("The retry loop gives up.", {"source": str(path)})])
    assert ok.id == f"{path}#L2-2"


def test_a_source_over_the_size_bound_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path)
    monkeypatch.setattr(frames_module, "MAX_SOURCE_BYTES", len(TEXT) - 1)
    (frame,) = _frames([Retrieved("# Retries", {"source": str(path)})])
    assert frame.provenance == [] and frame.uri is None


def test_scores_are_by_rank_and_repeats_and_empty_documents_are_left_out(tmp_path: Path) -> None:
    path = _file(tmp_path)
    items = [
        Retrieved("# Retries", {"source": str(path)}),
        Retrieved("  \n", {}),
        Retrieved("# Retries", {"source": str(path)}),
        Retrieved("Deploys happen on Tuesdays.", {}),
    ]
    frames = _frames(items)
    assert [f.score for f in frames] == [1.0, 0.25]
    assert [f.id for f in frames] == [f"{path}#L1-1", frames[1].id]
    # The same documents give the same frames, byte for byte (ids from content).
    assert [f.to_wire() for f in _frames(items)] == [f.to_wire() for f in frames]


@given(
    costs=st.lists(st.integers(1, 60), max_size=12),
    max_frames=st.integers(0, 6),
    max_tokens=st.integers(0, 200),
    kinds=st.sampled_from([[], ["doc"], ["fact"], ["fact", "doc"]]),
)
def test_packing_keeps_kinds_frames_and_tokens(
    costs: list[int], max_frames: int, max_tokens: int, kinds: list[str]
) -> None:
    frames = frames_of(
        [Retrieved(f"{i} " + "x" * (4 * c - 3), {}) for i, c in enumerate(costs)],
        name="lc",
        kind="doc",
        files=SourceFiles(),
    )
    query = _query(max_frames=max_frames, max_tokens=max_tokens, kinds=kinds)
    result = pack_frames(frames, query)
    out = [ContextFrame.model_validate(f) for f in result.frames]
    if kinds and "doc" not in kinds:  # Q1
        assert out == [] and not result.truncated
        return
    assert len(out) <= max_frames  # B4
    assert sum(f.token_cost for f in out) <= max_tokens  # B1
    ids = [f.id for f in frames]
    assert [ids.index(f.id) for f in out] == sorted(ids.index(f.id) for f in out)  # best first
    assert result.truncated == (len(out) < len(frames))
    assert audit_leg("lc", query, result.frames, declared_kinds=["doc"]).violations == ()


def _served(tmp_path: Path) -> tuple[ContextFrame, set[Path]]:
    served: set[Path] = set()
    path = _file(tmp_path)
    (frame,) = _frames([Retrieved("# Retries", {"source": str(path)})], served)
    return frame, served


def _identity(frame: ContextFrame, digest: str | None = None) -> FrameIdentity:
    return FrameIdentity(
        provider_id="p", frame_id=frame.id, content_digest=digest or frame.content_digest
    )


def test_verify_re_reads_the_lines_valid_stale_gone(tmp_path: Path) -> None:
    frame, served = _served(tmp_path)
    path = tmp_path / "notes.md"
    assert verify_frame(_identity(frame), served).status == "valid"
    assert verify_frame(_identity(frame, "sha256:" + "0" * 64), served).status == "stale"
    path.write_text("# Retries, revised\n")
    verdict = verify_frame(_identity(frame), served)
    assert (verdict.status, verdict.replacement_digest) == (
        "stale",
        sha256_digest(b"# Retries, revised\n"),
    )
    path.write_text("")
    assert verify_frame(_identity(frame), served).status == "gone"  # the line is gone
    path.unlink()
    assert verify_frame(_identity(frame), served).status == "gone"


def test_verify_vouches_only_for_files_it_served_and_never_for_doc_frames(
    tmp_path: Path,
) -> None:
    frame, served = _served(tmp_path)
    other = tmp_path / "secret.txt"
    other.write_text("hunter2\n")
    forged = FrameIdentity(
        provider_id="p",
        frame_id=f"{other}#L1-1",
        content_digest=sha256_digest(b"hunter2\n"),
    )
    verdict = verify_frame(forged, served)
    assert (verdict.status, verdict.replacement_digest) == ("unknown", None)
    (doc,) = _frames([Retrieved("Deploys happen on Tuesdays.", {})])
    assert verify_frame(_identity(doc), served).status == "unknown"
    assert verify_frame(_identity(frame), set()).status == "unknown"  # after a restart
