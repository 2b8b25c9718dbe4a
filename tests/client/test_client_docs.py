"""docs/api.md's client examples run as written against a real daemon: the async client
in an ``async with`` block, shared by concurrent tasks, and a budget that leaves room for
the rest of the model's prompt; a client awaited instead says how it is used."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import Client, ComposeResult, connect
from tests.fixtures.procs import ServeChild

ROOT = Path(__file__).resolve().parents[2]
API_MD = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def _block(marker: str) -> str:
    """The one Python block of docs/api.md that holds ``marker``."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", API_MD, re.S) if marker in b]
    return block


@pytest.fixture
def config() -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="hd-"))  # short: AF_UNIX path limit
    words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "alpha"]
    path = workdir / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{workdir}/run/s.sock"\nstate_dir = "{workdir}/state"\n'
        f'[[provider]]\nid = "alpha"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n',
        encoding="utf-8",
    )
    child = ServeChild(path)
    try:
        assert child.start(60)
        yield path
    finally:
        assert child.stop() == 0
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_async_example_runs_its_tasks_on_one_client(config: Path) -> None:
    env = {**os.environ, "HOSTD_CONFIG": str(config)}
    done = subprocess.run(
        [sys.executable, "-c", _block("async with connect(")],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "where is the retry policy? 3 False",
        "why does the cache miss? 3 False",
    ]


@pytest.mark.anyio
async def test_one_async_client_shared_by_concurrent_tasks_gets_each_its_own_reply(
    config: Path,
) -> None:
    budgets = [300 + 10 * k for k in range(8)]
    got: dict[int, ComposeResult] = {}
    async with connect(config.parent / "run" / "s.sock") as h:

        async def one(budget: int) -> None:
            got[budget] = await h.compose(f"question {budget}", budget=budget)

        async with anyio.create_task_group() as tg:
            for budget in budgets:
                tg.start_soon(one, budget)
    # Each task has the reply to its own call: its budget, a request id of its own.
    assert {b: r.audit.global_budget for b, r in got.items()} == {b: b for b in budgets}
    assert len({r.request_id for r in got.values()}) == len(budgets)


@pytest.mark.anyio
async def test_an_awaited_client_says_it_is_opened_with_async_with(config: Path) -> None:
    with pytest.raises(TypeError, match=r"is not awaited: `async with connect\(\.\.\.\) as"):
        await connect(config.parent / "run" / "s.sock")  # type: ignore[misc]  # the mistake tested


def test_the_budget_example_leaves_room_for_the_system_text_and_the_question(
    config: Path,
) -> None:
    space: dict[str, Any] = {}
    exec(_block("def compose_to_fit("), space)  # the example's definitions, as written

    def canonical(text: str) -> int:  # the daemon's count without a tokenizer
        return -(-len(text.encode("utf-8")) // 4)

    system = "You answer from the evidence below and cite its labels. " * 3
    question = "why does the cache miss?"
    window = 1200
    with Client.connect(config.parent / "run" / "s.sock") as hostd:
        whole, result = space["compose_to_fit"](hostd, system, question, window, canonical)
    assert result.citations and result.prompt in whole
    assert canonical(whole) <= window - space["REPLY_ROOM"]
    assert result.usage is not None and result.usage.prompt is not None
    assert result.usage.prompt.canonical_tokens == canonical(result.prompt)
