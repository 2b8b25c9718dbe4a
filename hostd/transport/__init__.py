"""Downstream transports: how hostd reaches one provider. It moves bytes; the wire is a codec's.

Three rooms, imports pointing one way (``process`` and ``remote`` use ``bindings``,
never each other):

- ``bindings``: one pure, synchronous codec per binding (``jsonrpc``: pipelined,
  correlated by id, H4; ``cgp``: the NDJSON envelopes, lock-step unless
  ``correlation``) and the one registry of bindings (name → codec, carrier, may it
  be remote, the extra it needs), read by config, the engine and check-provider.
- ``process``: provider child processes (own process group, scrubbed env, stderr
  into the log, the reaper shim, the teardown ladder), their stdout split into
  bounded lines pushed from the pipe's read callback to a ``PipeClient`` driving
  the binding's codec, and the handshake (H1–H3, H2, C5).
- ``remote``: providers over HTTPS (one pooled client per provider; C4, C7, C8),
  each exchange one POST of the same codec's request.

Every text about a provider leaves through its ``Redactor`` (``_redact``, shared by
both carriers: its secrets scrubbed, C8).

``ProviderLink`` is either end of a leg, with the one surface the engine uses.
This package imports only ``hostd.protocol``, ``hostd.errors`` and ``hostd.rpc``
(and the teardown ladder); fan-out, audit, consent and restart policy live in
``hostd.engine``.
"""

from hostd._teardown import stop_process
from hostd.protocol import DEFAULT_MAX_LINE_BYTES
from hostd.rpc import encode_line

from ._partial import EmptyResult, PartialResult
from ._readiness import (
    PROGRESS_METHOD,
    RATE_SPAN_S,
    OnProgress,
    Readiness,
    progress_figures,
    seconds_left,
)
from ._redact import REDACTED, Redactor, printable, secret_env_values
from ._repeats import RepeatedEvents
from .bindings import (
    BindingRow,
    CgpCodec,
    JsonRpcCodec,
    binding_names,
    binding_problem,
    provider_error,
    register_binding,
    unregister_binding,
    validate_reply,
)
from .process import (
    ENV_ALLOW_LIST,
    BindingClient,
    CgpClient,
    ChildProcess,
    ClientFactory,
    JsonRpcClient,
    PipeClient,
    ProviderConnection,
    StartedCall,
    StderrPolicy,
    TokenBucket,
    scrubbed_env,
)
from .remote import (
    DEFAULT_REMOTE_CONNECTIONS,
    Credential,
    RemoteConnection,
    RemoteEndpoint,
    TokenSource,
    remote_url_problem,
    shown_url,
    stalled_found,
    stalled_words,
)

#: Either end of a leg: a child process's connection or a remote provider's.
ProviderLink = ProviderConnection | RemoteConnection

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_REMOTE_CONNECTIONS",
    "ENV_ALLOW_LIST",
    "PROGRESS_METHOD",
    "REDACTED",
    "BindingClient",
    "BindingRow",
    "CgpClient",
    "CgpCodec",
    "ChildProcess",
    "ClientFactory",
    "Credential",
    "EmptyResult",
    "JsonRpcClient",
    "JsonRpcCodec",
    "OnProgress",
    "PartialResult",
    "PipeClient",
    "ProviderConnection",
    "ProviderLink",
    "RATE_SPAN_S",
    "Readiness",
    "Redactor",
    "RepeatedEvents",
    "RemoteConnection",
    "RemoteEndpoint",
    "StartedCall",
    "StderrPolicy",
    "TokenBucket",
    "TokenSource",
    "binding_names",
    "binding_problem",
    "encode_line",
    "printable",
    "progress_figures",
    "provider_error",
    "register_binding",
    "remote_url_problem",
    "shown_url",
    "scrubbed_env",
    "stalled_found",
    "stalled_words",
    "seconds_left",
    "secret_env_values",
    "stop_process",
    "unregister_binding",
    "validate_reply",
]
