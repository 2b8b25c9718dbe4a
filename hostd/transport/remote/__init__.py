"""Remote providers over HTTPS: one pooled client per provider, URL and token rules."""

from .._redact import REDACTED
from ._http import DEFAULT_REMOTE_CONNECTIONS, RemoteConnection, RemoteEndpoint
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
]
