"""``Host.query_all(..., session=...)`` with the verification stage, real children and files."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.compose import compose_for_prompt
from hostd.engine import FanOut, Host, ProviderSpec
from hostd.engine.verify import SourceCache
from hostd.protocol import ContextQuery, FrameId, sha256_digest
from tests.engine._helpers import healthy
from tests.engine.test_verify_e2e import provider_command
from tests.fixtures.gate import Gate
from tests.fixtures.procs import ROOT, marked_env

pytestmark = pytest.mark.anyio

BUDGET = 4000


def spec(pid: str, root: Path, mode: str = "honest", **kw: Any) -> ProviderSpec:
    # A generous leg timeout: these tests are about verification, not a loaded machine.
    kw.setdefault("timeout_ms", 30000)
    return ProviderSpec(
        pid,
        provider_command(root, mode),
        env=marked_env(),
        cwd=str(ROOT),
        trusted_roots=[root],
        **kw,
    )


def _query() -> ContextQuery:
    return ContextQuery(goal="what does the code do", max_frames=20, max_tokens=0)


async def _ask(host: Host, session: str | None = "s") -> FanOut:
    with anyio.fail_after(30):
        return await host.query_all(_query(), BUDGET, session=session)


def _tree(tmp_path: Path, name: str = "repo") -> Path:
    root = tmp_path / name
    root.mkdir()
    for f in ("a.py", "b.py", "c.py"):
        (root / f).write_text(f"def {f[0]}():\n    return {f!r}\n")
    return root


def _one_entry_per_frame_id(fan: FanOut) -> None:
    ids = [FrameId.of(p, f) for p, f in fan.accepted] + [e[0] for e in fan.excluded]
    assert [k for k, n in Counter(ids).items() if n > 1] == []
    assert set(fan.verification) == {FrameId.of(p, f) for p, f in fan.accepted}


async def test_every_accepted_frame_carries_a_verification_state(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with Host([spec("p", root)]) as host:
        fan = await _ask(host, session=None)
    assert len(fan.accepted) == 3
    assert {v["state"] for v in fan.verification.values()} == {"source_verified"}
    assert fan.figures["verify_requested"] == 0
    _one_entry_per_frame_id(fan)


async def test_second_turn_reuses_valid_frames_and_keeps_the_prompt(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with Host([spec("p", root), spec("q", _tree(tmp_path, "other"))]) as host:
        first = await _ask(host)
        second = await _ask(host)
        status = host.session_stats()
    assert second.accepted == first.accepted
    assert second.figures["reused"] == 6 and second.figures["verify_providers"] == 2
    assert {v["state"] for v in second.verification.values()} == {"provider_verified"}
    one = compose_for_prompt(first.accepted, BUDGET, verification=first.verification)
    two = compose_for_prompt(second.accepted, BUDGET, verification=second.verification)
    assert two.prompt == one.prompt  # the whole evidence block is byte-identical
    assert status["reuse"]["sessions"] == 1 and status["reuse"]["frames"] == 6
    assert status["verification"]["reused"] == 6
    _one_entry_per_frame_id(second)


async def test_verify_runs_concurrently_with_the_fresh_query(tmp_path: Path) -> None:
    # The rendezvous provider answers its second query only once a verify arrived.
    root = _tree(tmp_path)
    async with Host([spec("p", root, "rendezvous")]) as host:
        await _ask(host)
        second = await _ask(host)
    assert second.reports["p"].status == "ok", second.reports["p"].to_wire()
    assert second.figures["reused"] == 3


class _Watched(SourceCache):
    """A source cache that tells when a source is first looked up (from the worker
    thread that reads it)."""

    def __init__(self) -> None:
        super().__init__()
        self.looked = threading.Event()

    def get(self, real: str, key: Any) -> Any:
        self.looked.set()
        return super().get(real, key)


async def test_a_landed_legs_sources_are_read_while_another_leg_is_still_out(
    tmp_path: Path,
) -> None:
    # "held" answers only when the gate opens; "p"'s files are looked at before that,
    # so the turn's reads overlap its slowest provider, and decide as they did before.
    root = _tree(tmp_path)
    async with Gate() as gate:
        specs = [spec("p", root), healthy("held", "--hold-port", str(gate.port))]
        async with Host(specs) as host:
            before = await _ask(host, session=None)  # both live: the next turn writes both
            stage = host.verify_stage
            assert stage is not None
            watched = stage.sources = _Watched()
            gate.close()
            turn: dict[str, FanOut] = {}

            async def ask() -> None:
                turn["fan"] = await _ask(host, session=None)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await gate.wait_held(1)
                looked = await anyio.to_thread.run_sync(watched.looked.wait, 30)
                gate.open()
            assert looked, "p's sources were not read while held's leg was out"
    fan = turn["fan"]
    assert fan.reports["held"].status == "ok" and fan.reports["p"].status == "ok"
    assert fan.verification == before.verification
    assert fan.figures["source_reads"] == before.figures["source_reads"] == 3
    _one_entry_per_frame_id(fan)


async def test_edited_and_deleted_files_are_stale_and_gone(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with Host([spec("p", root)]) as host:
        first = await _ask(host)
        (root / "a.py").write_text("def a():\n    return 'edited'\n")
        (root / "c.py").unlink()
        second = await _ask(host)
    old = {f.id: FrameId.of(p, f) for p, f in first.accepted}
    reasons = {fid: (reason, detail) for fid, reason, detail in second.excluded}
    assert reasons[old["a.py"]][0] == "stale"
    assert reasons[old["a.py"]][1]["replacement_digest"] == sha256_digest(
        (root / "a.py").read_bytes()
    )
    assert reasons[old["c.py"]][0] == "gone"
    served = {f.id: f.content for _, f in second.accepted}
    assert served == {
        "a.py": "def a():\n    return 'edited'\n",
        "b.py": "def b():\n    return 'b.py'\n",
    }
    states = {fid.frame_id: v["state"] for fid, v in second.verification.items()}
    assert states == {"a.py": "source_verified", "b.py": "provider_verified"}
    _one_entry_per_frame_id(second)


async def test_a_lying_digest_is_caught_beside_an_honest_provider(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with Host([spec("honest", root), spec("liar", root, "liar")]) as host:
        fan = await _ask(host, session=None)
        listed = {p["id"]: p for p in host.providers_list()}
    assert {p for p, _ in fan.accepted} == {"honest"}
    assert Counter(r for _, r, _ in fan.excluded) == {"digest_mismatch": 3}
    assert listed["liar"]["health"]["verification"]["digest_mismatch"] == 3
    assert listed["honest"]["health"]["verification"]["digest_mismatch"] == 0


async def test_rubber_stamping_is_flagged_in_health(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with Host([spec("p", root, "rubber")]) as host:
        await _ask(host)
        (root / "b.py").write_text("tampered\n")
        second = await _ask(host)
        listed = host.providers_list()
    assert listed[0]["health"]["verification"]["rubber_stamp"] == 1
    flagged = [fid.frame_id for fid, _, d in second.excluded if d.get("rubber_stamp")]
    assert flagged == ["b.py"]
    _one_entry_per_frame_id(second)


async def test_a_quarantined_provider_contributes_no_held_frames(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    async with Host([spec("turncoat", root, "turncoat"), spec("ok", _tree(tmp_path, "o"))]) as host:
        await _ask(host)
        second = await _ask(host)
    assert second.reports["turncoat"].status == "quarantined"
    assert {p for p, _ in second.accepted} == {"ok"}
    assert {r for fid, r, _ in second.excluded if fid.provider_id == "turncoat"} == {"quarantined"}
    _one_entry_per_frame_id(second)


async def test_verification_can_be_turned_off(tmp_path: Path) -> None:
    async with Host([spec("p", _tree(tmp_path))], verify_stage=None) as host:
        fan = await _ask(host)
        assert host.session_stats() == {}
    assert {v["state"] for v in fan.verification.values()} == {"unverified"}


async def test_consent_is_decided_once_per_provider_for_its_query_and_its_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hostd.engine._gate as gate_module
    from hostd.engine.consent import required_scopes as required

    asked: list[str] = []

    def counting(info: Any) -> list[str]:
        asked.append(info.name)  # every consent decision reads the provider's scopes
        return required(info)

    monkeypatch.setattr(gate_module, "required_scopes", counting)
    root = _tree(tmp_path)
    async with Host([spec("p", root)]) as host:
        await _ask(host)  # a start: consent judged once, after it
        asked.clear()
        second = await _ask(host)  # live: judged by the plan, for the query and the verify
    assert second.figures["verify_providers"] == 1 and second.figures["reused"] == 3
    assert len(asked) == 1


async def test_a_verify_waits_for_its_providers_restart_as_its_leg_does(tmp_path: Path) -> None:
    """A provider restarting when a turn asks is waited for (the request names no
    ``timeout_ms``); its leg's bound then counts from its ready, and so does its verify's:
    a restart slower than that bound neither times the verify out nor fails the leg."""
    limit_ms = 4000  # each call's bound once the provider is up: room on a loaded machine
    root = _tree(tmp_path)
    async with Gate() as gate:
        restart_gated = ("--start-gate", str(gate.port), str(tmp_path / "starts"), "2")
        p = spec("p", root, timeout_ms=limit_ms)
        p = dataclasses.replace(p, command=[*p.command, *restart_gated])
        async with Host([p]) as host:
            await _ask(host)  # its frames held for the next turn, to verify
            gate.close()  # its second start (the restart) waits at the gate
            turn: dict[str, FanOut] = {}

            async def ask() -> None:
                turn["fan"] = await _ask(host)

            async with anyio.create_task_group() as tg:
                tg.start_soon(host.restart_provider, "p")
                await gate.wait_held(1)
                tg.start_soon(ask)
                await anyio.wait_all_tasks_blocked()  # the turn planned, waiting for p
                # Its restart outlasts the bound the turn planned for its leg and verify.
                await anyio.sleep(limit_ms / 1000 * 1.25)
                gate.open()
    fan = turn["fan"]
    assert fan.reports["p"].status == "ok", fan.reports["p"].to_wire()
    assert fan.figures["verify_providers"] == 1 and fan.figures["reused"] == 3, fan.figures
    assert {v["state"] for v in fan.verification.values()} == {"provider_verified"}
    _one_entry_per_frame_id(fan)
