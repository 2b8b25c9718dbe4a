"""The verify stage's per-frame fast paths give what the reference functions give.

``quick_inline_check`` against ``check_inline_digest`` (D1, D4), ``settled_state``
against ``decide_frame`` (D4, F5, F17, V3), and ``merge`` with its shared states
against ``merge`` deciding every frame with ``decide_frame``: on generated inputs,
honest, lying and malformed alike.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.engine.verify import (
    Checked,
    HeldFrame,
    HeldJudgement,
    InlineCheck,
    InlineMemo,
    InlineOutcome,
    SourceCheck,
    SourceOutcome,
    Unverifiable,
    VerifyPlan,
    _judge,
    check_inline_digest,
    decide_frame,
    merge,
)
from hostd.engine.verify._rules import quick_inline_check, settled_state, sourceless_states
from hostd.protocol import ContextFrame, FrameId, canonical_token_cost, sha256_digest

D_A = sha256_digest(b"a")
D_B = sha256_digest(b"b")

# Few distinct texts too, so the same content and digest come back (InlineMemo).
_text = st.sampled_from(["a", "b", "", "caf\u00e9\r\n"]) | st.text(
    st.characters(exclude_categories=["Cs"]), max_size=40
)


@st.composite
def frames(draw: st.DrawFn) -> ContextFrame:
    """A frame whose digest is honest, lying, absent or malformed, with or without
    content, in any representation (the stage sees what the leg audit let through and
    more)."""
    content = draw(st.none() | _text)
    honest = sha256_digest(content.encode()) if content is not None else None
    digest = draw(
        st.sampled_from([honest, None, D_A, D_B, "sha256:XYZ", ""])
        | _text.map(lambda t: sha256_digest(t.encode()))
    )
    representation = draw(st.sampled_from([None, "full", "compact", "reference", "other"]))
    return ContextFrame(
        id=draw(st.sampled_from(["a", "b", "c"])),
        kind="snippet",
        title="t",
        content=content,
        content_digest=digest,
        representation=representation,
        score=0.5,
        token_cost=canonical_token_cost(content),
        citation_label="c",
    )


def _honest() -> ContextFrame:
    return ContextFrame(
        id="x",
        kind="snippet",
        title="t",
        content="a",
        content_digest=D_A,
        score=0.5,
        token_cost=1,
        citation_label="c",
    )


_INLINES = [
    InlineCheck(InlineOutcome.CHECKED, D_A, D_A),
    quick_inline_check(_honest()),  # the shared value, without the digests
    InlineCheck(InlineOutcome.MISMATCH, D_A, D_B),
    InlineCheck(InlineOutcome.ABSENT),
    InlineCheck(InlineOutcome.NO_CONTENT),
    InlineCheck(InlineOutcome.NO_CONTENT, declared=D_A),
]
_inlines = st.sampled_from(_INLINES)
_REASONS = [None, *(u.value for u in Unverifiable)]
_STATES: list[dict[str, Any]] = [{}, {"uri": "file:///x"}, {"uri": "file:///x", "expected": D_A}]
# Every source check the strategies draw from: a finite set, so the properties over
# it alone are checked exhaustively.
_SOURCES: list[SourceCheck | None] = [
    None,
    *(SourceCheck(o, r, dict(f)) for o in SourceOutcome for r in _REASONS for f in _STATES),
]
_sources = st.none() | st.builds(
    SourceCheck,
    st.sampled_from(list(SourceOutcome)),
    st.sampled_from(_REASONS),
    st.sampled_from(_STATES),
)


@settings(max_examples=300, deadline=None)
@given(frames(), _sources, st.booleans(), st.sampled_from(["exclude", "include"]))
def test_quick_inline_check_decides_as_check_inline_digest(
    frame: ContextFrame, source: SourceCheck | None, reused: bool, untrusted: str
) -> None:
    full = check_inline_digest(frame)
    quick = quick_inline_check(frame)
    assert quick.outcome == full.outcome
    if full.outcome != InlineOutcome.CHECKED:
        assert quick == full  # a mismatch names both digests, as before
    assert decide_frame(quick, source, reused=reused, untrusted=untrusted) == decide_frame(
        full, source, reused=reused, untrusted=untrusted
    )


# Each example checks up to 24 frames through one memo (about 1,500 checks in all,
# bounds 1-4 entries and 0-8 characters each met many times); Hypothesis's generation
# of the frames is most of the cost.
@settings(max_examples=150, deadline=None)
@given(st.lists(frames(), max_size=12), st.integers(1, 4), st.integers(0, 8))
def test_inline_memo_checks_as_quick_inline_check(
    batch: list[ContextFrame], max_entries: int, max_chars: int
) -> None:
    # Twice over the same memo: the second pass answers from what the first kept.
    memo = InlineMemo(max_entries=max_entries, max_chars=max_chars)
    for frame in [*batch, *batch]:
        assert memo.check(frame) == quick_inline_check(frame)
        assert len(memo) <= max_entries


def test_inline_memo_remembers_honest_contents_only() -> None:
    memo = InlineMemo()
    lying = _honest().model_copy(update={"content": "b"})  # claims sha256("a")
    assert memo.check(lying).outcome == InlineOutcome.MISMATCH
    assert len(memo) == 0  # a mismatch is never remembered
    assert memo.check(lying).outcome == InlineOutcome.MISMATCH
    assert memo.check(_honest()).outcome == InlineOutcome.CHECKED and len(memo) == 1
    # The same digest with other content is hashed again, and still a mismatch.
    assert memo.check(lying) == quick_inline_check(lying)


def test_settled_state_is_decide_frames_state() -> None:
    # Every inline check, source check, reuse and untrusted policy: a finite space.
    for inline in _INLINES:
        for source in _SOURCES:
            for reused in (False, True):
                for untrusted in ("exclude", "include"):
                    got = settled_state(inline, source, reused)
                    if got is None:
                        continue  # decide_frame decides
                    d = decide_frame(inline, source, reused=reused, untrusted=untrusted)
                    assert d.excluded is None and not d.rubber_stamp
                    assert dict(got) == d.state


def test_sourceless_states_are_settled_states() -> None:
    for inline in _INLINES:
        for reused in (False, True):
            got = sourceless_states(reused).get(inline.outcome)
            assert got == settled_state(inline, None, reused)


def test_settled_state_covers_the_common_frames() -> None:
    # Without this the fast path could silently never be taken.
    checked = InlineCheck(InlineOutcome.CHECKED, D_A, D_A)
    verified = SourceCheck(SourceOutcome.VERIFIED, None, {"provenance_checked": 1})
    assert settled_state(checked, None, False) == {"state": "content_checked"}
    assert settled_state(checked, verified, False) == {"state": "source_verified"}
    assert settled_state(InlineCheck(InlineOutcome.ABSENT), None, False) == {
        "state": "unverifiable",
        "reason": "no_content_digest",
    }
    assert settled_state(checked, None, True) == {"state": "provider_verified"}
    assert settled_state(InlineCheck(InlineOutcome.MISMATCH, D_A, D_B), None, False) is None
    outside = SourceCheck(SourceOutcome.UNVERIFIABLE, "untrusted_path", {"uri": "file:///x"})
    assert settled_state(checked, outside, False) is None


@st.composite
def turns(draw: st.DrawFn) -> Checked:
    """A checked turn: held copies standing first, then fresh frames, FrameIds repeating."""
    n_held = draw(st.integers(0, 4))
    n_fresh = draw(st.integers(0, 12))
    pids = st.sampled_from(["p", "q"])
    items: list[tuple[str, ContextFrame]] = []
    held: list[HeldFrame] = []
    checks: list[tuple[InlineCheck, SourceCheck | None]] = []
    for i in range(n_held + n_fresh):
        pid, frame = draw(pids), draw(frames())
        items.append((pid, frame))
        if i < n_held:
            held.append(HeldFrame.of(pid, frame))
        inline = draw(st.sampled_from([quick_inline_check(frame), check_inline_digest(frame)]))
        checks.append((draw(_inlines | st.just(inline)), draw(_sources)))
    judgement = HeldJudgement("s" if held else None, valid=held)
    return Checked(
        VerifyPlan(judgement.session),
        judgement,
        n_fresh,
        items,
        [FrameId.of(pid, f) for pid, f in items],
        checks,
        n_held,
        0,
    )


def _plain(result: Any) -> dict[str, Any]:
    return {
        "accepted": result.accepted,
        "excluded": result.excluded,
        "verification": {k: dict(v) for k, v in result.verification.items()},
        "reused": result.reused,
        "figures": result.figures,
        "health": result.health,
        "evict": result.evict,
        "counts": result.counts,
    }


# Each turn holds up to 16 frames, held and fresh, FrameIds repeating: 150 turns
# merge over a thousand frames each way; generating them is most of the cost.
@settings(max_examples=150, deadline=None)
@given(turns(), st.sampled_from(["exclude", "include"]), st.sampled_from([{}, {"q": "include"}]))
def test_merge_with_shared_states_is_merge_deciding_every_frame(
    checked: Checked, untrusted: str, untrusted_for: dict[str, str]
) -> None:
    fast = merge(checked, untrusted_for, untrusted)
    with (
        mock.patch.object(_judge, "settled_state", lambda *_: None),
        mock.patch.object(_judge, "sourceless_states", lambda _: {}),
    ):
        slow = merge(checked, untrusted_for, untrusted)
    assert _plain(fast) == _plain(slow)
