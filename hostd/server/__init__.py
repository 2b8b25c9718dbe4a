"""The daemon's client side: JSON-RPC 2.0 API, listeners and lifecycle.

``server → engine → transport → protocol`` and ``server → compose → protocol``:
this package wires the engine's fan-out and the composition library to clients;
it never ranks, renders or speaks to providers itself.
"""

from ._api import METHODS, RequestContext
from ._connection import Connection, Limits
from ._daemon import Daemon
from ._listeners import ListenerError, open_stdio, private_state_dir, reserve_stdout
from ._params import ComposeParams, QueryParams

__all__ = [
    "METHODS",
    "ComposeParams",
    "Connection",
    "Daemon",
    "Limits",
    "ListenerError",
    "QueryParams",
    "RequestContext",
    "open_stdio",
    "private_state_dir",
    "reserve_stdout",
]
