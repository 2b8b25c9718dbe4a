"""Downstream transports: how hostd talks to one provider process.

A child's stdout split into bounded lines (one JSON value per line) and pushed to
the binding client from the pipe's read callback (``_stdout``), the JSON-RPC client
binding (pipelined, correlated by id, H4), the CGP NDJSON envelope binding (lock-step
unless ``correlation``), provider child processes (own process group,
scrubbed env, stderr into the log, teardown ladder) and the handshake
(H1–H3, H2, C5). Remote providers over HTTPS (``_http``: one pooled client per
provider; C4, C7, C8) are one more end with the same surface. This package
imports only ``hostd.protocol`` and ``hostd.errors``; fan-out, audit, consent and
restart policy live in ``hostd.engine``.
"""

from hostd._teardown import stop_process
from hostd.protocol import DEFAULT_MAX_LINE_BYTES
from hostd.rpc import encode_line

from ._readiness import PROGRESS_METHOD, OnProgress, Readiness
from .process import (
    ENV_ALLOW_LIST,
    Binding,
    BindingClient,
    ChildProcess,
    ClientFactory,
    ProviderConnection,
    StartedCall,
    StderrPolicy,
    TokenBucket,
    scrubbed_env,
)

# isort: split
# .bindings after .process: the process connection imports the binding clients.
from .bindings import CgpClient, JsonRpcClient, provider_error, validate_reply

# isort: split
from .remote import (
    DEFAULT_REMOTE_CONNECTIONS,
    REDACTED,
    Credential,
    RemoteConnection,
    RemoteEndpoint,
    TokenSource,
    remote_url_problem,
)

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
    "StartedCall",
    "StderrPolicy",
    "TokenBucket",
    "TokenSource",
    "encode_line",
    "provider_error",
    "remote_url_problem",
    "scrubbed_env",
    "stop_process",
    "validate_reply",
]
