"""``Client.remember`` / ``forget`` and ``AsyncClient``'s: typed results from a real
daemon child writing into a real ``providers.memory`` child."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hostd.client import Client, Forgotten, Remembered, RpcError, spawn

ROOT = Path(__file__).resolve().parents[2]
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-02-01T00:00:00Z"
BETWEEN = "2026-01-15T00:00:00Z"


def _config(tmp_path: Path) -> Path:
    db = tmp_path / "memory.db"
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[[provider]]\nid = "memory"\n'
        f'command = ["python", "-m", "providers.memory", "--db", "{db}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    return path


def _cited(hostd: Client, as_of: str | None = None) -> list[str]:
    composed = hostd.compose("when do deploys happen", budget=2000, as_of=as_of)
    return sorted(e.frame_id for e in composed.evidence)


def test_the_sync_client_remembers_supersedes_and_forgets(tmp_path: Path) -> None:
    with Client.spawn(_config(tmp_path), stderr=subprocess.DEVNULL, cwd=ROOT) as hostd:
        first = hostd.remember("Deploys happen on Tuesdays.", title="deploys", valid_from=T0)
        assert isinstance(first, Remembered)
        assert (first.provider, first.id, first.valid_from) == ("memory", "mem-1", T0)
        assert _cited(hostd) == ["mem-1"]
        second = hostd.remember(
            "Deploys happen on Wednesdays.", title="deploys", valid_from=T1, supersedes=first.id
        )
        assert (second.id, second.supersedes) == ("mem-2", "mem-1")
        assert _cited(hostd) == ["mem-2"]
        assert _cited(hostd, as_of=BETWEEN) == ["mem-1"]
        gone = hostd.forget(second.id)
        assert isinstance(gone, Forgotten) and gone.forgotten == "mem-2"
        assert gone.reopened == "mem-1"  # the correction undone: the old entry holds again
        assert _cited(hostd) == ["mem-1"]
        assert gone.already is False
        again = hostd.forget("mem-2")  # a retry: safe, and said
        # and it names the entry the first forget made valid again, as the first did
        assert (again.forgotten, again.already, again.reopened) == ("mem-2", True, "mem-1")
        with pytest.raises(RpcError) as caught:
            hostd.forget("mem-3")  # never an entry
        assert caught.value.remote_reason == "write_refused"


@pytest.mark.anyio
async def test_the_async_client_remembers_an_episode(tmp_path: Path) -> None:
    async with spawn(_config(tmp_path), stderr=subprocess.DEVNULL, cwd=ROOT) as client:
        done = await client.remember(
            "We moved the deploy to Wednesday after the outage.",
            title="deploy moved",
            kind="episode",
            provider="memory",
        )
        assert (done.id, done.provider) == ("mem-1", "memory")
        assert done.recorded_at == done.valid_from  # default: true from when it is recorded
        assert (await client.forget(done.id)).forgotten == "mem-1"
