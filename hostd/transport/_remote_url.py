"""The rules a remote provider's address and credential obey before any byte leaves (C7, C8).

Plain sync code over strings: ``remote_url_problem`` decides from the URL's text
alone (no DNS lookup: a name that resolves to loopback is still a name, and
resolving it would already be traffic), and ``Credential`` holds a bearer token
that renders as ``<redacted>`` everywhere a value can end up (``repr``, ``str``,
f-strings, logs). Config load and the HTTP transport both call these, so the rule
is the same at both gates.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from hostd.protocol import is_loopback_host

__all__ = ["REDACTED", "Credential", "read_credential", "remote_url_problem"]

#: How a credential is shown wherever a value is printed (C8).
REDACTED = "<redacted>"


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


class Credential:
    """A bearer token. Its value is reachable only through ``authorization()``."""

    __slots__ = ("_token",)

    def __init__(self, token: str) -> None:
        if not token or any(c in token for c in "\r\n"):
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


def read_credential(token_file: str | Path | None, token_env: str | None) -> Credential | None:
    """The credential from a file (first line, stripped) or an environment variable.
    Raises ``ValueError`` naming the file or variable, never its content."""
    if token_file is not None:
        try:
            text = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise ValueError(f"token_file {token_file}: cannot read: {reason}") from None
        if not text or "\n" in text:
            raise ValueError(f"token_file {token_file}: must hold one non-empty line")
        return Credential(text)
    if token_env is not None:
        value = os.environ.get(token_env, "").strip()
        if not value:
            raise ValueError(f"token_env {token_env}: the variable is not set or empty")
        return Credential(value)
    return None
