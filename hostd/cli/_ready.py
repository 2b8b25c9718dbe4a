"""``hostd serve`` says it is ready: a ready file (``--ready-file PATH``) and, under a
service manager that set ``NOTIFY_SOCKET``, the ``sd_notify`` protocol's ``READY=1``.

Ready means the listeners accept: a client that connects now is served (its request
joins the providers' start if they are still starting). The ready file is written
whole (a temporary file renamed into place) and removed when the daemon stops, so
it never names a daemon that is gone. ``sd_notify`` is a few lines over a Unix
datagram socket (systemd's ``sd_notify(3)``; an ``@`` address is in the abstract
namespace): no library needed, and nothing is sent when the variable is unset.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from hostd.logs import get_logger

__all__ = ["ReadySignal", "sd_notify"]


def sd_notify(state: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (``READY=1``…) to ``$NOTIFY_SOCKET``; ``False`` when it is unset
    or not a Unix socket address. A send that fails raises ``OSError``."""
    address = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if address.startswith("@"):  # the abstract namespace (sd_notify(3))
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(state.encode("utf-8"))
    return True


class ReadySignal:
    """Called once by the daemon when it serves (``Daemon.run(ready=…)``)."""

    def __init__(
        self, ready_file: Path | None, config_file: str, no_providers: str | None = None
    ) -> None:
        self.ready_file = ready_file
        self.config_file = config_file
        #: Why no provider will answer (``Config.no_providers``), said once serving.
        self.no_providers = no_providers
        self._written = False

    def __call__(self, daemon: Any) -> None:
        if self.no_providers is not None:
            get_logger("hostd.cli").warning("host.no_providers", message=self.no_providers)
        socket_path = getattr(daemon, "socket_path", None)
        tcp = getattr(daemon, "tcp_address", None)
        if self.ready_file is not None:
            body = {
                "pid": os.getpid(),
                "socket": str(socket_path) if socket_path else None,
                "tcp": list(tcp) if tcp else None,
                "config": self.config_file,
            }
            _write_whole(self.ready_file, orjson.dumps(body) + b"\n")
            self._written = True
        where = f"serving on {socket_path}" if socket_path else "serving"
        try:
            sd_notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS={where}")
        except OSError as exc:  # the manager went away: serving goes on, the log says so
            get_logger("hostd.cli").warning("host.notify_failed", error=exc.strerror or str(exc))

    def stopping(self) -> None:
        """A stop has begun: the service manager is told (``STOPPING=1``), so it does
        not take the grace period for a hang."""
        try:
            sd_notify("STOPPING=1")
        except OSError:  # the manager went away: the stop goes on
            pass

    @contextlib.contextmanager
    def held(self) -> Iterator[ReadySignal]:
        """Remove the ready file when the daemon stops (however it stops)."""
        try:
            yield self
        finally:
            if self._written and self.ready_file is not None:
                self.ready_file.unlink(missing_ok=True)


def _write_whole(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
