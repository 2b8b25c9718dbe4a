"""``[reranker] url``: a real daemon asking a real rerank server process, honest or not.

The server is ``tests.fixtures.rerank_server`` (starlette under uvicorn, on a loopback
socket), in the Cohere-style and the TEI-style API; no registry package serves the
TEI API here. An honest one orders the composition by its scores, the audit naming
the model; every way it can fail (a partial or repeated verdict, a wrong shape, junk,
a 5xx, a redirect, a refused token, a hang, the server stopped) gives ``round_robin``
with the reason in the audit and ``degraded: true`` (``rerank_fallback``), and no
byte the server wrote, nor the token it echoes, reaches the audit or the log.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import ComposeResult, connect
from hostd.compose import rerank_request
from hostd.engine._rerank_api import document_text
from hostd.protocol import FrameId
from tests.fixtures.rerank_server import fixture_score
from tests.server.conftest import ROOT
from tests.server.test_rerank import PROVIDERS, _frames, _ranked, _record

pytestmark = pytest.mark.anyio

TOKEN = "rk-71c0ffee5ec2e7a9"
#: What a server that refuses a request as sent (a 400, 404 or 422) is told with.
REFUSED_HINT = (
    "the server refused the request: check that its model reranks and that "
    "[reranker] model and api match the server (docs/config.md)"
)


@contextlib.asynccontextmanager
async def rerank_server(mode: str, *args: str) -> AsyncIterator[int]:
    """The fixture server in ``mode`` (its flags ``args``): its port, until the block ends."""
    cmd = [sys.executable, "-m", "tests.fixtures.rerank_server", mode, *args]
    process = await anyio.open_process(
        cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(60):  # hang guard: the line comes once its socket listens
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
        yield int(line.split()[1])
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


def server_table(port: int, **keys: Any) -> str:
    lines = ["[reranker]", f'url = "http://127.0.0.1:{port}"', "timeout_ms = 60000"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


async def _shown(client: Any) -> tuple[list[FrameId], list[str]]:
    """The candidates the reranker is shown (their FrameIds and texts, in that order)."""
    query = await client.query("why", budget=4000)
    request = rerank_request(_frames(query), 100)
    return list(request.keys), [document_text(c) for c in request.candidates]


def _by_score(keys: list[FrameId], texts: list[str]) -> list[FrameId]:
    scores = [fixture_score("why", t) for t in texts]
    return [keys[i] for i in sorted(range(len(keys)), key=lambda i: (-scores[i], i))]


def _seen(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(("api", "batch"), [("cohere", None), ("tei", 3)])
async def test_a_rerank_server_orders_the_composition_by_its_scores(
    start_daemon: Any, workdir: Path, api: str, batch: int | None
) -> None:
    seen, token = workdir / "seen.jsonl", workdir / "rerank.token"
    token.write_text(TOKEN + "\n")
    flags = ("--api", api, "--token-file", str(token), "--seen", str(seen))
    async with rerank_server("ok", *flags) as port:
        keys: dict[str, Any] = {"api": api, "model": "fixture-ce", "token_file": str(token)}
        if batch is not None:
            keys["batch_size"] = batch
        daemon = await start_daemon(providers=PROVIDERS, extra=server_table(port, **keys))
        async with connect(daemon.socket) as client:
            result = await client.compose("why", budget=4000, strategy="rerank")
            shown, texts = await _shown(client)
            status = await client.call("host/status")
    record = _record(result)
    assert (record["model"], record["candidates"], record["fallback"]) == ("fixture-ce", 8, None)
    assert (record["reason"], result.degraded) == (None, False)
    assert _ranked(result) == _by_score(shown, texts) != shown
    requests = _seen(seen)
    assert all(r["path"] == "/rerank" and r["bearer"] for r in requests)
    if api == "cohere":
        (body,) = (r["body"] for r in requests)
        assert body == {"model": "fixture-ce", "query": "why", "documents": texts, "top_n": 8}
    else:  # three requests at once, 3 + 3 + 2 texts, the model not sent (TEI has none)
        bodies = sorted((r["body"] for r in requests), key=lambda b: texts.index(b["texts"][0]))
        assert [b["texts"] for b in bodies] == [texts[0:3], texts[3:6], texts[6:8]]
        assert all(b["truncate"] is True and "model" not in b for b in bodies)
    row = status["reranker"]
    assert (row["binding"], row["api"], row["state"]) == ("http", api, "ready")
    assert row["remote"]["credential"] == "<redacted>"
    assert TOKEN not in json.dumps(status) and TOKEN not in "\n".join(daemon.log_text)
    assert await daemon.stop() == 0


async def test_without_a_configured_model_the_servers_own_name_is_recorded(
    start_daemon: Any,
) -> None:
    async with rerank_server("ok", "--model", "org/tiny-ce") as port:
        daemon = await start_daemon(providers=PROVIDERS, extra=server_table(port))
        async with connect(daemon.socket) as client:
            result = await client.compose("why", budget=4000, strategy="rerank")
    assert _record(result)["model"] == "org/tiny-ce"
    assert await daemon.stop() == 0


FALLBACKS = [
    ("partial", "bad_reply", "rerank reply: 1 of 8 documents not scored"),
    ("duplicate", "bad_reply", "rerank reply: results[8].index repeats an earlier one"),
    ("shape", "bad_reply", "rerank reply: results must be a list"),
    ("junk", "bad_reply", "rerank reply ("),
    ("status500", "error", "HTTP 500"),
    # Refused as sent: where to look, never what the server wrote.
    ("status400", "error", f"HTTP 400: {REFUSED_HINT}"),
    ("redirect", "error", "HTTP 307: redirect not followed"),
    ("hang", "timeout", "no verdict within 1500 ms (raise [reranker] timeout_ms)"),
]


@pytest.mark.parametrize(("mode", "reason", "detail"), FALLBACKS)
async def test_a_failing_rerank_server_costs_only_its_order(
    start_daemon: Any, workdir: Path, mode: str, reason: str, detail: str
) -> None:
    token = workdir / "rerank.token"
    token.write_text(TOKEN)
    async with rerank_server(mode, "--token-file", str(token)) as port:
        table = server_table(port, token_file=str(token))
        if mode == "hang":  # the only deadline that may pass; the others answer in time
            table = table.replace("60000", "1500")
        daemon = await start_daemon(providers=PROVIDERS, extra=table, start_providers="boot")
        async with connect(daemon.socket) as client:
            result: ComposeResult = await client.compose("why", budget=4000, strategy="rerank")
            shown, _ = await _shown(client)
    record = _record(result)
    assert (record["fallback"], record["reason"]) == ("round_robin", reason)
    assert record["detail"].startswith(detail)
    assert record["order"] == [] and record["candidates"] == 8 and result.citations
    assert _ranked(result) == shown  # all by the fallback
    assert result.degraded is True
    assert [(d.reason, d.detail) for d in result.degraded_reasons] == [("rerank_fallback", reason)]
    # What the server wrote (its body echoes the bearer token) is never quoted.
    assert TOKEN not in result.model_dump_json() and TOKEN not in "\n".join(daemon.log_text)
    assert daemon.events("rerank.failed")[0]["reason"] == reason
    assert await daemon.stop() == 0


async def test_a_refused_token_and_a_stopped_server_fall_back_with_their_reasons(
    start_daemon: Any, workdir: Path
) -> None:
    wrong, right = workdir / "wrong.token", workdir / "right.token"
    wrong.write_text("not-the-token-at-all")
    right.write_text(TOKEN)
    async with rerank_server("ok", "--token-file", str(right)) as port:
        table = server_table(port, token_file=str(wrong))
        daemon = await start_daemon(providers=PROVIDERS, extra=table)
        async with connect(daemon.socket) as client:
            refused = await client.compose("why", budget=4000, strategy="rerank")
    # The block ended: the server is stopped, nothing listens on its port.
    async with connect(daemon.socket) as client:
        down = await client.compose("why", budget=4000, strategy="rerank")
        shown, _ = await _shown(client)
    assert (_record(refused)["reason"], _record(refused)["detail"]) == (
        "error",
        "HTTP 401: the credential was refused",
    )
    record = _record(down)
    assert (record["fallback"], record["reason"]) == ("round_robin", "unavailable")
    assert record["detail"].startswith("ConnectError")
    assert _ranked(down) == shown and down.degraded is True
    assert "not-the-token-at-all" not in "\n".join(daemon.log_text)
    assert await daemon.stop() == 0


async def test_a_hanging_server_is_left_alone_after_its_failures_and_status_says_so(
    start_daemon: Any, workdir: Path
) -> None:
    """After ``cool_down_after`` timeouts in a row, a composition does not ask the server:
    its audit says ``cooling_down`` and when it is tried again, no exchange is made (the
    server's count stays), and ``host/status`` shows the reranker's health."""
    seen = workdir / "seen.jsonl"
    async with rerank_server("hang", "--seen", str(seen)) as port:
        # The only deadline that may pass is timeout_ms; the cool-down (10 min) is a
        # hang guard's length, so the third composition always falls in it.
        table = server_table(
            port, cool_down_after=2, cool_down_ms=600_000, max_cool_down_ms=600_000
        ).replace("timeout_ms = 60000", "timeout_ms = 1000")
        daemon = await start_daemon(providers=PROVIDERS, extra=table, start_providers="boot")
        async with connect(daemon.socket) as client:
            results = [
                await client.compose("why", budget=4000, strategy="rerank") for _ in range(3)
            ]
            status = await client.call("host/status")
    reasons = [(_record(r)["reason"], r.degraded) for r in results]
    assert reasons == [("timeout", True), ("timeout", True), ("unavailable", True)]
    detail = _record(results[2])["detail"]
    assert detail.startswith(
        "cooling_down: 2 failures in a row, the last timeout: no verdict within 1000 ms "
        "(raise [reranker] timeout_ms); "
        "next try in "
    )
    assert [(d.reason, d.detail) for d in results[2].degraded_reasons] == [
        ("rerank_fallback", "unavailable")
    ]
    row = status["reranker"]
    health = row["health"]
    assert (row["state"], health["consecutive_failures"], health["timeouts"]) == ("failed", 2, 2)
    assert health["skipped"] == 1 and 0 < health["retry_in_s"] <= 600
    assert row["remote"]["exchanges"] == 2  # the third composition sent nothing
    assert len(_seen(seen)) <= 2  # nor did the server ever see a third request
    (cooling,) = daemon.events("rerank.cooling_down")
    assert (cooling["consecutive_failures"], cooling["retry_in_s"]) == (2, 600.0)
    # The outage is told as it begins; its repeats (the same timeout, the composition the
    # cool-down spared) are debug, below the daemon's level.
    failed = daemon.events("rerank.failed")
    assert [(e["level"], e["reason"]) for e in failed] == [("warning", "timeout")]
    assert await daemon.stop() == 0
