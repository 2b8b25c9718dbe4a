"""``HttpReranker`` on its own: a rerank server over HTTPS with a CA made in the test.

The same pooled client as a remote provider's: verification always on (``ca_file``
replaces the system's CAs), so a server whose certificate no configured CA signed is
``certificate``, never trusted (left alone for the longest cool-down, then tried with
the TLS files read again); candidates in ``batch_size`` chunks are scored together.
A server that gives no answer (a hang, a 5xx) a few times in a row is left alone while
it cools down (its health decided by ``decide_ask``, read off a clock the test moves),
and a verdict forgets its failures.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from hostd.cli._daemon import reranker_state
from hostd.engine import CoolDownPolicy, HttpReranker, PoolSettings, RerankOutcome, RerankServer
from tests.fixtures.rerank_server import fixture_score
from tests.remote._servers import make_tls
from tests.server.test_rerank_server import rerank_server

pytestmark = pytest.mark.anyio

CANDIDATES = [
    {"key": str(k), "kind": "doc", "title": f"t{k}", "content": f"body {k}"} for k in range(7)
]


def _expected(query: str) -> tuple[str, ...]:
    scores = [fixture_score(query, f"t{k}\nbody {k}") for k in range(7)]
    return tuple(str(k) for k in sorted(range(7), key=lambda k: (-scores[k], k)))


async def test_an_https_rerank_server_signed_by_the_configured_ca_gives_its_verdict(
    tmp_path: Path,
) -> None:
    tls = make_tls(tmp_path)
    flags = ("--tls", str(tls.cert_file), str(tls.key_file), "--model", "m@1")
    async with rerank_server("ok", *flags) as port:
        server = RerankServer(f"https://127.0.0.1:{port}/v1", ca_file=tls.ca_file, batch_size=3)
        async with HttpReranker(server, PoolSettings()) as reranker:
            assert reranker.url == f"https://127.0.0.1:{port}/v1/rerank"
            assert (reranker.row()["state"], reranker.row()["remote"]["credential"]) == (
                "idle",
                None,
            )
            outcome = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
    assert (outcome.reason, outcome.model) == (None, "m@1")
    assert outcome.order == _expected("why")
    assert (row["state"], row["health"]["ok"], row["remote"]["exchanges"]) == ("ready", 1, 3)


async def test_a_server_no_configured_ca_signed_is_a_certificate_failure_naming_its_key(
    tmp_path: Path,
) -> None:
    tls = make_tls(tmp_path)
    async with rerank_server("ok", "--tls", str(tls.cert_file), str(tls.key_file)) as port:
        server = RerankServer(f"https://127.0.0.1:{port}")  # the system's CAs only
        async with HttpReranker(server, PoolSettings()) as reranker:
            outcome = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
    # Told by the verify error's type, not as a server that is down: what to set, and where.
    assert (outcome.reason, outcome.order) == ("certificate", ())
    assert outcome.detail is not None
    assert outcome.detail.startswith("not trusted (") and "CERTIFICATE_VERIFY_FAILED" in (
        outcome.detail
    )
    assert outcome.detail.endswith(": set [reranker] ca_file to the CA that signed it")
    # Said once in its health: ``certificate: not trusted …``; cooling down at once.
    assert row["health"]["last_failure"] == f"certificate: {outcome.detail}"
    assert (row["state"], row["health"]["crashes"]) == ("failed", 1)


async def test_a_certificate_failure_is_tried_once_per_longest_cool_down_and_a_fixed_ca_file_taken(
    tmp_path: Path,
) -> None:
    """A certificate no ask cures: not asked again at the next compositions, as a server
    down a moment would be (three tries, then a short cool-down), but left alone for the
    longest cool-down from the first failure, its skipped compositions saying
    ``certificate``; then tried once, the TLS files read again, so a ``ca_file`` fixed in
    place is taken with no restart. The clock is the test's."""
    clock = _Clock()
    served, other = make_tls(tmp_path, "served"), make_tls(tmp_path, "other")
    ca_file = tmp_path / "team-ca.pem"
    ca_file.write_bytes(other.ca_file.read_bytes())  # the wrong CA
    flags = ("--tls", str(served.cert_file), str(served.key_file))
    async with rerank_server("ok", *flags) as port:
        policy = _cooling(3, 1.0, max_s=60.0)
        server = RerankServer(f"https://127.0.0.1:{port}", ca_file=ca_file, cool_down=policy)
        async with HttpReranker(server, PoolSettings(clock=clock)) as reranker:
            wrong = await reranker.rerank("why", CANDIDATES, 60.0)
            clock.now += 2.0  # past any cool-down a server that is down would get
            skipped = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
            ca_file.write_bytes(served.ca_file.read_bytes())  # the user fixes it
            clock.now += 58.0
            fixed = await reranker.rerank("why", CANDIDATES, 60.0)
            after = reranker.row()
    assert wrong.reason == "certificate"
    assert (wrong.detail or "").endswith(f"not in [reranker] ca_file {ca_file}")
    assert (skipped.reason, skipped.order) == ("certificate", ())
    assert skipped.detail == f"cooling_down: certificate: {wrong.detail}; next try in 58.0 s"
    assert (row["state"], row["health"]["retry_in_s"], row["health"]["skipped"]) == (
        "failed",
        58.0,
        1,
    )
    assert (fixed.reason, fixed.order) == (None, _expected("why"))
    assert after["state"] == "ready"


