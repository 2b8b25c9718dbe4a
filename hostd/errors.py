"""The HostdError tree and the one exception → wire translation.

Errors are named by condition and carry their CGP code, JSON-RPC number and a
short machine ``reason`` (``data.reason`` on the wire). Third-party errors are
translated where they enter (transport edge) and chained with ``from exc``.
This module imports only ``hostd.protocol`` so every layer may raise these.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hostd.protocol import CgpErrorCode

__all__ = [
    "BadRequest",
    "ConfigError",
    "ConsentRequired",
    "CorrelationMismatch",
    "FloorsExceedBudget",
    "FloorsOverBudget",
    "HandshakeFailed",
    "HostdError",
    "IncompatibleVersion",
    "LineTooLong",
    "NoProviderAvailable",
    "Overloaded",
    "ProtocolFault",
    "ProviderCrashed",
    "ProviderError",
    "ProviderTimeout",
    "ShuttingDown",
    "UnknownProvider",
    "error_to_wire",
]


class HostdError(Exception):
    """Base of every error hostd raises on purpose."""

    code: ClassVar[CgpErrorCode] = CgpErrorCode.INTERNAL
    reason: ClassVar[str] = "internal"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    @property
    def jsonrpc_code(self) -> int:
        return self.code.jsonrpc_code


class BadRequest(HostdError):
    code = CgpErrorCode.BAD_REQUEST
    reason = "bad_request"


class UnknownProvider(BadRequest):
    reason = "unknown_provider"


class NoProviderAvailable(HostdError):
    code = CgpErrorCode.UNAVAILABLE
    reason = "no_provider_available"


class ShuttingDown(HostdError):
    code = CgpErrorCode.SHUTTING_DOWN
    reason = "shutting_down"


class ProviderError(HostdError):
    """A provider answered with an error object (its code read per X1/X2)."""

    code = CgpErrorCode.INTERNAL
    reason = "provider_error"

    def __init__(
        self, message: str, *, cgp_code: CgpErrorCode = CgpErrorCode.INTERNAL, **data: Any
    ) -> None:
        super().__init__(message, cgp_code=cgp_code.value, **data)
        self.cgp_code = cgp_code


class ProviderTimeout(HostdError):
    code = CgpErrorCode.UNAVAILABLE
    reason = "timeout"


class ProviderCrashed(HostdError):
    code = CgpErrorCode.UNAVAILABLE
    reason = "crashed"


class ProtocolFault(HostdError):
    """A peer broke the framing or the wire shape (garbage line, bad reply)."""

    reason = "protocol_fault"


class LineTooLong(ProtocolFault):
    reason = "line_too_long"


class CorrelationMismatch(ProtocolFault):
    """H4: a reply with an unknown or missing id."""

    reason = "correlation_mismatch"


class HandshakeFailed(ProtocolFault):
    reason = "handshake_failed"


class IncompatibleVersion(HandshakeFailed):
    """H3: the provider's major family differs from ours."""

    code = CgpErrorCode.INCOMPATIBLE_VERSION
    reason = "incompatible_version"


class ConsentRequired(HostdError):
    """C2/C6: an egress provider without recorded consent for its scopes."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "no_consent"


class ConfigError(HostdError):
    """A config file that cannot be used; the message names the file, key and problem."""

    code = CgpErrorCode.BAD_REQUEST
    reason = "bad_config"


class FloorsOverBudget(HostdError):
    """The client's floors alone cost more than its budget (never a silent drop)."""

    code = CgpErrorCode.BUDGET_UNSATISFIABLE
    reason = "floors_exceed_budget"


class Overloaded(HostdError):
    """A client over its per-connection limit (in-flight requests, batch size)."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "overloaded"


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """The JSON-RPC error object for any exception; unexpected ones hide their detail."""
    if isinstance(exc, HostdError):
        data = {"reason": exc.reason, "cgp_code": exc.code.value, **exc.data}
        return {"code": exc.jsonrpc_code, "message": exc.message, "data": data}
    return {
        "code": CgpErrorCode.INTERNAL.jsonrpc_code,
        "message": "internal error",
        "data": {"reason": "internal", "cgp_code": CgpErrorCode.INTERNAL.value},
    }


# --- composition (hostd.compose) ---


class FloorsExceedBudget(FloorsOverBudget, ValueError):
    """The floors alone do not fit the budget; nothing is dropped silently.

    The budget bounds the whole prompt, so a floor costs its fenced block and
    the floors bring the constant preamble with them: ``floors`` lists
    ``(label, cost)`` for every floor's block, ``preamble`` the preamble's cost,
    and ``total`` (the prompt of floors alone) and ``budget`` the two numbers
    that disagree.
    """

    reason = "floors_exceed_budget"

    def __init__(
        self,
        floors: list[tuple[str, int]],
        budget: int,
        *,
        preamble: int = 0,
        total: int | None = None,
    ) -> None:
        if total is None:
            total = preamble + sum(cost for _, cost in floors)
        detail = ", ".join(f"{label!r} costs {cost}" for label, cost in floors)
        super().__init__(
            f"floors cost {total} tokens with the evidence preamble ({preamble}) and their "
            f"fences, but the budget is {budget} ({detail})",
            floors=[{"label": label, "cost": cost} for label, cost in floors],
            budget=budget,
            total=total,
            preamble=preamble,
        )
        self.floors = floors
        self.budget = budget
        self.total = total
        self.preamble = preamble
