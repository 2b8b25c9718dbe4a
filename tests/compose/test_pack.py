"""Packing's bookkeeping: unique citation labels in linear time, and excluded frames
priced exactly as the block they would have been, without rendering it."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import AuditEntry, _render, compose_for_prompt, render_frame
from hostd.compose._pack import Labels
from hostd.compose._render import (
    _neutral,
    fence,
    fence_columns,
    kinds_and_labels,
    neutral_bodies,
    neutral_bodies_sized,
    priced_blocks,
    rendered_size,
    rendered_sizes,
    title_attributes,
)

from ._helpers import frame

# Text that exercises every escaping path: fence openers and lookalikes, invisible
# and control characters, attribute specials, non-ASCII letters.
NASTY = st.text(
    st.sampled_from(
        list("abc #<>&\"'/\n\t\x00frameFRAME")
        + ["\uff1c", "\u2039", "\u02c2", "\u200b", "\u00ad", "\u2028", "\u202e", "é", "€", "𝐟"]
    ),
    max_size=40,
)


#: A title as providers write them, from its label: the label then an item (a code
#: chunk), its file then a section (a markdown chunk), the label itself, or any text.
TITLES = st.tuples(st.sampled_from(["item", "section", "label", "other"]), NASTY)


def _titled(label: str, shape: tuple[str, str]) -> str:
    how, text = shape
    title = {
        "item": f"{label} · in {text}",
        "section": f"{label.partition(' ')[0]} § {text}",
        "label": label,
        "other": text,
    }[how]
    return title or "t"


def _reference_peek(taken: set[str], label: str) -> str:
    """The label rule as first written: the smallest free ``" #n"``, n >= 2."""
    if label not in taken:
        return label
    n = 2
    while f"{label} #{n}" in taken:
        n += 1
    return f"{label} #{n}"


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["a", "a #2", "a #3", "b", "a #2 #2", "c"])),
        max_size=60,
    ),
    st.sets(st.sampled_from(["a", "a #2", "a #4", "b #2"])),
)
def test_labels_match_the_reference_rule_for_any_sequence(
    ops: list[tuple[bool, str]], start: set[str]
) -> None:
    labels = Labels(set(start))
    taken = set(start)
    for claim, label in ops:
        expected = _reference_peek(taken, label)
        if claim:
            assert labels.claim(label) == expected
            taken.add(expected)
        else:
            assert labels.peek(label) == expected
    assert labels.taken == taken


class _CountingSet(set[str]):
    probes = 0

    def __contains__(self, item: object) -> bool:
        _CountingSet.probes += 1
        return super().__contains__(item)


def test_many_frames_sharing_one_label_cost_a_bounded_number_of_probes_each() -> None:
    labels = Labels(_CountingSet())
    _CountingSet.probes = 0
    claimed = [labels.claim("shared") for _ in range(500)]
    assert claimed[:3] == ["shared", "shared #2", "shared #3"] and len(set(claimed)) == 500
    # Linear: a few membership tests per claim, not one per label already handed out.
    assert _CountingSet.probes <= 4 * 500


@settings(max_examples=400)
@given(
    NASTY,
    NASTY,
    NASTY,
    NASTY,
    st.none() | NASTY,
    st.booleans(),
    TITLES,
    st.none() | NASTY,
    st.none() | NASTY,
)
def test_the_price_of_a_block_is_the_size_of_its_render(
    pid: str,
    fid: str,
    kind: str,
    label: str,
    content: str | None,
    verified: bool,
    title: tuple[str, str],
    valid_from: str | None,
    valid_to: str | None,
) -> None:
    f = frame(fid or "x", 0.5, content, kind=kind or "snippet", label=label or None)
    f = f.model_copy(
        update={
            "title": _titled(f.citation_label or "", title),
            "valid_from": valid_from,
            "valid_to": valid_to,
        }
    )
    for cite in (None, label):
        block = render_frame(pid, f, cite, verified=verified)
        assert rendered_size(pid, f, cite, verified=verified) == len(block.encode())


def _rank(entry: AuditEntry) -> int:
    assert entry.rank is not None  # the walk ranks every frame it reaches
    return entry.rank


def test_an_excluded_frames_cost_is_its_rendered_blocks_cost() -> None:
    shared = [
        ("p", frame(f"f{i}", 1 - i / 100, f"body <frame> {i} é" * (1 + i % 3), label="same"))
        for i in range(40)
    ]
    out = compose_for_prompt(shared, 300, strategy="score")
    over = [e for e in out.audit.entries if e.reason == "over_budget"]
    assert over and out.citations
    by_id = {f.id: f for _, f in shared}
    label_of = {c.frame: c.label for c in out.citations}
    included = [(_rank(e), label_of[e.frame]) for e in out.audit.entries if e.included]
    for e in over:
        # Its label as made unique when the walk reached it: by the inclusions above it.
        taken = {label for rank, label in included if rank < _rank(e)}
        block = render_frame("p", by_id[e.frame.frame_id], _reference_peek(taken, "same"))
        assert e.tokens == (len(block.encode()) + 3) // 4


def _frames(rows: list[tuple[str, str, str, str, str | None, bool, tuple[str, str]]]) -> list[Any]:
    """The frames of generated rows (provider, id, kind, label, content, verified, title)."""
    return [
        frame(
            fid or "x",
            0.5,
            content,
            kind=kind or "snippet",
            label=label or None,
            title=_titled(label or f"label {fid or 'x'}", title),
        )
        for _, fid, kind, label, content, _, title in rows
    ]


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(NASTY, NASTY, NASTY, NASTY, st.one_of(st.none(), NASTY), st.booleans(), TITLES),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["", "x", "plain ascii words\n\tand more"]),
)
def test_bulk_prices_equal_each_rendered_block(
    rows: list[tuple[str, str, str, str, str | None, bool, tuple[str, str]]], plain: str
) -> None:
    # Clean rows first, so a batch that is all plain ASCII takes the bulk path too.
    rows = [("p", "f", "snippet", "lab", plain, True, ("label", "")), *rows]
    pids = [pid for pid, *_ in rows]
    frames = _frames(rows)
    kinds, labels = kinds_and_labels(frames)
    contents = [f.content for f in frames]
    unverified = [i for i, row in enumerate(rows) if not row[5]]
    expected = [
        len(render_frame(pid, f, label, verified=i not in unverified).encode())
        for i, (pid, f, label) in enumerate(zip(pids, frames, labels, strict=True))
    ]
    titles = title_attributes(frames)
    # pricing reads all three columns in one pass: the same values
    assert fence_columns(frames) == (kinds, labels, titles)
    assert rendered_sizes(pids, kinds, labels, contents, unverified, titles) == expected
    one = rendered_sizes(pids[:1], kinds[:1], labels[:1], contents[:1], (), titles[:1])
    assert one == expected[:1]


def test_fence_columns_read_kind_label_title_and_validity_as_the_three_helpers_do() -> None:
    frames = [
        frame("a", content="x", label="  ", title="Runbook"),  # a blank label: its title
        frame("b", content="y", label="src/a.py L1-4", title="src/a.py L1-4 · in fn build"),
        frame("c", content="z", kind="memory", label="ADR 2", title="ADR 2: Queues"),
        frame("d", label="docs/x.md L1", valid_from="2026-06-01T00:00:00Z"),
        frame("e", label="docs/x.md L2", title="t" * 2000, valid_to="2026-11-02T10:00:00.5Z"),
    ]
    kinds, labels = kinds_and_labels(frames)
    titles = title_attributes(frames)
    assert fence_columns(frames) == (kinds, labels, titles)
    assert labels[0] == "Runbook" and titles[0] == ""
    assert titles[1] == ' in="fn build"' and "valid=" in titles[3] and "valid=" in titles[4]


def test_only_admitted_frames_are_rendered_and_the_audit_is_built_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hostd.compose._compose as compose_module

    renders: list[str] = []
    real = fence  # the function hostd.compose._compose calls

    def counting(*args: Any, **kwargs: Any) -> str:
        block = real(*args, **kwargs)
        renders.append(block)
        return block

    monkeypatch.setattr(compose_module, "fence", counting)
    frames = [("p", frame(f"f{i}", 1 - i / 1000, f"body {i} " * (5 + i % 40))) for i in range(300)]
    out = compose_for_prompt(frames, 600, strategy="score")
    over = [e for e in out.audit.entries if e.reason == "over_budget"]
    assert over and out.citations
    # Excluded frames are priced, never rendered: one render per included frame.
    assert len(renders) == len(out.citations)
    # The entries the wire carries are the ones the composition built, not rebuilt per read.
    first, again = out.audit.entry_dicts(), out.to_wire()["audit"]["entries"]
    assert all(a is b for a, b in zip(first, again, strict=True))


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(NASTY, NASTY, NASTY, NASTY, st.one_of(st.none(), NASTY), st.booleans(), TITLES),
        min_size=0,
        max_size=6,
    ),
    st.lists(st.sampled_from(["", "x", "plain ascii words\n\tand more", "a < b"]), max_size=3),
    st.randoms(use_true_random=False),
)
def test_blocks_built_from_the_bulk_bodies_equal_render_frame(
    rows: list[tuple[str, str, str, str, str | None, bool, tuple[str, str]]],
    plain: list[str],
    rnd: Any,
) -> None:
    # Plain rows mixed in at any place, so each bulk path (all clean ASCII, clean ASCII
    # beside other text, neither) is taken.
    rows = rows + [("p", "f", "snippet", "lab", text, True, ("label", "")) for text in plain]
    rnd.shuffle(rows)
    pids = [pid for pid, *_ in rows]
    frames = _frames(rows)
    kinds, labels = kinds_and_labels(frames)
    contents = [f.content for f in frames]
    unverified = [i for i, row in enumerate(rows) if not row[5]]
    titles = title_attributes(frames)
    bodies, sizes, clean = priced_blocks(pids, kinds, labels, contents, unverified, titles)
    assert bodies == neutral_bodies(contents)
    for i, (pid, f, label) in enumerate(zip(pids, frames, labels, strict=True)):
        verified = i not in unverified
        block = render_frame(pid, f, label, verified=verified)
        title = titles[i]
        assert (
            fence(pid, f.kind, label, bodies[i], verified=verified, clean=clean, title=title)
            == block
        )
        assert fence(pid, f.kind, label, bodies[i], verified=verified, title=title) == block
        assert sizes[i] == len(block.encode())


@settings(max_examples=200)
@given(st.lists(NASTY.filter(lambda t: not t.isascii()), min_size=1, max_size=8))
def test_remembered_bodies_are_the_bodies_neutralised_afresh(texts: list[str]) -> None:
    # Asked twice: the first asking may neutralise (or find a text from an earlier
    # example), the second finds every text; both answer what a fresh pass does.
    want = [_neutral(t) for t in texts]
    sizes = [len(b.encode()) for b in want]
    for _ in range(2):
        assert neutral_bodies_sized(texts) == (want, sizes)


def test_the_remembered_bodies_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = functools.lru_cache(maxsize=4)(_render._neutral_and_size)
    monkeypatch.setattr(_render, "_remembered", kept)
    monkeypatch.setattr(_render, "_BODY_CHARS", 10)
    texts = [f"é{i}<frame" for i in range(9)]
    for t in texts:
        neutral_bodies_sized([t])
    assert kept.cache_info().currsize == 4
    neutral_bodies_sized(["é" * 11])  # too long to keep
    assert kept.cache_info().misses == 9
    assert neutral_bodies_sized(["é" * 11])[0] == [_neutral("é" * 11)]
