"""The daemon's side of shadow ranking: sample a composition and write it off the request path.

A drawn composition becomes a small record, handed to one writer thread through
a bounded queue, and the request goes on at once: serialising it and the SQLite
transaction happen on that thread, for whatever gathered meanwhile. ``close()`` (``aclose()`` from
async code) writes every record still queued before it returns, so a graceful
stop loses nothing; a queue full of unwritten records refuses the newest one
(``shadow.record_dropped``) rather than make a request wait.

Feedback (``usage/feedback``) needs the request's citation map and candidate
set whether or not the draw picked it: so every composition is held (``_held``:
plain rows, a few attribute reads a frame) and the newest ``HELD`` are kept in
memory; a drawn one becomes its record at once. Feedback on
a request the draw skipped writes its record first, then the feedback, through
the same queue (in that order); feedback on an older request is checked
against the store. A request neither held nor stored is ``UnknownRequest``.
"""

from __future__ import annotations

import queue
import random
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from hostd.errors import Overloaded, UnknownRequest
from hostd.logs import get_logger

from ._feedback import Feedback, resolve_used
from ._held import Composition, Held, hold
from ._store import Recorded, ShadowStore

__all__ = ["ShadowRecorder", "shadow_path"]

log = get_logger("hostd.shadow")

#: Records waiting for the writer before a new one is dropped.
PENDING = 512
#: Records written in one transaction at most.
_BATCH = 128
#: How long the writer lets recordings gather before it writes them.
_GATHER_S = 0.1
#: The newest compositions kept in memory (drawn or not), so feedback can name them.
HELD = 256

#: A drawn composition is queued as held: its body is made on the writer thread.
_Queued = Held | Recorded | Feedback | None


def shadow_path(state_dir: Path) -> Path:
    """The shadow store's file under ``state_dir``."""
    return state_dir / "shadow.db"


