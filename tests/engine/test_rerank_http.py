"""``HttpReranker`` on its own: a rerank server over HTTPS with a CA made in the test.

The same pooled client as a remote provider's: verification always on (``ca_file``
replaces the system's CAs), so a server whose certificate no configured CA signed is
``unavailable``, never trusted; candidates in ``batch_size`` chunks are scored together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.engine import HttpReranker, PoolSettings, RerankServer
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
