"""What the pipeline reads of a request, as read-only protocols (no second params model).

The server's pydantic params (``hostd.server.ComposeParams``, validated once at the
wire) satisfy these structurally, and so does any object an embedded caller builds:
the pipeline never re-validates what the wire already checked, and never copies it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

__all__ = ["ComposeRequest", "FloorRequest", "Progress", "QueryRequest"]

#: Where a request's progress notes go (``$/progress`` params without the token): one
#: per finished leg (``provider``, ``status``, ``frames_accepted``, ``latency_ms``,
#: ``done``, ``total``) and one per warm-up step of a provider it asks (``status``
#: ``warming`` and the provider's own ``warming`` figures). Sync or async.
Progress = Callable[[dict[str, Any]], Awaitable[None] | None]


class FloorRequest(Protocol):
    """A floor the client insists on: admitted before any frame (priced once)."""

    @property
    def label(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def position(self) -> Literal["top", "bottom"]: ...


class QueryRequest(Protocol):
    """The fan-out's part of a request (``context/query`` and ``context/compose``)."""

    @property
    def goal(self) -> str: ...

    @property
    def query_text(self) -> str | None: ...

    @property
    def kinds(self) -> Sequence[str]: ...

    @property
    def anchors(self) -> Sequence[str]: ...

    @property
    def as_of(self) -> str | None: ...

    @property
    def budget(self) -> int | None: ...

    @property
    def max_frames(self) -> int: ...

    @property
    def providers(self) -> Sequence[str] | None: ...

    @property
    def timeout_ms(self) -> int | None: ...

    @property
    def ready_wait_ms(self) -> int | None: ...

    @property
    def session(self) -> str | None: ...

    @property
    def overfetch(self) -> float | None: ...


class ComposeRequest(QueryRequest, Protocol):
    """A ``context/compose`` request: the fan-out's part and the composition's."""

    @property
    def strategy(self) -> str | Mapping[str, Any] | None: ...

    @property
    def placement(self) -> str | None: ...

    @property
    def floors(self) -> Sequence[FloorRequest]: ...

    @property
    def caps(self) -> Mapping[str, float] | None: ...

    @property
    def include_content(self) -> bool:
        """Also return ``evidence``: each included frame's own content."""
        ...

    @property
    def record(self) -> bool:
        """Keep this composition's shadow record whatever the sample draws, and answer
        only once it is committed."""
        ...
