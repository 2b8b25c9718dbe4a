"""The published ``mcp-server-git`` as a provider: one ``git log`` entry, one frame.

Its ``git_log`` prints each commit as ``Commit:``, ``Author:``, ``Date:`` and
``Message:`` lines and then the message, blank lines and all. The docs' ``git``
provider (docs/mcp.md) composes over a repository whose messages have a subject and
two paragraphs: each frame must hold one whole commit under its ``commit <sha7>``
label, and a new commit, which moves every entry down the answer, must leave the
older commits' frames (id, digest, label) as they were.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.server import Daemon

from .test_binding import config_of, mcp_table, report

pytestmark = pytest.mark.anyio

GOAL = "why must a changed chunker never serve old chunks?"
_FENCE = re.compile(
    r'<frame provider="git" kind="episode" cite="([^"]+)"[^>]*>\n(.*?)\n</frame>',
    re.DOTALL,
)


class Repo:
    """A repository made here, committed to as the test goes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: dict[str, tuple[str, str, str]] = {}  # sha: (subject, body 1, body 2)

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
            cwd=self.path,
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout

    def commit(self, i: int) -> str:
        (self.path / f"chunk{i % 4}.py").write_text(f"STEP = {i}\n" * (i + 1))
        self.git("add", ".")
        subject = f"Drop held chunks when the chunker changes, step {i}"
        first = (
            f"A changed chunker must never serve old chunks: a held range of step {i}"
            " would address other bytes than the ones it was cut from."
        )
        second = f"The digest check catches it now; step {i} only makes the rule explicit."
        trailer = "Signed-off-by: Dev <dev@example.com>"
        self.git("commit", "-q", "-m", subject, "-m", first, "-m", second, "-m", trailer)
        sha = self.git("rev-parse", "HEAD").strip()
        self.messages[sha] = (subject, first, second)
        return sha


@pytest.fixture
def repo(workdir: Path) -> Iterator[Repo]:
    pytest.importorskip("mcp_server_git", reason="mcp-server-git (the dev extra) is not installed")
    path = workdir / "repo"
    path.mkdir()
    made = Repo(path)
    made.git("init", "-q")
    for i in range(6):
        made.commit(i)
    yield made


def _git_provider(workdir: Path, repo: Path) -> Any:
    """docs/mcp.md's ``git`` provider with its ``git_log`` call, this repository's
    absolute path for ``.``. (Its ``git_show`` of ``HEAD`` is one commit, not a
    sequence of records; its header would also be a second ``commit <sha7>`` frame,
    which the prompt labels ``#2`` by rank, so it is left out here.)"""
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    tools = [{"name": "git_log", "arguments": {"repo_path": str(repo), "max_count": 20}}]
    table = mcp_table("git", command, [repo], resources=False, kind="episode", tools=tools)
    return config_of(workdir, table)


def _log_frames(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``git_log`` frames of a composition by label: id, digest, range, content."""
    leg = report(result, "git")
    assert leg["status"] == "ok" and leg["violations"] == [], leg
    content = dict(_FENCE.findall(result["prompt"]))  # by the cite, the citation's label
    frames: dict[str, dict[str, Any]] = {}
    for citation in result["citations"]:
        frame = citation["frame"]
        if frame["provider_id"] != "git":
            continue
        # Several entries when dedup (D2) merged frames of equal content into this one.
        ranges = [p["range"] for p in citation["provenance"] if p["method"] == "tools/call:git_log"]
        assert ranges, citation  # git_log is the only tool called
        assert citation["label"] not in frames, citation["label"]  # one frame per commit
        frames[citation["label"]] = {
            "id": frame["frame_id"],
            "digest": frame["content_digest"],
            "ranges": ranges,
            "content": content[citation["label"]],
        }
    return frames


async def _compose(session: Any) -> dict[str, Any]:
    with anyio.fail_after(120):
        result: dict[str, Any] = await session.call(
            "context/compose", {"goal": GOAL, "budget": 6000}
        )
    return result


async def test_each_git_log_entry_is_one_frame_with_its_commit_line_and_message(
    workdir: Path, repo: Repo
) -> None:
    async with Daemon(_git_provider(workdir, repo.path)).local() as session:
        result = await _compose(session)
    frames = _log_frames(result)
    assert sorted(frames) == sorted(f"commit {sha[:7]}" for sha in repo.messages)
    for sha, (subject, first, second) in repo.messages.items():
        text = frames[f"commit {sha[:7]}"]["content"]
        assert text.startswith(f"Commit: {sha}\nAuthor: Dev\nDate: ")
        assert f"\nMessage: {subject}\n\n{first}\n\n{second}\n\n" in text
        assert text.count("Commit: ") == 1 and text.count("Signed-off-by:") == 1
        assert len(frames[f"commit {sha[:7]}"]["ranges"]) == 1  # one place in the answer
    # Nothing of the log is a frame of its own beside them (a caption, a bare body).
    assert all(label.startswith("commit ") for label in frames)


async def test_a_new_commit_leaves_the_older_commits_frames_as_they_were(
    workdir: Path, repo: Repo
) -> None:
    async with Daemon(_git_provider(workdir, repo.path)).local() as session:
        before = _log_frames(await _compose(session))
        newest = repo.commit(6)  # on top: every older entry moves down the answer
        after = _log_frames(await _compose(session))
    assert set(after) == set(before) | {f"commit {newest[:7]}"}
    for label, frame in before.items():
        assert (after[label]["id"], after[label]["digest"]) == (frame["id"], frame["digest"])
        assert after[label]["content"] == frame["content"]
        assert after[label]["ranges"] != frame["ranges"]  # the lines moved, the frame did not


async def test_git_show_of_one_commit_is_one_record_every_part_named_by_it(
    workdir: Path, repo: Repo
) -> None:
    """``git_show`` prints one commit (``commit <sha>``, ``Author:``, ``Date:``, the
    message indented, then its diff): no header recurs, yet its parts belong to that
    commit, so each is labelled by it and no message paragraph is a frame alone."""
    head = repo.git("rev-parse", "HEAD").strip()
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo.path)]
    show = {"repo_path": str(repo.path), "revision": "HEAD"}
    tools = [{"name": "git_show", "arguments": show}]
    table = mcp_table("git", command, [repo.path], resources=False, kind="episode", tools=tools)
    async with Daemon(config_of(workdir, table)).local() as session:
        result = await _compose(session)
    leg = report(result, "git")
    assert leg["status"] == "ok" and leg["violations"] == [], leg
    labels = [c["label"] for c in result["citations"] if c["frame"]["provider_id"] == "git"]
    assert labels, result["audit"]
    named = re.compile(rf"commit {head[:7]}( \(\d+/\d+\))?(: .+)?")
    assert all(named.fullmatch(label) for label in labels), labels
    quoted = "\n".join(text for _, text in _FENCE.findall(result["prompt"]))
    subject, first, second = repo.messages[head]
    for paragraph in (subject, first, second):
        assert f"    {paragraph}\n" in quoted  # the message, whole, in the composition
