"""``hostd.pipeline``: the stages of one request, over an in-memory engine.

The engine here is a plain object with ``query_all`` (the ``Engine`` interface):
what the pipeline decides (when it asks, with what over-fetch, what it prepares,
records and reports) is observable without a process. The same path over real
provider children is ``tests/server`` (wire) and ``tests/server/test_local.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.config import parse_config
from hostd.engine import FanOut, LegReport, LegStatus, RerankOutcome
from hostd.errors import FloorsExceedBudget, ShadowDisabled, UnknownProvider
from hostd.pipeline import REASONS, Degraded, Pipeline, degradations, leg_degradation
from hostd.pipeline._degraded import MESSAGE_CHARS
from hostd.protocol import ContextQuery, Violation
from hostd.quality import Composition
from hostd.server import ComposeParams
from hostd.server._params import FloorParam
from tests.compose._helpers import frame

pytestmark = pytest.mark.anyio


class _Engine:
    """``query_all`` answering from a fixed set of legs; counts and keeps each call."""

    consent = None

    def __init__(self, reports: dict[str, LegReport], accepted: list[Any]) -> None:
        self.reports = reports
        self.accepted = accepted
        self.calls: list[dict[str, Any]] = []
        #: ``FanOut.coverage``: providers still building their index, done of total.
        self.coverage: dict[str, tuple[int, int]] = {}

    async def query_all(self, query: ContextQuery, global_budget: int, **kw: Any) -> FanOut:
        self.calls.append({"budget": global_budget, **kw})
        for report in self.reports.values():
            done = kw.get("on_leg_done")
            if done is not None:
                await done(report)
        fan = FanOut(
            query,
            global_budget,
            accepted=list(self.accepted),
            reports=dict(self.reports),
            overfetch=kw.get("overfetch", 1.0),
            coverage=dict(self.coverage),
        )
        fan.part = fan.compose_part()  # as the engine's judge builds it
        return fan

    def providers_list(self) -> list[dict[str, Any]]:
        return []

    async def restart_provider(self, provider_id: str) -> dict[str, Any]:
        return {}

    async def warm_all(self, on_progress: Any = None) -> dict[str, str]:
        return {}

    def session_stats(self) -> dict[str, Any]:
        return {}

    async def remember(self, request: Any, **kw: Any) -> tuple[str, Any]:
        raise AssertionError("no write in these tests")

    async def forget(self, request: Any, **kw: Any) -> tuple[str, Any]:
        raise AssertionError("no write in these tests")


class _Reranker:
    def __init__(self, outcome: RerankOutcome) -> None:
        self.outcome = outcome
        self.asked: list[tuple[str, int]] = []

    async def rerank(self, query: str, candidates: list[Any], timeout_s: float) -> RerankOutcome:
        self.asked.append((query, len(candidates)))
        return self.outcome


class _Recorder:
    def __init__(self) -> None:
        self.recorded: list[Composition] = []
        self.kept: list[bool] = []

    async def record(self, composition: Composition, *, keep: bool = False) -> bool:
        self.recorded.append(composition)
        self.kept.append(keep)
        return keep


def _pipeline(
    tmp_path: Path,
    legs: Iterable[tuple[str, LegStatus]] = (("alpha", LegStatus.OK), ("beta", LegStatus.OK)),
    *,
    reranker: Any = None,
    recorder: Any = None,
    extra: str = "",
) -> tuple[Pipeline, _Engine]:
    legs = list(legs)
    text = f'[host]\nstate_dir = "{tmp_path / "state"}"\noverfetch = 1.5\n{extra}\n'
    for pid, _ in legs:
        text += f'[[provider]]\nid = "{pid}"\ncommand = ["x"]\n'
    config = parse_config(text, source="<test>", base=tmp_path)
    reports = {pid: LegReport(pid, status) for pid, status in legs}
    accepted = [
        (pid, frame(f"{pid}-{i}", score=0.9 - i / 10, content=f"{pid} evidence {i}"))
        for pid, status in legs
        if status is LegStatus.OK
        for i in range(3)
    ]
    engine = _Engine(reports, accepted)
    return Pipeline(config, engine, reranker=reranker, recorder=recorder), engine


async def test_floors_that_cannot_fit_fail_before_any_provider_is_asked(tmp_path: Path) -> None:
    pipeline, engine = _pipeline(tmp_path)
    params = ComposeParams(goal="g", budget=20, floors=[FloorParam(label="f", content="x" * 400)])
    with pytest.raises(FloorsExceedBudget):
        await pipeline.compose(params, "r-1")
    with pytest.raises(UnknownProvider):  # a policy naming no configured provider: refused
        await pipeline.compose(ComposeParams(goal="g", caps={"nobody": 0.5}), "r-2")
    assert engine.calls == []


async def test_an_unknown_provider_is_refused_as_every_bad_param_is_naming_its_field(
    tmp_path: Path,
) -> None:
    pipeline, engine = _pipeline(tmp_path)
    for params, field in (
        (ComposeParams(goal="g", providers=["alpah"]), "providers"),
        (ComposeParams(goal="g", caps={"alpah": 0.5}), "caps"),
    ):
        with pytest.raises(UnknownProvider) as refused:
            await pipeline.compose(params, "r")
        assert refused.value.message == (
            f"invalid params: {field}: unknown provider 'alpah' (configured: alpha, beta); "
            "did you mean 'alpha'?"
        )
        # The reason a client may rely on stays; the field is named as every refusal's.
        assert refused.value.reason == "unknown_provider"
        assert refused.value.data == {"provider": "alpah", "field": field}
    assert engine.calls == []


async def test_the_readiness_wait_a_request_names_reaches_the_engine(tmp_path: Path) -> None:
    pipeline, engine = _pipeline(tmp_path)
    await pipeline.compose(ComposeParams(goal="g", ready_wait_ms=0), "r-1")
    await pipeline.compose(ComposeParams(goal="g", timeout_ms=500), "r-2")
    named = [(call["ready_wait_ms"], call["timeout_ms"]) for call in engine.calls]
    assert named == [(0, None), (None, 500)]


async def test_the_providers_share_what_the_floors_leave_and_one_value_is_recorded(
    tmp_path: Path,
) -> None:
    recorder = _Recorder()
    pipeline, engine = _pipeline(tmp_path, recorder=recorder)
    floors = [FloorParam(label="rules", content="be brief")]
    result = await pipeline.compose(ComposeParams(goal="g", budget=400, floors=floors), "r-1")
    (asked,) = engine.calls
    assert asked["budget"] < 400 and asked["overfetch"] == 1.5  # [host] overfetch
    (recorded,) = recorder.recorded
    assert (recorded.request_id, recorded.goal, recorded.contested) == ("r-1", "g", asked["budget"])
    assert list(recorded.accepted) == engine.accepted
    assert recorded.composed.prompt == result["prompt"]
    assert pipeline.usage_of("r-1") == result["usage"]
    assert (result["degraded"], result["degraded_reasons"]) == (False, [])
    assert "recorded" not in result and recorder.kept == [False]
    # ``record: true``: kept whatever the draw, and the reply says whether it is on disk.
    kept = await pipeline.compose(ComposeParams(goal="g", record=True), "r-2")
    assert kept["recorded"] is True and recorder.kept == [False, True]


async def test_a_record_with_nowhere_to_keep_it_is_refused_before_the_fan_out(
    tmp_path: Path,
) -> None:
    pipeline, engine = _pipeline(tmp_path)
    with pytest.raises(ShadowDisabled):
        await pipeline.compose(ComposeParams(goal="g", record=True), "r-1")
    with pytest.raises(ShadowDisabled):
        await pipeline.feedback("r-1", [], None, None)
    assert engine.calls == []


async def test_rerank_is_asked_after_the_fan_out_over_its_own_pool(tmp_path: Path) -> None:
    reranker = _Reranker(RerankOutcome(order=("2", "0"), model="m"))
    extra = '[reranker]\ncommand = ["x"]\noverfetch = 4\n'
    pipeline, engine = _pipeline(tmp_path, reranker=reranker, extra=extra)
    result = await pipeline.compose(ComposeParams(goal="g", query_text="q", strategy="rerank"), "r")
    assert engine.calls[0]["overfetch"] == 4.0  # [reranker] overfetch, for its larger pool
    assert reranker.asked == [("q", 6)]
    verdict = result["audit"]["policy"]["strategy_params"]["rerank"]
    assert (verdict["model"], verdict["reason"], len(verdict["order"])) == ("m", "partial", 2)
    assert result["degraded"] is False  # a partial verdict is still the reranker's

    broken = _Reranker(RerankOutcome(reason="timeout", detail="no verdict within 1500 ms"))
    pipeline, engine = _pipeline(tmp_path, reranker=broken, extra=extra)
    params = ComposeParams(goal="g", strategy="rerank", overfetch=2.0)
    result = await pipeline.compose(params, "r")
    assert engine.calls[0]["overfetch"] == 2.0  # the request's own wins
    # Its message is the audit's account, for a person: what failed, what to raise.
    assert result["degraded_reasons"] == [
        {
            "reason": "rerank_fallback",
            "detail": "timeout",
            "message": "timeout: no verdict within 1500 ms",
        }
    ]
    account = result["audit"]["policy"]["strategy_params"]["rerank"]
    assert result["degraded_reasons"][0]["message"] == f"{account['reason']}: {account['detail']}"


async def test_each_failed_leg_is_named_and_the_rest_is_served(tmp_path: Path) -> None:
    legs = [("alpha", LegStatus.OK), ("beta", LegStatus.TIMEOUT), ("gamma", LegStatus.WARMING)]
    pipeline, _ = _pipeline(tmp_path, legs)
    notes: list[dict[str, Any]] = []
    result = await pipeline.compose(ComposeParams(goal="g"), "r", notes.append)
    assert result["degraded_reasons"] == [
        {"reason": "provider_failed", "provider": "beta", "detail": "timeout"},
        {"reason": "provider_warming", "provider": "gamma"},
    ]
    assert {c["frame"]["provider_id"] for c in result["citations"]} == {"alpha"}
    assert [(n["provider"], n["done"], n["total"]) for n in notes] == [
        ("alpha", 1, 3),
        ("beta", 2, 3),
        ("gamma", 3, 3),
    ]


class _LateStep(_Engine):
    """The engine's order when a warm-up step is handed over just as its leg is judged:
    a step heard before, the leg judged (its note not sent yet), a step heard after."""

    async def query_all(self, query: ContextQuery, global_budget: int, **kw: Any) -> FanOut:
        step = {"state": "warming", "phase": "load model", "done": 0}
        await kw["on_progress"]("beta", step)
        sending = kw["on_leg_done"](self.reports["beta"])  # called when the leg is judged
        await kw["on_progress"]("beta", {**step, "phase": "embed", "total": 60})
        await sending
        await kw["on_leg_done"](self.reports["alpha"])
        fan = FanOut(query, global_budget, accepted=list(self.accepted), reports=self.reports)
        fan.part = fan.compose_part()
        return fan


async def test_a_warming_legs_note_is_the_last_of_its_provider_and_names_its_phase(
    tmp_path: Path,
) -> None:
    pipeline, engine = _pipeline(tmp_path, [("alpha", LegStatus.OK), ("beta", LegStatus.WARMING)])
    engine.reports["beta"] = LegReport("beta", LegStatus.WARMING, phase="load model")
    late = _LateStep(engine.reports, engine.accepted)
    notes: list[dict[str, Any]] = []
    await Pipeline(pipeline.config, late).compose(ComposeParams(goal="g"), "r", notes.append)
    beta = [n for n in notes if n["provider"] == "beta"]
    # The step heard after beta's leg was judged is not told: the client's last word of
    # beta is its leg's note, which says where the leg left it, as the result does.
    assert [n.get("warming", {}).get("phase") for n in beta] == ["load model", None], beta
    assert (beta[-1]["done"], beta[-1]["phase"]) == (1, "load model")


def _report(pid: str, status: LegStatus) -> LegReport:
    if status is LegStatus.QUARANTINED:
        violations = (Violation("B3", "token_cost", "misstated"), Violation("B1", "frames", "x"))
        return LegReport(pid, status, violations=violations)
    if status is LegStatus.NO_CONSENT:
        return LegReport(pid, status, missing_scopes=("a.example", "b.example"))
    return LegReport(pid, status, error_code="no_budget" if status is LegStatus.SKIPPED else None)


def test_every_leg_status_but_ok_is_a_named_reason() -> None:
    got = {s: leg_degradation(_report("p", s)) for s in LegStatus}
    assert got.pop(LegStatus.OK) is None
    assert {s: (d.reason, d.detail) for s, d in got.items() if d is not None} == {
        LegStatus.TIMEOUT: ("provider_failed", "timeout"),
        LegStatus.CRASHED: ("provider_failed", "crashed"),
        LegStatus.ERROR: ("provider_failed", "error"),
        LegStatus.UNAUTHORIZED: ("provider_failed", "unauthorized"),
        LegStatus.QUARANTINED: ("quarantined", "B1,B3"),
        LegStatus.NO_CONSENT: ("consent_missing", "a.example,b.example"),
        LegStatus.WARMING: ("provider_warming", None),
        LegStatus.SKIPPED: ("provider_skipped", "no_budget"),
    }
    # A crash loop's leg (code restarting: its restart runs behind) is a failure too, told
    # apart from one crash by its detail; a warming leg keeps its code, never a failure.
    looping = LegReport("p", LegStatus.CRASHED, error_code="restarting")
    assert leg_degradation(looping) == Degraded("provider_failed", "p", "restarting")
    warming = LegReport("p", LegStatus.WARMING, error_code="warming")
    assert leg_degradation(warming) == Degraded("provider_warming", "p", "warming")
    with pytest.raises(ValueError, match="unknown degraded reason"):
        Degraded("provider_sad")


def test_a_degraded_reasons_message_is_on_the_wire_bounded() -> None:
    long = Degraded("rerank_fallback", detail="unavailable", message="x" * 2000).to_wire()
    assert long["message"] == "x" * (MESSAGE_CHARS - 1) + "…" and MESSAGE_CHARS == 500
    assert "message" not in Degraded("rerank_fallback", detail="timeout").to_wire()


def test_an_ok_leg_that_lost_part_of_its_answer_is_a_reason_beside_its_invalid_frames() -> None:
    short = LegReport("tickets", LegStatus.OK, partial=("isError", "timeout"))
    invalid = replace(short, violations=(Violation("F2", "content_digest", "mismatch"),))
    assert degradations({"tickets": short}, {}) == (
        Degraded("provider_partial", "tickets", "isError,timeout"),
    )
    assert degradations({"tickets": invalid}, {}) == (
        Degraded("provider_partial", "tickets", "isError,timeout"),
        Degraded("frames_invalid", "tickets", "F2"),
    )
    assert degradations({"tickets": LegReport("tickets", LegStatus.OK)}, {}) == ()


_STATUSES = st.sampled_from(list(LegStatus))


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _STATUSES, min_size=1))
def test_the_same_shortfalls_give_the_same_reasons_in_any_order(legs: dict[str, Any]) -> None:
    reports = [_report(pid, status) for pid, status in legs.items()]
    figures = {"verify_errors": {"c": {"error": "ProviderCrashed: the text it wrote"}}}
    strategy = [Degraded("rerank_fallback", detail="timeout")]
    outs = {
        degradations({r.provider_id: r for r in order}, figures, strategy)
        for order in itertools.permutations(reports)
    }
    (out,) = outs
    assert [d.reason for d in out] == sorted((d.reason for d in out), key=REASONS.index)
    assert Degraded("verify_skipped", "c", "ProviderCrashed") in out  # the code, not the text
    assert sum(d.provider is not None for d in out) == 1 + sum(
        s is not LegStatus.OK for s in legs.values()
    )


async def test_the_reply_is_the_composition_then_the_fan_out_in_protocol_order(
    tmp_path: Path,
) -> None:
    # The report stage builds the reply from two calls (the fan-out's part, then the
    # composition's wire form around it): the members, their order and their values
    # are those of the parts, each built once.
    figures = {"reused": 1, "verify_errors": {"beta": {"error": "timeout"}}}

    class _Verified(_Engine):
        async def query_all(self, query: ContextQuery, global_budget: int, **kw: Any) -> FanOut:
            fan = await super().query_all(query, global_budget, **kw)
            fan.figures = figures
            fan.part = fan.compose_part()  # judged with them
            self.fan = fan
            return fan

    recorder = _Recorder()
    pipeline, engine = _pipeline(tmp_path, recorder=recorder)
    verified = _Verified(engine.reports, engine.accepted)
    pipeline.engine = verified
    result = await pipeline.compose(ComposeParams(goal="g", budget=300, record=True), "r-9")
    assert list(result) == [
        "prompt",
        "citations",
        "audit",
        "recorded",
        "providers",
        "usage",
        "verification",
        "degraded",
        "degraded_reasons",
        "request_id",
    ]
    fan = verified.fan
    (composed,) = [r.composed for r in recorder.recorded]
    assert result["providers"] == [fan.reports[p].to_wire() for p in sorted(fan.reports)]
    assert result["usage"] == {**fan.usage_report(), "prompt": composed.prompt_usage()}
    assert list(result["usage"]) == [*fan.usage_report(), "prompt"]
    assert result["verification"] is figures
    assert {k: result[k] for k in ("prompt", "citations", "audit")} == composed.to_wire()
    assert result["degraded_reasons"] == [
        {"reason": "verify_skipped", "provider": "beta", "detail": "timeout"}
    ]
    assert pipeline.usage_of("r-9") == result["usage"]
    # Without ``record`` or verify figures neither member is there.
    plain, _ = _pipeline(tmp_path)
    other = await plain.compose(ComposeParams(goal="g", budget=300), "r-10")
    assert "recorded" not in other and "verification" not in other
    assert list(other)[3:5] == ["providers", "usage"]


async def test_only_work_that_grows_with_the_candidates_is_handed_to_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MMR's ranking grows with what was offered, its floors' canonical price does not:
    # the composition goes to a worker thread, the floors are priced on the loop.
    handed: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counting(fn: Any, *args: Any, **kw: Any) -> Any:
        handed.append(getattr(fn, "func", fn).__name__)
        return await run_sync(fn, *args, **kw)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    pipeline, _ = _pipeline(tmp_path)
    floors = [FloorParam(label="rules", content="be brief")]
    mmr = await pipeline.compose(ComposeParams(goal="g", strategy="mmr", floors=floors), "r-1")
    assert handed == ["compose_reply"]
    assert mmr["audit"]["floors"][0]["label"] == "rules"
    handed.clear()
    await pipeline.compose(ComposeParams(goal="g", floors=floors), "r-2")
    assert handed == []  # canonical counting, score: all of it on the loop


@pytest.mark.parametrize(("at", "logged"), [(10, True), (20, True), (30, False), (40, False)])
async def test_a_composition_is_logged_once_at_info_and_not_built_above_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int, logged: bool
) -> None:
    # Its whole log is one ``log_audit`` call with its figures; above info (warning, the
    # bench's level) nothing of it is built: no figures, no call.
    from hostd import _log
    from hostd.pipeline import _pipeline as module

    calls: list[tuple[int, dict[str, Any]]] = []

    def log_audit(_logger: Any, entries: Any, legs: Any, *, done: dict[str, Any]) -> None:
        calls.append((len(list(entries)), done))

    monkeypatch.setattr(module, "log_audit", log_audit)
    monkeypatch.setattr(_log.level, "at", at)
    pipeline, _ = _pipeline(tmp_path)
    result = await pipeline.compose(ComposeParams(goal="g", budget=300), "r-1")
    if not logged:
        assert calls == []
        return
    ((entries, done),) = calls
    assert entries == len(result["audit"]["entries"]) == done["frames_offered"] == 6
    assert done["citations"] == len(result["citations"]) and done["global_budget"] == 300
    assert done["tokens_used"] == result["audit"]["tokens_used"]


def _building(tmp_path: Path, coverage: dict[str, tuple[int, int]]) -> tuple[Pipeline, _Engine]:
    """``files`` (complete) and ``semantic`` (building), semantic's frames ranked first:
    ten of each, every frame ~50 tokens."""
    legs = [("files", LegStatus.OK), ("semantic", LegStatus.OK)]
    pipeline, engine = _pipeline(tmp_path, legs, recorder=_Recorder())
    engine.accepted = [
        (pid, frame(f"{pid}-{i}", score=score - i / 100, content=f"{pid} {i} " + "x" * 180))
        for pid, score in (("files", 0.5), ("semantic", 0.9))
        for i in range(10)
    ]
    engine.coverage = coverage
    return pipeline, engine


def _included(result: dict[str, Any]) -> list[str]:
    entries = result["audit"]["entries"]
    return [e["frame"]["frame_id"] for e in entries if e["disposition"] == "included"]


async def test_a_provider_still_building_its_index_gets_no_more_than_the_share_it_built(
    tmp_path: Path,
) -> None:
    pipeline, engine = _building(tmp_path, {"semantic": (1, 100)})
    whole, _ = _building(tmp_path / "whole", {})
    budget = 600  # room for about ten of the twenty frames
    result = await pipeline.compose(ComposeParams(goal="g", budget=budget), "r")
    before = await whole.compose(ComposeParams(goal="g", budget=budget), "r")
    # Complete, semantic's frames, ranked first, would take the prompt; building at 1%,
    # it gets 1% of the budget (no frame fits that) and files' frames are not displaced.
    assert any(f.startswith("semantic") for f in _included(before))
    assert _included(result) and all(f.startswith("files") for f in _included(result))
    capped = [e for e in result["audit"]["entries"] if e.get("reason") == "provider_cap"]
    assert {e["provider"] for e in capped} == {"semantic"} and len(capped) == 10
    assert capped[0]["detail"]["building"] == "1/100" and capped[0]["detail"]["share"] == 0.01
    # Recorded with the caps it was composed under: a replay composes the same prompt.
    assert isinstance(pipeline.recorder, _Recorder)
    assert pipeline.recorder.recorded[0].caps == {"semantic": 0.01}


async def test_a_smaller_cap_the_request_set_stands_and_is_not_blamed_on_the_build(
    tmp_path: Path,
) -> None:
    pipeline, _ = _building(tmp_path, {"semantic": (50, 100)})
    params = ComposeParams(goal="g", budget=600, caps={"semantic": 0.0})
    result = await pipeline.compose(params, "r")
    capped = [e for e in result["audit"]["entries"] if e.get("reason") == "provider_cap"]
    assert capped and all("building" not in e["detail"] for e in capped)
    assert all(e["detail"]["share"] == 0.0 for e in capped)


async def test_every_provider_at_full_coverage_composes_as_it_did(tmp_path: Path) -> None:
    pipeline, _ = _building(tmp_path, {})
    result = await pipeline.compose(ComposeParams(goal="g", budget=600), "r")
    assert not [e for e in result["audit"]["entries"] if e.get("reason") == "provider_cap"]
    assert isinstance(pipeline.recorder, _Recorder)
    assert pipeline.recorder.recorded[0].caps is None


@given(st.permutations(range(20)))
def test_a_building_providers_cap_gives_the_same_bytes_in_any_order(order: list[int]) -> None:
    pipeline, engine = _building(Path("/nonexistent"), {"semantic": (30, 100)})
    pipeline.recorder = None
    frames = list(engine.accepted)

    async def compose(accepted: list[Any]) -> dict[str, Any]:
        engine.accepted = accepted
        return await pipeline.compose(ComposeParams(goal="g", budget=600), "r")

    first = anyio.run(compose, frames)
    again = anyio.run(compose, [frames[i] for i in order])
    assert again["prompt"] == first["prompt"] and again["audit"] == first["audit"]
    assert any(f.startswith("semantic") for f in _included(first))  # 30%: some of it fits
