"""The TCP listener's bearer token as the config names it now, not as it was at start.

``TcpToken.current()`` is what each ``$/authenticate`` compares with. ``tcp.token``
is the value itself; ``tcp.token_file`` is read again when its stat (device, inode,
size, mtime) differs from the read before, as a remote provider's token file is
(``hostd.transport.remote``): one ``stat`` per authentication, so an operator who
rotates the team's token (rewrites the file, or renames a new one over it) revokes
the old one at the next authentication, with no restart. ``reload()`` reads it
whatever the stat says (``hostd reload``: also after a rewrite within one tick of a
coarse clock) and takes a reloaded config's ``[tcp]`` token keys.

A file that cannot be read, or holds no token (empty, more than one line), never
opens the door: ``current()`` is ``None`` then, and every authentication is
refused until the file is fixed; said once per state of the file at error
(``host.tcp.token_unreadable``, naming the file and why, never a token), while
the Unix socket serves on. A token that changed is said once (``host.tcp.token_changed``),
so the daemon can close the TCP connections opened with the old one.
"""

from __future__ import annotations

import os
from pathlib import Path

from hostd.config import TcpSettings
from hostd.logs import get_logger

__all__ = ["TcpToken"]

log = get_logger("hostd.server")


class TcpToken:
    """The bearer token a TCP client must send now (see the module's docstring)."""

    __slots__ = ("_failure", "_file", "_stamp", "_token")

    def __init__(self, settings: TcpSettings) -> None:
        self._token: str | None = None
        self._file: Path | None = None
        #: The file's (device, inode, size, mtime) when it was last read.
        self._stamp: tuple[int, int, int, int] | None = None
        #: Why the file gave no token at the last read (said once per reason).
        self._failure: str | None = None
        self._take(settings)

    def __repr__(self) -> str:  # never the token
        return f"TcpToken(file={self._file}, usable={self._token is not None})"

    @property
    def failure(self) -> str | None:
        """Why there is no token now (``None`` while there is one)."""
        return self._failure

    def current(self) -> str | None:
        """The token to accept now; ``None``: none (refuse every authentication)."""
        if self._file is None:
            return self._token
        try:
            st = os.stat(self._file)
        except OSError as exc:
            self._fail(exc.strerror or str(exc))
            return None
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self._stamp:
            self._read()
        return self._token

    def reload(self, settings: TcpSettings) -> str | None:
        """Take ``settings`` (a reloaded config's ``[tcp]``) and read its file whatever
        its stat says; the token in force after it."""
        self._take(settings)
        return self._token

    def _take(self, settings: TcpSettings) -> None:
        self._stamp = None
        if settings.token:
            self._file = None
            self._set(settings.token)
        elif settings.token_file is not None:
            self._file = settings.token_file
            self._read()
        else:
            self._file = None
            self._fail("no tcp.token or tcp.token_file in the config")

    def _read(self) -> None:
        assert self._file is not None
        try:
            with self._file.open("rb") as f:
                st = os.fstat(f.fileno())  # the stamp of the very file read (no race)
                raw = f.read()
            lines = [line.strip() for line in raw.decode("utf-8").splitlines() if line.strip()]
        except OSError as exc:
            self._stamp = None
            self._fail(exc.strerror or str(exc))
            return
        except UnicodeDecodeError:
            lines = []
        self._stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if len(lines) != 1:
            self._fail(f"it holds {len(lines)} non-empty lines, not one line with the token")
            return
        self._set(lines[0])

    def _set(self, token: str) -> None:
        if self._failure is not None:
            log.info("host.tcp.token_readable", file=_shown(self._file))
        self._failure = None
        if self._token is not None and token != self._token:
            log.info("host.tcp.token_changed", file=_shown(self._file))
        self._token = token

    def _fail(self, why: str) -> None:
        self._token = None
        if why != self._failure:
            self._failure = why
            log.error(
                "host.tcp.token_unreadable",
                file=_shown(self._file),
                error=why,
                action="every TCP authentication is refused until it holds one token",
            )


def _shown(path: Path | None) -> str | None:
    return str(path) if path is not None else None
