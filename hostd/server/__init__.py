"""The daemon's wire: listeners, connections, params, the method table, lifecycle.

``server → pipeline → engine → transport → protocol``: each client method
(``_api``) validates its params (``_params``) and calls the request pipeline
(``hostd.pipeline``); the daemon (``_daemon``) starts the engine, builds the
pipeline over it and serves connections. This package never ranks, renders or
speaks to providers itself; the method table never imports the engine or the
composition library (the daemon's start-up alone builds the engine).
"""

from ._api import METHODS, RequestContext
from ._connection import Connection, Limits
from ._daemon import Daemon
from ._listeners import (
    ListenerError,
    config_holder,
    open_stdio,
    private_state_dir,
    reserve_stdout,
    socket_is_live,
)
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
    "config_holder",
    "open_stdio",
    "private_state_dir",
    "reserve_stdout",
    "socket_is_live",
]