class ShadowRecorder:
    """Records a ``sample`` share of compositions into a ``ShadowStore``.

    Recording never fails a request: a store that cannot be opened is logged
    (``shadow.record_failed``) and the composition is returned as usual.
    """

    def __init__(
        self,
        store: ShadowStore,
        *,
        sample: float = 1.0,
        store_content: bool = False,
        draw: Callable[[], float] = random.random,
        pending: int = PENDING,
    ) -> None:
        self.store = store
        self.sample = sample
        self.store_content = store_content
        self._draw = draw
        self._queue: queue.Queue[_Queued] = queue.Queue(maxsize=pending)
        #: request id → (its held composition, whether its record is queued or written).
        self._held: OrderedDict[str, tuple[Held, bool]] = OrderedDict()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._closing = threading.Event()

    @classmethod
    def from_settings(cls, settings: Any, state_dir: Path) -> ShadowRecorder | None:
        """``None`` unless ``settings.enabled`` (the ``[shadow]`` config section)."""
        if not settings.enabled:
            return None
        store = ShadowStore(
            shadow_path(state_dir),
            max_requests=settings.max_requests,
            max_bytes=settings.max_bytes,
            retention_days=settings.retention_days,
        )
        return cls(store, sample=settings.sample, store_content=settings.store_content)

    async def record(self, composition: Composition) -> bool:
        """Queue this composition for writing if it is drawn; whether it was queued.

        Drawn or not, its record is held for feedback (``HELD`` newest)."""
        if self._closed:
            return False
        # Held as plain tuples (a few attribute reads a frame, docs/benchmarks.md): the
        # held compositions keep small rows alive, not whole frames and audits. A drawn
        # one becomes its record here, from what the request holds.
        held = hold(composition, store_content=self.store_content)
        drawn = self.sample > 0 and self._draw() < self.sample
        self._hold(held, written=False)
        if not drawn:
            return False
        queued = await self._enqueue(held)
        self._hold(held, written=queued)
        return queued

    def _hold(self, held: Held, *, written: bool) -> None:
        self._held[held.request_id] = (held, written)
        self._held.move_to_end(held.request_id)
        while len(self._held) > HELD:
            self._held.popitem(last=False)

    async def _start(self) -> bool:
        """The store open and the writer running (once); ``False`` if it cannot be."""
        if self._thread is None:
            try:
                # Opened (created, migrated) once, off the event loop; a store that cannot
                # be written is found here, not later on the writer thread.
                await anyio.to_thread.run_sync(self.store.open)
            except (OSError, sqlite3.Error) as exc:
                log.warning("shadow.record_failed", error=str(exc), path=str(self.store.path))
                return False
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._write_queued, name="hostd-shadow", daemon=True
                )
                self._thread.start()
        return not self._closed  # closed while the store was opening: nothing more

    async def _enqueue(self, record: Held) -> bool:
        if not await self._start():
            return False
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            log.warning(
                "shadow.record_dropped", request_id=record.request_id, pending=self._queue.qsize()
            )
            return False
        return True

    async def feedback(
        self,
        request_id: str,
        used: Sequence[str | dict[str, Any]],
        helpful: bool | None = None,
        note: str | None = None,
    ) -> Feedback:
        """Check ``used`` against ``request_id``'s citation map and queue it for the store.

        ``UnknownRequest`` when the request is neither held nor stored,
        ``UnknownCitation`` naming every item its map lacks, ``Overloaded`` when the
        writer is too far behind to take it (nothing is half-written)."""
        entry = self._held.get(request_id)
        if entry is None:
            try:
                stored = await anyio.to_thread.run_sync(
                    lambda: self.store.load(request_id=request_id)
                )
            except (OSError, sqlite3.Error):
                stored = []
            if not stored:
                raise UnknownRequest(
                    f"no shadow record of request {request_id!r} (unknown, or past the "
                    f"{HELD} newest compositions and not recorded)",
                    request_id=request_id,
                )
            citations, written = stored[-1].citations, True
        else:
            citations, written = entry[0].citations, entry[1]
        keys = resolve_used(citations, used)
        fb = Feedback.of(
            request_id, time.time(), keys, helpful, note, store_content=self.store_content
        )
        if self._closed or not await self._start():
            raise Overloaded("the shadow store cannot be written now", request_id=request_id)
        room = self._queue.maxsize - self._queue.qsize()
        if room < (1 if written else 2):
            raise Overloaded("the shadow store is behind; send the feedback again later")
        if entry is not None and not written:
            # The record first: the feedback's row needs it.
            self._queue.put_nowait(entry[0])
            self._hold(entry[0], written=True)
        self._queue.put_nowait(fb)
        log.info(
            "shadow.feedback",
            request_id=request_id,
            used=len(keys),
            helpful=helpful,
            recorded_now=not written,
        )
        return fb

    def _write_queued(self) -> None:
        stop = False
        while not stop:
            # One transaction for whatever queued up meanwhile: a busy daemon pays one
            # commit for many recordings.
            batch = [self._queue.get()]
            # Let recordings gather for a moment (close() cuts it short): the thread then
            # wakes a few times a second, not once a request, so it rarely contends for
            # the GIL with the event loop.
            self._closing.wait(_GATHER_S)
            while len(batch) < _BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if None in batch:
                stop = True
                batch = batch[: batch.index(None)]
            if batch:
                self._write(batch)

    def _write(self, batch: list[_Queued]) -> None:
        records = [r for r in batch if isinstance(r, Held | Recorded)]
        feedback = [f for f in batch if isinstance(f, Feedback)]
        ids = [record.request_id for record in records]
        try:
            orphans = self.store.write_many(records, feedback)
        # The thread's boundary: one that died would silently drop every later record.
        except Exception as exc:  # logged; the next batch is still tried
            log.warning(
                "shadow.record_failed", request_ids=ids, error=str(exc), path=str(self.store.path)
            )
        else:
            log.debug("shadow.recorded", request_ids=ids)
            if orphans:  # its request was pruned from the store before the feedback came
                log.warning("shadow.feedback_dropped", request_ids=orphans)

    def close(self) -> None:
        """Write every queued record, stop the writer and close the store (blocking)."""
        self._closed = True
        self._closing.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)  # after every queued record: the writer drains first
            thread.join()
        self.store.close()

    async def aclose(self) -> None:
        """``close()`` off the event loop; shielded, so a stop being cancelled still flushes."""
        # Closed here, on the loop's thread, so no record is queued behind the writer's stop.
        self._closed = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)
