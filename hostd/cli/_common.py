"""What every ``hostd`` command shares: exit statuses, the ``--connect`` option, the
session a command talks through, and how values are spelt and printed.

A command reaches providers through ``session``: a running daemon's socket with
``--connect``, else a daemon started in-process for the one shot. Either way it
is one ``call(method, params)``, so the command's code is the same.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any, Protocol

import orjson

from hostd.config import Config

from ._outcome import NoDaemon, config_hint

__all__ = [
    "EXIT_FAILED",
    "EXIT_NO_DAEMON",
    "EXIT_OK",
    "EXIT_USAGE",
    "connect_arg",
    "csv_arg",
    "print_json",
    "session",
    "strategy_arg",
]


class ProgressListener(Protocol):
    """A provider's warm-up progress, as the pool tells it (``_warm.ProgressBars``)."""

    def __call__(self, provider_id: str, progress: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: ``--connect`` found no daemon answering at the socket.
EXIT_NO_DAEMON = 3


def connect_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--connect",
        nargs="?",
        const="",
        metavar="SOCKET",
        help="use the running daemon (its socket; default: the configured socket)",
    )


def strategy_arg(value: str | None) -> Any:
    """A ``--strategy`` value as the wire takes it: a text spelling as it is, a JSON
    value decoded; checked by the one parser (``strategy_from_wire``) before any
    provider starts."""
    if value is None:
        return None
    from hostd.compose import strategy_from_wire

    wire = orjson.loads(value) if value.lstrip().startswith(("{", "[", '"')) else value
    strategy_from_wire(wire)
    return wire


def csv_arg(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


@contextlib.asynccontextmanager
async def session(
    cfg: Config, connect: str | None, bars: ProgressListener | None = None, *, boot: bool = True
) -> AsyncIterator[Any]:
    """An object with ``call(method, params)``: a running daemon, or one in-process.
    ``bars`` hears every provider's warm-up progress (in-process; ``--connect`` asks
    the daemon for it per request) and is closed at the end."""
    if connect is not None:
        from hostd.client import connect as connect_socket

        path = connect or cfg.socket_path
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(connect_socket(path))
            except OSError as exc:
                raise NoDaemon(
                    f"no daemon at {path} ({exc.strerror or exc}); "
                    f"start one with `hostd serve{config_hint(cfg)}`"
                ) from exc
            yield client
    else:
        from hostd.server import Daemon

        # One shot: start every provider up front, so a slow index build is not a timeout.
        if boot:
            cfg = cfg.model_copy(
                update={"host": cfg.host.model_copy(update={"start_providers": "boot"})}
            )
        daemon = Daemon(cfg)
        async with daemon.local() as local:
            if bars is not None and daemon.host is not None:
                daemon.host.pool.progress_listeners.append(bars)
            try:
                yield local
            finally:
                if bars is not None:
                    bars.close()


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
