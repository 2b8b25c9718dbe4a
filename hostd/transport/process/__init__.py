"""Provider child processes: spawn, pipes, stderr, the reaper shim, the teardown ladder."""

from ._client import StartedCall
from ._connection import Binding, BindingClient, ClientFactory, ProviderConnection
from ._process import ENV_ALLOW_LIST, ChildProcess, StderrPolicy, scrubbed_env
from ._stderr import TokenBucket

__all__ = [
    "ENV_ALLOW_LIST",
    "Binding",
    "BindingClient",
    "ChildProcess",
    "ClientFactory",
    "ProviderConnection",
    "StartedCall",
    "StderrPolicy",
    "TokenBucket",
    "scrubbed_env",
]
