"""Leaving a Unix-socket client while its daemon is still writing is quiet.

On asyncio, anyio's raw UNIX streams resolve a read with ``Future.set_result`` from
the loop's reader callback; cancelling a read that the same loop pass finds ready
makes that callback raise ``InvalidStateError`` (anyio's test runner re-raises it, a
user's program logs "Exception in callback"). The client closes its stream before it
stops its reader, so the read ends with the stream and nothing is cancelled mid-read.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import SocketStream

from hostd.client import connect

pytestmark = pytest.mark.anyio

NOTIFY = b'{"jsonrpc":"2.0","method":"$/progress","params":{"token":"t","value":{}}}\n'


async def test_closing_a_client_while_lines_arrive_raises_nothing(tmp_path: Path) -> None:
    path = tmp_path / "chatty.sock"
    listener = await anyio.create_unix_listener(path)
    entered = 0

    async def chatty(stream: SocketStream) -> None:
        async with stream:
            try:
                while True:
                    await stream.send(NOTIFY)
                    await anyio.lowlevel.checkpoint()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, chatty)
        for _ in range(40):
            async with anyio.create_task_group() as clients:
                for _ in range(10):

                    async def one() -> None:
                        nonlocal entered
                        async with connect(path):
                            entered += 1
                            await anyio.sleep(0.001)

                    clients.start_soon(one)
        tg.cancel_scope.cancel()
    assert entered == 400
