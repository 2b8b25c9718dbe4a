"""The one JSON-RPC 2.0 core, shared by every end of every JSON-RPC wire hostd speaks.

The daemon (``hostd.server``), the provider runtime (``hostd.provider``), the
provider transport (``hostd.transport``), the client library (``hostd.client``)
and check-provider read and write through it:

- the envelope (``_envelope``): ``decode`` (strict), ``encode``, the one line
  encoder ``encode_line``, request and notification builders, the request
  shape check, error replies through ``hostd.errors.error_to_wire``;
- the dispatchers (``_dispatch``): jsonrpcserver through its public API at the
  wire, and a direct one for in-process callers (no envelope), each method
  wrapped once in the error boundary (the answering ends);
- the correlation table (``_pending``): request id → one-slot waiter (the
  requesting ends);
- ``LinePipeProtocol`` (``_pipe``): a pipe split into bounded lines in the event
  loop's read callback; ``reserve_stdout``: descriptor 1 kept for a stdout wire,
  whatever else the process prints sent to stderr;
- ``Stdio`` (``_stdio``): that wire's byte stream, stdin and the reserved descriptor,
  async (``open_stdio``), for ``hostd serve --stdio`` and ``hostd mcp``.

Imports only ``hostd.errors``, ``hostd.protocol`` and the leaf ``hostd._param_words``
(plus jsonrpcserver, orjson, pydantic, anyio).
"""

from ._dispatch import DirectDispatcher, Dispatcher, Handler, Method
from ._envelope import (
    HEAD_BYTES,
    OnError,
    decode,
    encode,
    encode_line,
    encode_reply,
    error_reply,
    id_in_line,
    is_mcp_id,
    log_unexpected,
    make_notification,
    make_request,
    reply_id,
    request_line,
    request_problem,
    tag_request,
    validate_request,
)
from ._pending import Pending, PendingSlot, PendingTable
from ._pipe import LinePipeProtocol, reserve_stdout
from ._stdio import Stdio, open_stdio

__all__ = [
    "HEAD_BYTES",
    "DirectDispatcher",
    "Dispatcher",
    "Handler",
    "LinePipeProtocol",
    "Method",
    "OnError",
    "Pending",
    "PendingSlot",
    "PendingTable",
    "Stdio",
    "decode",
    "encode",
    "encode_line",
    "encode_reply",
    "error_reply",
    "id_in_line",
    "is_mcp_id",
    "log_unexpected",
    "make_notification",
    "make_request",
    "open_stdio",
    "reply_id",
    "request_line",
    "request_problem",
    "tag_request",
    "reserve_stdout",
    "validate_request",
]
