"""CGP error codes and their JSON-RPC numbers (protocol.md §1, X1, X2)."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "CgpErrorCode",
    "read_cgp_code",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class CgpErrorCode(StrEnum):
    """The base vocabulary. It is open: unknown codes read as ``internal`` (X1)."""

    BAD_REQUEST = "bad_request"
    UNSUPPORTED_KIND = "unsupported_kind"
    UNSUPPORTED_REPRESENTATION = "unsupported_representation"
    INCOMPATIBLE_VERSION = "incompatible_version"
    BUDGET_UNSATISFIABLE = "budget_unsatisfiable"
    UNAVAILABLE = "unavailable"
    SHUTTING_DOWN = "shutting_down"
    INTERNAL = "internal"

    @property
    def jsonrpc_code(self) -> int:
        """``bad_request`` is JSON-RPC's invalid params; the rest count down from −32001."""
        if self is CgpErrorCode.BAD_REQUEST:
            return INVALID_PARAMS
        return _NUMBERS[self]


_NUMBERS = {
    code: -32001 - i
    for i, code in enumerate(c for c in CgpErrorCode if c is not CgpErrorCode.BAD_REQUEST)
}


def read_cgp_code(value: object) -> CgpErrorCode:
    """Interpret a peer's error code: unknown (X1) or absent (X2) is ``internal``."""
    if isinstance(value, str):
        try:
            return CgpErrorCode(value)
        except ValueError:
            pass
    return CgpErrorCode.INTERNAL
