"""jsonrpcserver, through its public API: the wire ``Dispatcher``'s library half.

Loaded by the first request a wire ``Dispatcher`` answers, not with ``hostd.rpc``:
jsonrpcserver brings jsonschema with it, and an in-process caller
(``DirectDispatcher``: ``hostd compose`` one shot, ``hostd mcp``, an embedded
session) never needs either. ``bound`` wraps one method for jsonrpcserver (params by
name, every exception through the error boundary); ``serializable`` dispatches one
decoded request or batch to the bound methods.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from jsonrpcserver import Error, JsonRpcError, Result, Success, async_dispatch_to_serializable
from pydantic import BaseModel

from hostd.errors import InvalidParam, error_to_wire

from ._envelope import BY_NAME, OnError, validate_params, validate_request

__all__ = ["bound", "serializable"]


def bound(
    name: str,
    params: type[BaseModel],
    handler: Callable[[Any, Any], Awaitable[Any]],
    on_error: OnError,
) -> Callable[..., Awaitable[Result]]:
    """``handler`` as jsonrpcserver calls it: its ``Success``, or the ``Error`` the
    boundary (``error_to_wire``) makes of any exception."""

    async def call(context: Any, *args: Any, **kwargs: Any) -> Result:
        # Positional params reach the body, so the boundary answers them, by name.
        try:
            if args:
                raise InvalidParam(BY_NAME, field="params")  # ``Dispatcher`` refuses it first
            # ``Method.invoke``'s body, inline: one coroutine fewer in the chain every
            # resumption of the method passes through.
            return Success(await handler(context, validate_params(params, kwargs)))
        except JsonRpcError as exc:  # jsonrpcserver's public way to answer an error
            return Error(exc.code, exc.message, exc.data)
        except Exception as exc:  # the boundary: nothing escapes a method as a crash
            on_error(name, exc)
            wire = error_to_wire(exc)
            return Error(wire["code"], wire["message"], wire["data"])

    call.__name__ = call.__qualname__ = name
    # jsonrpcserver checks the params against ``inspect.signature`` of the method on
    # every request; a ``__signature__`` set once is read back instead of derived.
    call.__signature__ = inspect.signature(call)  # type: ignore[attr-defined]  # a function takes any attribute
    return call


def _as_decoded(value: Any) -> Any:
    return value


async def serializable(
    request: Any, methods: dict[str, Callable[..., Awaitable[Result]]], context: Any
) -> Any:
    """jsonrpcserver's reply dict(s) to one decoded request or batch (``None`` when
    nothing is owed): an identity deserializer (callers decode first) and hostd's
    request-shape validator."""
    return await async_dispatch_to_serializable(
        request,
        methods,
        context=context,
        deserializer=_as_decoded,
        validator=validate_request,
    )
