"""The rerank stage over the real daemon, with real reranker processes that behave or not.

Every misbehaviour the stage falls back from (a partial verdict, unknown and
repeated keys, a timeout, a crash, junk on its stdout, a result of the wrong
shape, a reranker that never starts, none configured) is a real child process
(``tests.fixtures.reranker``): the composition is served all the same, the named
frames lead in the given order, the rest follow by ``round_robin``, and the
audit's policy record names the model, the candidates shown and the fallback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostd.client import ComposeResult, connect
from hostd.compose import compose_for_prompt, rerank_request, strategy_from_wire
from hostd.protocol import ContextFrame, FrameId
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio

PROVIDERS: dict[str, dict[str, Any]] = {"alpha": {"frames": 4}, "beta": {"frames": 4}}


def reranker_table(mode: str, marker: str, *, timeout_ms: int = 60_000, **extra: str) -> str:
    args = [mode, "--tag", marker, *(w for k, v in extra.items() for w in (f"--{k}", v))]
    cmd = ", ".join(f'"{w}"' for w in ["python", "-m", "tests.fixtures.reranker", *args])
    return f'[reranker]\ncommand = [{cmd}]\ntimeout_ms = {timeout_ms}\ncwd = "{ROOT}"\n'


def _frames(query: dict[str, Any]) -> list[tuple[str, ContextFrame]]:
    return [
        (pid, ContextFrame.model_validate(f))
        for pid in sorted(query["frames"])
        for f in query["frames"][pid]
    ]


def _ranked(result: ComposeResult) -> list[FrameId]:
    """The audit's entries in rank order (every candidate has a rank)."""
    ranked = [e for e in result.audit.entries if e.rank is not None]
    entries = sorted(ranked, key=lambda e: e.rank or 0)
    return [FrameId.from_wire(e.frame.to_wire()) for e in entries]


async def _compose(daemon: Any) -> tuple[ComposeResult, list[FrameId]]:
    """A ``rerank`` composition, and the keys the reranker was shown (in their order)."""
    async with connect(daemon.socket) as client:
        result = await client.compose("why", budget=4000, strategy="rerank")
        query = await client.query("why", budget=4000)
    return result, list(rerank_request(_frames(query), 100).keys)


def _record(result: ComposeResult) -> dict[str, Any]:
    policy = result.audit.policy
    assert policy["strategy"] == "rerank"
    record: dict[str, Any] = policy["strategy_params"]["rerank"]
    return record


async def test_a_whole_verdict_orders_the_composition(start_daemon, marker) -> None:
    daemon = await start_daemon(providers=PROVIDERS, extra=reranker_table("reverse", marker))
    result, shown = await _compose(daemon)
    record = _record(result)
    assert (record["model"], record["candidates"], record["fallback"]) == ("fixture@1", 8, None)
    assert record["reason"] is None and record["ignored"] == 0
    assert _ranked(result) == shown[::-1]
    assert [FrameId.from_wire(f) for f in record["order"]] == shown[::-1]
    assert daemon.events("rerank.done")[0]["candidates"] == 8
    assert await daemon.stop() == 0


async def test_a_reranker_without_a_handshake_is_used_without_one(start_daemon, marker) -> None:
    # Written to the documented `rerank` method alone: -32601 to context/handshake.
    daemon = await start_daemon(providers=PROVIDERS, extra=reranker_table("bare", marker))
    result, shown = await _compose(daemon)
    record = _record(result)
    assert (record["model"], record["reason"], record["fallback"]) == (None, None, None)
    assert _ranked(result) == shown[::-1] and result.degraded is False
    assert daemon.events("provider.handshake.skipped")[0]["provider"] == "reranker"
    async with connect(daemon.socket) as client:
        row = (await client.call("host/status"))["reranker"]
    assert (row["state"], row["info"], row["health"]["starts"]) == ("ready", None, 1)
    assert await daemon.stop() == 0


async def test_a_provider_without_a_handshake_still_fails_its_start(start_daemon, marker):
    # Only the reranker may skip it: a provider's handshake carries what the host needs.
    cmd = ", ".join(f'"{w}"' for w in ["python", "-m", "tests.fixtures.reranker", "bare", marker])
    table = f'[[provider]]\nid = "bare"\ncommand = [{cmd}]\ncwd = "{ROOT}"\n'
    daemon = await start_daemon(providers={}, extra=table, start_providers="boot")
    failed = await daemon.logged("provider.start.failed")
    assert (failed["provider"], failed["reason"]) == ("bare", "provider_error")
    assert daemon.events("provider.handshake.skipped") == []
    assert await daemon.stop() == 0


async def test_a_partial_verdict_leads_and_round_robin_takes_the_rest(start_daemon, marker):
    daemon = await start_daemon(providers=PROVIDERS, extra=reranker_table("partial", marker))
    result, shown = await _compose(daemon)
    record = _record(result)
    assert (record["fallback"], record["reason"]) == ("round_robin", "partial")
    assert record["detail"] == "7 of 8 candidates not named"
    # The named frame first, then the fallback's order of the others.
    assert _ranked(result) == [shown[-1], *shown[:-1]]
    assert await daemon.stop() == 0


