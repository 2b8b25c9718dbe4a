"""The compose summary says why a provider's frames were dropped as invalid in the
words check-provider uses (``missing``, ``a number; expected a string``), bounded,
never quoting what the provider sent."""

from __future__ import annotations

from typing import Any

from hostd.cli._outcome import leg_failures, no_evidence
from hostd.protocol import parse_frames


def _leg(*frames: dict[str, Any]) -> dict[str, Any]:
    """An ``ok`` leg whose frames were all dropped, its violations as the daemon reports
    them (located under ``frames[i]``, from the protocol's own parse)."""
    violations = [
        {**v.to_wire(), "field": f"frames[{i}].{v.field}"}
        for i, (_frame, found) in enumerate(parse_frames(list(frames)))
        for v in found
    ]
    entries = [
        {"frame": {"provider_id": "adr"}, "reason": "invalid_frame", "disposition": "excluded"}
        for _ in frames
    ]
    return {
        "prompt": "",
        "audit": {"entries": entries},
        "providers": [{"provider_id": "adr", "status": "ok", "violations": violations}],
    }


def _frame(i: int, **over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "id": f"adr:{i}",
        "kind": "doc",
        "title": "Secret plan for the io pool",
        "content": "abcd",
        "score": 0.5,
        "token_cost": 1,
        "citation_label": f"ADR {i}",
    }
    raw.update(over)
    return {k: v for k, v in raw.items() if v is not None}


def test_a_missing_title_is_said_missing_for_each_frame_at_once() -> None:
    result = _leg(_frame(0, title=None), _frame(1, title=None))
    (line,) = leg_failures({**result, "prompt": "evidence"})
    assert line == (
        "  adr: ok, but 2 frame(s) dropped: invalid_frame 2 "
        "(schema frames[0].title, frames[1].title: missing)"
    )
    (_total, why) = no_evidence(result) or []
    assert why == (
        "  adr: ok, 2 frame(s) offered, none included "
        "(invalid_frame 2: schema frames[0].title, frames[1].title: missing)"
    )


def test_a_wrong_type_says_its_json_type_never_the_value() -> None:
    result = _leg(_frame(0, title=7), _frame(1, token_cost="1"), _frame(2, title=" "))
    (line,) = leg_failures({**result, "prompt": "evidence"})
    assert "schema frames[0].title: a number; expected a string" in line, line
    assert "schema frames[1].token_cost: a string; expected a number (an integer)" in line
    assert "F2 frames[2].title: title is empty" in line, line
    assert "Secret" not in line


def test_many_reasons_are_bounded() -> None:
    frames = [_frame(i, title=None) for i in range(12)]
    frames += [_frame(20, score=2.0), _frame(21, citation_label=" "), _frame(22, kind=5)]
    frames += [_frame(23, recorded_at="yesterday"), _frame(24, token_cost=9), _frame(25, id=3)]
    (line,) = leg_failures({**_leg(*frames), "prompt": "evidence"})
    assert "schema frames[0].title, frames[1].title, frames[2].title, +9 more: missing" in line
    assert line.endswith("; +1 more)"), line
    assert len(line) < 500, len(line)


def test_each_reason_a_provider_is_blamed_for_has_what_to_fix() -> None:
    # The compose summary and hostd mcp's text count the same drops (hostd._hints).
    from hostd._hints import PROVIDER_FAULTS
    from hostd.cli._outcome import _PROVIDER_FAULTS

    assert set(_PROVIDER_FAULTS) == set(PROVIDER_FAULTS)
