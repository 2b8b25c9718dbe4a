"""The bundled providers end to end through the daemon (``hostd serve --stdio`` child)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hostd.client import Client
from hostd.config import load_config
from providers.memory import MemoryStore
from providers.semantic import semantic_unavailable

from ._stdio import REPO, child_env

GOAL = "why does the retry loop give up"
#: Each provider's start deadline, and each request's wait for its warm-up: hang guards.
START_GUARD_S = 600


def _toml_list(words: list[str]) -> str:
    return json.dumps(words)  # a JSON array of strings is a TOML array


def _config(tmp_path: Path, with_semantic: bool) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "net.py").write_text(
        "def retry_loop(attempts):\n    # the retry loop gives up after three attempts\n"
        "    for _ in range(attempts):\n        pass\n"
    )
    (tree / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three tries.\n")
    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        store.add("fact", "retries", "the retry loop gives up after three attempts")
    providers = [
        ("files", ["python", "-m", "providers.files", "--root", str(tree)], 10_000),
        ("memory", ["python", "-m", "providers.memory", "--db", str(db)], 10_000),
    ]
    if with_semantic:
        cmd = ["python", "-m", "providers.semantic", "--root", str(tree)]
        providers.append(("semantic", [*cmd, "--cache", str(tmp_path / "c.db")], 100_000))
    text = (
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f'trusted_roots = ["{tree}"]\n\n[log]\nfile = "{tmp_path / "hostd.log"}"\n'
    )
    for pid, command, timeout in providers:
        # start_timeout_s: a hang guard. A request waits for a warming provider no longer
        # than its start deadline (30 s unless set), and semantic's model load alone
        # takes longer than that with both cores busy.
        text += (
            f'\n[[provider]]\nid = "{pid}"\ncommand = {_toml_list(command)}\n'
            f'timeout_ms = {timeout}\nstart_timeout_s = {START_GUARD_S}\ncwd = "{REPO}"\n'
        )
    path = tmp_path / "hostd.toml"
    path.write_text(text)
    return path


def test_demo_config_names_the_three_providers() -> None:
    config = load_config(REPO / "config" / "demo.toml")
    assert [p.id for p in config.provider] == ["files", "memory", "semantic"]
    for p in config.provider:
        assert p.cwd == REPO and p.command is not None
        # -P: the bundled provider, never a module of the directory it runs in
        assert p.command[1:4] == ["-P", "-m", f"providers.{p.id}"]


@pytest.mark.parametrize(
    "with_semantic",
    [
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(
                semantic_unavailable() is not None, reason=f"{semantic_unavailable()}"
            ),
        ),
    ],
    ids=["files+memory", "files+memory+semantic"],
)
@pytest.mark.timeout(START_GUARD_S + 60)
def test_providers_compose_through_the_daemon(tmp_path: Path, with_semantic: bool) -> None:
    config = _config(tmp_path, with_semantic)
    expected = {"files", "memory"} | ({"semantic"} if with_semantic else set())
    with Client.spawn(config, env=child_env(), cwd=REPO) as client:
        for strategy in ("score", "rrf"):
            # Each leg waits for its provider's ready (semantic's model loaded), however
            # long that takes: every leg ``ok`` is then what is tested, not the load's speed.
            composed = client.compose(
                GOAL,
                budget=2000,
                strategy=strategy,
                timeout_ms=100_000,
                ready_wait_ms=START_GUARD_S * 1000,
            )
            legs = {r.provider_id: r.status for r in composed.providers}
            assert legs == dict.fromkeys(expected, "ok"), composed.providers
            included = composed.audit.included()
            # A chunk both files and semantic serve is merged by dedup: one entry vouched by both.
            vouched = {p for e in included for p in [e.provider, *e.vouched_by]}
            assert vouched == expected
            file_frames = [e for e in included if e.provider != "memory"]
            # The daemon re-read every file frame's range and found the same digest (F5, F17).
            states = {e.verification.state if e.verification else None for e in file_frames}
            assert states == {"source_verified"}
            assert "the retry loop gives up" in composed.prompt
