"""``hostd serve`` says it is ready: a ready file (``--ready-file PATH``) and, under a
service manager that set ``NOTIFY_SOCKET``, the ``sd_notify`` protocol's ``READY=1``.

Ready means the listeners accept: a client that connects now is served (its request
joins the providers' start if they are still starting). The ready file is written
whole (a temporary file renamed into place), only then, and removed when the daemon
stops. A daemon that did not stop (``kill -9``, a power cut) cannot remove it: the
next ``serve`` removes one naming a process that is gone before it starts (and says
so once serving, ``host.ready_file.stale``), and a reader tells a stale one by its
``pid`` (not the daemon it started, or no longer alive). Its directory is checked
at start: one this user cannot write is a usage error (exit 2), not a failure after
the providers started. ``sd_notify`` is a few lines over a Unix
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

from hostd._log import get_logger

from ._common import UsageError, pid_alive

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
        #: A ready file an unclean stop left, removed at start: said once serving.
        self._stale: dict[str, Any] | None = None

    def prepare(self) -> None:
        """Before the daemon starts: remove a ready file whose daemon is gone (a poller
        must not take it for this one's), and check a new one can be written where it
        goes (``UsageError`` naming ``--ready-file``: exit 2, before any provider)."""
        if self.ready_file is None:
            return
        pid = _named_pid(self.ready_file)
        if pid is not None and pid != os.getpid() and pid_alive(pid):
            return  # a live daemon's: this start is refused, or replaces it once serving
        try:
            if self.ready_file.exists():
                self.ready_file.unlink()
                self._stale = {"file": str(self.ready_file), "pid": pid}
            fd, probe = tempfile.mkstemp(
                prefix=f".{self.ready_file.name}.", dir=self.ready_file.parent
            )
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise UsageError(
                f"--ready-file {self.ready_file}: cannot write it ({exc.strerror or exc}); "
                "name a file in a directory this user can write"
            ) from exc

    def __call__(self, daemon: Any) -> None:
        if self.no_providers is not None:
            get_logger("hostd.cli").warning("host.no_providers", message=self.no_providers)
        if self._stale is not None:  # an unclean stop's (``kill -9``), removed at start
            get_logger("hostd.cli").warning("host.ready_file.stale", **self._stale)
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


def _named_pid(path: Path) -> int | None:
    """The ``pid`` a ready file names; ``None`` when there is none, or it is unreadable."""
    try:
        pid = orjson.loads(path.read_bytes()).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _write_whole(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
