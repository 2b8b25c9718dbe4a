"""Remote providers over HTTPS: one pooled client per provider, URL and token rules."""

from .._redact import REDACTED
from ._http import DEFAULT_REMOTE_CONNECTIONS, RemoteConnection, RemoteEndpoint
from ._stage import stalled_found, stalled_words
from ._url import Credential, TokenSource, remote_url_problem, shown_url

__all__ = [
    "DEFAULT_REMOTE_CONNECTIONS",
    "REDACTED",
    "Credential",
    "RemoteConnection",
    "RemoteEndpoint",
    "TokenSource",
    "remote_url_problem",
    "shown_url",
    "stalled_found",
    "stalled_words",
]
