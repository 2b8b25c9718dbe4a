"""``[reranker] url`` against a real rerank server from a package registry: Infinity.

Infinity (``infinity-emb``) serves the Cohere-style ``POST /rerank``. It pins numpy<2 and
sentence-transformers<4, so it lives in a venv of its own: ``$HOSTD_RERANK_VENV``, else
``.venv-rerank`` in the checkout (``scripts/test`` makes it). The model is a tiny random
cross-encoder built in the test (``tests.fixtures.tiny_cross_encoder``, by that venv's
transformers), served under the name ``tiny-ce``; no network is used. The daemon's
``rerank`` composition must follow the scores Infinity itself gives for the same query
and documents, the audit naming the model; with the server stopped it falls back to
``round_robin`` with the reason, ``degraded: true``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hostd.client import connect
from tests.server.conftest import ROOT
from tests.server.test_rerank import PROVIDERS, _ranked, _record
from tests.server.test_rerank_server import _shown, server_table

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def rerank_venv() -> Path:
    """The venv Infinity is installed in; the tests skip only when none was named and the
    checkout has none (``scripts/test``, and so CI, always names one)."""
    named = os.environ.get("HOSTD_RERANK_VENV")
    venv = Path(named) if named else ROOT / ".venv-rerank"
    if not (venv / "bin" / "infinity_emb").exists():
        if named:
            pytest.fail(f"HOSTD_RERANK_VENV={named} has no infinity_emb")
        pytest.skip(
            "no rerank server venv: set HOSTD_RERANK_VENV or run scripts/test, which makes "
            ".venv-rerank with infinity-emb"
        )
    return venv


def _env() -> dict[str, str]:
    quiet = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    # One thread: the machine is shared, and a tiny model gains nothing from more.
    quiet |= {"INFINITY_ANONYMOUS_USAGE_STATS": "0", "OMP_NUM_THREADS": "1"}
    return {**os.environ, **quiet}


_LISTENING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


async def _until_listening(stream: Any, tail: bytearray) -> int:
    """Read the server's output until it says where it listens (then keep reading it,
    elsewhere, so its pipe never fills)."""
    while True:
        try:
            tail += await stream.receive()
        except anyio.EndOfStream:
            raise AssertionError(
                "infinity exited before serving:\n" + tail[-3000:].decode()
            ) from None
        found = _LISTENING.search(tail)
        if found:
            return int(found.group(1))


async def _drain(stream: Any) -> None:
    try:
        async for _ in stream:
            pass
    except anyio.BrokenResourceError:
        pass


@pytest.mark.timeout(900)  # a cold torch import and model load: a hang guard on a busy machine
async def test_an_infinity_server_orders_the_composition_and_its_absence_degrades_it(
    start_daemon: Any, workdir: Path
) -> None:
    venv = rerank_venv()
    model = workdir / "tiny-ce"
    built = await anyio.run_process(
        [
            venv / "bin" / "python",
            "-m",
            "tests.fixtures.tiny_cross_encoder",
            model,
            "--max-length",
            "128",
        ],
        cwd=ROOT,
        env=_env(),
    )
    assert built.returncode == 0
    cmd: list[str | Path] = [
        venv / "bin" / "infinity_emb",
        "v2",
        "--model-id",
        model,
        "--served-model-name",
        "tiny-ce",
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--no-model-warmup",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    server = await anyio.open_process(
        cmd, cwd=workdir, env=_env(), stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        assert server.stdout is not None
        with anyio.fail_after(600):  # hang guard
            port = await _until_listening(server.stdout, bytearray())
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, server.stdout)
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False) as http:
                assert (await http.get("/health")).status_code == 200
                table = server_table(port, model="tiny-ce")
                daemon = await start_daemon(providers=PROVIDERS, extra=table)
                async with connect(daemon.socket) as client:
                    result = await client.compose("why", budget=4000, strategy="rerank")
                    shown, texts = await _shown(client)
                # What Infinity itself says of the same query and documents.
                body = {"model": "tiny-ce", "query": "why", "documents": texts}
                reply = (await http.post("/rerank", json=body)).json()
            scores = {r["index"]: r["relevance_score"] for r in reply["results"]}
            assert len(set(scores.values())) == len(texts)  # distinct: the order is the model's
            expected = [shown[i] for i in sorted(scores, key=lambda i: (-scores[i], i))]
            record = _record(result)
            assert (record["model"], record["reason"], record["candidates"]) == ("tiny-ce", None, 8)
            assert result.degraded is False
            assert _ranked(result) == expected != shown  # not the fallback's order
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if server.returncode is None:
                server.terminate()
            await server.wait()
    # The same server stopped: the composition is served all the same, by round_robin.
    async with connect(daemon.socket) as client:
        down = await client.compose("why", budget=4000, strategy="rerank")
    record = _record(down)
    assert (record["fallback"], record["reason"]) == ("round_robin", "unavailable")
    assert _ranked(down) == shown
    assert down.degraded is True
    assert [(d.reason, d.detail) for d in down.degraded_reasons] == [
        ("rerank_fallback", "unavailable")
    ]
    assert await daemon.stop() == 0
