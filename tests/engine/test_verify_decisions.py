"""The sync decisions of the verification stage: digests, states, requests, verdicts (V1–V4)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.engine.verify import (
    Exclusion,
    HeldFrame,
    InlineCheck,
    InlineOutcome,
    SourceCheck,
    SourceOutcome,
    Unverifiable,
    VerificationState,
    build_verify_requests,
    check_inline_digest,
    decide_frame,
    file_uri_path,
    judge_verdicts,
)
from hostd.protocol import (
    ContextFrame,
    FrameId,
    FrameVerdict,
    VerdictStatus,
    canonical_token_cost,
    sha256_digest,
)

D_A = sha256_digest(b"a")
D_B = sha256_digest(b"b")


def _frame(fid: str = "f", content: str | None = "body", **kw: Any) -> ContextFrame:
    fields: dict[str, Any] = {
        "id": fid,
        "kind": "snippet",
        "title": "t",
        "content": content,
        "content_digest": sha256_digest(content.encode()) if content is not None else None,
        "score": 0.5,
        "token_cost": canonical_token_cost(content),
        "citation_label": "c",
    }
    fields.update(kw)
    return ContextFrame(**fields)


# -- inline digest (D4) ----------------------------------------------------------------


def test_matching_inline_digest_is_checked() -> None:
    assert check_inline_digest(_frame()).outcome == InlineOutcome.CHECKED


def test_lying_inline_digest_is_a_mismatch() -> None:
    got = check_inline_digest(_frame(content_digest=D_A))
    assert got.outcome == InlineOutcome.MISMATCH
    assert got.declared == D_A and got.computed == sha256_digest(b"body")


def test_digest_covers_exact_utf8_bytes_without_normalisation() -> None:
    text = "caf\u00e9\r\n"
    assert check_inline_digest(_frame(content=text)).outcome == InlineOutcome.CHECKED
    nfd = _frame(content="cafe\u0301\r\n", content_digest=sha256_digest(text.encode()))
    assert check_inline_digest(nfd).outcome == InlineOutcome.MISMATCH
    lf = _frame(content="café\n", content_digest=sha256_digest(text.encode()))
    assert check_inline_digest(lf).outcome == InlineOutcome.MISMATCH


def test_absent_digest_is_absent_not_checked() -> None:
    assert check_inline_digest(_frame(content_digest=None)).outcome == InlineOutcome.ABSENT


def test_digest_without_content_checks_nothing() -> None:
    got = check_inline_digest(_frame(content=None, content_digest=D_A))
    assert got.outcome == InlineOutcome.NO_CONTENT


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_honest_content_checks(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates are not UTF-8 text, a frame cannot carry them
    assert check_inline_digest(_frame(content=text)).outcome == InlineOutcome.CHECKED


# -- decide_frame ------------------------------------------------------------------------

CHECKED = InlineCheck(InlineOutcome.CHECKED, D_A, D_A)
MISMATCH = InlineCheck(InlineOutcome.MISMATCH, D_A, D_B)
ABSENT = InlineCheck(InlineOutcome.ABSENT)
NO_CONTENT = InlineCheck(InlineOutcome.NO_CONTENT)
SRC_OK = SourceCheck(SourceOutcome.VERIFIED)
SRC_BAD = SourceCheck(SourceOutcome.MISMATCH, None, {"uri": "file:///x", "expected": D_A})
SRC_NA = SourceCheck(SourceOutcome.UNVERIFIABLE, "start_past_end", {"uri": "file:///x"})


@pytest.mark.parametrize("source", [None, SRC_OK, SRC_BAD, SRC_NA])
@pytest.mark.parametrize("reused", [False, True])
def test_inline_mismatch_always_excludes(source: SourceCheck | None, reused: bool) -> None:
    d = decide_frame(MISMATCH, source, reused=reused)
    assert d.excluded == Exclusion.DIGEST_MISMATCH and d.state is None
    # What the frame must carry (computed from its content), then what it carries.
    assert d.detail["expected"] == D_B and d.detail["actual"] == D_A


@pytest.mark.parametrize("inline", [CHECKED, ABSENT, NO_CONTENT])
def test_source_mismatch_excludes(inline: InlineCheck) -> None:
    d = decide_frame(inline, SRC_BAD, reused=False)
    assert d.excluded == Exclusion.SOURCE_MISMATCH and not d.rubber_stamp
    assert d.detail["uri"] == "file:///x"


SRC_OUTSIDE = SourceCheck(SourceOutcome.UNVERIFIABLE, "untrusted_path", {"uri": "file:///x"})


@pytest.mark.parametrize("inline", [CHECKED, ABSENT, NO_CONTENT])
@pytest.mark.parametrize("reused", [False, True])
def test_a_source_outside_the_trusted_roots_is_excluded_or_included_marked(
    inline: InlineCheck, reused: bool
) -> None:
    # A valid verdict (reused) vouches for nothing the host cannot check itself.
    for d in (
        decide_frame(inline, SRC_OUTSIDE, reused=reused),
        decide_frame(inline, SRC_OUTSIDE, reused=reused, untrusted="exclude"),
    ):
        assert d.excluded == Exclusion.UNTRUSTED_SOURCE and d.state is None
        assert d.detail["uri"] == "file:///x"
    kept = decide_frame(inline, SRC_OUTSIDE, reused=reused, untrusted="include")
    assert kept.excluded is None
    assert kept.state == {"state": "unverifiable", "reason": "outside_trusted_roots"}
    # Other unverifiable sources are not "untrusted": the setting does not touch them.
    other = decide_frame(inline, SRC_NA, reused=reused)
    assert other.excluded is None


def test_valid_verdict_with_source_mismatch_is_a_rubber_stamp() -> None:
    d = decide_frame(CHECKED, SRC_BAD, reused=True)
    assert d.excluded == Exclusion.SOURCE_MISMATCH and d.rubber_stamp


@pytest.mark.parametrize(
    ("inline", "source", "reused", "state"),
    [
        (CHECKED, None, False, {"state": "content_checked"}),
        (CHECKED, SRC_OK, False, {"state": "source_verified"}),
        (ABSENT, SRC_OK, False, {"state": "source_verified"}),
        (
            CHECKED,
            SRC_NA,
            False,
            {"state": "unverifiable", "reason": "start_past_end", "content_checked": True},
        ),
        (ABSENT, SRC_NA, False, {"state": "unverifiable", "reason": "start_past_end"}),
        (ABSENT, None, False, {"state": "unverifiable", "reason": "no_content_digest"}),
        (NO_CONTENT, None, False, {"state": "unverifiable", "reason": "no_inline_content"}),
        (CHECKED, None, True, {"state": "provider_verified"}),
        (CHECKED, SRC_OK, True, {"state": "provider_verified", "source": "source_verified"}),
        (
            CHECKED,
            SRC_NA,
            True,
            {
                "state": "provider_verified",
                "source": "unverifiable",
                "source_reason": "start_past_end",
            },
        ),
    ],
)
def test_state_is_the_strongest_that_holds(
    inline: InlineCheck, source: SourceCheck | None, reused: bool, state: dict[str, Any]
) -> None:
    d = decide_frame(inline, source, reused=reused)
    assert d.excluded is None and not d.rubber_stamp
    assert dict(d.state or {}) == state


def test_unverifiable_is_never_verified_nor_a_mismatch() -> None:
    for inline in (CHECKED, ABSENT, NO_CONTENT):
        d = decide_frame(inline, SRC_NA, reused=False)
        assert d.excluded is None
        assert d.state is not None and d.state["state"] == VerificationState.UNVERIFIABLE


# -- file URIs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("file:///repo/a.py", "/repo/a.py"),
        ("file://localhost/repo/a.py", "/repo/a.py"),
        ("file:/repo/a.py", "/repo/a.py"),
        ("file:///repo/with%20space.py", "/repo/with space.py"),
        ("FILE:///repo/a.py", "/repo/a.py"),
    ],
)
def test_file_uris_name_local_paths(uri: str, path: str) -> None:
    assert file_uri_path(uri) == (path, None)


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        (None, Unverifiable.NO_URI),
        ("", Unverifiable.NO_URI),
        ("https://example.org/a.py", Unverifiable.UNSUPPORTED_URI),
        ("file://otherhost/a.py", Unverifiable.UNSUPPORTED_URI),
        ("file:relative/a.py", Unverifiable.UNSUPPORTED_URI),
        ("file:///a.py?x=1", Unverifiable.UNSUPPORTED_URI),
        ("file:///a.py#L3", Unverifiable.UNSUPPORTED_URI),
        ("file:///a%00.py", Unverifiable.UNSUPPORTED_URI),
        ("/repo/a.py", Unverifiable.UNSUPPORTED_URI),
    ],
)
def test_other_uris_name_nothing(uri: str | None, reason: Unverifiable) -> None:
    assert file_uri_path(uri) == (None, reason)


# -- verify requests (V1, D3) ------------------------------------------------------------


def _held(pid: str, fid: str, digest: bool = True) -> HeldFrame:
    f = _frame(fid, content=f"{pid}/{fid}")
    if not digest:
        f = f.model_copy(update={"content_digest": None})
    return HeldFrame.of(pid, f)


def test_requests_carry_digest_identities_only() -> None:
    held = [_held("a", "2"), _held("a", "1"), _held("a", "nodigest", digest=False)]
    plan = build_verify_requests(held, can_verify={"a": True})
    entry = plan["a"]
    assert [h.fid.frame_id for h in entry.ask] == ["1", "2"]
    assert [h.fid.frame_id for h in entry.skipped] == ["nodigest"]
    wire = [i.to_wire() for i in entry.identities()]
    assert wire[0] == {
        "provider_id": "a",
        "frame_id": "1",
        "content_digest": held[1].fid.content_digest,
    }
    assert all(set(w) == {"provider_id", "frame_id", "content_digest"} for w in wire)


def test_providers_without_verify_are_not_asked() -> None:
    held = [_held("a", "1"), _held("b", "1")]
    plan = build_verify_requests(held, can_verify=lambda pid: pid == "b")
    assert plan["a"].ask == () and len(plan["a"].skipped) == 1
    assert len(plan["b"].ask) == 1


def test_only_queried_providers_are_asked() -> None:
    held = [_held("a", "1"), _held("b", "1")]
    plan = build_verify_requests(held, can_verify={"a": True, "b": True}, providers=["b"])
    assert list(plan) == ["b"]


def test_duplicate_held_identities_are_asked_once() -> None:
    h = _held("a", "1")
    plan = build_verify_requests([h, h], can_verify={"a": True})
    assert len(plan["a"].ask) == 1


# -- verdicts (V2, V3, V4) ---------------------------------------------------------------

F1 = FrameId("p", "1", D_A)
F2 = FrameId("p", "2", D_B)


def _v(fid: FrameId, status: str, replacement: str | None = None) -> FrameVerdict:
    return FrameVerdict(frame=fid.identity(), status=status, replacement_digest=replacement)


def test_each_verdict_is_matched_by_identity_not_position() -> None:
    judged, anomalies = judge_verdicts([F1, F2], [_v(F2, "stale", D_A), _v(F1, "valid")])
    assert judged[F1].status == VerdictStatus.VALID
    assert judged[F2].status == VerdictStatus.STALE
    assert judged[F2].replacement_digest == D_A
    assert not any(anomalies.values())


def test_missing_verdict_is_unknown() -> None:
    judged, anomalies = judge_verdicts([F1, F2], [_v(F1, "valid")])
    assert judged[F2].status == VerdictStatus.UNKNOWN and judged[F2].note == "missing_verdict"
    assert anomalies["missing"] == 1


def test_failed_call_makes_every_identity_unknown() -> None:
    judged, anomalies = judge_verdicts([F1, F2], None)
    assert {j.status for j in judged.values()} == {VerdictStatus.UNKNOWN}
    assert anomalies["failed"] == 2


def test_unrecognised_status_is_unknown() -> None:
    judged, _ = judge_verdicts([F1], [_v(F1, "probably")])
    assert judged[F1].status == VerdictStatus.UNKNOWN
    assert judged[F1].note == "unrecognised_status"


def test_verdict_for_another_digest_does_not_validate() -> None:
    other = FrameId("p", "1", D_B)
    judged, anomalies = judge_verdicts([F1], [_v(other, "valid")])
    assert judged[F1].status == VerdictStatus.UNKNOWN
    assert anomalies == {**anomalies, "unrequested": 1, "missing": 1}


def test_verdict_for_another_provider_does_not_validate() -> None:
    judged, anomalies = judge_verdicts([F1], [_v(FrameId("q", "1", D_A), "valid")])
    assert judged[F1].status == VerdictStatus.UNKNOWN
    assert anomalies["unrequested"] == 1


def test_conflicting_verdicts_are_unknown() -> None:
    judged, anomalies = judge_verdicts([F1], [_v(F1, "valid"), _v(F1, "gone")])
    assert judged[F1].status == VerdictStatus.UNKNOWN
    assert judged[F1].note == "conflicting_verdicts"
    assert anomalies["conflicting"] == 1


def test_repeated_identical_verdicts_are_fine() -> None:
    judged, anomalies = judge_verdicts([F1], [_v(F1, "valid"), _v(F1, "valid")])
    assert judged[F1].status == VerdictStatus.VALID
    assert anomalies["conflicting"] == 0


def test_valid_with_a_different_replacement_digest_is_unknown() -> None:
    judged, anomalies = judge_verdicts([F1], [_v(F1, "valid", D_B)])
    assert judged[F1].status == VerdictStatus.UNKNOWN
    assert anomalies["contradictory"] == 1
    judged, _ = judge_verdicts([F1], [_v(F1, "valid", D_A)])
    assert judged[F1].status == VerdictStatus.VALID


def test_malformed_replacement_digest_is_dropped() -> None:
    judged, anomalies = judge_verdicts([F1], [_v(F1, "stale", "sha256:ABC")])
    assert judged[F1].status == VerdictStatus.STALE
    assert judged[F1].replacement_digest is None
    assert anomalies["malformed_replacement"] == 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([F1, F2, FrameId("p", "3", D_A)]),
            st.sampled_from(["valid", "stale", "gone", "unknown", "bogus"]),
        ),
        max_size=8,
    )
)
def test_valid_only_on_an_unambiguous_valid(answers: list[tuple[FrameId, str]]) -> None:
    judged, _ = judge_verdicts([F1, F2], [_v(f, s) for f, s in answers])
    assert set(judged) == {F1, F2}
    for fid in (F1, F2):
        said = {s for f, s in answers if f == fid}
        assert (judged[fid].status == VerdictStatus.VALID) == (said == {"valid"})
