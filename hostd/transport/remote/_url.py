"""The rules a remote provider's address and credential obey before any byte leaves (C7, C8).

Plain sync code over strings: ``remote_url_problem`` decides from the URL's text
alone (no DNS lookup: a name that resolves to loopback is still a name, and
resolving it would already be traffic), and ``Credential`` holds a bearer token
that renders as ``<redacted>`` everywhere a value can end up (``repr``, ``str``,
f-strings, logs). Config load and the HTTP transport both call these, so the rule
is the same at both gates. ``TokenSource`` is where a credential comes from: a
token file is read again when it changes (one ``stat`` per exchange), so a rotated
token needs no restart.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from hostd._hints import FLAGS, key_named
from hostd.errors import CredentialUnavailable
from hostd.protocol import is_loopback_host

from .._redact import REDACTED, Redactor

__all__ = ["REDACTED", "Credential", "TokenSource", "remote_url_problem", "shown_url"]


def remote_url_problem(url: str) -> str | None:
    """Why ``url`` may not name a remote provider, or ``None`` when it may.

    C7: ``https://`` anywhere, ``http://`` only to loopback. C8: no user or password
    in the URL (it would be logged wherever the URL is), no fragment.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    if parts.scheme not in ("https", "http"):
        return "the scheme must be https:// (or http:// to a loopback address)"
    if not host:
        return "the URL names no host"
    if parts.username is not None or parts.password is not None:
        return "a credential may not be part of the URL (use token_file or token_env)"
    if parts.fragment:
        return "the URL may not have a fragment"
    if parts.scheme == "http" and not is_loopback_host(host):
        return (
            f"plaintext http:// to {host!r}, which is not loopback: use https:// "
            "(C7: a query never leaves the machine unencrypted)"
        )
    return None


def shown_url(url: str) -> str:
    """``url`` as ``providers/list``, ``host/status`` and the log show it: scheme, host, port and
    path. A user or password (refused by the config, C8), a query (a server may take its
    key there) and a fragment are left out: whatever they hold is never shown."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _one_line(token: str) -> bool:
    """Whether a token can be one header value: no line break, no other control
    character (an HTTP library refuses them, or a header would be split)."""
    return not any(ord(c) < 0x20 or ord(c) == 0x7F for c in token)


class Credential:
    """A bearer token. Its value is reachable only through ``authorization()``."""

    __slots__ = ("_token",)

    def __init__(self, token: str) -> None:
        if not token or not _one_line(token):
            raise ValueError("a bearer token must be one non-empty line")
        self._token = token

    def __repr__(self) -> str:
        return f"Credential({REDACTED})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Credential) and other._token == self._token

    def __hash__(self) -> int:
        return hash(("Credential", self._token))

    def authorization(self) -> str:
        """The ``Authorization`` header's value (the only place the token is written)."""
        return f"Bearer {self._token}"

    def hide_in(self, redactor: Redactor) -> None:
        """Have ``redactor`` scrub this token from every text it passes (C8)."""
        redactor.add(self._token)


class TokenSource:
    """A remote provider's bearer token, from a file or an environment variable (C8).

    ``current()`` is what each exchange asks: for a file, one ``stat``, and the file
    is read again only when its device, inode, size or mtime differ from the read
    before (a rotation renames a new file over it, or rewrites it). ``reload()``
    reads it whatever the stat says: at each (re)start of the leg, and after a 401,
    since a rewrite within one tick of a coarse clock leaves the stat as it was. A
    variable is read at ``reload()`` only: nothing outside the process changes its
    environment. Both raise ``CredentialUnavailable`` naming the file or variable,
    never its content. Every token read is handed to ``redactor`` (the provider's one
    redaction point), so neither the current token nor a rotated-out one is ever shown.
    """

    __slots__ = ("_credential", "_loaded", "_stamp", "redactor", "token_env", "token_file")

    def __init__(
        self,
        token_file: str | Path | None = None,
        token_env: str | None = None,
        *,
        redactor: Redactor | None = None,
    ) -> None:
        self.token_file = Path(token_file) if token_file is not None else None
        self.token_env = token_env
        self.redactor = redactor if redactor is not None else Redactor()
        self._credential: Credential | None = None
        self._loaded = False
        #: The file's (device, inode, size, mtime) when it was last read.
        self._stamp: tuple[int, int, int, int] | None = None

    def __repr__(self) -> str:
        where = self.token_file or (f"${self.token_env}" if self.token_env else None)
        return f"TokenSource({where}, {REDACTED if self.configured else None})"

    @property
    def named(self) -> str | None:
        """Where the token comes from, as a user fixes it: ``$VAR`` or ``token_file PATH``
        (never the token); ``None`` when none is configured."""
        if self.token_env is not None:
            return f"${self.token_env}"
        if self.token_file is not None:
            return f"token_file {self.token_file}"
        return None

    def named_in(self, section: str) -> str | None:
        """``named``, or, for a provider given by flags (``section`` ``FLAGS``), by the
        flag that gave it, as ``hostd check-provider --help`` spells it (``--token-file
        PATH``, ``--token-env NAME``): the user who typed it fixes it there."""
        if section != FLAGS:
            return self.named
        if self.token_env is not None:
            return f"{key_named(FLAGS, 'token_env')} {self.token_env}"
        if self.token_file is not None:
            return f"{key_named(FLAGS, 'token_file')} {self.token_file}"
        return None

    @property
    def configured(self) -> bool:
        """Whether a credential is configured at all (what ``providers/list`` shows)."""
        return self.token_file is not None or self.token_env is not None

    def current(self) -> Credential | None:
        """The credential to send now: the same object while its file is unchanged."""
        if self.token_file is None:
            return self._credential if self._loaded else self.reload()
        try:
            st = os.stat(self.token_file)
        except OSError as exc:
            raise self._unreadable(exc) from None
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self._stamp:
            self._read_file(self.token_file)
        return self._credential

    def reload(self) -> Credential | None:
        """Read the credential again, whatever its file's stat says."""
        if self.token_file is not None:
            self._read_file(self.token_file)
        elif self.token_env is not None:
            value = os.environ.get(self.token_env, "").strip()
            if not value:
                raise CredentialUnavailable(
                    f"token_env {self.token_env}: the variable is not set or empty"
                )
            if not _one_line(value):
                raise CredentialUnavailable(
                    f"token_env {self.token_env}: must hold one line, no control characters"
                )
            self._keep(Credential(value))
        self._loaded = True
        return self._credential

    def _read_file(self, path: Path) -> None:
        try:
            with path.open("rb") as f:
                st = os.fstat(f.fileno())  # the stamp of the very file read (no race)
                raw = f.read()
            text = raw.decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise self._unreadable(exc) from None
        if not text or not _one_line(text):
            raise CredentialUnavailable(
                f"token_file {path}: must hold one non-empty line, no control characters"
            )
        self._keep(Credential(text))
        self._stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _keep(self, credential: Credential) -> None:
        if credential != self._credential:  # unchanged: the same object, the same headers
            credential.hide_in(self.redactor)
            self._credential = credential

    def _unreadable(self, exc: OSError | UnicodeDecodeError) -> CredentialUnavailable:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        return CredentialUnavailable(f"token_file {self.token_file}: cannot read: {reason}")
