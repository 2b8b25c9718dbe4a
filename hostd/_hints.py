"""What hostd tells a user about a provider still warming up (a name it does not know
is answered in ``hostd.errors``: ``did_you_mean``, ``unknown_provider``).

A provider still warming up: pure words over a ``context/compose`` reply (its
``providers[]`` entries), shared by the CLI's summary and ``hostd mcp``'s texts. A
provider with an index to build answers its handshake at once and builds afterwards
(docs/providers.md); its leg is ``warming`` until it is done. Where that build goes
on decides the advice: a one-shot command stops its providers when it ends, so on a
large project a build never finishes within one run (``hostd warm`` builds it once,
and the bundled providers keep it on disk; a running ``hostd serve`` keeps building
between requests), while a daemon (``--connect``, ``hostd mcp``) goes on warming up in
the background. ``hostd warm`` keeps no model loaded, though: an in-process ``hostd
mcp`` (no ``--connect``) starts its providers anew, so each one loads its model once
per ``hostd mcp`` process (each session of its client) even over an index on disk;
only a running ``hostd serve`` behind ``hostd mcp --connect`` keeps it loaded across
sessions. Only hostd's own words and figures are used (the engine's report).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "budget_advice",
    "warming_advice",
    "warming_doing",
    "warming_ids",
    "warming_state",
]


def warming_doing(phase: Any) -> str:
    """What a warming provider is doing, by the phase it last reported (``error.phase``
    of its leg): ``load`` is loading what an earlier run saved (the bundled ``files``
    provider's cached index, which takes a fraction of a build), ``load model`` a model;
    any other phase, or none, builds its index."""
    if phase == "load model":
        return "loading its model"
    if isinstance(phase, str) and phase.split(maxsplit=1)[:1] == ["load"]:
        return "loading its saved index"
    return "building its index"


def warming_state(report: Mapping[str, Any]) -> str | None:
    """``still building its index (…)`` for a ``warming`` leg (``still loading its saved
    index (…)`` while it loads one: ``warming_doing``), the engine's message in
    parentheses; ``still starting (…)`` for one not handshaken yet; None for any other
    status."""
    if report.get("status") != "warming":
        return None
    error = report.get("error") or {}
    starting = error.get("code") == "starting"
    what = "still starting" if starting else f"still {warming_doing(error.get('phase'))}"
    detail = error.get("message")
    return f"{what} ({detail})" if detail else what


def warming_ids(result: Mapping[str, Any]) -> list[str]:
    """The ids of the providers whose leg was ``warming``, in the reply's order."""
    reports: Sequence[Mapping[str, Any]] = result.get("providers") or []
    return [str(p.get("provider_id")) for p in reports if p.get("status") == "warming"]


def warming_advice(ids: Sequence[str], *, where: str, config: str = "") -> str | None:
    """One line saying what to do about the warming providers ``ids`` (None for none).

    ``where``: ``one_shot`` (a command that starts its providers and stops them when
    it ends), ``daemon`` (a running ``hostd serve`` behind ``--connect``), ``mcp``
    (an in-process ``hostd mcp``, which keeps its providers while it runs and starts
    them anew in the next) or ``mcp_connect`` (``hostd mcp --connect``: the daemon's
    providers). ``config``: the ``--config FILE`` option to repeat in the commands
    named, or nothing.
    """
    if not ids:
        return None
    who = ", ".join(ids)
    if where == "one_shot":
        return (
            f"still warming: {who}. This command stops its providers when it ends, so a "
            f"large index takes many runs to build: run `hostd warm{config}` once to build "
            f"it (the bundled providers keep it on disk), or keep `hostd serve{config}` "
            f"running and compose with --connect"
        )
    if where == "daemon":
        return (
            f"still warming: {who}. The daemon's providers go on warming up in the "
            f"background: ask again shortly (`hostd providers{config} --connect` shows each "
            f"one's state)"
        )
    if where == "mcp_connect":
        return (
            f"still warming: {who}. The daemon's providers go on warming up in the "
            f"background: call compose_context again shortly"
        )
    return (
        f"still warming: {who}. hostd goes on warming up in the background: call "
        f"compose_context again shortly. Each `hostd mcp` process (a client's session) "
        f"starts its providers anew and loads their models once (`hostd warm{config}` "
        f"builds an index ahead of time but keeps no model loaded); keep `hostd "
        f"serve{config}` running and give the client `hostd mcp{config} --connect` to keep "
        f"them loaded across sessions"
    )


def budget_advice(result: Mapping[str, Any]) -> str | None:
    """For a composition that included nothing because nothing fit (every frame ranked
    ``over_budget``): what the smallest one costs, what the budget left after the
    prompt's own lines, and the budget that would include it. ``None`` otherwise: an
    empty prompt for other reasons says nothing of the budget."""
    audit = result.get("audit") or {}
    entries = audit.get("entries") or []
    if any(e.get("disposition") == "included" for e in entries):
        return None
    budget = audit.get("global_budget")
    if not isinstance(budget, int):
        return None
    # What each would need: the budget, less the room it had, plus its cost; past a
    # budget its fixed lines alone are over, by ``over_by`` more.
    needs = [
        (budget - int(d["remaining"]) + int(d.get("over_by") or 0) + int(d["cost"]), d)
        for e in entries
        if e.get("reason") == "over_budget"
        and isinstance(d := e.get("detail"), Mapping)
        and isinstance(d.get("cost"), int)
        and isinstance(d.get("remaining"), int)
    ]
    if not needs:
        return None
    need, detail = min(needs, key=lambda n: n[0])
    own = (
        f"the prompt's own lines alone take {budget + int(detail['over_by'])}"
        if detail.get("over_by")
        else f"the prompt's own lines leave {detail['remaining']} of it"
    )
    return (
        f"the budget of {budget} tokens is too small for any frame offered: {own} and "
        f"the smallest frame costs {detail['cost']}; a budget of at least {need} includes it"
    )
