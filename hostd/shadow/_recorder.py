"""The daemon's side of shadow ranking: sample a composition and write it off the request path.

A drawn composition becomes a small record, handed to one writer thread through
a bounded queue, and the request goes on at once: serialising it and the SQLite
transaction happen on that thread, for whatever gathered meanwhile. ``close()`` (``aclose()`` from
async code) writes every record still queued before it returns, so a graceful
stop loses nothing; a queue full of unwritten records refuses the newest one
(``shadow.record_dropped``) rather than make a request wait.
"""

from __future__ import annotations

import queue
import random
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from hostd.logs import get_logger
from hostd.protocol import ContextFrame

from ._store import Recorded, ShadowStore, build_record

__all__ = ["ShadowRecorder", "shadow_path"]

log = get_logger("hostd.shadow")

#: Records waiting for the writer before a new one is dropped.
PENDING = 512
#: Records written in one transaction at most.
_BATCH = 128
#: How long the writer lets recordings gather before it writes them.
_GATHER_S = 0.1


def shadow_path(state_dir: Path) -> Path:
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
        self._queue: queue.Queue[Recorded | None] = queue.Queue(maxsize=pending)
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

    async def record(
        self,
        request_id: str,
        goal: str,
        contested: int,
        caps: dict[str, float] | None,
        accepted: Iterable[tuple[str, ContextFrame]],
        composed: Any,
    ) -> bool:
        """Queue this composition for writing if it is drawn; whether it was queued."""
        if self._closed or self.sample <= 0 or self._draw() >= self.sample:
            return False
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
        if self._closed:  # closed while the store was opening
            return False
        # Built here, from what the request holds (tens of microseconds): the queue
        # then keeps a few small records alive, not whole compositions and their audits.
        record = build_record(
            request_id, goal, contested, caps, accepted, composed, store_content=self.store_content
        )
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            log.warning("shadow.record_dropped", request_id=request_id, pending=self._queue.qsize())
            return False
        return True

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

    def _write(self, batch: list[Recorded | None]) -> None:
        records = [record for record in batch if record is not None]
        ids = [record.request_id for record in records]
        try:
            self.store.write_many(records)
        # The thread's boundary: one that died would silently drop every later record.
        except Exception as exc:  # logged; the next batch is still tried
            log.warning(
                "shadow.record_failed", request_ids=ids, error=str(exc), path=str(self.store.path)
            )
        else:
            log.debug("shadow.recorded", request_ids=ids)

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
