"""accept_frames, the accept-only schema: what it accepts passes every frame rule.

Frames are generated around every boundary the schema encodes (blank strings of each
whitespace character, scores at and past [0, 1], stamps past the calendar, digests one
character off, provenance types next to ``file``, representations and their members,
a token cost off by one): whenever ``accept_frames`` accepts a reply, each frame is the
instance the model parses, ``check_frame`` finds nothing in it, and its cost is the
honest one. The exact path must stay the judge of everything else.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hostd.protocol import (
    PY_WHITESPACE,
    AcceptMemo,
    ContextFrame,
    ContextQuery,
    FrameId,
    accept_frames,
    accept_reply,
    canonical_token_cost,
    check_budget,
    check_frame,
    parse_frames,
    sha256_digest,
)
from hostd.protocol._time import is_timestamp

_DIGEST = sha256_digest(b"x")
_DIGESTS = st.sampled_from(
    [
        _DIGEST,
        _DIGEST.upper(),
        _DIGEST[:-1],
        _DIGEST + "0",
        _DIGEST + "\n",
        "sha256:" + "g" * 64,
        "sha1:" + "0" * 40,
        "",
    ]
)
# Blank and nearly blank strings: each whitespace character alone, around a letter, and
# characters that are whitespace to one engine and not the other.
_SPACES = st.sampled_from([*PY_WHITESPACE, "\u200b", "\ufeff", "\x00", "\u180e"])
_TEXT = st.one_of(
    st.text(max_size=12),
    st.lists(_SPACES, min_size=0, max_size=3).map("".join),
    st.tuples(st.lists(_SPACES, max_size=2), st.sampled_from(["a", "é", "\u0130"])).map(
        lambda t: "".join(t[0]) + t[1]
    ),
)
_SCORES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 0.0, -0.0, 1.0, 1.0000000000000002, -5e-324, 2, "0.5", True]),
)


@st.composite
def stamps(draw: st.DrawFn) -> str:
    """F4 stamps and near misses: every field at and past its bounds, leap days, a
    fraction or a broken one, other digits, separators and letter cases."""
    y = draw(st.sampled_from([0, 1, 4, 100, 400, 1900, 2000, 2024, 2100, 2026, 9999]))
    y = draw(st.one_of(st.just(y), st.integers(0, 9999)))
    mo = draw(st.integers(0, 13))
    d = draw(st.one_of(st.sampled_from([0, 1, 28, 29, 30, 31, 32]), st.integers(0, 32)))
    h = draw(st.one_of(st.sampled_from([0, 23, 24]), st.integers(0, 24)))
    mi = draw(st.one_of(st.sampled_from([0, 59, 60]), st.integers(0, 60)))
    s = draw(st.one_of(st.sampled_from([0, 59, 60]), st.integers(0, 60)))
    frac = draw(st.sampled_from(["", "", "", ".5", ".123456789", ".", ".x", "\u0665"]))
    text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{frac}Z"
    bend = draw(st.sampled_from(["", "", "", "", "lower", "nl", "digit", "space"]))
    if bend == "lower":
        text = text.lower()
    elif bend == "nl":
        text += "\n"
    elif bend == "digit":
        text = "\u0662" + text[1:]  # an Arabic-Indic two: decimal, not ASCII
    elif bend == "space":
        text = " " + text
    return text


_PROVENANCE = st.fixed_dictionaries(
    {"type": st.sampled_from(["file", "File", "file ", "fil", "files", "memory", "", "url"])},
    optional={"uri": st.text(max_size=5), "digest": st.one_of(st.none(), _DIGESTS)},
)
_RELATION = st.fixed_dictionaries(
    {"rel": st.just("calls"), "target_uri": _TEXT},
    optional={"display_name": st.one_of(st.none(), _TEXT)},
)


_BENDS: dict[str, st.SearchStrategy[Any]] = {
    "kind": st.sampled_from(["snippet", "fact", "doc", "graph", "Snippet", "x-new", ""]),
    "title": _TEXT,
    "score": _SCORES,
    "token_cost": st.sampled_from([1, -1]),  # added to the honest cost
    "citation_label": st.one_of(st.none(), _TEXT),
    "valid_from": st.one_of(st.none(), stamps()),
    "valid_to": st.one_of(st.none(), stamps()),
    "recorded_at": st.one_of(st.none(), stamps()),
    "content": st.none(),
    "content_digest": st.one_of(st.none(), _DIGESTS),
    "representation": st.sampled_from([None, "full", "compact", "reference", ""]),
    "content_ref": st.sampled_from([None, {"provider_id": "p", "uri": "u"}]),
    "transform": st.sampled_from([None, {"method": "m", "implementation": "i", "version": "1"}]),
    "canonical_content_hash": st.sampled_from([None, _DIGEST]),
    "provenance": st.lists(_PROVENANCE, max_size=3),
    "relations": st.lists(_RELATION, max_size=2),
}


@st.composite
def raw_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A valid full frame with none, one or a few members bent (or dropped)."""
    raw = _valid(draw(st.text(max_size=40)))
    for key in draw(st.lists(st.sampled_from(sorted(_BENDS)), max_size=3, unique=True)):
        if draw(st.integers(0, 5)) == 0:
            raw.pop(key, None)
        elif key == "token_cost":
            raw[key] += draw(_BENDS[key])
        else:
            raw[key] = draw(_BENDS[key])
    if "content" not in raw or raw["content"] is None:
        raw["token_cost"] = draw(st.sampled_from([0, raw.get("token_cost", 0)]))
    return raw


