"""Provider child processes: spawn, pipes, stderr, the reaper shim, the teardown ladder.

A child's stdout is read in the event loop's read callback (``_stdout``) and each
line handed to its binding client: a ``PipeClient`` driving the binding's codec
(``hostd.transport.bindings``), or the client of an SDK-session binding (``mcp``).
``ProviderConnection`` owns the order of one provider's life: spawn, handshake,
serve, the teardown ladder. Imports the bindings, never the remote carrier.
"""

from ._client import CgpClient, JsonRpcClient, PipeClient, StartedCall
from ._connection import BindingClient, ClientFactory, ProviderConnection, client_factory
from ._process import ENV_ALLOW_LIST, ChildProcess, StderrPolicy, scrubbed_env
from ._stderr import TokenBucket

__all__ = [
    "ENV_ALLOW_LIST",
    "BindingClient",
    "CgpClient",
    "ChildProcess",
    "ClientFactory",
    "JsonRpcClient",
    "PipeClient",
    "ProviderConnection",
    "StartedCall",
    "StderrPolicy",
    "TokenBucket",
    "client_factory",
    "scrubbed_env",
]