# -- health: a server that gives no answer is left alone while it cools down ---------------


class _Clock:
    """The clock the health decisions read: moved by the test, never waited out."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cooling(after: int, base_s: float, max_s: float = 3600.0) -> CoolDownPolicy:
    return CoolDownPolicy(after=after, base_s=base_s, max_s=max_s)


async def test_a_hanging_server_is_not_asked_again_until_its_cool_down_has_passed() -> None:
    clock = _Clock()
    async with rerank_server("hang") as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(2, 10.0))
        async with HttpReranker(server, PoolSettings(clock=clock)) as reranker:
            # The only deadline that may pass: the server never answers.
            timed_out = [await reranker.rerank("why", CANDIDATES, 0.5) for _ in range(2)]
            assert reranker.row()["remote"]["exchanges"] == 2
            skipped = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
            clock.now += 10.0  # the cool-down has passed: one request tries it again
            async with anyio.create_task_group() as tg:
                tried: list[RerankOutcome] = []

                async def try_it() -> None:
                    tried.append(await reranker.rerank("why", CANDIDATES, 0.5))

                tg.start_soon(try_it)
                await anyio.wait_all_tasks_blocked()  # the try is out, waiting on the server
                meanwhile = await reranker.rerank("why", CANDIDATES, 60.0)
            after = reranker.row()
    assert [o.reason for o in timed_out] == ["timeout", "timeout"]
    assert (skipped.reason, skipped.order) == ("unavailable", ())
    assert skipped.detail == (
        "cooling_down: 2 failures in a row, the last timeout: no verdict within 500 ms "
        "(raise [reranker] timeout_ms); "
        "next try in 10.0 s"
    )
    # Not asked: no exchange was made for the skipped request.
    assert row["remote"]["exchanges"] == 2
    assert (row["state"], row["health"]["consecutive_failures"]) == ("failed", 2)
    assert (row["health"]["skipped"], row["health"]["retry_in_s"]) == (1, 10.0)
    assert meanwhile.reason == "unavailable" and meanwhile.detail is not None
    assert meanwhile.detail.endswith("; a try is under way")
    assert [o.reason for o in tried] == ["timeout"]
    health = after["health"]
    assert (after["remote"]["exchanges"], health["retries"], health["skipped"]) == (3, 1, 2)
    # The failed try doubled the cool-down, counted from it.
    assert (health["consecutive_failures"], health["retry_in_s"]) == (3, 20.0)


async def test_a_server_that_comes_back_is_asked_again_and_its_failures_forgotten() -> None:
    clock = _Clock()
    async with rerank_server("ok", "--fail-first", "2") as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(2, 5.0))
        async with HttpReranker(server, PoolSettings(clock=clock)) as reranker:
            failed = [await reranker.rerank("why", CANDIDATES, 60.0) for _ in range(2)]
            skipped = await reranker.rerank("why", CANDIDATES, 60.0)
            clock.now += 5.0
            back = await reranker.rerank("why", CANDIDATES, 60.0)
            again = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
    assert [(o.reason, o.detail) for o in failed] == [("error", "HTTP 503")] * 2
    assert skipped.detail is not None and skipped.detail.startswith(
        "cooling_down: 2 failures in a row, the last error: HTTP 503;"
    )
    assert back.reason is None and back.order == again.order == _expected("why")
    health = row["health"]
    assert (row["state"], health["consecutive_failures"], "retry_in_s" in health) == (
        "ready",
        0,
        False,
    )
    assert (health["ok"], health["errors"], health["skipped"], health["retries"]) == (2, 2, 1, 1)
    assert row["remote"]["exchanges"] == 4


async def test_a_server_cooling_down_after_one_failure_says_one_failure() -> None:
    clock = _Clock()
    async with rerank_server("ok", "--fail-first", "1") as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(1, 5.0))
        async with HttpReranker(server, PoolSettings(clock=clock)) as reranker:
            failed = await reranker.rerank("why", CANDIDATES, 60.0)
            skipped = await reranker.rerank("why", CANDIDATES, 60.0)
    assert (failed.reason, failed.detail) == ("error", "HTTP 503")
    assert skipped.detail == (
        "cooling_down: 1 failure in a row, the last error: HTTP 503; next try in 5.0 s"
    )


async def test_asks_out_together_when_a_server_fails_double_its_cool_down_once() -> None:
    clock = _Clock()
    # No request is answered before all five are in: every ask is out before any fails.
    async with rerank_server("status500", "--gather", "5") as port:
        server = RerankServer(
            f"http://127.0.0.1:{port}", cool_down=_cooling(2, 10.0), max_connections=5
        )
        async with HttpReranker(server, PoolSettings(clock=clock)) as reranker:
            outcomes: list[RerankOutcome] = []

            async def ask() -> None:
                outcomes.append(await reranker.rerank("why", CANDIDATES, 60.0))

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(ask)
            row = reranker.row()
    assert [o.reason for o in outcomes] == ["error"] * 5
    health = row["health"]
    # Two failures start the cool-down (``after``); the three asks that were out with
    # them are counted as errors but do not double it three more times (80 s).
    assert (health["errors"], health["consecutive_failures"]) == (5, 2)
    assert (row["state"], health["retry_in_s"]) == ("failed", 10.0)
    assert row["remote"]["exchanges"] == 5


@pytest.mark.parametrize(
    ("mode", "down"),
    [("status500", True), ("redirect", False), ("junk", False), ("shape", False)],
)
async def test_only_a_server_that_gives_no_answer_cools_down(mode: str, down: bool) -> None:
    async with rerank_server(mode) as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(1, 3600.0))
        async with HttpReranker(server, PoolSettings()) as reranker:
            first = await reranker.rerank("why", CANDIDATES, 60.0)
            second = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
    assert first.reason in ("error", "bad_reply")
    # A wrong answer is the server's answer: asking again costs one exchange, no wait.
    assert (second.reason == "unavailable") is down
    assert row["remote"]["exchanges"] == (1 if down else 2)
    assert row["state"] == ("failed" if down else "ready")


@pytest.mark.parametrize("api", ["cohere", "tei"])
async def test_the_servers_endpoint_is_logged_as_the_rerank_api_it_speaks(
    api: Literal["cohere", "tei"],
) -> None:
    async with rerank_server("ok", "--api", api) as port:
        server = RerankServer(f"http://127.0.0.1:{port}", api=api)
        async with HttpReranker(server, PoolSettings()) as reranker:
            with capture_logs() as logs:
                outcome = await reranker.rerank("why", CANDIDATES, 60.0)
    assert outcome.reason is None
    (opened,) = [e for e in logs if e["event"] == "provider.remote.opened"]
    assert (opened["provider"], opened["binding"]) == ("reranker", f"rerank-http:{api}")


# -- answers come in any order: the newest ask is the news --------------------------------


async def _release(port: int) -> None:
    """Let the fixture server answer the asks it holds (``--hold-query``)."""
    async with httpx.AsyncClient() as client:
        (await client.post(f"http://127.0.0.1:{port}/release")).raise_for_status()


async def test_a_verdict_asked_before_a_later_failure_does_not_clear_it() -> None:
    flags = ("--hold-query", "held", "--fail-query", "down")
    async with rerank_server("ok", *flags) as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(3, 3600.0))
        async with HttpReranker(server, PoolSettings()) as reranker:
            held: list[RerankOutcome] = []

            async def ask_held() -> None:
                held.append(await reranker.rerank("held", CANDIDATES, 60.0))

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask_held)
                await anyio.wait_all_tasks_blocked()  # asked first, held by the server
                failed = await reranker.rerank("down", CANDIDATES, 60.0)
                stopped = reranker.row()
                await _release(port)
            late = reranker.row()
            fresh = await reranker.rerank("why", CANDIDATES, 60.0)
            back = reranker.row()
    assert (failed.reason, failed.detail) == ("error", "HTTP 503")
    assert [o.reason for o in held] == [None]  # its composition has its verdict
    assert (stopped["state"], stopped["health"]["consecutive_failures"]) == ("crashed", 1)
    # The late verdict is counted, yet it is older news than the failure: status says
    # what the latest ask found.
    health = late["health"]
    assert (late["state"], health["consecutive_failures"], health["ok"]) == ("crashed", 1, 1)
    assert health["last_failure"] == "error: HTTP 503"
    # ``hostd status`` says it is down, not ``ready``.
    assert reranker_state(late).startswith("unreachable ")
    assert reranker_state(late).endswith(": error: HTTP 503; asks 2, fallbacks 1")
    assert fresh.reason is None
    assert (back["state"], back["health"]["consecutive_failures"]) == ("ready", 0)


# -- the log: an outage's turns at warning or info, its repeats at debug -----------------


def _rerank_events(logs: list[MutableMapping[str, Any]]) -> list[tuple[str, str]]:
    return [(e["log_level"], e["event"]) for e in logs if e["event"].startswith("rerank.")]


async def test_an_outage_is_logged_as_it_begins_and_ends_and_its_repeats_at_debug() -> None:
    clock = _Clock()
    async with rerank_server("ok", "--fail-first", "3") as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(2, 5.0))
        async with HttpReranker(server, PoolSettings(clock=clock)) as reranker:
            with capture_logs() as logs:
                failed = [await reranker.rerank("why", CANDIDATES, 60.0) for _ in range(2)]
                skipped = [await reranker.rerank("why", CANDIDATES, 60.0) for _ in range(3)]
                clock.now += 5.0
                tried = await reranker.rerank("why", CANDIDATES, 60.0)  # fails as before
                clock.now += 10.0
                back = await reranker.rerank("why", CANDIDATES, 60.0)
    assert [o.reason for o in [*failed, *skipped, tried]] == ["error"] * 2 + ["unavailable"] * 3 + [
        "error"
    ]
    assert back.reason is None
    assert _rerank_events(logs) == [
        ("warning", "rerank.failed"),  # the first failure
        ("warning", "rerank.cooling_down"),  # the cool-down begins
        ("debug", "rerank.failed"),
        *[("debug", "rerank.failed")] * 3,  # compositions it spares
        ("info", "rerank.retry"),  # the first try
        ("debug", "rerank.cooling_down"),  # it failed as before: a longer cool-down
        ("debug", "rerank.failed"),
        ("debug", "rerank.retry"),
        ("info", "rerank.recovered"),
        ("info", "rerank.done"),
    ]
    (recovered,) = [e for e in logs if e["event"] == "rerank.recovered"]
    assert (recovered["was"], recovered["failures"], recovered["skipped"]) == ("failed", 3, 3)


async def test_a_failure_in_new_words_is_told_again() -> None:
    async with rerank_server("ok", "--fail-query", "down", "--hold-query", "held") as port:
        server = RerankServer(f"http://127.0.0.1:{port}", cool_down=_cooling(0, 1.0))
        async with HttpReranker(server, PoolSettings()) as reranker:
            with capture_logs() as logs:
                # The only deadline that may pass: "held" is never answered.
                for query, timeout_s in [("down", 60.0)] * 2 + [("held", 0.5)] * 2:
                    await reranker.rerank(query, CANDIDATES, timeout_s)
    warned, repeated = ("warning", "rerank.failed"), ("debug", "rerank.failed")
    assert _rerank_events(logs) == [warned, repeated, warned, repeated]


# -- a deadline a server cannot meet: the detail says what it takes ------------------------


async def test_a_timeout_says_how_long_the_latest_verdict_took() -> None:
    async with rerank_server("ok", "--hold-query", "held") as port:
        server = RerankServer(f"http://127.0.0.1:{port}")
        async with HttpReranker(server, PoolSettings()) as reranker:
            first = await reranker.rerank("held", CANDIDATES, 0.5)  # never answered
            answered = await reranker.rerank("why", CANDIDATES, 60.0)
            timed_out = await reranker.rerank("held", CANDIDATES, 0.5)
    assert first.detail == "no verdict within 500 ms (raise [reranker] timeout_ms)"
    assert answered.reason is None
    assert timed_out.reason == "timeout" and timed_out.detail is not None
    took = f"its latest verdict took {answered.latency_ms:.0f} ms"  # as measured
    assert timed_out.detail == f"no verdict within 500 ms; {took} (raise [reranker] timeout_ms)"
