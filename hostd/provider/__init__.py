"""The runtime for writing providers in Python: a small class, its helpers, its loops.

``Provider`` and ``ProviderServer`` (``_runtime``: the JSON-RPC provider binding
from the provider's side), the honest-frame helpers ``make_frame`` and
``file_provenance``, the warm-up record (``_warmup``), the stdio loop
(``_stdio``: ``serve_stdio``, ``run_stdio``) and the HTTPS server (``_http``:
``run_http``, loaded with starlette and uvicorn on first use). Imports point
down: this package's ``__init__`` imports its modules, ``_stdio`` and ``_http``
import ``_runtime``, none of them imports the package. It uses only
``hostd.protocol``, ``hostd.errors`` and ``hostd.rpc``, never the host side.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from hostd.errors import ProviderRefusal
from hostd.protocol import DEFAULT_MAX_LINE_BYTES

from ._runtime import Provider, ProviderServer, file_provenance, make_frame
from ._stdio import run_stdio, serve_stdio
from ._warmup import Progress, Warming

if _TYPE_CHECKING:
    from ._http import run_http

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "Progress",
    "Provider",
    "ProviderRefusal",
    "ProviderServer",
    "Warming",
    "file_provenance",
    "make_frame",
    "run_http",
    "run_stdio",
    "serve_stdio",
]


def __getattr__(name: str) -> _Any:
    # ``run_http`` is loaded on first use (PEP 562): ``_http`` imports starlette and
    # uvicorn (the remote extra), which a stdio provider should not need.
    if name != "run_http":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ._http import run_http

    globals()[name] = run_http  # later lookups skip this function
    return run_http
