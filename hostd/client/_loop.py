"""An event loop of its own for sync callers: a blocking portal in a daemon thread.

anyio's ``start_blocking_portal`` runs its loop in a thread-pool worker, which the
interpreter joins at exit, and that loop never ends by itself: a program that did not
stop it (one that raised before ``close()``) hung for ever. This loop's thread is a
daemon thread, so it never holds up the interpreter's exit; who starts it stops it
(``portal.call(portal.stop, True)``, then ``thread.join()``) on a clean close.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import anyio
from anyio.from_thread import BlockingPortal

__all__ = ["start_loop"]


def start_loop(name: str) -> tuple[BlockingPortal, threading.Thread]:
    """A portal on a new asyncio loop in a daemon thread named ``name``, and the thread."""
    started: Future[BlockingPortal] = Future()

    async def serve() -> None:
        async with BlockingPortal() as portal:
            started.set_result(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(serve, backend="asyncio")
        except BaseException as exc:  # handed to the thread that waits for the portal
            if not started.done():
                started.set_exception(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return started.result(), thread
