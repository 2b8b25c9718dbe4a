"""The async verification stage on real files, verdicts supplied in-process (V1–V4, D2–D4)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from hostd.engine.verify import HeldFrame, VerifyStage
from hostd.protocol import (
    ContextFrame,
    FrameId,
    FrameIdentity,
    FrameVerdict,
    Provenance,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
)

from ._verify_turn import ask_all, finish, turn

pytestmark = pytest.mark.anyio


def _frame(
    fid: str, content: str, *, path: Path | None = None, range_: str | None = None, **kw: Any
) -> ContextFrame:
    provenance = []
    if path is not None:
        data = path.read_bytes()
        provenance.append(
            Provenance(
                type="file",
                uri=path.as_uri(),
                range=range_,
                digest=sha256_digest(address_line_range(data, range_)),
            )
        )
    fields: dict[str, Any] = {
        "id": fid,
        "kind": "snippet",
        "title": fid,
        "content": content,
        "content_digest": sha256_digest(content.encode()),
        "score": 0.5,
        "token_cost": canonical_token_cost(content),
        "citation_label": fid,
        "provenance": provenance,
    }
    fields.update(kw)
    return ContextFrame(**fields)


class Verifier:
    """An in-process ``send_verify``: answers from a table, records what it was sent."""

    def __init__(self, answers: dict[str, str] | None = None, default: str = "valid") -> None:
        self.answers = answers or {}
        self.default = default
        self.sent: list[tuple[str, list[FrameIdentity]]] = []
        self.omit: set[str] = set()
        self.replacement: dict[str, str] = {}
        self.fail: BaseException | None = None
        self.hang = False

    async def __call__(self, pid: str, identities: list[FrameIdentity]) -> Sequence[FrameVerdict]:
        self.sent.append((pid, identities))
        if self.fail is not None:
            raise self.fail
        if self.hang:
            await anyio.sleep_forever()
        return [
            FrameVerdict(
                frame=i,
                status=self.answers.get(i.frame_id, self.default),
                replacement_digest=self.replacement.get(i.frame_id),
            )
            for i in identities
            if i.frame_id not in self.omit
        ]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_bytes(b"def a():\n    return 1\n")
    (root / "b.py").write_bytes(b"def b():\n    return 2\n")
    return root


async def _turn(
    stage: VerifyStage,
    fresh: list[tuple[str, ContextFrame]],
    verifier: Verifier | None,
    session: str | None = "s",
    can: dict[str, bool] | None = None,
    limit_ms: float = 60_000,
):
    return await turn(
        stage,
        fresh,
        session=session,
        can_verify=can or {"p": True, "q": True},
        send_verify=verifier,
        limit_ms=limit_ms,
    )


async def test_fresh_frames_get_states(src: Path) -> None:
    stage = VerifyStage(host_roots=[src])
    frames = [
        ("p", _frame("plain", "hello")),
        ("p", _frame("sourced", "def a", path=src / "a.py", range_="L1")),
        ("p", _frame("nodigest", "hi", content_digest=None)),
        (
            "p",
            _frame("past", "x", path=src / "a.py", range_="L1").model_copy(
                update={
                    "provenance": [
                        Provenance(
                            type="file",
                            uri=(src / "a.py").as_uri(),
                            range="L9",
                            digest=sha256_digest(b""),
                        )
                    ]
                }
            ),
        ),
    ]
    result = await _turn(stage, frames, None, session=None)
    states = {fid.frame_id: st for fid, st in result.verification.items()}
    assert states == {
        "plain": {"state": "content_checked"},
        "sourced": {"state": "source_verified"},
        "nodigest": {"state": "unverifiable", "reason": "no_content_digest"},
        "past": {"state": "unverifiable", "reason": "start_past_end", "content_checked": True},
    }
    assert result.excluded == []
    assert result.figures["source_reads"] == 1


async def test_lying_digest_is_excluded_and_counted(src: Path) -> None:
    stage = VerifyStage()
    liar = _frame("liar", "real words", content_digest=sha256_digest(b"other words"))
    result = await _turn(stage, [("p", liar), ("q", _frame("ok", "fine"))], None, session=None)
    assert [p for p, _ in result.accepted] == ["q"]
    ((fid, reason, detail),) = result.excluded
    assert (fid.frame_id, reason) == ("liar", "digest_mismatch")
    # What the frame must carry (computed from its content), then what it carries.
    assert detail["expected"] == sha256_digest(b"real words")
    assert detail["actual"] == sha256_digest(b"other words")
    assert stage.health("p")["digest_mismatch"] == 1
    assert stage.health("q")["digest_mismatch"] == 0


async def test_tampered_source_is_excluded(src: Path) -> None:
    stage = VerifyStage(trusted_roots={"p": [src]})
    frame = _frame("a", "def a", path=src / "a.py", range_="L1-2")
    (src / "a.py").write_bytes(b"def a():\n    return 666\n")
    result = await _turn(stage, [("p", frame)], None, session=None)
    assert result.accepted == []
    assert [(f.frame_id, r) for f, r, _ in result.excluded] == [("a", "source_mismatch")]
    assert stage.health("p")["source_mismatch"] == 1


async def test_roots_are_per_provider(src: Path) -> None:
    stage = VerifyStage(trusted_roots={"q": [src]})
    frame = _frame("a", "def a", path=src / "a.py")
    (src / "a.py").write_bytes(b"changed\n")
    result = await _turn(stage, [("p", frame)], None, session=None)
    # p has no trusted root: its source is not re-read (so its citation is not taken as
    # checked: unverifiable, fenced so), the inline digest still is.
    assert result.verification[FrameId.of("p", frame)] == {
        "state": "unverifiable",
        "reason": "no_trusted_root",
        "content_checked": True,
    }


async def test_valid_held_frames_are_reused_and_render_identically(src: Path) -> None:
    stage = VerifyStage(host_roots=[src])
    turn1 = [("p", _frame("a", "def a", path=src / "a.py")), ("q", _frame("b", "def b"))]
    first = await _turn(stage, turn1, Verifier())
    assert first.reused == []
    verifier = Verifier()
    second = await _turn(stage, [], verifier)
    assert second.accepted == first.accepted
    assert [f.frame_id for f in second.reused] == ["a", "b"]
    assert {st["state"] for st in second.verification.values()} == {"provider_verified"}
    assert second.verification[FrameId.of("p", turn1[0][1])]["source"] == "source_verified"
    # V1: identities only, digest-carrying, one request per provider.
    assert sorted(pid for pid, _ in verifier.sent) == ["p", "q"]
    for _, identities in verifier.sent:
        assert all(i.content_digest for i in identities)
    assert second.figures["reused"] == 2 and second.figures["verify_requested"] == 2


async def test_fresh_copy_of_a_reused_frame_is_deduplicated(src: Path) -> None:
    stage = VerifyStage()
    held = _frame("a", "same", score=0.9)
    await _turn(stage, [("p", held)], Verifier())
    again = _frame("a", "same", score=0.2)  # same FrameId (D2), different score
    result = await _turn(stage, [("p", again)], Verifier())
    assert len(result.accepted) == 1
    assert result.accepted[0][1].score == 0.9  # the held copy keeps the prompt stable
    assert result.excluded == []


async def test_stale_frame_is_evicted_and_not_served(src: Path) -> None:
    stage = VerifyStage()
    old = _frame("a", "v1")
    await _turn(stage, [("p", old)], Verifier())
    new_digest = sha256_digest(b"v2")
    verifier = Verifier({"a": "stale"})
    verifier.replacement["a"] = new_digest
    result = await _turn(stage, [("p", _frame("a", "v2"))], verifier)
    assert [f.content for _, f in result.accepted] == ["v2"]
    ((fid, reason, detail),) = result.excluded
    assert fid == FrameId.of("p", old) and reason == "stale"
    assert detail["replacement_digest"] == new_digest
    assert stage.cache.figures()["evicted"] == {"stale": 1}


async def test_gone_frame_is_evicted_and_reported(src: Path) -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "v1")), ("p", _frame("b", "keep"))], Verifier())
    result = await _turn(stage, [], Verifier({"a": "gone"}))
    assert [f.id for _, f in result.accepted] == ["b"]
    assert [(f.frame_id, r) for f, r, _ in result.excluded] == [("a", "gone")]
    assert result.figures["gone"] == 1


async def test_missing_verdict_is_unknown_and_not_reused() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1")), ("p", _frame("b", "2"))], Verifier())
    verifier = Verifier()
    verifier.omit.add("b")
    result = await _turn(stage, [], verifier)
    assert [f.id for _, f in result.accepted] == ["a"]
    ((fid, reason, detail),) = result.excluded
    assert (fid.frame_id, reason, detail["note"]) == ("b", "verify_unknown", "missing_verdict")
    assert stage.health("p")["verify_missing"] == 1


async def test_verdicts_under_identities_never_asked_are_a_warning() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier())

    async def renamed(pid: str, identities: list[FrameIdentity]) -> Sequence[FrameVerdict]:
        return [
            FrameVerdict(frame=i.model_copy(update={"provider_id": "its-name"}), status="valid")
            for i in identities
        ]

    with capture_logs() as logs:
        result = await _turn(stage, [], renamed)  # type: ignore[arg-type]  # a send_verify
    assert result.accepted == [] and result.figures["unknown"] == 1
    (event,) = [e for e in logs if e["event"] == "verify.unmatched"]
    assert (event["log_level"], event["provider_id"]) == ("warning", "p")
    assert (event["unrequested"], event["missing"]) == (1, 1)


async def test_unknown_verdict_is_not_reused() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier())
    result = await _turn(stage, [], Verifier({"a": "unknown"}))
    assert result.accepted == [] and result.figures["unknown"] == 1


async def test_failed_verify_reuses_nothing() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier())
    verifier = Verifier()
    verifier.fail = RuntimeError("pipe closed")
    result = await _turn(stage, [], verifier)
    assert result.accepted == []
    assert stage.health("p")["verify_failed"] == 1


async def test_hung_verify_times_out_and_reuses_nothing() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier())
    verifier = Verifier()
    verifier.hang = True
    with anyio.fail_after(10):
        result = await _turn(stage, [], verifier, limit_ms=50)
    assert result.accepted == []
    assert result.excluded[0][2]["note"] == "verify_failed"


async def test_digestless_frames_are_never_reused_unchecked() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1", content_digest=None))], Verifier())
    verifier = Verifier()
    result = await _turn(stage, [], verifier)
    assert verifier.sent == []  # V1: nothing worth asking
    assert result.accepted == [] and result.figures["not_reusable"] == 1


async def test_provider_without_verify_is_never_reused() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier(), can={"p": False})
    verifier = Verifier()
    result = await _turn(stage, [], verifier, can={"p": False})
    assert verifier.sent == [] and result.accepted == []


async def test_rubber_stamp_is_caught_and_flagged(src: Path) -> None:
    stage = VerifyStage(host_roots=[src])
    frame = _frame("a", "def a", path=src / "a.py", range_="L2")
    await _turn(stage, [("p", frame)], Verifier())
    (src / "a.py").write_bytes(b"def a():\n    return 0\n")
    result = await _turn(stage, [], Verifier())  # the provider still says valid
    assert result.accepted == []
    ((fid, reason, detail),) = result.excluded
    assert reason == "source_mismatch" and detail["rubber_stamp"] is True
    assert stage.health("p")["rubber_stamp"] == 1
    assert result.figures["rubber_stamp"] == 1


async def test_sessions_are_separate() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier(), session="one")
    result = await _turn(stage, [], Verifier(), session="two")
    assert result.accepted == [] and result.figures["held"] == 0


async def test_without_session_nothing_is_held() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier(), session=None)
    assert len(stage.cache) == 0


async def test_figures_and_health_accumulate() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier())
    await _turn(stage, [], Verifier())
    figures = stage.figures()
    assert figures["verification"]["passes"] == 2
    assert figures["verification"]["reused"] == 1
    assert figures["reuse"]["sessions"] == 1
    assert set(stage.health("nobody")) >= {"digest_mismatch", "rubber_stamp", "verify_failed"}


async def test_held_copy_of_an_upstream_exclusion_is_neither_reused_nor_reported() -> None:
    stage = VerifyStage()
    frame = _frame("a", "1")
    await _turn(stage, [("p", frame), ("p", _frame("b", "2"))], Verifier())
    plan = stage.plan("s", can_verify={"p": True})
    replies = await ask_all(stage, plan, Verifier({"b": "stale"}))
    fid_a = FrameId.of("p", frame)
    result = await finish(
        stage,
        [],
        plan=plan,
        replies=replies,
        upstream_excluded=[fid_a, FrameId.of("p", _frame("b", "2"))],
    )
    assert result.accepted == [] and result.excluded == []


async def test_quarantined_provider_contributes_no_held_frames() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1")), ("q", _frame("b", "2"))], Verifier())
    plan = stage.plan("s", can_verify={"p": True, "q": True})
    replies = await ask_all(stage, plan, Verifier())
    result = await finish(stage, [], plan=plan, replies=replies, distrusted={"p": "quarantined"})
    assert [p for p, _ in result.accepted] == ["q"]
    assert [(f.provider_id, r) for f, r, _ in result.excluded] == [("p", "quarantined")]
    assert result.figures["not_reused_distrusted"] == 1


async def test_verify_timeout_is_per_provider() -> None:
    stage = VerifyStage()
    await _turn(stage, [("p", _frame("a", "1"))], Verifier())
    verifier = Verifier()
    verifier.hang = True
    plan = stage.plan("s", can_verify={"p": True})
    with anyio.fail_after(10):
        replies = await ask_all(stage, plan, verifier, limits_ms={"p": 50})
    assert replies["p"].error == "timeout" and replies["p"].verdicts is None
    assert replies["p"].limit_ms == 50


_STATUSES = ["valid", "stale", "gone", "unknown", "bogus", None]  # None: no verdict


@settings(max_examples=60, deadline=None)
@given(
    held=st.lists(st.tuples(st.sampled_from("pq"), st.integers(0, 4)), max_size=8),
    fresh=st.lists(
        st.tuples(st.sampled_from("pq"), st.integers(0, 4), st.booleans(), st.booleans()),
        max_size=8,
    ),
    answers=st.dictionaries(st.integers(0, 4), st.sampled_from(_STATUSES)),
    upstream=st.lists(st.tuples(st.sampled_from("pq"), st.integers(0, 4)), max_size=3),
    distrust=st.sets(st.sampled_from("pq")),
)
def test_every_frame_id_ends_in_exactly_one_place(
    held: list[tuple[str, int]],
    fresh: list[tuple[str, int, bool, bool]],
    answers: dict[int, str | None],
    upstream: list[tuple[str, int]],
    distrust: set[str],
) -> None:
    async def run() -> None:
        stage = VerifyStage()
        await _turn(stage, [(p, _frame(f"f{i}", f"v{i}")) for p, i in held], Verifier())
        verifier = Verifier({f"f{i}": s for i, s in answers.items() if s is not None})
        verifier.omit = {f"f{i}" for i, s in answers.items() if s is None}
        lie: dict[str, Any] = {"content_digest": sha256_digest(b"lie")}
        frames = [
            (
                p,
                _frame(
                    f"f{i}",
                    f"v{i}" if same else f"w{i}",
                    **({} if honest else lie),
                ),
            )
            for p, i, same, honest in fresh
        ]
        up = [FrameId.of(p, _frame(f"f{i}", f"v{i}")) for p, i in upstream]
        # As in Host: what the leg audit dropped never reaches the stage as fresh.
        frames = [(p, f) for p, f in frames if FrameId.of(p, f) not in set(up)]
        plan = stage.plan("s", can_verify={"p": True, "q": True})
        replies = await ask_all(stage, plan, verifier)
        result = await finish(
            stage, frames, plan=plan, replies=replies, upstream_excluded=up, distrusted=distrust
        )
        accepted = [FrameId.of(p, f) for p, f in result.accepted]
        excluded = [fid for fid, _, _ in result.excluded]
        assert len(set(accepted)) == len(accepted)
        assert len(set(excluded)) == len(excluded)
        assert not set(accepted) & set(excluded)
        assert set(result.verification) == set(accepted)
        assert accepted == sorted(accepted)
        # Nothing upstream dropped comes back, and no distrusted provider's held frame is reused.
        assert not set(up) & (set(accepted) | set(excluded))
        for fid in result.reused:
            assert fid.provider_id not in distrust
            assert answers.get(int(fid.frame_id[1:]), "valid") == "valid"
        # Every fresh frame is accepted or excluded here (none silently lost).
        offered = {FrameId.of(p, f) for p, f in frames}
        assert offered <= set(accepted) | set(excluded)

    anyio.run(run, backend="asyncio")


# -- merge (D2), through the stage's check and merge --------------------------------------


async def test_reused_copy_wins_over_fresh_copy_of_same_identity() -> None:
    stage = VerifyStage()
    held = _frame("1", "same", score=0.9)
    await _turn(stage, [("p", held)], Verifier())
    fresh = _frame("1", "same", score=0.1)  # same FrameId, different score
    result = await _turn(stage, [("p", fresh), ("p", _frame("0", "zero"))], Verifier())
    assert [f.id for _, f in result.accepted] == ["0", "1"]
    assert result.accepted[1][1].score == 0.9
    assert result.reused == [HeldFrame.of("p", held).fid]


async def test_merge_orders_by_provider_then_frame_id() -> None:
    stage = VerifyStage()
    await _turn(stage, [("a", _frame("0", "zero"))], Verifier())
    result = await _turn(
        stage,
        [("b", _frame("1", "one")), ("a", _frame("2", "two")), ("a", _frame("1", "one"))],
        Verifier(),
        can={"a": True, "b": True},
    )
    assert [(p, f.id) for p, f in result.accepted] == [
        ("a", "0"),
        ("a", "1"),
        ("a", "2"),
        ("b", "1"),
    ]


async def test_the_bytes_of_a_source_two_accepted_frames_quote_are_handed_on(src: Path) -> None:
    """Span merging quotes a union of lines from what this pass matched: the stage
    hands on exactly the sources two or more accepted frames were verified against."""
    path = src / "a.py"
    data = path.read_bytes()
    lines = [line.decode() for line in data.splitlines(keepends=True)]
    stage = VerifyStage(trusted_roots={"p": [src], "q": [src]})
    frames = [
        ("p", _frame("one", lines[0], path=path, range_="L1")),
        ("q", _frame("both", "".join(lines), path=path, range_="L1-2")),
        ("q", _frame("lonely", "def b():\n", path=src / "b.py", range_="L1")),
    ]
    result = await _turn(stage, frames, None, session=None)
    assert {f.frame_id for f in result.verification} == {"one", "both", "lonely"}
    # b.py has one frame: nothing to merge; a.py's bytes come with their lines found
    assert {uri: s.data for uri, s in result.sources.items()} == {path.as_uri(): data}
    assert result.sources[path.as_uri()].count == 2
    # a frame that no longer matches its source is not vouched for by its bytes
    path.write_bytes(data.replace(b"return", b"yield"))
    result = await _turn(VerifyStage(trusted_roots={"p": [src], "q": [src]}), frames, None, None)
    assert result.sources == {}
    # without a root nothing is re-read, so there are no bytes to hand on
    assert (await _turn(VerifyStage(), frames, None, None)).sources == {}


async def test_checks_run_early_decide_as_one_pass_and_skip_what_a_held_copy_stands_for(
    src: Path,
) -> None:
    """The fan-out checks the frames of legs already in while others are still out
    (``check_early``); the turn then decides exactly as one pass would: the same states,
    drops, sources and reads. A fresh copy of a held frame (D2) is not checked early."""
    path = src / "a.py"
    lines = path.read_text().splitlines(keepends=True)
    held = _frame("a", lines[0], path=path, range_="L1")
    fresh = [
        ("p", _frame("a", lines[0], path=path, range_="L1")),  # its held copy stands
        ("p", _frame("two", lines[1], path=path, range_="L2")),
        (
            "p",
            _frame("liar", "nope\n", path=path, range_="L2", content_digest="sha256:" + "0" * 64),
        ),
        ("q", _frame("b", "def b():\n", path=src / "b.py", range_="L1")),
        ("q", _frame("plain", "no source")),
    ]
    results = []
    for early_first in (None, ["p"], ["q"], ["p", "q"]):
        stage = VerifyStage(host_roots=[src])
        await _turn(stage, [("p", held)], Verifier())
        plan = stage.plan("s", can_verify={"p": True, "q": True})
        replies = await ask_all(stage, plan, Verifier())
        fids = [FrameId.of(pid, f) for pid, f in fresh]
        early = stage.early(plan)
        assert early is not None
        for pid in early_first or ():
            mine = [(pair, fid) for pair, fid in zip(fresh, fids, strict=True) if pair[0] == pid]
            await stage.check_early(early, [p for p, _ in mine], [f for _, f in mine])
        if early_first is not None and "p" in early_first:
            assert early.get(fresh[0][1]) is None  # D2: checked only if its held copy falls
            assert early.get(fresh[1][1]) is not None
        checked = await stage.check(plan, replies, fresh, fresh_ids=fids, early=early)
        result = stage.merge(checked)
        results.append(result)
        assert checked.reads == 2  # a.py and b.py, each once a turn, however split
    first = results[0]
    assert first.verification[FrameId.of("p", fresh[1][1])]["state"] == "source_verified"
    assert [e[1] for e in first.excluded] == ["digest_mismatch"]
    for other in results[1:]:
        assert other.accepted == first.accepted
        assert other.verification == first.verification
        assert other.excluded == first.excluded
        assert other.figures == first.figures
        assert {u: s.data for u, s in other.sources.items()} == {
            u: s.data for u, s in first.sources.items()
        }


async def test_nothing_is_checked_early_without_roots() -> None:
    stage = VerifyStage()
    assert stage.early(stage.plan(None, can_verify={})) is None