async def test_unknown_and_repeated_keys_are_ignored(start_daemon, marker) -> None:
    daemon = await start_daemon(providers=PROVIDERS, extra=reranker_table("unknown", marker))
    result, shown = await _compose(daemon)
    record = _record(result)
    assert record["ignored"] == 3  # "nope", the repeat, the number
    assert record["reason"] == "partial"
    assert _ranked(result) == [shown[-1], shown[-2], *shown[:-2]]
    assert await daemon.stop() == 0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("crash", "crashed"), ("junk", "bad_reply"), ("shape", "bad_reply")],
)
async def test_a_broken_reranker_costs_only_its_order(
    start_daemon: Any, marker: str, workdir: Path, mode: str, reason: str
) -> None:
    starts = workdir / "starts"
    extra = reranker_table(mode, marker, starts=str(starts))
    daemon = await start_daemon(providers=PROVIDERS, extra=extra)
    for turn in (1, 2):
        result, shown = await _compose(daemon)
        record = _record(result)
        assert (record["fallback"], record["reason"]) == ("round_robin", reason)
        assert record["order"] == [] and record["candidates"] == 8 and result.citations
        assert _ranked(result) == shown  # all by the fallback
        # A reranker whose stream broke is started afresh for the next composition: each
        # turn met one started since the last break. Once its backoff has passed the
        # daemon may start the next one on its own, with no request (as a provider's),
        # so one more start may already be there however fast the test reads.
        broken = mode != "shape"
        started = len(starts.read_text().splitlines())
        assert turn <= started <= turn + 1 if broken else started == 1
    assert daemon.events("rerank.failed")[0]["reason"] == reason
    async with connect(daemon.socket) as client:
        health = (await client.call("host/status"))["reranker"]["health"]
    if broken:  # each break a failure, with its backoff, as a provider's crash
        assert health["starts"] in (2, 3) and health["consecutive_failures"] == 2
    else:  # a wrong answer is an error leg of a reranker that stays up
        assert (health["starts"], health["errors"]) == (1, 2)
    assert await daemon.stop() == 0


async def test_a_reranker_that_misses_its_deadline_is_waited_for_no_longer(
    start_daemon: Any, marker: str
) -> None:
    # Started with the daemon ("boot"), so the deadline can only be the rerank call's.
    extra = reranker_table("hang", marker, timeout_ms=300)
    daemon = await start_daemon(providers=PROVIDERS, extra=extra, start_providers="boot")
    result, shown = await _compose(daemon)
    record = _record(result)
    assert (record["reason"], record["detail"]) == (
        "timeout",
        "no verdict within 300 ms (raise [reranker] timeout_ms)",
    )
    assert _ranked(result) == shown and result.citations
    assert await daemon.stop() == 0


async def test_a_reranker_that_never_starts_never_holds_a_composition(
    start_daemon: Any, marker: str
) -> None:
    daemon = await start_daemon(
        providers=PROVIDERS, extra=reranker_table("never", marker, timeout_ms=300)
    )
    result, shown = await _compose(daemon)
    record = _record(result)
    assert record["reason"] == "starting" and record["detail"] == "not started within 300 ms"
    assert _ranked(result) == shown and result.citations
    assert await daemon.stop() == 0


async def test_without_a_reranker_rerank_is_round_robin_and_says_so(start_daemon) -> None:
    daemon = await start_daemon(providers=PROVIDERS)
    result, shown = await _compose(daemon)
    assert _record(result)["reason"] == "not_configured"
    assert _ranked(result) == shown
    assert await daemon.stop() == 0


async def test_the_recorded_verdict_composes_the_same_bytes(start_daemon, marker) -> None:
    daemon = await start_daemon(providers=PROVIDERS, extra=reranker_table("reverse", marker))
    async with connect(daemon.socket) as client:
        result = await client.compose("why", budget=600, strategy="rerank")
        query = await client.query("why", budget=600, rerank=True)
        again = await client.compose(
            "why", budget=600, strategy=result.audit.policy["strategy_params"]
        )
    # context/query's verdict is the same order; composing it locally gives the same prompt.
    assert query["rerank"]["rerank"]["order"] == _record(result)["order"]
    local = compose_for_prompt(_frames(query), 600, strategy=strategy_from_wire(query["rerank"]))
    assert local.prompt == result.prompt == again.prompt
    assert len(daemon.events("rerank.done")) == 2  # a client's own verdict is not re-asked
    assert await daemon.stop() == 0


SECRET = "rk-5ec2e7a9c0ffee71"


@pytest.mark.parametrize("mode", ["importerror", "lazyimport"])
async def test_a_reranker_that_dies_says_why_as_a_provider_does(
    start_daemon: Any, marker: str, mode: str
) -> None:
    """A reranker that dies of an ``ImportError`` (at start, or at its first verdict as its
    model library loads) is named in the audit with its exit status and its last stderr
    lines, as a provider is; a secret of its ``env`` it wrote there is not shown."""
    extra = reranker_table(mode, marker) + f'env = {{ RERANK_API_KEY = "{SECRET}" }}\n'
    daemon = await start_daemon(providers=PROVIDERS, extra=extra)
    result, shown = await _compose(daemon)
    record = _record(result)
    why = "ImportError: cannot import name 'no_such_"
    assert (record["fallback"], record["reason"]) == (
        "round_robin",
        "unavailable" if mode == "importerror" else "crashed",
    )
    assert "exited with status 1" in record["detail"] and why in record["detail"]
    assert _ranked(result) == shown and result.degraded is True
    async with connect(daemon.socket) as client:
        health = (await client.call("host/status"))["reranker"]["health"]
    assert why in health["last_failure"] and "exited with status 1" in health["last_failure"]
    if mode == "lazyimport":  # its last lines, redacted as a provider's are (after its start)
        said = "its stderr's last lines: loading the model with key <redacted> | ImportError"
        assert said in record["detail"]
    assert SECRET not in result.model_dump_json() and SECRET not in "\n".join(daemon.log_text)
    assert await daemon.stop() == 0
