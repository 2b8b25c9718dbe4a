"""The one correlation table: request id → a one-slot waiter, for every end that sends requests.

The provider transport, the client library and check-provider register each
request they send here and hand each reply to its waiter; what a reply with an
unknown id means is the end's own rule (a fault of a provider, H4; nothing for a
client). When the stream ends or breaks, every waiter is woken with the same
typed error (style: "EOF wakes every waiter with a typed error").
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

import anyio

from hostd.errors import HostdError

__all__ = ["Pending", "PendingTable", "PendingSlot"]


class PendingSlot(Protocol):
    """What the table holds for one id: resolved with the reply's payload, or failed."""

    def resolve(self, result: Any) -> None: ...
    def fail(self, error: BaseException) -> None: ...


class Pending:
    """One awaited reply."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def resolve(self, result: Any) -> None:
        if not self.done.is_set():
            self.result = result
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()

    async def wait(self) -> Any:
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result


class PendingTable(dict[Any, PendingSlot]):
    """Correlation table: id → ``PendingSlot``, a dict (``pop(key, None)`` takes a reply's
    waiter, ``len`` counts those in flight). Registering refuses once the stream has
    ended (``failure``): ``add`` raises it; an end that keeps a slot of its own (one that
    settles a future, say: the provider transport's) raises it before it sets the item.
    Remembers ids abandoned by
    their caller (a timed-out leg) so a late reply is dropped quietly rather than read
    as a correlation fault (H4 is about ids we never sent)."""

    def __init__(self, remember_abandoned: int = 4096) -> None:
        super().__init__()
        self._abandoned: OrderedDict[Any, None] = OrderedDict()
        self._remember = remember_abandoned
        self.failure: HostdError | None = None

    def __repr__(self) -> str:
        return f"<PendingTable pending={len(self)} failure={self.failure!r}>"

    def add(self, key: Any) -> Pending:
        if self.failure is not None:
            raise self.failure
        slot = Pending()
        self[key] = slot
        return slot

    def abandon(self, key: Any) -> None:
        if super().pop(key, None) is not None:
            self._abandoned[key] = None
            while len(self._abandoned) > self._remember:
                self._abandoned.popitem(last=False)

    def has(self, key: Any) -> bool:
        return key in self

    def was_abandoned(self, key: Any) -> bool:
        return self._abandoned.pop(key, "missing") is None

    def fail_all(self, error: HostdError) -> None:
        if self.failure is None:
            self.failure = error
        pending = list(self.values())
        self.clear()
        for slot in pending:
            slot.fail(error)
