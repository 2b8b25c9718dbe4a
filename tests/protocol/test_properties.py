"""Hypothesis round-trips: any frame or query survives to_wire → parse unchanged."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    FrameId,
    canonical_json,
    canonical_token_cost,
    check_frame,
    sha256_digest,
)

text = st.text(max_size=40)
digest = st.binary(max_size=16).map(sha256_digest)
stamp = st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + "Z")

provenance = st.fixed_dictionaries(
    {"type": st.sampled_from(["file", "derivation", "url"])},
    optional={"uri": text, "range": st.sampled_from(["L1", "L2-9", "step:2"]), "digest": digest},
)
relation = st.fixed_dictionaries(
    {"rel": st.text(min_size=1, max_size=10), "target_uri": st.text(min_size=1, max_size=10)},
    optional={"display_name": text},
)


@st.composite
def frames(draw: st.DrawFn) -> dict:
    content = draw(st.text(max_size=200))
    raw = {
        "id": draw(st.text(min_size=1, max_size=20)),
        "kind": draw(st.sampled_from(["snippet", "symbol", "fact", "doc", "memory", "x-new"])),
        "title": draw(text),
        "content": content,
        "score": draw(st.floats(0, 1)),
        "token_cost": canonical_token_cost(content),
        "citation_label": draw(text),
        "provenance": draw(st.lists(provenance, max_size=3)),
        "relations": draw(st.lists(relation, max_size=2)),
    }
    for key in ("valid_from", "valid_to", "recorded_at"):
        if draw(st.booleans()):
            raw[key] = draw(stamp)
    if draw(st.booleans()):
        raw["content_digest"] = sha256_digest(content.encode())
    if draw(st.booleans()):
        raw["future_member"] = draw(text)  # U1: ignored
    return raw


@given(frames())
@settings(max_examples=200)
def test_frames_round_trip(raw: dict) -> None:
    frame = ContextFrame.model_validate(raw)
    wire = frame.to_wire()
    assert "future_member" not in wire
    again = ContextFrame.model_validate(json.loads(json.dumps(wire)))
    assert again == frame
    assert canonical_json(again.to_wire()) == canonical_json(wire)
    # Rules are a pure function of the frame.
    assert check_frame(again) == check_frame(frame)


@given(
    st.fixed_dictionaries(
        {
            "goal": st.text(min_size=1),
            "max_frames": st.integers(0, 2**32 - 1),
            "max_tokens": st.integers(0, 2**32 - 1),
        },
        optional={
            "kinds": st.lists(st.sampled_from(["doc", "fact"])),
            "anchors": st.lists(text, max_size=3),
            "as_of": stamp,
            "query_text": text,
            "embedding": st.lists(st.floats(-1, 1), max_size=4),
        },
    )
)
def test_queries_round_trip(raw: dict) -> None:
    query = ContextQuery.model_validate(raw)
    assert ContextQuery.model_validate(query.to_wire()) == query


@given(
    st.lists(
        st.tuples(
            st.sampled_from("ab"), st.sampled_from("xy"), st.none() | st.sampled_from(["d1", "d2"])
        ),
        min_size=1,
        max_size=12,
    ),
    st.randoms(),
)
def test_frame_id_order_is_total_and_independent_of_input_order(ids, rnd) -> None:
    values = [FrameId(*t) for t in ids]
    shuffled = values[:]
    rnd.shuffle(shuffled)
    assert sorted(values) == sorted(shuffled)
    ordered = sorted(values)
    for a, b in zip(ordered, ordered[1:], strict=False):
        assert a <= b and not (b < a)
