"""The one correlation table: id → waiter, a latch once the stream ends, abandoned ids."""

from __future__ import annotations

from typing import Any

import pytest

from hostd.errors import ProviderCrashed
from hostd.rpc import PendingTable


class _Slot:
    def __init__(self) -> None:
        self.failed: BaseException | None = None

    def resolve(self, result: Any) -> None:
        raise AssertionError("not resolved here")

    def fail(self, error: BaseException) -> None:
        self.failed = error


def test_a_reply_takes_its_waiter_once_and_an_unknown_id_takes_nothing() -> None:
    table = PendingTable()
    slot = _Slot()
    table[1] = slot
    assert len(table) == 1 and table.has(1)
    assert table.pop(1, None) is slot
    assert table.pop(1, None) is None and len(table) == 0


def test_an_abandoned_id_is_remembered_once_and_only_the_newest_are_kept() -> None:
    table = PendingTable(remember_abandoned=2)
    for key in (1, 2, 3):
        table[key] = _Slot()
        table.abandon(key)
    assert len(table) == 0
    assert not table.was_abandoned(1)  # forgotten: only the newest two are kept
    assert table.was_abandoned(3) and not table.was_abandoned(3)  # told once
    table.abandon(99)  # never sent: nothing to remember
    assert not table.was_abandoned(99)


def test_the_streams_end_fails_every_waiter_and_refuses_new_ones() -> None:
    table = PendingTable()
    slots = [_Slot(), _Slot()]
    for key, slot in enumerate(slots):
        table[key] = slot
    ended = ProviderCrashed("gone")
    table.fail_all(ended)
    assert [s.failed for s in slots] == [ended, ended] and len(table) == 0
    with pytest.raises(ProviderCrashed):
        table.add(6)
    assert len(table) == 0
    table.fail_all(ProviderCrashed("later"))
    assert table.failure is ended  # the first end is the one every waiter hears
