"""The runtime for writing providers in Python: a small class, its helpers, its loops.

``Provider`` and ``ProviderServer`` (``_runtime``: the JSON-RPC provider binding
from the provider's side), the honest-frame helpers ``make_frame``,
``file_provenance`` and ``verify_file_range``, the warm-up record (``_warmup``), the
stdio loop (``_stdio``: ``serve_stdio``, ``run_stdio``) and the HTTPS server (``_http``:
``run_http``, which loads starlette and uvicorn only when called). Imports point
down: this package's ``__init__`` imports its modules, ``_stdio`` and ``_http``
import ``_runtime``, none of them imports the package. It uses only
``hostd.protocol``, ``hostd.errors`` and ``hostd.rpc``, never the host side.
"""

import os

from hostd.errors import ProviderRefusal
from hostd.protocol import DEFAULT_MAX_LINE_BYTES

from ._runtime import (
    Provider,
    ProviderServer,
    file_provenance,
    make_frame,
    verify_file,
    verify_file_range,
)
from ._stdio import run_stdio, serve_stdio
from ._warmup import Progress, Warming

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
    "verify_file",
    "verify_file_range",
]


def run_http(
    provider: Provider,
    host: str = "127.0.0.1",
    port: int = 0,
    certfile: str | os.PathLike[str] | None = None,
    keyfile: str | os.PathLike[str] | None = None,
    token: str | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_LINE_BYTES,
    client_ca: str | os.PathLike[str] | None = None,
    request_timeout_s: float = 10.0,
    max_connections: int | None = None,
) -> None:
    """Serve ``provider`` over HTTPS (either binding, one request per POST) until
    interrupted; a ``token`` is then required as ``Authorization: Bearer``, a client
    certificate signed by ``client_ca`` too when given. A connection that sends no
    complete request within ``request_timeout_s`` is closed; at most ``max_connections``
    are open (default: below the descriptor limit). The URL is written to stderr once
    bound. See docs/remote.md."""
    from ._http import run_http as run  # starlette and uvicorn (the remote extra) load here

    run(
        provider,
        host,
        port,
        certfile,
        keyfile,
        token,
        max_body_bytes=max_body_bytes,
        client_ca=client_ca,
        request_timeout_s=request_timeout_s,
        max_connections=max_connections,
    )
