"""One pure, synchronous codec per binding, and the one registry of bindings.

A codec (``_codec``) builds a provider's requests as bytes with their correlation
keys and reads one message it wrote as a reply, an error, a notification or a
fault; the carriers (``hostd.transport.process``'s pipes, ``hostd.transport.remote``'s
HTTPS endpoint, check-provider) drive the same codec and do the I/O. The registry
(``_registry``) maps a binding's name to its codec, how it is carried, whether it
may be remote and which extra it needs. Imports only ``hostd.protocol``,
``hostd.errors``, ``hostd.rpc`` and the logger factory (``hostd._log``: the cgp
codec notes an envelope type it ignores).
"""

from ._cgp import CGP_SDK_WIRE, CgpCodec, envelope_error
from ._codec import (
    UNKEYED,
    Codec,
    Fault,
    Message,
    Notice,
    Refusal,
    Reply,
    Request,
    query_wire,
    validate_reply,
)
from ._handshake import check_ack, handshake_error
from ._jsonrpc import JsonRpcCodec, provider_error
from ._registry import (
    BindingRow,
    Carrier,
    binding_names,
    binding_problem,
    find_binding,
    import_one_at_a_time,
    register_binding,
    unregister_binding,
)
from ._unquoted import STDERR_HINT

__all__ = [
    "CGP_SDK_WIRE",
    "STDERR_HINT",
    "UNKEYED",
    "BindingRow",
    "Carrier",
    "CgpCodec",
    "Codec",
    "Fault",
    "JsonRpcCodec",
    "Message",
    "Notice",
    "Refusal",
    "Reply",
    "Request",
    "binding_names",
    "binding_problem",
    "check_ack",
    "envelope_error",
    "find_binding",
    "import_one_at_a_time",
    "handshake_error",
    "provider_error",
    "query_wire",
    "register_binding",
    "unregister_binding",
    "validate_reply",
]
