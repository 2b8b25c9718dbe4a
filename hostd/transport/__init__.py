"""Downstream transports: how hostd talks to one provider process.

Line framing (bounded, one JSON value per line), the JSON-RPC client binding
(pipelined, correlated by id, H4), the CGP NDJSON envelope binding (lock-step
unless ``correlation``), provider child processes (own process group,
scrubbed env, stderr into the log, teardown ladder) and the handshake
(H1–H3, H2, C5). This package imports only ``hostd.protocol`` and
``hostd.errors``; fan-out, audit, consent and restart policy live in
``hostd.engine``.
"""

from ._calls import Pending, PendingTable, StartedCall
from ._cgp import CgpClient
from ._connection import Binding, BindingClient, ProviderConnection
from ._framing import DEFAULT_MAX_LINE_BYTES, LineReader, encode_line
from ._jsonrpc import JsonRpcClient, provider_error, validate_reply
from ._process import ENV_ALLOW_LIST, ChildProcess, StderrPolicy, scrubbed_env
from ._readiness import PROGRESS_METHOD, OnProgress, Readiness
from ._teardown import stop_process

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "ENV_ALLOW_LIST",
    "Binding",
    "BindingClient",
    "CgpClient",
    "ChildProcess",
    "JsonRpcClient",
    "LineReader",
    "OnProgress",
    "PROGRESS_METHOD",
    "Pending",
    "PendingTable",
    "ProviderConnection",
    "Readiness",
    "StartedCall",
    "StderrPolicy",
    "encode_line",
    "provider_error",
    "scrubbed_env",
    "stop_process",
    "validate_reply",
]
