"""The one redaction point: every text about a provider leaves the transport through here (C8).

A provider may echo what it was given: a proxy's error page the ``Authorization``
header, a script its environment on stderr. The transport never quotes what a
peer writes on its protocol stream (``_unquoted``); what it does pass on, the
provider's own log (its stderr lines, the tail of it that explains a failed
start) and every error message a connection raises, goes through one
``Redactor``: each configured secret value becomes ``<redacted>``. A provider's
secrets are its remote bearer tokens (every one its token source has read, so a
rotated-out token stays hidden) and the values of its ``env`` entries whose names
say they hold one (``secret_env_values``). ``printable`` neutralises control
characters, so a provider's bytes cannot forge a terminal escape or a log line
(``hostd._printable``, which the CLI uses without loading the transport).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from hostd._printable import printable
from hostd.errors import HostdError

__all__ = ["REDACTED", "Redactor", "amend", "printable", "secret_env_values"]

#: How a credential is shown wherever a value is printed (C8).
REDACTED = "<redacted>"

#: A secret shorter than this is not scrubbed: it would mangle ordinary words and still
#: give nothing away a guess would not.
MIN_SECRET_CHARS = 6

#: The most secrets one provider keeps (a token rotated every minute for a year stays
#: bounded: the oldest is forgotten first).
MAX_SECRETS = 64

#: An ``env`` entry whose name says it holds a secret (``GITHUB_TOKEN``, ``API_KEY``,
#: ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ``SESSION_COOKIE`` …).
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|(^|_)KEY($|_)|APIKEY",
    re.IGNORECASE,
)

E = TypeVar("E", bound=HostdError)


def amend(exc: E, more: str) -> E:
    """``exc`` with ``; more`` added to its message, in place (type, code, data kept)."""
    if more:
        exc.message = f"{exc.message}; {more}"
        exc.args = (exc.message, *exc.args[1:])
    return exc


def secret_env_values(env: Mapping[str, str]) -> list[str]:
    """The values of ``env`` whose names say they are secrets."""
    return [value for name, value in env.items() if _SECRET_NAME.search(name)]


class Redactor:
    """The secrets of one provider, and the one function text about it passes through."""

    __slots__ = ("_pattern", "_secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: dict[str, None] = {}  # insertion-ordered: the oldest goes first
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def __repr__(self) -> str:
        return f"<Redactor secrets={len(self._secrets)}>"

    def __len__(self) -> int:
        return len(self._secrets)

    def add(self, secret: str) -> None:
        """Scrub ``secret`` (and each of its lines) from now on."""
        for part in {secret, secret.strip(), *secret.splitlines()}:
            part = part.strip()
            if len(part) < MIN_SECRET_CHARS or part in self._secrets:
                continue
            self._secrets[part] = None
            while len(self._secrets) > MAX_SECRETS:
                del self._secrets[next(iter(self._secrets))]
            # Longest first: a secret that contains another is replaced whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets it scrubs (each at least ``MIN_SECRET_CHARS`` long)."""
        return tuple(self._secrets)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``<redacted>``."""
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(REDACTED, text)

    def error(self, exc: E) -> E:
        """``exc`` with its message scrubbed, in place (its type, code and data kept)."""
        if self._pattern is None:
            return exc
        message = self.text(exc.message)
        if message != exc.message:
            exc.message = message
            exc.args = (message, *exc.args[1:])
        return exc
