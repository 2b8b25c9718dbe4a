"""The daemon's client side: JSON-RPC 2.0 API, listeners and lifecycle.

``server → engine → transport → protocol`` and ``server → compose → protocol``:
this package wires the engine's fan-out and the composition library to clients;
it never ranks, renders or speaks to providers itself.
"""

from ._api import METHODS, ComposeParams, QueryParams
from ._connection import Connection, RequestContext
from ._daemon import Daemon
from ._framing import LineFault, read_lines
from ._listeners import ListenerError, is_loopback

__all__ = [
    "METHODS",
    "ComposeParams",
    "Connection",
    "Daemon",
    "LineFault",
    "ListenerError",
    "QueryParams",
    "RequestContext",
    "is_loopback",
    "read_lines",
]
