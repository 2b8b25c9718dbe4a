"""A provider's readiness, from its own side: warming, progress, ready (provider runtime).

A provider that must build or load something before it can answer (an index, a
model) answers ``context/handshake`` at once with ``"ready": false`` and does
that work in a worker thread (``Provider.warm``). Meanwhile ``context/query``
is answered with the CGP ``unavailable`` error carrying ``data.warming: true``
and the latest progress, never by waiting; and the provider tells the host how
far it got with ``context/progress`` notifications (``state`` warming, ready or
failed, ``phase``, ``done``, ``total``, ``message``), the last one saying
``ready``; a step that runs long (a model load reports once, then nothing until it is
loaded) is said again every ``Provider.progress_beat_s`` with ``elapsed_s``, the whole
seconds its phase has run, by a thread of its own. A warm-up that can answer from what
it has built so far (an index embedded in part) says so (``Progress.answer_meanwhile``):
its queries then reach ``Provider.query`` while it still warms, and the host reads such
an answer as partial (its leg's note, ``provider_partial``). Once ready, it says
``ready`` again with a new message when what it holds changes
(``Provider.ready_message``). docs/providers.md describes this wire.
Imports only ``hostd.errors`` and ``hostd.protocol``.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from hostd.errors import ProviderRefusal
from hostd.protocol import MAX_READY_MESSAGE, CgpErrorCode

__all__ = ["BEAT_S", "Progress", "Readiness", "Warming", "warm_in_thread"]

#: Notifications are at most this often (a tight embedding loop reports per batch);
#: a phase change and the final one always go out.
_MIN_INTERVAL_S = 0.2
#: How often a warm-up that reports nothing new is said again (``Readiness.beat``).
BEAT_S = 2.0


class Warming(ProviderRefusal):
    """The answer to a query while the provider warms: CGP ``unavailable``, saying so."""

    reason = "warming"

    def __init__(self, message: str, progress: dict[str, Any]) -> None:
        super().__init__(message, CgpErrorCode.UNAVAILABLE)
        self.data = {"warming": True, "progress": progress}


class Progress:
    """What ``Provider.warm`` is given: call it as work advances (from any thread).

    ``progress(done, total, phase="embed", message=None)``; ``total`` may be
    ``None`` when unknown. Cheap to call per item: notifications are throttled."""

    def __init__(self, readiness: Readiness) -> None:
        self._readiness = readiness

    def __call__(
        self,
        done: int,
        total: int | None = None,
        *,
        phase: str = "index",
        message: str | None = None,
    ) -> None:
        self._readiness.update(
            {"state": "warming", "phase": phase, "done": done, "total": total, "message": message}
        )

    def answer_meanwhile(self) -> None:
        """From now until the warm-up ends, queries reach ``Provider.query`` instead of
        the ``warming`` refusal: it answers from what it has built so far. The host,
        which still hears ``warming``, tells such an answer as partial, with the
        figures of the last progress (``done`` of ``total``): keep them true of what a
        query searches. Said to the host at once (``answering``), so a request stops
        waiting for this provider's ready and asks it."""
        self._readiness.answer_meanwhile()


