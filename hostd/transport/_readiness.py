"""A provider's readiness as the host sees it: warming, ready or failed, and its progress.

A provider may answer its handshake before it can answer queries (an index to
build): its handshake result then says ``"ready": false``, and its
``context/progress`` notifications (``state`` warming | ready | failed,
``phase``, ``done``, ``total``, ``message``, ``elapsed_s``; docs/providers.md) say
how far it got and when it is ready. A provider that says neither is ready at its
handshake. This record is fed from the binding's read callback and read by
the engine (wait for readiness, report ``warming``); it does no I/O itself. It also
measures a warm-up's rate from the notes it hears (``left_s``), so ``hostd status``
says the time a build has left as ``hostd warm`` does, hours into a daemon's build.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from hostd.protocol import MAX_PROGRESS_TEXT, MAX_READY_MESSAGE, PROGRESS_METHOD

__all__ = [
    "PROGRESS_METHOD",
    "RATE_SPAN_S",
    "OnProgress",
    "Readiness",
    "progress_figures",
    "seconds_left",
]

#: A phase's rate is measured over at least this before the time it has left is said:
#: its first batches (a model warming its caches) alone would say too little, or too much.
RATE_SPAN_S = 10.0


#: Told of each progress notification: ``(provider_id, progress)``.
OnProgress = Callable[[str, dict[str, Any]], None]


def progress_figures(params: Any) -> dict[str, Any]:
    """The members of a progress note (or a reply's ``warming``) the host reads, of the
    types it reads them as (a peer's wire, U1): anything else is dropped."""
    if not isinstance(params, dict):
        return {}
    out: dict[str, Any] = {}
    if params.get("answering") is True:  # warming, and its queries are answered
        out["answering"] = True
    ready = params.get("state") == "ready"
    for key in ("state", "phase", "message"):
        value = params.get(key)
        if isinstance(value, str):
            out[key] = value[
                : MAX_READY_MESSAGE if ready and key == "message" else MAX_PROGRESS_TEXT
            ]
    for key in ("done", "total", "elapsed_s"):  # elapsed_s: a long step said again
        value = params.get(key)
        if type(value) is int and value >= 0:
            out[key] = value
    return out


def seconds_left(first: int, began: float, done: int, now: float, total: Any) -> float | None:
    """The seconds a phase has left at the rate it went from ``first`` done at ``began``
    to ``done`` at ``now``: counted from its first note, so a build resumed from its
    cache is not credited its cached part. ``None`` until that rate is measured over
    ``RATE_SPAN_S``, or with no ``total`` to reach."""
    if total is None or not first < done < total or now - began < RATE_SPAN_S:
        return None
    return float((total - done) * (now - began) / (done - first))


class Readiness:
    """Warming until the provider says ready or failed; ``settled`` is the event to wait on."""

    __slots__ = (
        "_clock",
        "_on_progress",
        "_since",
        "answers",
        "failed",
        "notified",
        "progress",
        "provider_id",
        "settled",
        "warming",
    )

    def __init__(
        self,
        provider_id: str,
        on_progress: OnProgress | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider_id = provider_id
        #: Set once ready or failed (a failed warm-up is waited on no longer).
        self.settled = anyio.Event()
        #: Set once its queries are answered: settled, or warming and answering meanwhile
        #: (its progress says ``answering``); a request waits for this, not ``settled``.
        self.answers = anyio.Event()
        #: Up and handshaken, but neither ready nor failed: its queries are refused.
        #: A plain flag, cleared with ``settled`` (``_settle``): every leg of every
        #: request reads it, and a read is no call into the event's library.
        self.warming = True
        self.failed: str | None = None
        self.progress: dict[str, Any] = {"state": "warming", "phase": "start"}
        #: Whether the provider sent progress of its own: one ready at its handshake
        #: sends none, so nobody listening to notes has heard it is ready.
        self.notified = False
        self._on_progress = on_progress
        self._clock = clock
        #: The warming phase's first note: (phase, total, when, done), the rate's start;
        #: a new phase or total starts it again (a total that changed changed the work).
        #: With the latest note's (when, done) the rate is measured up to now.
        self._since: tuple[str, Any, float, int, float, int] | None = None

    def __repr__(self) -> str:
        return f"<Readiness {self.provider_id} {self.state} {self.progress}>"

    @property
    def state(self) -> str:
        if self.warming:
            return "warming"
        return "ready" if self.failed is None else "failed"

    def _settle(self) -> None:
        self.warming = False
        self.settled.set()
        self.answers.set()

    def _measure(self, progress: dict[str, Any]) -> None:
        """Note where a warming phase stands, and when, for ``left_s``."""
        if progress.get("state", "warming") != "warming":
            self._since = None
            return
        now, done = self._clock(), progress.get("done", 0)
        phase, total = progress.get("phase", "warming"), progress.get("total")
        since = self._since
        if since is None or since[:2] != (phase, total):
            self._since = (phase, total, now, done, now, done)
        else:
            self._since = (*since[:4], now, done)

    def left_s(self) -> float | None:
        """The seconds the warming phase has left at the rate measured from its first note
        to its latest (``seconds_left``), as of that latest note; ``None`` until then."""
        if self._since is None:
            return None
        _phase, total, began, first, at, done = self._since
        return seconds_left(first, began, done, at, total)

    def handshake(self, result: Any) -> None:
        """Read the handshake result: ready unless it says ``"ready": false``.

        A warm-up that ends before the handshake is answered may have its ready
        notification read first (it is written from the warm-up's thread): that one
        settled the provider already, and its progress (the ready message, what the
        provider holds) is kept, not replaced by a bare ``ready``."""
        if self.warming and not (isinstance(result, dict) and result.get("ready") is False):
            self.progress = {"state": "ready"}
            self._settle()

    def on_notification(self, method: str, params: Any) -> None:
        """A provider notification (from the read callback); only progress is read."""
        if method != PROGRESS_METHOD:
            return
        progress = progress_figures(params)
        state = progress.get("state", "warming")
        self.progress = progress
        self.notified = True
        self._measure(progress)
        if state == "failed":
            self.failed = progress.get("message") or "warm-up failed"
        if state in ("ready", "failed"):
            self._settle()
        elif progress.get("answering"):
            self.answers.set()
        if self._on_progress is not None:
            self._on_progress(self.provider_id, progress)
