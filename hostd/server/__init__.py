"""The daemon's wire: listeners, connections, params, the method table, lifecycle.

``server → pipeline → engine → transport → protocol``: each client method
(``_api``) validates its params (``_params``) and calls the request pipeline
(``hostd.pipeline``); the daemon (``_daemon``) starts the engine, builds the
pipeline over it and serves connections. This package never ranks, renders or
speaks to providers itself; the method table never imports the engine or the
composition library (the daemon's start-up alone builds the engine).

Each name loads its own module with its first use (``_LAZY``): ``hostd serve`` loads
the daemon (``Daemon``) and with it the rest, while a command that checks its params as
the daemon would (``hostd compose --connect``: ``ComposeParams``) or looks for a live
socket (``socket_is_live``) loads that module alone, never the engine, the pipeline or
the composition library.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
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

#: Each public name's module, imported by the first use of the name.
_LAZY: dict[str, str] = {
    "METHODS": "._api",
    "RequestContext": "._api",
    "Connection": "._connection",
    "Limits": "._connection",
    "Daemon": "._daemon",
    "ListenerError": "._listeners",
    "config_holder": "._listeners",
    "open_stdio": "._listeners",
    "private_state_dir": "._listeners",
    "reserve_stdout": "._listeners",
    "socket_is_live": "._listeners",
    "ComposeParams": "._params",
    "QueryParams": "._params",
}

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


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once: the next lookup is the module's own
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
