"""A host process with one provider, for tests that kill the host itself:
``python -m tests.transport.lone_host MODE PIDFILE`` opens a ``ProviderConnection`` to
``tests.transport.orphaning_provider MODE PIDFILE``, prints ``ready`` once the
handshake is done, and waits to be killed."""

from __future__ import annotations

import os
import sys

import anyio

from hostd.transport import ProviderConnection


async def main(mode: str, pidfile: str) -> None:
    command = [sys.executable, "-m", "tests.transport.orphaning_provider", mode, pidfile]
    async with anyio.create_task_group() as tg:
        await ProviderConnection.open(
            "lone", command, task_group=tg, env=dict(os.environ), handshake_timeout=60
        )
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await anyio.sleep_forever()


if __name__ == "__main__":
    mode, pidfile = sys.argv[1:3]
    anyio.run(main, mode, pidfile, backend="asyncio")
