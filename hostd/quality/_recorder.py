"""The daemon's side of shadow ranking: sample a composition and write it off the request path.

A drawn composition becomes a small record, handed to one writer thread through
a bounded queue, and the request goes on at once: serialising it and the SQLite
transaction happen on that thread, for whatever gathered meanwhile (at most
``_GATHER_S``). ``close()`` (``aclose()`` from async code) writes every record
still queued before it returns, so a graceful stop loses nothing; a queue full of
unwritten records refuses the newest one (``shadow.record_dropped``) rather than
make a request wait. A sampled record is write-behind: a process killed within
that window loses it, which costs a sample, not an answer anyone was given.

Acknowledged means written: feedback, and a composition that asked for its record
(``record(keep=True)``), are queued as one ``_Durable`` item with a future; the
writer commits it (synced, ``write_many(durable=True)``) without waiting for a
batch to gather, then resolves the future from its thread
(``call_soon_threadsafe``, which never blocks the writer), and only then is the
request answered. A write that fails resolves it with ``ShadowUnavailable``.

Feedback (``usage/feedback``) needs the request's citation map and candidate
set whether or not the draw picked it: so every composition is held (``_held``:
plain rows, a few attribute reads a frame) and the newest ``HELD`` are kept in
memory; a drawn one becomes its record at once. Feedback on
a request the draw skipped writes its record first, then the feedback, through
the same queue (in that order); feedback on an older request is checked
against the store. A request neither held nor stored is ``UnknownRequest``.

A restart must not lose what an agent may still report on: a graceful stop
(``close()``) sets every held composition whose record is not written aside in
the store's ``pending`` table, in one synced transaction (``write_pending``: the
newest ``HELD``, within retention), and feedback on one after the restart finds
it there and writes it as it would a held one. Nothing is written per
composition for it; a process killed without its stop loses them, as before.
"""

from __future__ import annotations

import asyncio
import os
import queue
import random
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from hostd.errors import HostdError, Overloaded, ShadowUnavailable, ShuttingDown, UnknownRequest
from hostd.logs import get_logger

from ._feedback import Feedback, resolve_used
from ._held import Composition, Held, hold
from ._paths import shadow_path
from ._record import Recorded
from ._store import ShadowStore, unavailable

__all__ = ["ShadowRecorder"]

log = get_logger("hostd.quality")

#: Records waiting for the writer before a new one is dropped.
PENDING = 512
#: Records written in one transaction at most.
_BATCH = 128
#: How long the writer lets recordings gather before it writes them.
_GATHER_S = 0.1
#: The newest compositions kept in memory (drawn or not), so feedback can name them.
HELD = 256
#: A store that could not be opened is tried again this often at most (or when it changes).
_RETRY_S = 30.0

_Item = Held | Recorded | Feedback


@dataclass(slots=True, frozen=True)
class _Durable:
    """Writes someone waits on: one queue item (so never split across transactions),
    committed synced; ``future`` is resolved on ``loop`` once the commit returned."""

    items: tuple[_Item, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]

    def settle(self, error: HostdError | None) -> None:
        """From the writer thread: wake the waiter (never blocks; a loop that has
        closed has no one waiting)."""

        def done() -> None:
            if self.future.done():  # the waiting request was cancelled
                return
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)

        try:
            self.loop.call_soon_threadsafe(done)
        except RuntimeError:  # the loop is closed
            pass


#: A drawn composition is queued as held: its body is made on the writer thread.
_Queued = _Item | _Durable | None


