"""What hostd tells a user: a name it does not know, and a provider still warming up.

A name that is not one hostd knows (a config key, a provider id a request names) is
answered with the closest known one, when one is close (``did_you_mean``); an
unknown provider id also with the ids configured (``unknown_provider``). Only the
names are quoted, never more of what a peer wrote.

A provider still warming up: pure words over a ``context/compose`` reply (its
``providers[]`` entries), shared by the CLI's summary and ``hostd mcp``'s texts. A
provider with an index to build answers its handshake at once and builds afterwards
(docs/providers.md); its leg is ``warming`` until it is done. Where that build goes
on decides the advice: a one-shot command stops its providers when it ends, so on a
large project a build never finishes within one run (``hostd warm`` builds it once,
and the bundled providers keep it on disk; a running ``hostd serve`` keeps building
between requests), while a daemon (``--connect``, ``hostd mcp``) goes on building in
the background. Only hostd's own words and figures are used (the engine's report).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "did_you_mean",
    "unknown_provider",
    "warming_advice",
    "warming_ids",
    "warming_state",
]

#: An unknown provider's message names at most this many configured ids (the rest counted).
IDS_NAMED = 20


def did_you_mean(word: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` closest to ``word`` when one is close (difflib's ratio at
    least 0.6), else None."""
    close = difflib.get_close_matches(word, list(known), 1)
    return close[0] if close else None


def unknown_provider(provider_id: str, configured: Iterable[str]) -> str:
    """``unknown provider 'fact' (configured: facts, notes); did you mean 'facts'?``: the
    id a request named, the ids configured (sorted; at most ``IDS_NAMED``, the rest
    counted) and, when one is close, the closest."""
    ids = sorted(set(configured))
    if not ids:
        named = "no provider is configured"
    else:
        more = len(ids) - IDS_NAMED
        named = "configured: " + ", ".join(ids[:IDS_NAMED])
        named += f" and {more} more" if more > 0 else ""
    close = did_you_mean(provider_id, ids)
    guess = f"; did you mean {close!r}?" if close is not None else ""
    return f"unknown provider {provider_id!r} ({named}){guess}"


def warming_state(report: Mapping[str, Any]) -> str | None:
    """``still building its index (…)`` for a ``warming`` leg, the engine's message in
    parentheses; ``still starting (…)`` for one not handshaken yet; None for any other
    status."""
    if report.get("status") != "warming":
        return None
    error = report.get("error") or {}
    what = "still starting" if error.get("code") == "starting" else "still building its index"
    detail = error.get("message")
    return f"{what} ({detail})" if detail else what


def warming_ids(result: Mapping[str, Any]) -> list[str]:
    """The ids of the providers whose leg was ``warming``, in the reply's order."""
    reports: Sequence[Mapping[str, Any]] = result.get("providers") or []
    return [str(p.get("provider_id")) for p in reports if p.get("status") == "warming"]


def warming_advice(ids: Sequence[str], *, where: str, config: str = "") -> str | None:
    """One line saying what to do about the warming providers ``ids`` (None for none).

    ``where``: ``one_shot`` (a command that starts its providers and stops them when
    it ends), ``daemon`` (a running ``hostd serve`` behind ``--connect``) or ``mcp``
    (``hostd mcp``, which keeps its providers while it runs). ``config``: the
    ``--config FILE`` option to repeat in the commands named, or nothing.
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
            f"still warming: {who}. The daemon goes on building in the background: ask "
            f"again shortly (`hostd providers{config} --connect` shows each one's state)"
        )
    return (
        f"still warming: {who}. hostd goes on building in the background: call "
        f"compose_context again shortly (`hostd warm{config}` builds the index ahead of "
        f"time, and the bundled providers keep it on disk)"
    )
