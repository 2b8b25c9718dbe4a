"""Packing's bookkeeping: unique citation labels in linear time, and excluded frames
priced exactly as the block they would have been, without rendering it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import compose_for_prompt, render_frame
from hostd.compose._pack import Labels
from hostd.compose._render import rendered_size

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
@given(NASTY, NASTY, NASTY, NASTY, st.none() | NASTY, st.booleans())
def test_the_price_of_a_block_is_the_size_of_its_render(
    pid: str, fid: str, kind: str, label: str, content: str | None, verified: bool
) -> None:
    f = frame(fid or "x", 0.5, content, kind=kind or "snippet", label=label or None)
    for cite in (None, label):
        block = render_frame(pid, f, cite, verified=verified)
        assert rendered_size(pid, f, cite, verified=verified) == len(block.encode())


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
    included = [(e.rank, label_of[e.frame]) for e in out.audit.entries if e.included]
    for e in over:
        # Its label as made unique when the walk reached it: by the inclusions above it.
        taken = {label for rank, label in included if rank < e.rank}
        block = render_frame("p", by_id[e.frame.frame_id], _reference_peek(taken, "same"))
        assert e.tokens == (len(block.encode()) + 3) // 4
