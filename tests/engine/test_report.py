"""``FanOut``'s report values: UR1's usage and the compose reply's fan-out part."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.engine import FanOut, LegReport, LegStatus
from hostd.protocol import ContextFrame, ContextQuery, FrameId
from tests.compose._helpers import frame


def _usage(fan: FanOut, served: list[FrameId] | None) -> dict[str, Any]:
    # UR1 as first written: one pass, every figure summed per frame.
    wanted = None if served is None else set(served)
    frames: list[dict[str, Any]] = []
    per_provider: dict[str, int] = {}
    total = 0
    for pid, f in fan.accepted:
        fid = FrameId(pid, f.id, f.content_digest)
        if wanted is not None and fid not in wanted:
            continue
        total += f.token_cost
        per_provider[pid] = per_provider.get(pid, 0) + f.token_cost
        frames.append({"frame": fid.to_wire(), "token_cost": f.token_cost})
    return {
        "budget_consumed": total,
        "global_budget": fan.global_budget,
        "frames": frames,
        "providers": per_provider,
    }


_FRAMES = st.lists(
    st.tuples(
        st.sampled_from(["alpha", "beta", "gamma"]),
        st.sampled_from(["f1", "f2", "f3"]),
        st.sampled_from(["", "short", "a longer piece of evidence " * 3]),
        st.booleans(),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(rows=_FRAMES, data=st.data())
def test_usage_sums_each_providers_frames_in_any_order_and_any_served_subset(
    rows: list[tuple[str, str, str, bool]], data: st.DataObject
) -> None:
    # ``accepted`` is ordered by provider in a fan-out; the sums must not depend on it.
    accepted: list[tuple[str, ContextFrame]] = [
        (pid, frame(fid, content=content, with_digest=digest)) for pid, fid, content, digest in rows
    ]
    fan = FanOut(ContextQuery(goal="g", max_frames=8, max_tokens=100), 100, accepted=accepted)
    ids = [FrameId(pid, f.id, f.content_digest) for pid, f in accepted]
    served = data.draw(st.none() | st.lists(st.sampled_from(ids), max_size=6) if ids else st.none())
    got = fan.usage_report(served)
    assert got == _usage(fan, served)
    assert list(got["providers"]) == list(_usage(fan, served)["providers"])


def test_the_compose_part_is_the_legs_sorted_the_usage_and_the_verify_figures() -> None:
    reports = {p: LegReport(p, LegStatus.OK, frames_accepted=1) for p in ("beta", "alpha")}
    accepted = [("alpha", frame("a")), ("beta", frame("b"))]
    fan = FanOut(
        ContextQuery(goal="g", max_frames=8, max_tokens=100), 100, accepted, reports=reports
    )
    part = fan.compose_part()
    assert list(part) == ["providers", "usage"]  # no verify figures: no member
    assert part["providers"] == [reports["alpha"].to_wire(), reports["beta"].to_wire()]
    assert part["usage"] == fan.usage_report()
    fan.figures = {"reused": 2}
    part = fan.compose_part()
    assert list(part) == ["providers", "usage", "verification"]
    assert part["verification"] is fan.figures
