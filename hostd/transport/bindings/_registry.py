"""The one binding registry: a binding's name → its codec, how it is carried, and its rules.

Config validation, the engine's provider spec, the launcher and check-provider
all read this table, so a binding is named in one place: a new binding is one
module (its codec) and one row here, or one ``register`` call from its module.

A row says how the binding is carried: ``pipe`` (a child's stdin/stdout, one
line per message, driven through the row's codec), with ``remote`` true when an
HTTPS endpoint may carry the same codec (one message per body); or
``sdk-session`` (a child's pipes fed to a client object a library drives, the
MCP SDK's session: the row's ``session`` builds it from the provider's options).
A row whose ``module`` is set is lazy: the module is imported on first use and
registers the full row itself; its ``extra`` is the package extra it needs, so
a missing extra is one clear message before anything starts. Such a module is
imported one thread at a time (``import_one_at_a_time``): a library imported from
two threads at once (the MCP SDK, by ``hostd mcp``'s face and by a provider's
binding) can see its own modules half-initialised.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from ._cgp import CgpCodec
from ._codec import Codec
from ._jsonrpc import JsonRpcCodec

__all__ = [
    "BindingRow",
    "Carrier",
    "binding_names",
    "binding_problem",
    "find_binding",
    "import_one_at_a_time",
    "register_binding",
    "unregister_binding",
]

#: How a binding's messages travel to a local provider.
Carrier = Literal["pipe", "sdk-session"]


@dataclass(frozen=True, slots=True)
class BindingRow:
    """One binding. ``codec(provider_id)`` builds a connection's codec (``pipe``;
    check-provider drives it too); ``session(options)`` returns the client factory of
    an ``sdk-session`` binding, called as ``(send, provider_id=…, send_nowait=…)``
    (such a binding has a check-provider of its own, as ``mcp`` has); ``module``: a
    lazy row's module, which registers the full row when imported; ``extra``: the
    package extra it needs (``pip install "/path/to/hostd[<extra>]"``); ``needs``: the
    distribution the extra brings, looked for without importing it."""

    name: str
    carrier: Carrier = "pipe"
    remote: bool = False
    codec: Callable[[str], Codec] | None = None
    session: Callable[[Mapping[str, Any]], Callable[..., Any]] | None = None
    module: str | None = None
    extra: str | None = None
    needs: str | None = None

    @property
    def lazy(self) -> bool:
        return self.codec is None and self.session is None

    def missing_extra(self) -> str | None:
        """What to install, when the extra this binding needs is absent; else ``None``."""
        if self.needs is None or importlib.util.find_spec(self.needs) is not None:
            return None
        extra = self.extra
        return (
            f'binding {self.name!r} needs the {extra} extra: pip install "/path/to/hostd[{extra}]" '
            "(a checkout or a wheel)"
        )


_ROWS: dict[str, BindingRow] = {}


def register_binding(row: BindingRow) -> BindingRow:
    """Add or complete ``row`` (a lazy row's module calls this with its full row)."""
    if row.carrier == "pipe" and row.codec is None and row.module is None:
        raise ValueError(f"binding {row.name!r}: a pipe binding needs a codec")
    if row.carrier == "sdk-session" and row.remote:
        raise ValueError(f"binding {row.name!r}: an sdk-session binding is local only")
    _ROWS[row.name] = row
    return row


def unregister_binding(name: str) -> None:
    """Remove a row (a binding registered for a while, as a test's)."""
    _ROWS.pop(name, None)


def binding_names() -> tuple[str, ...]:
    """Every registered binding's name, in the order they were registered."""
    return tuple(_ROWS)


def binding_problem(name: str, *, remote: bool = False) -> str | None:
    """Why ``name`` cannot be used (unknown, local only, its extra missing); ``None`` if
    it can. Imports nothing."""
    row = _ROWS.get(name)
    if row is None:
        *most, last = (repr(n) for n in binding_names())
        known = f"{', '.join(most)} or {last}" if most else last
        return f"binding must be {known}, not {name!r}"
    if remote and not row.remote:
        return f"binding {name!r} starts a local provider: give command, not url"
    return row.missing_extra()


_IMPORTING = threading.Lock()


def import_one_at_a_time(name: str) -> ModuleType:
    """``importlib.import_module(name)``, never beside another import made through this
    function. Python imports one module in one thread at a time, but a package whose
    modules import each other in a cycle (the MCP SDK: ``mcp.client`` and
    ``mcp.server``), entered from two threads at once, can hand one of them a module
    still half-initialised (``cannot import name 'Server' from partially initialized
    module``). ``hostd mcp`` imports its SDK in a worker thread while providers start,
    and an MCP provider's binding imports the same SDK: both come through here."""
    with _IMPORTING:
        return importlib.import_module(name)


def find_binding(name: str) -> BindingRow:
    """The full row of ``name``, its module imported if the row is lazy. Raises
    ``ValueError`` naming the problem (unknown, its extra missing)."""
    problem = binding_problem(name)
    if problem is not None:
        raise ValueError(problem)
    row = _ROWS[name]
    if row.lazy and row.module is not None:
        import_one_at_a_time(row.module)  # registers the full row
        row = _ROWS[name]
        if row.lazy:
            raise ValueError(f"binding {name!r}: {row.module} did not register it")
    return row


register_binding(BindingRow("jsonrpc", remote=True, codec=JsonRpcCodec))
register_binding(BindingRow("cgp", remote=True, codec=CgpCodec))
# The MCP provider binding runs the MCP SDK's client session; its module registers it.
register_binding(
    BindingRow(
        "mcp",
        carrier="sdk-session",
        module="hostd.mcp._binding",
        extra="mcp",
        needs="mcp",
    )
)
