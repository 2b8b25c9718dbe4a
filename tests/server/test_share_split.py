"""The budget split over the real daemon: while one provider warms, the others are asked
for its share too.

Two healthy providers that quote the ``max_tokens`` each query carried (``asked N``) and
a warming one whose warm-up waits on a file the test creates: the verdict is read from
what the providers were asked, before and after that file exists, never from a clock.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hostd.client import connect
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio


def _table(pid: str, *args: str) -> str:
    cmd = ", ".join(f'"{w}"' for w in ("python", "-m", *args))
    return f'[[provider]]\nid = "{pid}"\ncommand = [{cmd}]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'


def _asked(result: dict[str, Any], pid: str) -> set[str]:
    """What ``pid``'s frames say it was asked for (``asked N``)."""
    return {
        m for frame in result["frames"][pid] for m in re.findall(r"asked \d+", frame["content"])
    }


def _legs(result: dict[str, Any]) -> dict[str, tuple[str, int, int, str | None]]:
    return {
        p["provider_id"]: (p["status"], p["share"], p["max_tokens"], p.get("share_apart"))
        for p in result["providers"]
    }


async def test_while_a_provider_warms_the_others_are_asked_for_its_share(
    start_daemon: Any, marker: str, workdir: Path
) -> None:
    gate = workdir / f"warm-{marker}.gate"  # the marker in its command line: no leftover
    healthy = ("tests.fixtures.healthy_provider", "--frames", "30", "--size", "200")
    extra = (
        _table("alpha", *healthy, "--name", f"alpha-{marker}", "--quote-asked")
        + _table("beta", *healthy, "--name", f"beta-{marker}", "--quote-asked")
        + _table("w", "tests.fixtures.warming_provider", "--warm-gate", str(gate))
    )
    # Every provider starts with the daemon (boot); overfetch is the default 2.
    daemon = await start_daemon(providers={}, extra=extra)
    async with connect(daemon.socket) as client:
        # alpha and beta up and ready (a request naming no timeout waits for their start),
        # w handshaken and warming (it says how far it got).
        await client.query("g", budget=800, providers=["alpha", "beta"])
        # Handshaken and warming: asked again at each step it reports (it says it is
        # alive while it waits), until the daemon lists it warming.
        heard = 1
        while {p["id"]: p["state"] for p in await client.providers()}["w"] != "warming":
            await daemon.logged_times("provider.progress", heard, provider="w")
            heard += 1
        warming = await client.query("g", budget=800, ready_wait_ms=100)
        gate.touch()
        await daemon.logged("provider.ready", provider="w")
        ready = await client.query("g", budget=800)
        # Its log says why, for an operator: on w's warming leg, never on the others'.
        cold = await daemon.logged("provider.leg", provider="w", status="warming")
        await daemon.logged("provider.leg", provider="w", status="ok")
    # While w warms, alpha and beta share the whole budget; w keeps its nominal share
    # (asked 532 of 800 in case it is ready within the wait) and is reported warming.
    assert _legs(warming) == {
        "alpha": ("ok", 400, 800, None),
        "beta": ("ok", 400, 800, None),
        "w": ("warming", 266, 532, "warming"),
    }
    assert _asked(warming, "alpha") == _asked(warming, "beta") == {"asked 800"}
    # Ready, w takes its part of the split again: every one is asked for a third.
    assert _legs(ready) == {
        "alpha": ("ok", 267, 534, None),
        "beta": ("ok", 267, 534, None),
        "w": ("ok", 266, 532, None),
    }
    assert _asked(ready, "alpha") == _asked(ready, "beta") == {"asked 534"}
    assert cold["share_apart"] == "warming"
    assert not [
        e for e in daemon.events("provider.leg") if e["status"] == "ok" and "share_apart" in e
    ]
    assert await daemon.stop() == 0
