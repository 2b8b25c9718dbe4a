"""``HttpReranker`` on its own: a rerank server over HTTPS with a CA made in the test.

The same pooled client as a remote provider's: verification always on (``ca_file``
replaces the system's CAs), so a server whose certificate no configured CA signed is
``unavailable``, never trusted; candidates in ``batch_size`` chunks are scored together.
A server that gives no answer (a hang, a 5xx) a few times in a row is left alone while
it cools down (its health decided by ``decide_ask``, read off a clock the test moves),
and a verdict forgets its failures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import anyio
import pytest
from structlog.testing import capture_logs

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


async def test_a_server_no_configured_ca_signed_is_unavailable(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with rerank_server("ok", "--tls", str(tls.cert_file), str(tls.key_file)) as port:
        server = RerankServer(f"https://127.0.0.1:{port}")  # the system's CAs only
        async with HttpReranker(server, PoolSettings()) as reranker:
            outcome = await reranker.rerank("why", CANDIDATES, 60.0)
            row = reranker.row()
    assert (outcome.reason, outcome.order) == ("unavailable", ())
    assert outcome.detail is not None and "CERTIFICATE_VERIFY_FAILED" in outcome.detail
    assert (row["state"], row["health"]["crashes"]) == ("crashed", 1)


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
