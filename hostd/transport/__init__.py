"""Downstream transports: how hostd talks to one provider process.

A child's stdout split into bounded lines (one JSON value per line) and pushed to
the binding client from the pipe's read callback (``_stdout``), the JSON-RPC client
binding (pipelined, correlated by id, H4), the CGP NDJSON envelope binding (lock-step
unless ``correlation``), provider child processes (own process group,
scrubbed env, stderr into the log, teardown ladder) and the handshake
(H1–H3, H2, C5). Every text about a provider leaves through its ``Redactor``
(``_redact``: its secrets scrubbed, C8). Remote providers over HTTPS (``_http``: one
pooled client per provider; C4, C7, C8) are one more end with the same surface. This package
imports only ``hostd.protocol`` and ``hostd.errors``; fan-out, audit, consent and
restart policy live in ``hostd.engine``.
"""

from hostd._teardown import stop_process
from hostd.protocol import DEFAULT_MAX_LINE_BYTES
from hostd.rpc import encode_line

from ._calls import StartedCall
from ._cgp import CgpClient
from ._connection import Binding, BindingClient, ClientFactory, ProviderConnection
from ._http import DEFAULT_REMOTE_CONNECTIONS, RemoteConnection, RemoteEndpoint
from ._jsonrpc import JsonRpcClient, provider_error, validate_reply
from ._process import ENV_ALLOW_LIST, ChildProcess, StderrPolicy, scrubbed_env
from ._readiness import PROGRESS_METHOD, OnProgress, Readiness
from ._redact import REDACTED, Redactor, printable, secret_env_values
from ._remote_url import (
    Credential,
    TokenSource,
    remote_url_problem,
)
from ._stderr import TokenBucket

#: Either end of a leg: a child process's connection or a remote provider's.
ProviderLink = ProviderConnection | RemoteConnection

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_REMOTE_CONNECTIONS",
    "ENV_ALLOW_LIST",
    "REDACTED",
    "Binding",
    "BindingClient",
    "CgpClient",
    "ChildProcess",
    "ClientFactory",
    "Credential",
    "JsonRpcClient",
    "OnProgress",
    "PROGRESS_METHOD",
    "ProviderConnection",
    "ProviderLink",
    "RemoteConnection",
    "RemoteEndpoint",
    "Readiness",
    "Redactor",
    "StartedCall",
    "StderrPolicy",
    "TokenBucket",
    "TokenSource",
    "encode_line",
    "printable",
    "provider_error",
    "remote_url_problem",
    "scrubbed_env",
    "secret_env_values",
    "stop_process",
    "validate_reply",
]