def _valid(content: str = "body") -> dict[str, Any]:
    return {
        "id": "a",
        "kind": "snippet",
        "title": "t",
        "content": content,
        "score": 0.5,
        "token_cost": canonical_token_cost(content),
        "citation_label": "c",
        "recorded_at": "2024-02-29T23:59:59.5Z",
        "content_digest": sha256_digest(content.encode()),
        "provenance": [{"type": "file", "digest": _DIGEST}, {"type": "memory"}],
        "relations": [{"rel": "calls", "target_uri": "x", "display_name": "y"}],
    }


# 600 replies bend about 2,400 members (150 of each of the 16 kinds, each through
# every value its strategy holds): most of an example's cost is Hypothesis's own
# generation, so the count is what the bends need, not more.
@pytest.mark.slow
@given(st.lists(raw_frames(), min_size=1, max_size=4))
@settings(max_examples=600, deadline=None)
@example([_valid()])
def test_what_the_strict_schema_accepts_passes_every_frame_rule(raw: list[dict]) -> None:
    got = accept_frames(raw)
    if got is None:
        return
    frames, costs = got
    assert len(frames) == len(raw) == len(costs)
    for item, frame, cost in zip(raw, frames, costs, strict=True):
        assert type(frame) is ContextFrame
        lax = ContextFrame.model_validate(item)
        assert frame == lax
        assert frame.model_fields_set == lax.model_fields_set
        assert check_frame(frame) == []
        assert cost == canonical_token_cost(frame.content) == frame.token_cost
    assert parse_frames(raw) == [(f, []) for f in frames]


def _schema_is_f4(stamp: str) -> None:
    frame = {**_valid(), "valid_from": stamp}
    accepted = accept_frames([frame]) is not None
    if accepted:
        assert is_timestamp(stamp), stamp
    elif stamp.isascii():
        assert not is_timestamp(stamp), stamp  # in ASCII the schema is F4 exactly


# The bounds are swept exhaustively below; Hypothesis mixes them with any year, day,
# fraction and bend, a few hundred examples (its generation is most of their cost).
@pytest.mark.slow
@given(stamps())
@settings(max_examples=300, deadline=None)
@example("2024-02-29T00:00:00Z")
@example("2100-02-29T00:00:00Z")
@example("2000-02-29T00:00:00Z")
@example("0000-01-01T00:00:00Z")
def test_stamps_the_schema_accepts_are_f4_and_ascii_ones_are_all_accepted(stamp: str) -> None:
    _schema_is_f4(stamp)


def test_stamps_at_and_past_every_bound_are_judged_as_f4() -> None:
    """Each year the stamps above favour with every month 0-13 and day 0-32, every hour
    0-24 with minutes and seconds at and past theirs, and each fraction with each bend."""
    years = [0, 1, 4, 100, 400, 1900, 2000, 2024, 2100, 2026, 9999]
    stamps = [
        f"{y:04d}-{mo:02d}-{d:02d}T12:30:30Z" for y in years for mo in range(14) for d in range(33)
    ]
    stamps += [
        f"2024-02-29T{h:02d}:{mi:02d}:{s:02d}Z"
        for h in range(25)
        for mi in (0, 1, 59, 60)
        for s in (0, 1, 59, 60)
    ]
    for frac in ("", ".5", ".123456789", ".", ".x", "\u0665"):
        for date in ("2024-02-29", "2023-02-29"):
            text = f"{date}T23:59:59{frac}Z"
            stamps += [text, text.lower(), text + "\n", "\u0662" + text[1:], " " + text]
    for stamp in stamps:
        _schema_is_f4(stamp)


def test_valid_frames_take_the_fast_path() -> None:
    """Guards the fast path against refusing everything (then it never runs)."""
    frames = [_valid("one"), {**_valid("two"), "id": "b", "kind": "fact"}]
    got = accept_frames(frames)
    assert got is not None
    assert [f.id for f in got[0]] == ["a", "b"]
    assert got[1] == [1, 1]


def test_what_it_refuses_the_exact_path_names() -> None:
    bent = [
        {**_valid(), "score": math.nan},
        {**_valid(), "title": "\x1f"},  # blank to Python, not to Unicode White_Space
        {**_valid(), "citation_label": None},
        {**_valid(), "recorded_at": "2023-02-29T00:00:00Z"},
        {**_valid(), "provenance": [{"type": "file"}]},
        {**_valid(), "content_digest": _DIGEST.upper()},
        {**_valid(), "representation": "full"},
        {**_valid(), "token_cost": 99},
        {**_valid(), "relations": [{"rel": "r", "target_uri": " "}]},
        {**_valid(), "kind": "x-new"},
    ]
    for frame in bent:
        assert accept_frames([_valid(), frame]) is None, frame
    assert accept_frames([ContextFrame.model_validate(_valid())]) is None  # checked as it is


