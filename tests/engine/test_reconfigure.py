"""``ProviderPool.reconfigure``: a reloaded config's providers, decided by their specs.

No process is started (``lazy``): what is kept, added, removed and replaced is read
from the pool's slots, and a retired slot is never started again.
"""

from __future__ import annotations

import pytest

from hostd.engine import PoolSettings, ProviderPool, ProviderSpec
from hostd.errors import ProviderCrashed

pytestmark = pytest.mark.anyio


def _spec(pid: str, weight: float = 1.0) -> ProviderSpec:
    return ProviderSpec(id=pid, command=["never-run", pid], weight=weight)


async def test_unchanged_slots_are_kept_and_removed_or_changed_ones_retired() -> None:
    async with ProviderPool([_spec("a"), _spec("b"), _spec("c")], PoolSettings()) as pool:
        a, b, c = (pool.slots[p] for p in "abc")

        done = pool.reconfigure([_spec("a"), _spec("b", weight=2.0), _spec("d")])

        assert (done.added, done.removed, done.changed, done.kept) == (["d"], ["c"], ["b"], ["a"])
        assert pool.slots["a"] is a  # the same slot: its process and health kept
        assert pool.slots["b"] is not b and pool.slots["b"].spec.weight == 2.0
        assert "c" not in pool.slots
        assert [s.spec.id for s in pool.select(None)] == ["a", "b", "d"]
        assert {id(s) for s in done.retired} == {id(b), id(c)}
        for old, why in ((b, "its config section changed"), (c, "removed from the config")):
            with pytest.raises(ProviderCrashed) as caught:
                await pool.ensure(old)
            assert caught.value.message == f"provider stopped by a config reload: {why}"
            assert pool.restart_behind(old) is False
        await pool.stop_retired(done.retired)
