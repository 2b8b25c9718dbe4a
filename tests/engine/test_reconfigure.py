"""``ProviderPool.reconfigure``: a reloaded config's providers, decided by their specs.

No process is started (``lazy``): what is kept, added, removed and replaced is read
from the pool's slots, and a retired slot is never started again; a write naming a
provider a reload removed is refused before any start.
"""

from __future__ import annotations

from typing import Any

import pytest

from hostd.engine import Host, PoolSettings, ProviderPool, ProviderSpec
from hostd.errors import ProviderCrashed, UnknownProvider
from hostd.protocol import ForgetRequest, RememberRequest

pytestmark = pytest.mark.anyio


def _spec(pid: str, weight: float = 1.0, **more: Any) -> ProviderSpec:
    return ProviderSpec(id=pid, command=["never-run", pid], weight=weight, **more)


async def test_unchanged_slots_are_kept_and_removed_or_changed_ones_retired() -> None:
    async with ProviderPool([_spec("a"), _spec("b"), _spec("c")], PoolSettings()) as pool:
        a, b, c = (pool.slots[p] for p in "abc")

        done = pool.reconfigure([_spec("a"), _spec("b", env={"X": "1"}), _spec("d")])

        assert (done.added, done.removed, done.changed, done.kept) == (["d"], ["c"], ["b"], ["a"])
        assert pool.slots["a"] is a  # the same slot: its process and health kept
        assert pool.slots["b"] is not b and pool.slots["b"].spec.env == {"X": "1"}
        assert "c" not in pool.slots
        assert [s.spec.id for s in pool.select(None)] == ["a", "b", "d"]
        assert {id(s) for s in done.retired} == {id(b), id(c)}
        for old, why in ((b, "its config section changed"), (c, "removed from the config")):
            with pytest.raises(ProviderCrashed) as caught:
                await pool.ensure(old)
            assert caught.value.message == f"provider stopped by a config reload: {why}"
            assert pool.restart_behind(old) is False
        await pool.stop_retired(done.retired)


async def test_a_change_of_keys_read_per_request_alone_keeps_the_slot_with_its_new_spec() -> None:
    async with ProviderPool([_spec("a"), _spec("b"), _spec("c")], PoolSettings()) as pool:
        a, b, c = (pool.slots[p] for p in "abc")

        done = pool.reconfigure(
            [
                _spec("a", weight=3.0, timeout_ms=500),
                _spec("b", trusted_roots=["/srv"], untrusted="include", start_timeout_s=9.0),
                _spec("c", weight=2.0, env={"X": "1"}),  # one key a process holds: restarted
            ]
        )

        assert (done.updated, done.changed, done.kept) == (["a", "b"], ["c"], [])
        assert [s.spec.id for s in done.retired] == ["c"]
        assert pool.slots["a"] is a and pool.slots["b"] is b and pool.slots["c"] is not c
        assert (a.spec.weight, a.spec.timeout_ms) == (3.0, 500)
        assert (b.spec.trusted_roots, b.spec.untrusted) == (("/srv",), "include")
        assert pool.start_timeout(b) == 9.0
        assert a.retired is None and b.retired is None
        await pool.stop_retired(done.retired)


async def test_a_removed_provider_is_selected_retired_only_when_asked_for_so() -> None:
    async with ProviderPool([_spec("a"), _spec("b")], PoolSettings()) as pool:
        b = pool.slots["b"]
        done = pool.reconfigure([_spec("a")])

        with pytest.raises(UnknownProvider):
            pool.select(["a", "b"])
        assert pool.select(["b", "a"], retired=True) == [pool.slots["a"], b]
        with pytest.raises(UnknownProvider):
            pool.select(["zed"], retired=True)
        pool.reconfigure([_spec("a"), _spec("b")])  # added again: its fresh slot
        assert pool.select(["b"], retired=True) == [pool.slots["b"]] != [b]
        await pool.stop_retired(done.retired)


@pytest.mark.parametrize("write", ["remember", "forget"])
async def test_a_write_naming_a_provider_not_configured_as_it_began_is_refused_as_unknown(
    write: str,
) -> None:
    # ``Host.remember`` called directly: its request begins at the call. A provider that
    # a reload removed before it, like one never configured, is unknown to it; only a
    # request that began with it configured (``configured``: the pipeline's config) is
    # told the reload's words. Refused before any start: no process is run.
    async with Host([_spec("alpha"), _spec("beta")]) as host:
        done = host.reconfigure([_spec("alpha")], start=False)

        async def send(provider: str, **kw: Any) -> object:
            if write == "remember":
                request = RememberRequest(kind="fact", title="t", content="c")
                return await host.remember(request, provider=provider, **kw)
            return await host.forget(ForgetRequest(id="mem-1"), provider=provider, **kw)

        for pid in ("beta", "gamma"):  # removed by the reload before the call; never configured
            with pytest.raises(UnknownProvider) as unknown:
                await send(pid)
            said = f"invalid params: provider: unknown provider {pid!r} (configured: alpha)"
            assert unknown.value.message == said
            assert unknown.value.data["field"] == "provider"
        with pytest.raises(ProviderCrashed) as reloaded:
            await send("beta", configured={"alpha", "beta"})
        assert reloaded.value.message == (
            "provider 'beta' stopped by a config reload: removed from the config; "
            "nothing was written"
        )
        with pytest.raises(UnknownProvider):  # never configured, whatever the caller's list
            await send("gamma", configured={"alpha", "gamma"})
        await host.pool.stop_retired(done.retired)