class Readiness:
    """Warming → ready (or failed), with the latest progress; sends each change through
    ``send`` (a thread-safe callable writing one ``context/progress`` notification)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.state = "ready"
        self.progress: dict[str, Any] = {"state": self.state, "phase": "start", "done": 0}
        self._send: Callable[[dict[str, Any]], None] | None = None
        self._sent_at = float("-inf")
        self._sent_phase: str | None = None
        #: When the phase in ``progress`` began: a beat says how long it has run.
        self._phase_began = time.monotonic()
        self.failure: str | None = None
        #: The warm-up answers queries meanwhile (``Progress.answer_meanwhile``).
        self.answering = False

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def answers(self) -> bool:
        """Whether a query is answered now: ready, or warming and answering meanwhile."""
        return self.state == "ready" or (self.state == "warming" and self.answering)

    def begin(self) -> None:
        """A warm-up starts: queries are refused (``refusal``) until ``finish``."""
        with self._lock:
            self.state = "warming"
            self.progress = {"state": "warming", "phase": "start", "done": 0}
            self._phase_began = time.monotonic()

    def attach(self, send: Callable[[dict[str, Any]], None]) -> None:
        with self._lock:
            self._send = send

    def update(self, progress: dict[str, Any]) -> None:
        final = progress.get("state") != "warming"
        with self._lock:
            if self.state != "warming":
                return  # ready or failed is final
            now = time.monotonic()
            phase = progress.get("phase")
            if phase != self.progress.get("phase"):
                self._phase_began = now
            self.progress = {k: v for k, v in progress.items() if v is not None}
            if self.answering and not final:  # every warming note says it answers
                self.progress["answering"] = True
            total = progress.get("total")
            due = (
                final
                or phase != self._sent_phase
                or (total is not None and progress.get("done") == total)
                or now - self._sent_at >= _MIN_INTERVAL_S
            )
            if final:
                self.state = str(progress["state"])
            send = self._send if due else None
            if due:
                self._sent_at, self._sent_phase = now, phase
            body = dict(self.progress)
        if send is not None:
            send(body)

    def answer_meanwhile(self) -> None:
        """Queries are answered from now on while warming; said at once with the latest
        progress and ``answering``, whatever the interval since the last note (the
        host waits for this provider's ready until it hears it)."""
        with self._lock:
            if self.state != "warming" or self.answering:
                return
            self.answering = True
            self.progress = {**self.progress, "answering": True}
            self._sent_at = time.monotonic()
            send, body = self._send, dict(self.progress)
        if send is not None:
            send(body)

    def meanwhile(self) -> dict[str, Any] | None:
        """What a query answered now searches, when that is less than a whole build:
        the latest progress's phase and figures while warming and answering, else
        ``None`` (docs/providers.md: a reply's ``warming`` member)."""
        with self._lock:
            if self.state != "warming":
                return None
            return {k: self.progress[k] for k in ("phase", "done", "total") if k in self.progress}

    def beat(self, every: float) -> float:
        """Say the latest step again, with ``elapsed_s`` (the whole seconds its phase has
        run), when nothing was sent for ``every`` seconds: a client that resets its
        timeout on each note (MCP clients do) would take a long silent step, a model
        load, for a hang. Returns the seconds until the next beat is due."""
        with self._lock:
            now = time.monotonic()
            quiet = now - self._sent_at
            send = self._send
            if self.state != "warming" or send is None:
                return every
            if quiet < every:
                return every - quiet
            self._sent_at = now
            body = {**self.progress, "elapsed_s": int(now - self._phase_began)}
        send(body)
        return every

    def restate(self, message: str | None) -> None:
        """Once ready, say ``message`` as the ready message when it is new: what the
        provider holds changed (an index rebuilt for a changed tree), and ``hostd
        status`` should not show what it held at its start. A ``None`` says nothing."""
        with self._lock:
            if self.state != "ready" or message is None:
                return
            message = message[:MAX_READY_MESSAGE]
            if message == self.progress.get("message"):
                return
            self.progress = {"state": "ready", "phase": "ready", "message": message}
            send, body = self._send, dict(self.progress)
        if send is not None:
            send(body)

    def finish(self, error: BaseException | None = None, message: str | None = None) -> None:
        if error is None:
            self.update({"state": "ready", "phase": "ready", "message": message})
        else:
            self.failure = f"{type(error).__name__}: {error}"
            self.update({"state": "failed", "phase": "failed", "message": self.failure})

    def refusal(self) -> ProviderRefusal:
        """What a query gets while not ready."""
        with self._lock:
            progress = dict(self.progress)
        if self.state == "failed":
            return ProviderRefusal(f"warm-up failed: {self.failure}", CgpErrorCode.UNAVAILABLE)
        done, total = progress.get("done"), progress.get("total")
        figure = f" {done}/{total}" if total is not None else (f" {done}" if done else "")
        return Warming(f"warming: {progress.get('phase', 'start')}{figure}", progress)


def warm_in_thread(
    warm: Callable[[Progress], str | None], readiness: Readiness, beat_s: float = BEAT_S
) -> threading.Thread:
    """Run ``warm`` in a daemon thread (shutdown never waits for it); its end makes the
    provider ready, or failed with the error named on every query. Meanwhile a second
    daemon thread beats (``Readiness.beat``) every ``beat_s`` seconds of silence, until
    the warm-up ends: a thread, not a task, so no beat waits on the event loop or runs
    on it (the loop only writes each note's line, as it writes every other)."""
    ended = threading.Event()

    def run() -> None:
        try:
            said: Any = warm(Progress(readiness))
            if inspect.iscoroutine(said):  # an ``async def warm``: run to its end here
                said = asyncio.run(said)
        except BaseException as exc:  # answered on every query instead of exiting
            sys.stderr.write(f"provider: warm-up failed: {type(exc).__name__}: {exc}\n")
            readiness.finish(exc)
        else:  # its summary, if it gave one, is the ready message
            readiness.finish(message=said[:MAX_READY_MESSAGE] if isinstance(said, str) else None)
        finally:
            ended.set()

    def beat() -> None:
        wait = beat_s
        while not ended.wait(wait):
            wait = readiness.beat(beat_s)

    thread = threading.Thread(target=run, name="provider-warm", daemon=True)
    thread.start()
    threading.Thread(target=beat, name="provider-warm-beat", daemon=True).start()
    return thread
