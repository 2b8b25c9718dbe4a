"""End to end over the CGP NDJSON binding with a provider built on the published SDK."""

from __future__ import annotations

import anyio
import pytest

from hostd.engine import Host, LegStatus, ProviderSpec
from hostd.protocol import FrameIdentity
from hostd.transport import ProviderConnection
from tests.engine._helpers import healthy, query
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio


def sdk(pid: str = "sdk", *args: str) -> ProviderSpec:
    return ProviderSpec(
        pid,
        python("tests.fixtures.sdk_provider", *args),
        binding="cgp",
        env=marked_env(),
        cwd=str(ROOT),
        timeout_ms=15_000,
    )


@pytest.mark.parametrize("args", [(), ("--no-correlation",)], ids=["correlated", "lockstep"])
async def test_an_sdk_provider_serves_frames_over_the_cgp_binding(args: tuple[str, ...]) -> None:
    async with Host([sdk("sdk", *args), healthy("h")], start="boot") as host:
        fan = await host.query_all(query(), 1000)
        conn = host.connection("sdk")
        assert isinstance(conn, ProviderConnection) and conn.client.correlation is (not args)
        listed = {p["id"]: p for p in host.providers_list()}
    assert fan.reports["sdk"].status is LegStatus.OK
    assert [f.id for pid, f in fan.accepted if pid == "sdk"] == [
        "sdk:logging",
        "sdk:retry",
        "sdk:timeout",
    ]
    assert fan.reports["sdk"].violations == ()
    assert listed["sdk"]["info"]["name"] == "sdk-docs" and listed["sdk"]["binding"] == "cgp"


@pytest.mark.parametrize("args", [(), ("--no-correlation",)], ids=["correlated", "lockstep"])
async def test_concurrent_queries_to_an_sdk_provider_each_get_their_reply(
    args: tuple[str, ...],
) -> None:
    async with Host([sdk("sdk", *args)], start="boot") as host:
        budgets = [20, 40, 1000] * 4
        results: dict[int, int] = {}

        async def one(i: int, budget: int) -> None:
            fan = await host.query_all(query(), budget)
            assert fan.reports["sdk"].status is LegStatus.OK
            results[i] = len(fan.accepted)

        async with anyio.create_task_group() as tg:
            for i, budget in enumerate(budgets):
                tg.start_soon(one, i, budget)
    # Each reply matches its own budget: 1 frame fits in 20 tokens, 2 in 40, all 3 in 1000.
    assert [results[i] for i in range(len(budgets))] == [1, 2, 3] * 4


async def test_an_sdk_error_envelope_maps_to_its_cgp_code() -> None:
    async with Host([sdk()], start="boot") as host:
        fan = await host.query_all(query(goal="refuse"), 1000)
    assert fan.reports["sdk"].status is LegStatus.ERROR
    assert fan.reports["sdk"].error_code == "budget_unsatisfiable"


async def test_verify_over_the_cgp_binding_returns_verdicts() -> None:
    async with Host([sdk()], start="boot") as host:
        conn = host.connection("sdk")
        assert conn is not None
        ident = FrameIdentity(provider_id="sdk", frame_id="sdk:retry", content_digest=None)
        response = await conn.verify([ident])
    assert [v.status for v in response.verdicts] == ["valid"]


async def test_an_sdk_provider_named_other_than_its_id_keeps_its_session_frames() -> None:
    # Config id "docs", handshake name "sdk-named": verify must reach the provider
    # under the name it knows itself by, and the frames stay "docs" frames here.
    spec = ProviderSpec(
        "docs",
        python("tests.fixtures.sdk_named_provider"),
        binding="cgp",
        env=marked_env(),
        cwd=str(ROOT),
        timeout_ms=15_000,
    )
    async with Host([spec], start="boot") as host:
        with anyio.fail_after(60):
            first = await host.query_all(query(), 1000, session="s")
            second = await host.query_all(query(), 1000, session="s")
    assert {pid for pid, _ in first.accepted} == {"docs"} and len(first.accepted) == 3
    assert second.figures["verify_requested"] == 3
    assert second.figures["reused"] == 3 and second.figures["unknown"] == 0
    assert {v["state"] for v in second.verification.values()} == {"provider_verified"}
    assert {fid.provider_id for fid in second.verification} == {"docs"}