def test_the_whitespace_set_is_what_str_isspace_holds() -> None:
    every = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())
    assert every == PY_WHITESPACE


# Each example judges up to sixteen replies three times through one small memo, so
# 200 already pass thousands of frames through it, hits, misses and restarts.
@pytest.mark.slow
@given(st.lists(st.lists(raw_frames(), min_size=1, max_size=4), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
@example([[_valid()], [_valid(), {**_valid(), "score": math.nan}], [{**_valid(), "score": None}]])
def test_a_memo_answers_what_validating_answers(replies: list[list[dict]]) -> None:
    """Replies decoded from JSON, judged in turn through one memo: each answer equals
    the memo-less one, frames and costs, whatever the memo already holds."""
    memo = AcceptMemo(max_entries=3)  # small: the memo also starts over mid-run
    for raw in replies:
        for reply in (raw, raw[::-1], raw):  # the same frames again, hit this time
            plain = accept_frames(reply)
            remembered = accept_frames(reply, memo)
            assert (plain is None) == (remembered is None), reply
            if plain is not None and remembered is not None:
                assert remembered[0] == plain[0]
                assert [f.model_fields_set for f in remembered[0]] == [
                    f.model_fields_set for f in plain[0]
                ]
                assert remembered[1] == plain[1]
                assert all(type(f) is ContextFrame for f in remembered[0])
        assert len(memo) <= memo.max_entries


def test_a_memo_validates_a_frame_once_and_never_keys_a_null() -> None:
    memo = AcceptMemo()
    one, two = _valid("one"), {**_valid("two"), "id": "b"}
    first = accept_frames([one, two], memo)
    assert first is not None and len(memo) == 2
    again = accept_frames([two, one], memo)
    assert again is not None
    assert again[0][0] is first[0][1] and again[0][1] is first[0][0]  # not built again
    # NaN is written as null: neither it nor a null member is ever remembered, so a
    # NaN score cannot be answered by an accepted frame whose text reads the same.
    assert accept_frames([{**one, "uri": None}], memo) is not None
    assert accept_frames([{**one, "score": math.nan}], memo) is None
    assert accept_frames([{**one, "uri": math.inf}], memo) is None  # reads as uri: null
    assert len(memo) == 2
    # Too long to remember, still accepted.
    assert accept_frames([_valid("x" * 5000)], memo) is not None
    assert len(memo) == 2


def test_a_memo_refuses_what_it_would_refuse_unremembered() -> None:
    memo = AcceptMemo()
    assert accept_frames([_valid()], memo) is not None
    for bent in ({**_valid(), "token_cost": 99}, {**_valid(), "kind": "x-new"}):
        assert accept_frames([_valid(), bent], memo) is None
    assert accept_frames([ContextFrame.model_validate(_valid())], memo) is None


# The budgets are small (0-40 tokens, 1-5 frames): 300 examples meet each of them
# with replies over and under it.
@pytest.mark.slow
@given(st.lists(raw_frames(), min_size=1, max_size=4), st.integers(0, 40), st.integers(1, 5))
@settings(max_examples=300, deadline=None)
@example([_valid()], 10_000, 4)
def test_an_accepted_reply_is_accepted_frames_within_the_budget_with_their_ids(
    raw: list[dict], max_tokens: int, max_frames: int
) -> None:
    query = ContextQuery(goal="g", max_tokens=max_tokens, max_frames=max_frames)
    got = accept_reply(raw, query, "alpha")
    clean = accept_frames(raw)
    if clean is None or check_budget(query, clean[0], sum(clean[1])):
        assert got is None  # the exact path judges it, and names what breaks B1/B4
        return
    assert got is not None
    assert got.frames == clean[0]
    assert got.tokens == sum(clean[1]) <= max_tokens
    assert len(got.frames) <= max_frames
    assert got.ids == [FrameId.of("alpha", f) for f in got.frames]


def test_a_full_memo_drops_its_oldest_frame_for_each_new_one() -> None:
    # First in, first out, one frame at a time (never emptied at once): the three most
    # recently remembered frames are answered from the memo, the older ones built again.
    memo = AcceptMemo(max_entries=3)
    frames = [{**_valid(f"text {i}"), "id": f"f{i}"} for i in range(5)]

    def accepted(i: int) -> ContextFrame:
        got = accept_frames([frames[i]], memo)
        assert got is not None
        return got[0][0]

    first = []
    for i in range(5):
        first.append(accepted(i))
        assert len(memo) == min(i + 1, 3)
    for i in (4, 3, 2, 1):  # hits first (a hit remembers nothing new), then a miss
        again = accepted(i)
        assert (again is first[i]) is (i >= 2), i
        assert again == first[i]
    # The miss was remembered in place of the oldest (2): 3 and 4 are still answered.
    assert accepted(3) is first[3] and accepted(4) is first[4]
    assert accepted(2) is not first[2] and len(memo) == 3
