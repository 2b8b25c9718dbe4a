"""providers.files after an edit: a query never waits on a whole rebuild. One that finds
the tree changed answers from the index it has while the rebuild goes on, and says how
many changed files that index lacks; the next query after the rebuild ranks over the
new one. A rebuild is held open by a test hook, so the order is decided by events."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hostd.client import Client
from hostd.protocol import ContextQuery
from providers import CorpusOptions
from providers.files import FileIndex
from providers.files import _index as files_index

from ._stdio import REPO, child_env

GUARD_S = 60  # a hang guard, never the thing tested


def _q(text: str) -> ContextQuery:
    return ContextQuery(goal=text, max_frames=10, max_tokens=10_000)


class _HeldIndex(FileIndex):
    """A ``FileIndex`` whose rebuilds after the first wait for ``release``; ``holding``
    is set once one waits (its refresh has walked the tree and read what changed)."""

    def __init__(self, root: Path, *, refresh_wait_s: float | None) -> None:
        super().__init__(
            CorpusOptions(root=root), refresh_interval_s=0.0, refresh_wait_s=refresh_wait_s
        )
        self.holding = threading.Event()
        self.release = threading.Event()

    def _rebuild(self, progress: Callable[..., None] | None = None, phase: str = "index") -> None:
        if self.generation:
            self.holding.set()
            assert self.release.wait(GUARD_S)
        super()._rebuild(progress, phase)


def _answer_within_guard(index: FileIndex, text: str) -> list[str]:
    """The contents ``index.answer`` gives, asked from another thread (a query that
    waited on a held rebuild would hang: the guard fails the test instead)."""
    found: list[str] = []
    asked = threading.Thread(
        target=lambda: found.extend(f.content or "" for f in index.answer(_q(text)).frames)
    )
    asked.start()
    asked.join(GUARD_S)
    assert not asked.is_alive(), "a query waited for the whole rebuild"
    return found


def test_a_query_during_a_rebuild_answers_from_the_index_it_has_and_says_so(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("def wombat():\n    return 'burrow'\n")
    (tmp_path / "b.py").write_text("def koala():\n    return 'tree'\n")
    index = _HeldIndex(tmp_path, refresh_wait_s=0.0)
    index.build()
    (tmp_path / "a.py").write_text("def wombat():\n    return 'tunnel'\n")
    (tmp_path / "b.py").unlink()
    _answer_within_guard(index, "wombat")  # starts the refresh, which is held
    assert index.holding.wait(GUARD_S)
    packed = index.answer(_q("wombat"))
    assert [f.content for f in packed.frames] == ["def wombat():\n    return 'burrow'\n"]
    assert packed.behind == 2  # a.py changed, b.py gone
    assert packed.to_result().unindexed_changes == 2
    index.release.set()
    for thread in threading.enumerate():
        if thread.name == "files-refresh":
            thread.join(GUARD_S)
    packed = index.answer(_q("wombat"))
    assert [f.content for f in packed.frames] == ["def wombat():\n    return 'tunnel'\n"]
    assert packed.behind == 0 and packed.to_result().unindexed_changes is None
    assert index.answer(_q("koala")).frames == []


def test_a_quick_rebuild_is_waited_for_and_answers_from_the_fresh_index(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def wombat():\n    return 'burrow'\n")
    # The wait is a hang guard here: the rebuild ends within it (and is never held).
    index = FileIndex(CorpusOptions(root=tmp_path), refresh_interval_s=0.0, refresh_wait_s=GUARD_S)
    index.build()
    (tmp_path / "a.py").write_text("def wombat():\n    return 'tunnel'\n")
    packed = index.answer(_q("wombat"))
    assert [f.content for f in packed.frames] == ["def wombat():\n    return 'tunnel'\n"]
    assert packed.behind == 0


def _answer_after_edit(tmp_path: Path, *, waits: bool) -> list[str]:
    """What a query gives when it finds ``a.py`` changed, with the default wait (no
    ``refresh_wait_s``) and the rebuild held. ``waits``: the query is expected to wait
    for the rebuild, which is let go once it is held; else the query must answer while
    the rebuild is still held (only then is it let go)."""
    (tmp_path / "a.py").write_text("def wombat():\n    return 'burrow'\n")
    index = _HeldIndex(tmp_path, refresh_wait_s=None)
    index.build()
    (tmp_path / "a.py").write_text("def wombat():\n    return 'tunnel'\n")
    found: list[str] = []
    asked = threading.Thread(
        target=lambda: found.extend(f.content or "" for f in index.answer(_q("wombat")).frames)
    )
    asked.start()
    assert index.holding.wait(GUARD_S)
    if waits:
        index.release.set()
    asked.join(GUARD_S)
    index.release.set()
    assert not asked.is_alive(), "the query waited for the held rebuild"
    return found


def test_by_default_a_small_tree_is_answered_from_its_rebuilt_index_however_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No time bound for a small index: were the bound applied (made 0 here), the query
    # would answer from the index before the edit.
    monkeypatch.setattr(files_index, "REFRESH_WAIT_S", 0.0)
    found = _answer_after_edit(tmp_path, waits=True)
    assert found == ["def wombat():\n    return 'tunnel'\n"]


def test_by_default_a_large_tree_waits_for_its_rebuild_no_longer_than_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_index, "REFRESH_WAIT_S", 0.0)
    monkeypatch.setattr(files_index, "WAIT_WHOLE_BELOW_CHUNKS", 1)  # one chunk is large
    found = _answer_after_edit(tmp_path, waits=False)
    assert found == ["def wombat():\n    return 'burrow'\n"]


def test_an_unchanged_tree_answers_the_same_frames_every_time(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(f"def wombat_{i}():\n    return {i}  # wombat\n")
    index = FileIndex(CorpusOptions(root=tmp_path), refresh_interval_s=0.0, refresh_wait_s=0.0)
    index.build()
    first = index.answer(_q("wombat")).to_result().to_wire()
    for _ in range(3):
        assert index.answer(_q("wombat")).to_result().to_wire() == first
    assert index.generation == 1  # no change, no rebuild


def test_the_leg_note_says_the_answer_came_from_the_index_before_the_changes() -> None:
    from hostd.engine._judge import behind
    from hostd.engine._outcome import LegReply

    reply = LegReply("files", _q("x"), frames=[], behind=3)
    assert behind(reply) == "answered from its index before 3 changed file(s); rebuilding"
    assert behind(LegReply("files", _q("x"), frames=[])) is None


def _fifos(tmp_path: Path) -> list[Path]:
    paths = [tmp_path / name for name in ("held", "release", "done")]
    for path in paths:
        os.mkfifo(path)
    return paths


def _in_thread(step: Callable[[], object]) -> None:
    """Run ``step()`` (a blocking FIFO open) under the hang guard."""
    errors: list[Exception] = []

    def run() -> None:
        try:
            step()
        except Exception as exc:  # said in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), "the provider never reached the step"
    assert not errors, errors


def test_an_edit_during_a_held_rebuild_is_never_quoted_with_its_old_bytes(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    net = tree / "net.py"
    net.write_text("def retry_loop(attempts):\n    # the retry loop gives up after three\n")
    (tree / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three tries.\n")
    held, release, done = _fifos(tmp_path)
    command = [
        "python", "-m", "tests.fixtures.held_files_provider", str(held), str(release),
        str(done), "--root", str(tree), "--no-cache", "--refresh-interval", "0",
        "--refresh-wait", "0",
    ]  # fmt: skip
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f'trusted_roots = ["{tree}"]\n\n[log]\nfile = "{tmp_path / "hostd.log"}"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = {GUARD_S * 1000}\ncwd = "{REPO}"\n'
    )
    goal = "why does the retry loop give up"
    with Client.spawn(config, env=child_env(), cwd=REPO) as client:
        first = client.compose(goal, budget=2000, timeout_ms=GUARD_S * 1000)
        assert "gives up after three\n" in first.prompt
        assert first.providers[0].note is None
        net.write_text("def retry_loop(attempts):\n    # the retry loop gives up after five\n")
        client.compose(goal, budget=2000, timeout_ms=GUARD_S * 1000)  # starts the refresh
        _in_thread(held.read_bytes)  # it has read net.py again and waits to rebuild
        during = client.compose(goal, budget=2000, timeout_ms=GUARD_S * 1000)
        (leg,) = during.providers
        assert leg.status == "ok"
        assert leg.note == "answered from its index before 1 changed file(s); rebuilding"
        # The old index's frame of net.py was re-read by the host's verify: dropped, its
        # old bytes never quoted.
        assert "def retry_loop" not in during.prompt
        dropped = {e.frame.frame_id: e.reason for e in during.audit.entries if e.reason}
        assert dropped == {"net.py#L1-2": "source_mismatch"}
        _in_thread(lambda: release.write_bytes(b""))
        _in_thread(done.read_bytes)
        after = client.compose(goal, budget=2000, timeout_ms=GUARD_S * 1000)
        assert after.providers[0].note is None
        assert "gives up after five\n" in after.prompt