class ShadowRecorder:
    """Records a ``sample`` share of compositions into a ``ShadowStore``.

    Recording never fails a request: a store that cannot be opened is logged
    (``shadow.record_failed``) and the composition is returned as usual (one that
    asked for its record learns it was not kept). Feedback, which is only worth
    its acknowledgement, is refused ``ShadowUnavailable`` instead.
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
        #: request id → (its held composition, whether its record is queued or written);
        #: one set aside at an earlier stop is held as read back, once feedback names it.
        self._held: OrderedDict[str, tuple[Held | Recorded, bool]] = OrderedDict()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: The last failed open: the file's stamp then, when, and the problem. Not
        #: retried (nor logged again) until the file changes or ``_RETRY_S`` passed: a
        #: damaged store costs a warning now and then, not one per composition.
        self._failed: tuple[tuple[int, int, int] | None, float, str] | None = None
        #: Cuts the writer's gathering short: set by close() and by a durable write.
        self._wake = threading.Event()

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

    async def record(self, composition: Composition, *, keep: bool = False) -> bool:
        """Queue this composition for writing if it is drawn; whether it was queued.

        ``keep``: the composition asked for its record, drawn or not; it is written
        now and this returns once it is committed (whether it was). Drawn or not, its
        record is held for feedback (``HELD`` newest)."""
        if self._closed:
            return False
        # Held as plain tuples (a few attribute reads a frame, docs/benchmarks.md): the
        # held compositions keep small rows alive, not whole frames and audits. A drawn
        # one becomes its record here, from what the request holds.
        held = hold(composition, store_content=self.store_content)
        if keep:
            return await self._keep(held)
        drawn = self.sample > 0 and self._draw() < self.sample
        self._hold(held, written=False)
        if not drawn:
            return False
        queued = await self._enqueue(held)
        self._hold(held, written=queued)
        return queued

    async def _keep(self, held: Held) -> bool:
        self._hold(held, written=True)
        try:
            await self._durable(held, request_id=held.request_id)
        except (ShadowUnavailable, Overloaded, ShuttingDown) as exc:
            self._unwritten(held)
            log.warning("shadow.record_failed", request_id=held.request_id, error=exc.message)
            return False
        return True

    def _hold(self, held: Held | Recorded, *, written: bool) -> None:
        self._held[held.request_id] = (held, written)
        self._held.move_to_end(held.request_id)
        while len(self._held) > HELD:
            self._held.popitem(last=False)

    def _unwritten(self, held: Held | Recorded) -> None:
        """A write that failed: its record is not in the store (if it is still held)."""
        if held.request_id in self._held:
            self._held[held.request_id] = (held, False)

    async def _start(self) -> None:
        """The store open and the writer running (once); ``ShadowUnavailable`` naming
        the file and the problem when it cannot be, ``ShuttingDown`` once closed."""
        if self._closed:
            raise ShuttingDown("the shadow store is closed: hostd is stopping")
        if self._thread is None:
            stamp, now = self._stamp(), time.monotonic()
            if self._failed is not None:
                failed_stamp, failed_at, problem = self._failed
                if failed_stamp == stamp and now - failed_at < _RETRY_S:
                    raise unavailable(self.store.path, problem)
            try:
                # Opened (created, migrated) once, off the event loop; a store that cannot
                # be written is found here, not later on the writer thread.
                await anyio.to_thread.run_sync(self.store.open)
            except (OSError, sqlite3.Error) as exc:
                log.warning("shadow.record_failed", error=str(exc), path=str(self.store.path))
                problem = f"cannot be opened for writing ({exc})"
                self._failed = (stamp, now, problem)
                raise unavailable(self.store.path, problem) from None
            self._failed = None
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._write_queued, name="hostd-shadow", daemon=True
                )
                self._thread.start()
        if self._closed:  # closed while the store was opening: nothing more
            raise ShuttingDown("the shadow store is closed: hostd is stopping")

    def _stamp(self) -> tuple[int, int, int] | None:
        """The store file's identity, modification time and size (``None``: not there)."""
        try:
            st = os.stat(self.store.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)  # not ctime: opening chmods it

    async def _enqueue(self, record: Held) -> bool:
        try:
            await self._start()
        except (ShadowUnavailable, ShuttingDown):
            return False
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            log.warning(
                "shadow.record_dropped", request_id=record.request_id, pending=self._queue.qsize()
            )
            return False
        return True

    async def _durable(self, *items: _Item, request_id: str) -> None:
        """Queue ``items`` as one transaction someone waits on, and wait for its commit.

        ``ShadowUnavailable`` when the store cannot be opened or the write failed,
        ``Overloaded`` when the writer is too far behind to take it (nothing queued),
        ``ShuttingDown`` once the recorder is closed."""
        await self._start()
        # The daemon runs anyio on the asyncio backend (jsonrpcserver gathers batches with
        # asyncio, hostd.rpc), and waking a task from another thread without blocking that
        # thread is asyncio's call_soon_threadsafe: the writer never waits on the loop.
        loop = asyncio.get_running_loop()
        durable = _Durable(items, loop, loop.create_future())
        try:
            self._queue.put_nowait(durable)
        except queue.Full:
            raise Overloaded(
                "the shadow store is behind; send it again later", request_id=request_id
            ) from None
        self._wake.set()
        await durable.future

    async def feedback(
        self,
        request_id: str,
        used: Sequence[str | dict[str, Any]],
        helpful: bool | None = None,
        note: str | None = None,
    ) -> Feedback:
        """Check ``used`` against ``request_id``'s citation map, write it, and return once
        it is committed (acknowledged means written).

        ``UnknownRequest`` when the request is neither held nor stored,
        ``UnknownCitation`` naming every item its map lacks, ``Overloaded`` when the
        writer is too far behind to take it, ``ShadowUnavailable`` when the store cannot
        be read or written (nothing is half-written), ``ShuttingDown`` once closed."""
        if self._closed:  # its held compositions are being set aside: nothing is written
            raise ShuttingDown("the shadow store is closed: hostd is stopping")
        entry = self._held.get(request_id)
        if entry is None:
            stored = await self._stored(request_id)
            # Looked up off the loop: a feedback on it meanwhile may have held it.
            entry = self._held.get(request_id, stored)
        record, written = entry
        keys = resolve_used(record.citations, used)
        fb = Feedback.of(
            request_id, time.time(), keys, helpful, note, store_content=self.store_content
        )
        if not written:
            # The record first, in the same transaction: the feedback's row needs it.
            self._hold(record, written=True)
            try:
                await self._durable(record, fb, request_id=request_id)
            except HostdError:  # not written (a cancelled wait still is: it stays queued)
                self._unwritten(record)
                raise
        else:
            await self._durable(fb, request_id=request_id)
        log.info(
            "shadow.feedback",
            request_id=request_id,
            used=len(keys),
            helpful=helpful,
            recorded_now=not written,
        )
        return fb

    async def _stored(self, request_id: str) -> tuple[Recorded, bool]:
        """A request this recorder does not hold, from the store: its record and whether
        it is written (``requests``), or set aside at a stop (``pending``) and not yet.
        ``UnknownRequest`` when it is in neither."""

        def find() -> tuple[Recorded, bool] | None:
            stored = self.store.load(request_id=request_id)
            if stored:
                return stored[-1], True
            pending = self.store.load_pending(request_id)
            return None if pending is None else (pending, False)

        try:
            found = await anyio.to_thread.run_sync(find)
        except FileNotFoundError:
            found = None
        except OSError as exc:
            raise unavailable(self.store.path, f"cannot be read ({exc})") from None
        if found is None:
            days = f"{self.store.retention_days:g}"
            raise UnknownRequest(
                f"no shadow record of request {request_id!r}: none is held or stored "
                f"under that id; it may have expired (past the {HELD} newest compositions "
                f"held for feedback, or older than retention_days = {days}), or been "
                "composed before the daemon was killed without a graceful stop; send "
                "feedback soon after its composition",
                request_id=request_id,
            )
        return found

    def _write_queued(self) -> None:
        stop = False
        while not stop:
            # One transaction for whatever queued up meanwhile: a busy daemon pays one
            # commit for many recordings.
            batch = [self._queue.get()]
            if not isinstance(batch[0], _Durable):
                # Let recordings gather for a moment (close() or a write someone waits on
                # cuts it short): the thread then wakes a few times a second, not once a
                # request, so it rarely contends for the GIL with the event loop.
                self._wake.wait(_GATHER_S)
            if not self._closed:
                self._wake.clear()  # before draining: a later durable write wakes us again
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
        items: list[_Item] = []
        waiters: list[_Durable] = []
        for queued in batch:
            if isinstance(queued, _Durable):
                items += queued.items
                waiters.append(queued)
            elif queued is not None:
                items.append(queued)
        records = [r for r in items if isinstance(r, Held | Recorded)]
        feedback = [f for f in items if isinstance(f, Feedback)]
        ids = [record.request_id for record in records]
        try:
            orphans = self.store.write_many(records, feedback, durable=bool(waiters))
        # The thread's boundary: one that died would silently drop every later record.
        except Exception as exc:  # logged and told to the waiters; the next batch is tried
            log.warning(
                "shadow.record_failed", request_ids=ids, error=str(exc), path=str(self.store.path)
            )
            for waiter in waiters:
                waiter.settle(unavailable(self.store.path, f"cannot be written ({exc})"))
            return
        log.debug("shadow.recorded", request_ids=ids)
        if orphans:  # its request was pruned from the store before the feedback came
            log.warning("shadow.feedback_dropped", request_ids=orphans)
        pruned = set(orphans)
        for waiter in waiters:
            lost = [
                i.request_id
                for i in waiter.items
                if isinstance(i, Feedback) and i.request_id in pruned
            ]
            waiter.settle(
                UnknownRequest(
                    f"request {lost[0]!r} was pruned from the shadow store before its "
                    "feedback was written",
                    request_id=lost[0],
                )
                if lost
                else None
            )

    def close(self) -> None:
        """Write every queued record, set aside the compositions held unwritten, stop
        the writer and close the store (blocking)."""
        self._closed = True
        self._close(self._unwritten_held())

    async def aclose(self) -> None:
        """``close()`` off the event loop; shielded, so a stop being cancelled still flushes."""
        # Closed here, on the loop's thread, so no record is queued behind the writer's
        # stop, and the held ring (which feedback changes) is read here too.
        self._closed = True
        held = self._unwritten_held()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close, held)

    def _unwritten_held(self) -> list[Held | Recorded]:
        """The held compositions whose record is neither written nor queued, taken out
        of the ring (the recorder is closed: nothing more is held)."""
        held = [h for h, written in self._held.values() if not written]
        self._held.clear()
        return held

    def _close(self, held: list[Held | Recorded]) -> None:
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)  # after every queued record: the writer drains first
            thread.join()
        if held:
            self._set_aside(held)
        self.store.close()

    def _set_aside(self, held: list[Held | Recorded]) -> None:
        """Keep ``held`` in the store's ``pending`` table, so feedback on them still finds
        them after a restart: an ordinary stop must not lose what an agent may still
        report on. Logged, never raised: the stop goes on."""
        try:
            self.store.write_pending(held, keep=HELD)
        except (OSError, sqlite3.Error) as exc:
            log.warning(
                "shadow.pending_failed",
                requests=len(held),
                error=str(exc),
                path=str(self.store.path),
            )
            return
        log.info("shadow.pending_written", requests=len(held))
