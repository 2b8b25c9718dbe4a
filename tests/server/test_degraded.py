"""One degraded flag over the wire: a real daemon, real provider children.

A composition that is whole says ``degraded: false`` with no reasons; one that
lost a provider, a consent or its reranker says ``degraded: true`` and names each
shortfall from the closed vocabulary, with the provider where one applies. And each
leg is logged once.
"""

from __future__ import annotations

import pytest

from hostd.client import connect
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio

LEG_EVENTS = ("provider.leg", "provider.leg.failed", "provider.leg.quarantined")


def _crashing(marker: str) -> str:
    # The marker rides in the argv, so the harness finds the process if it outlives us.
    return (
        '[[provider]]\nid = "broken"\ncommand = ["python", "-m", '
        '"tests.fixtures.adversarial_provider", "crash", "--name", '
        f'"broken-{marker}"]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'
    )


async def test_a_whole_composition_is_not_degraded(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}, "beta": {}})
    async with connect(daemon.socket) as client:
        result = (await client.compose("a whole composition", budget=300)).to_wire()
    assert await daemon.stop() == 0
    assert all(p["status"] == "ok" for p in result["providers"])
    assert (result["degraded"], result["degraded_reasons"]) == (False, [])


async def test_every_shortfall_is_named_once_and_each_leg_logged_once(
    start_daemon, marker: str
) -> None:
    extra = _crashing(marker)
    daemon = await start_daemon(
        {"alpha": {}, "cloud": {"egress_scope": "api.example.com"}}, extra=extra
    )
    async with connect(daemon.socket) as client:
        typed = await client.compose("lose some", budget=300, strategy="rerank")
    result = typed.to_wire()
    assert await daemon.stop() == 0
    status = {p["provider_id"]: p["status"] for p in result["providers"]}
    assert status == {"alpha": "ok", "broken": "crashed", "cloud": "no_consent"}
    assert result["degraded"] is True
    # Sorted by the vocabulary's order, then provider: the same shortfalls, the same bytes.
    assert result["degraded_reasons"] == [
        {"reason": "provider_failed", "provider": "broken", "detail": "crashed"},
        {"reason": "consent_missing", "provider": "cloud", "detail": "api.example.com"},
        {
            "reason": "rerank_fallback",
            "detail": "not_configured",
            "message": "not_configured: no [reranker] command or url in the config",
        },
    ]
    # The typed client reads them as they came, the message with them.
    assert typed.degraded is True
    assert typed.degraded_reasons[-1].message == (
        "not_configured: no [reranker] command or url in the config"
    )
    assert [(d.reason, d.provider) for d in typed.degraded_reasons][0] == (
        "provider_failed",
        "broken",
    )
    # The evidence that did come is still served: degraded, not failed.
    assert result["citations"] and result["prompt"]
    rid = result["request_id"]
    legs = [e for name in LEG_EVENTS for e in daemon.events(name) if e.get("request_id") == rid]
    assert sorted((e["provider"], e["event"]) for e in legs) == [
        ("alpha", "provider.leg"),
        ("broken", "provider.leg.failed"),
        ("cloud", "provider.leg"),
    ]
    (done,) = [e for e in daemon.events("compose.done") if e["request_id"] == rid]
    assert done["degraded"] == ["provider_failed", "consent_missing", "rerank_fallback"]
    # The log's prompt size is the reply's (counted once).
    assert done["prompt_bytes"] == result["usage"]["prompt"]["bytes"]
    assert done["prompt_bytes"] == len(result["prompt"].encode())


async def test_a_calibrated_composition_without_maps_says_so(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}})
    async with connect(daemon.socket) as client:
        typed = await client.compose("no maps yet", budget=300, strategy="calibrated")
    result = typed.to_wire()
    assert await daemon.stop() == 0
    assert result["audit"]["policy"]["strategy_params"]["calibrated"]["fallback"] == "round_robin"
    (reason,) = result["degraded_reasons"]
    assert reason["reason"] == "calibration_missing" and "provider" not in reason
    assert "hostd calibrate" in reason["detail"]


async def test_an_ok_leg_whose_frames_were_dropped_as_invalid_is_named(
    start_daemon, marker: str
) -> None:
    # Its one frame is of a kind it did not declare (Q1): dropped, the leg still ok.
    extra = (
        '[[provider]]\nid = "odd"\ncommand = ["python", "-m", '
        '"tests.fixtures.adversarial_provider", "undeclared_kind", "--name", '
        f'"odd-{marker}"]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    daemon = await start_daemon({"alpha": {}}, extra=extra)
    async with connect(daemon.socket) as client:
        result = (await client.compose("kinds", budget=300)).to_wire()
    assert await daemon.stop() == 0
    status = {p["provider_id"]: p["status"] for p in result["providers"]}
    assert status == {"alpha": "ok", "odd": "ok"}
    assert result["degraded"] is True
    assert result["degraded_reasons"] == [
        {"reason": "frames_invalid", "provider": "odd", "detail": "Q1"}
    ]
