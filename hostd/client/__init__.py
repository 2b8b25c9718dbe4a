"""The client library: talk to a running hostd, or spawn one on stdio.

Two faces over one wire: ``AsyncClient`` (anyio), opened with ``connect``,
``connect_tcp`` or ``spawn``; and ``Client``, a small blocking wrapper for
scripts::

    with Client.connect() as hostd:      # the daemon of the hostd.toml found here
        result = hostd.compose("why does the cache miss?", budget=2000)
        print(result.prompt)                         # fenced, cited evidence
        first = result.evidence[0]                   # the frame itself, unescaped
        print(first.label, first.uri, first.range, first.content)

    with Client.spawn(config="config/demo.toml") as hostd:   # a private daemon on stdio
        ...

    hostd = Client.connect()       # or keep one for the program's life: it reconnects
    hostd.compose("…", timeout=10)  # after a daemon restart; CallTimeout after 10 s
    hostd.close()

``compose`` returns a ``ComposeResult``: the wire's members as attributes,
validated once on receipt (unknown members carried, never read: U1), ``to_wire()``
the dict received. It asks for the evidence's own content
(``include_content``) unless told not to. It never loads the host side. Everything it
raises on purpose is a ``HostdError``: ``NoDaemon``, ``RpcError`` (the daemon's
answer), ``CallTimeout``, ``ConnectionLost``, ``UnexpectedReply``.
"""

from hostd.errors import (
    CallTimeout,
    ConnectionLost,
    HostdError,
    NoDaemon,
    RpcError,
    UnexpectedReply,
)

from ._async import (
    AsyncClient,
    ComposeOptions,
    Floor,
    ProgressCallback,
    Used,
    connect,
    connect_tcp,
    serve_command,
    spawn,
)
from ._results import (
    Audit,
    AuditEntry,
    Citation,
    ComposeResult,
    DegradedReason,
    Evidence,
    FloorRecord,
    Forgotten,
    FrameRef,
    NeedsRestart,
    PromptUsage,
    Provenance,
    ProviderFailure,
    ProviderReport,
    Reloaded,
    Remembered,
    TcpTokenState,
    Usage,
    UsageFrame,
    Verification,
    WireResult,
)
from ._sync import Client

__all__ = [
    "AsyncClient",
    "Audit",
    "AuditEntry",
    "CallTimeout",
    "Citation",
    "Client",
    "ComposeOptions",
    "ComposeResult",
    "ConnectionLost",
    "DegradedReason",
    "Evidence",
    "Floor",
    "FloorRecord",
    "Forgotten",
    "FrameRef",
    "HostdError",
    "NeedsRestart",
    "NoDaemon",
    "ProgressCallback",
    "PromptUsage",
    "Provenance",
    "ProviderFailure",
    "ProviderReport",
    "Reloaded",
    "Remembered",
    "RpcError",
    "TcpTokenState",
    "UnexpectedReply",
    "Usage",
    "UsageFrame",
    "Used",
    "Verification",
    "WireResult",
    "connect",
    "connect_tcp",
    "serve_command",
    "spawn",
]
