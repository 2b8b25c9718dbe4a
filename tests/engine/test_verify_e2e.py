"""Verification and reuse end to end: real child providers over real pipes, real files.

The module doubles as the provider it tests against:
``python -m tests.engine.test_verify_e2e --root DIR [--name N] [--mode M]`` serves
one ``snippet`` frame per regular file under ``DIR`` (sorted), whole-file
``file`` provenance with its digest, and answers ``context/verify`` from the
files as they are now. Modes: ``honest``; ``rubber`` (every verdict ``valid``);
``liar`` (``content_digest`` of other bytes); ``noverify`` (declares no verify
capability); ``hollow`` (answers verify with no verdicts); ``range`` (each frame
carries one extra provenance entry with range ``--range``); ``rendezvous`` (from
the second query on, a query answers only once a ``context/verify`` has arrived,
so it proves the host sends verify concurrently with the fresh query);
``turncoat`` (honest on the first query, misstates ``token_cost`` after, B3);
``verify_hang`` (answers queries, never answers ``context/verify``).
``--start-gate PORT COUNTER N``: as ``tests.fixtures.adversarial_provider``'s, its
N-th start and later ones wait at the test's gate before serving (a slow restart).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.compose import compose_for_prompt
from hostd.engine.verify import StageResult, VerifyStage
from hostd.protocol import (
    Capabilities,
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    FrameIdentity,
    FrameVerdict,
    Provenance,
    ProviderInfo,
    QueryCapability,
    canonical_token_cost,
    parse_frame,
    sha256_digest,
)
from hostd.provider import Provider, ProviderRefusal, make_frame, run_stdio
from hostd.transport import ProviderConnection
from tests.fixtures.adversarial_provider import _start_gate
from tests.fixtures.procs import marked_env

from ._verify_turn import ask_all, finish

REPO = Path(__file__).resolve().parents[2]


class FileProvider(Provider):
    """Serves the files under a root as frames; verifies against the files as they are now."""

    def __init__(self, root: Path, name: str, mode: str, range_: str | None = None) -> None:
        self.root = root
        self.name = name
        self.mode = mode
        self.range = range_
        self.info = ProviderInfo(name=name, version="1.0", data_flow=DataFlow(reads=True))
        self.queries = 0
        self._verify_seen: anyio.Event | None = None  # made on the loop, lazily
        self.capabilities = Capabilities(
            query=QueryCapability(kinds=["snippet"]),
            correlation=True,
            verify=mode != "noverify",
        )

    def _seen(self) -> anyio.Event:
        if self._verify_seen is None:
            self._verify_seen = anyio.Event()
        return self._verify_seen

    def _files(self) -> list[Path]:
        return sorted(p for p in self.root.iterdir() if p.is_file())

    def _frame(self, path: Path) -> ContextFrame:
        data = path.read_bytes()
        text = data.decode("utf-8")
        provenance = [Provenance(type="file", uri=path.as_uri(), digest=sha256_digest(data))]
        if self.mode == "range":
            provenance.append(
                Provenance(
                    type="file", uri=path.as_uri(), range=self.range, digest=sha256_digest(b"")
                )
            )
        frame = make_frame(
            id=path.name,
            kind="snippet",
            title=path.name,
            content=text,
            citation_label=path.name,
            score=0.5,
            uri=path.as_uri(),
            provenance=provenance,
        )
        if self.mode == "liar":
            frame = frame.model_copy(update={"content_digest": sha256_digest(b"not the content")})
        return frame

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        self.queries += 1
        if self.mode == "rendezvous" and self.queries > 1:
            seen = self._seen()
            with anyio.move_on_after(10):
                await seen.wait()
            if not seen.is_set():
                raise ProviderRefusal("no context/verify arrived beside this query")
            self._verify_seen = None
        out: list[dict[str, Any]] = []
        spent = 0
        for path in self._files():
            frame = self._frame(path)
            cost = canonical_token_cost(frame.content)
            if len(out) >= query.max_frames or spent + cost > query.max_tokens:
                return ContextQueryResult(frames=out, truncated=True)
            spent += cost
            wire = frame.to_wire()
            if self.mode == "turncoat" and self.queries > 1:
                wire["token_cost"] = 0  # B3: a misstated cost quarantines the whole reply
            out.append(wire)
        return ContextQueryResult(frames=out)

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        self._seen().set()
        if self.mode == "verify_hang":
            await anyio.sleep_forever()
        if self.mode == "hollow":
            return []
        out = []
        for ident in frames:
            if self.mode == "rubber":
                out.append(FrameVerdict(frame=ident, status="valid"))
                continue
            path = self.root / ident.frame_id
            if not path.is_file():
                out.append(FrameVerdict(frame=ident, status="gone"))
                continue
            now = sha256_digest(path.read_bytes())
            if now == ident.content_digest:
                out.append(FrameVerdict(frame=ident, status="valid"))
            else:
                out.append(FrameVerdict(frame=ident, status="stale", replacement_digest=now))
        return out


def _main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--name", default="files")
    parser.add_argument("--mode", default="honest")
    parser.add_argument("--range", default=None)
    parser.add_argument("--start-gate", nargs=3, default=None)
    args = parser.parse_args()
    if args.start_gate is not None:
        port, counter, gated_from = args.start_gate
        _start_gate(int(port), counter, int(gated_from))
    run_stdio(FileProvider(Path(args.root), args.name, args.mode, args.range))


def provider_command(root: Path, mode: str = "honest", range_: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "tests.engine.test_verify_e2e", "--root", str(root)]
    cmd += ["--mode", mode]
    if range_ is not None:
        cmd += ["--range", range_]
    return cmd


# --- the tests ------------------------------------------------------------------------

pytestmark = pytest.mark.anyio


class Rig:
    """Real provider children on real pipes, fanned out beside the verification stage."""

    def __init__(self, conns: dict[str, ProviderConnection], stage: VerifyStage) -> None:
        self.conns = conns
        self.stage = stage

    async def send_verify(self, pid: str, identities: list[FrameIdentity]) -> list[FrameVerdict]:
        return list((await self.conns[pid].verify(identities)).verdicts)

    async def turn(self, session: str | None = "s", budget: int = 4000) -> tuple[StageResult, Any]:
        fresh: dict[str, list[tuple[str, ContextFrame]]] = {}
        query = ContextQuery(goal="what changed", max_frames=50, max_tokens=budget)
        can = {pid: bool(c.capabilities and c.capabilities.verify) for pid, c in self.conns.items()}
        plan = self.stage.plan(session, can_verify=can)
        replies: dict[str, Any] = {}

        async def leg(pid: str) -> None:
            result = await self.conns[pid].query(query)
            out = []
            for raw in result.frames:
                frame, violations = parse_frame(raw)
                if frame is not None and not [v for v in violations if v.severity == "error"]:
                    out.append((pid, frame))
            fresh[pid] = out

        async def ask() -> None:
            # A generous deadline per verify (the stage's default is 2 s): these tests
            # judge verdicts, and a busy machine must not turn one into a timeout.
            limits = dict.fromkeys(self.conns, 30_000.0)
            replies.update(await ask_all(self.stage, plan, self.send_verify, limits_ms=limits))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for pid in self.conns:
                    tg.start_soon(leg, pid)
                tg.start_soon(ask)  # V: concurrently with the fresh queries
            frames = [pair for pid in sorted(fresh) for pair in fresh[pid]]
            result = await finish(self.stage, frames, plan=plan, replies=replies)
        composed = compose_for_prompt(
            result.accepted,
            budget,
            placement="canonical",
            excluded=result.excluded,
            verification=result.verification,
        )
        return result, composed


@contextlib.asynccontextmanager
async def rig(
    providers: dict[str, list[str]], stage: VerifyStage | None = None
) -> AsyncIterator[Rig]:
    async with anyio.create_task_group() as tg:
        conns: dict[str, ProviderConnection] = {}
        try:
            for pid, cmd in providers.items():
                conns[pid] = await ProviderConnection.open(
                    pid, cmd, task_group=tg, cwd=REPO, env=marked_env(), handshake_timeout=30
                )
            yield Rig(conns, stage or VerifyStage())
        finally:
            for conn in conns.values():
                await conn.aclose()
            for conn in conns.values():
                assert conn.child.returncode is not None  # no process left behind


@pytest.fixture
def files(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (root / name).write_text(f"def {name[0]}():\n    return '{name}'\n")
    return root


def _states(result: StageResult) -> dict[str, Mapping[str, Any]]:
    return {f"{fid.provider_id}/{fid.frame_id}": st for fid, st in result.verification.items()}


def _reasons(result: StageResult) -> dict[str, str]:
    return {f"{fid.provider_id}/{fid.frame_id}": r for fid, r, _ in result.excluded}


async def test_unchanged_session_reuses_frames_and_keeps_the_prompt(files: Path) -> None:
    stage = VerifyStage(host_roots=[files])
    async with rig({"p": provider_command(files)}, stage) as r:
        first, prompt1 = await r.turn()
        second, prompt2 = await r.turn()
    assert {st["state"] for st in first.verification.values()} == {"source_verified"}
    assert [f.frame_id for f in second.reused] == ["a.py", "b.py", "c.py"]
    assert {st["state"] for st in second.verification.values()} == {"provider_verified"}
    assert second.accepted == first.accepted
    assert prompt2.prompt == prompt1.prompt  # byte-identical: the whole prefix is shared
    assert second.excluded == []
    entries = prompt2.to_wire()["audit"]["entries"]
    assert {e["verification"]["state"] for e in entries} == {"provider_verified"}


async def test_edited_file_is_stale_and_not_served(files: Path) -> None:
    stage = VerifyStage(host_roots=[files])
    async with rig({"p": provider_command(files)}, stage) as r:
        first, _ = await r.turn()
        (files / "b.py").write_text("def b():\n    return 'edited'\n")
        second, composed = await r.turn()
    old = next(fid for fid in first.verification if fid.frame_id == "b.py")
    stale = [(fid, reason, d) for fid, reason, d in second.excluded if fid == old]
    assert len(stale) == 1 and stale[0][1] == "stale"
    assert stale[0][2]["replacement_digest"] == sha256_digest((files / "b.py").read_bytes())
    served = {f.id: f.content for _, f in second.accepted}
    assert served["b.py"] == "def b():\n    return 'edited'\n"  # the fresh copy, not the held one
    assert "'b.py'" not in composed.prompt
    assert _states(second)["p/b.py"] == {"state": "source_verified"}
    assert _states(second)["p/a.py"] == {"state": "provider_verified", "source": "source_verified"}


async def test_deleted_file_is_gone(files: Path) -> None:
    async with rig({"p": provider_command(files)}) as r:
        await r.turn()
        (files / "c.py").unlink()
        second, composed = await r.turn()
    assert _reasons(second) == {"p/c.py": "gone"}
    assert [f.id for _, f in second.accepted] == ["a.py", "b.py"]
    audit = {e["frame"]["frame_id"]: e for e in composed.to_wire()["audit"]["entries"]}
    assert audit["c.py"]["disposition"] == "excluded" and audit["c.py"]["reason"] == "gone"


async def test_lying_digest_is_caught_beside_a_healthy_provider(files: Path) -> None:
    stage = VerifyStage()
    async with rig(
        {"honest": provider_command(files), "liar": provider_command(files, "liar")}, stage
    ) as r:
        result, _ = await r.turn(session=None)
    assert {p for p, _ in result.accepted} == {"honest"}
    assert set(_reasons(result).values()) == {"digest_mismatch"}
    assert len(result.excluded) == 3
    assert stage.health("liar")["digest_mismatch"] == 3
    assert stage.health("honest")["digest_mismatch"] == 0


async def test_rubber_stamp_is_flagged(files: Path) -> None:
    stage = VerifyStage(host_roots=[files])
    async with rig({"p": provider_command(files, "rubber")}, stage) as r:
        await r.turn()
        (files / "a.py").write_text("tampered\n")
        second, _ = await r.turn()
    held = [(fid, d) for fid, reason, d in second.excluded if d.get("rubber_stamp")]
    assert len(held) == 1 and held[0][0].frame_id == "a.py"
    assert stage.health("p")["rubber_stamp"] == 1
    # The fresh copy of the edited file is a different FrameId and verifies.
    assert _states(second)["p/a.py"] == {"state": "source_verified"}


async def test_symlink_out_of_the_trusted_root_is_refused(files: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    (files / "z-link.py").symlink_to(secret)
    stage = VerifyStage(host_roots=[files])
    async with rig({"p": provider_command(files)}, stage) as r:
        result, _ = await r.turn(session=None)
    # untrusted = "exclude" (the default): the frame is dropped and the audit says why.
    assert _reasons(result) == {"p/z-link.py": "untrusted_source"}
    assert result.figures["source_reads"] == 3  # the three real files, never the secret


async def test_an_included_untrusted_source_is_marked_unverifiable(
    files: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    (files / "z-link.py").symlink_to(secret)
    stage = VerifyStage(host_roots=[files], untrusted="include")
    async with rig({"p": provider_command(files)}, stage) as r:
        result, _ = await r.turn(session=None)
    assert _states(result)["p/z-link.py"] == {
        "state": "unverifiable",
        "reason": "outside_trusted_roots",
    }
    assert _states(result)["p/a.py"] == {"state": "source_verified"}
    assert _reasons(result) == {}


def test_an_untrusted_choice_outside_exclude_and_include_is_refused() -> None:
    with pytest.raises(ValueError, match="untrusted"):
        VerifyStage(untrusted="maybe")
    with pytest.raises(ValueError, match="untrusted"):
        VerifyStage(provider_untrusted={"p": "yes"})


@pytest.mark.parametrize(
    ("range_", "reason"),
    [
        ("L0", "unrecognised"),
        ("l1", "unrecognised"),
        ("L2-1", "inverted"),
        ("L9", "start_past_end"),
    ],
)
async def test_f17_cases_are_reported_unverifiable(files: Path, range_: str, reason: str) -> None:
    stage = VerifyStage(host_roots=[files])
    async with rig({"p": provider_command(files, "range", range_)}, stage) as r:
        result, _ = await r.turn(session=None)
    assert result.excluded == []
    assert {st.get("reason") for st in result.verification.values()} == {reason}
    assert {st["state"] for st in result.verification.values()} == {"unverifiable"}


async def test_hollow_verify_reuses_nothing(files: Path) -> None:
    stage = VerifyStage()
    async with rig({"p": provider_command(files, "hollow")}, stage) as r:
        await r.turn()
        second, _ = await r.turn()
    assert second.reused == []
    assert stage.health("p")["verify_missing"] == 3
    # No trusted root: the cited files are not re-read, only the inline digests are.
    states = {(st["state"], st.get("reason")) for st in second.verification.values()}
    assert states == {("unverifiable", "no_trusted_root")}


async def test_provider_without_verify_is_requeried(files: Path) -> None:
    stage = VerifyStage()
    async with rig({"p": provider_command(files, "noverify")}, stage) as r:
        await r.turn()
        second, _ = await r.turn()
    assert second.reused == [] and second.figures["verify_requested"] == 0
    assert second.figures["not_reusable"] == 3
    assert len(second.accepted) == 3


if __name__ == "__main__":
    _main()
