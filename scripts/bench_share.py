#!/usr/bin/env python3
"""The budget a composition fills while one provider warms: this checkout against another.

A walkthrough's daemon (``hostd init``'s ``files`` over the other checkout's ``docs/``, the
same tree for both sides, and an empty ``memory``, a provider of the user's own with one
short frame to give, and a ``semantic`` still building its index:
``tests.fixtures.warming_provider``, its warm-up held for the whole run), composing one
question at each budget with ``strategy = "rrf"`` and the default overfetch 2. Each
side's ``hostd serve`` runs from its own checkout; the other providers' starts are
waited for (and the warming one seen warming) before any composition is counted. Also
composed, as the reference the walkthrough compared with: the same question with
``files`` and ``memory`` alone.

    git worktree add /tmp/base <commit>
    python scripts/bench_share.py /tmp/base [--budgets 800 2000]

Prints, as JSON, per side and budget: ``tokens_used`` of the budget, and each provider's
share, ask and included frames.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _serving import serving_daemon  # noqa: E402 - after the path set-up

from hostd.client import connect  # noqa: E402 - after this checkout is put first

GOAL = "how is the budget split between providers and what is each one asked for"


def _config(workdir: Path, checkout: Path, corpus: Path) -> Path:
    providers = {
        "files": ["python", "-m", "providers.files", "--root", str(corpus)],
        "memory": ["python", "-m", "providers.memory", "--db", str(workdir / "memory.db")],
        "mine": ["python", "-m", "tests.fixtures.healthy_provider", "--name", "mine"]
        + ["--frames", "1", "--size", "120"],
        "semantic": ["python", "-m", "tests.fixtures.warming_provider"]
        + ["--warm-gate", str(workdir / "never")],
    }
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        'strategy = "rrf"',
    ]
    for pid, command in providers.items():
        lines += [
            "[[provider]]",
            f'id = "{pid}"',
            f"command = {orjson.dumps(command).decode()}",
            f'cwd = "{checkout}"',
            "timeout_ms = 60000",
        ]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _figures(result: Any) -> dict[str, Any]:
    audit = result.audit
    included: dict[str, int] = {}
    for entry in audit.included():
        included[entry.provider] = included.get(entry.provider, 0) + 1
    legs = {
        r.provider_id: {
            "status": r.status,
            "share": r.share,
            "asked": r.max_tokens,
            **({"share_apart": r.share_apart} if getattr(r, "share_apart", None) else {}),
            "offered_tokens": r.tokens_accepted,
            "included": included.get(r.provider_id, 0),
        }
        for r in result.providers
    }
    return {"tokens_used": audit.tokens_used, "budget": audit.global_budget, "providers": legs}


async def _state(client: Any, pid: str) -> str:
    return str({p["id"]: p["state"] for p in await client.providers()}[pid])


async def _side(checkout: Path, workdir: Path, budgets: list[int], corpus: Path) -> dict[str, Any]:
    config = _config(workdir, checkout, corpus)
    out: dict[str, Any] = {}
    async with serving_daemon(config, checkout):
        async with connect(workdir / "run" / "hostd.sock") as client:
            # Every provider but the warming one up and ready (no timeout: their starts are
            # waited for), the warming one handshaken and warming.
            await client.compose(GOAL, budget=800, providers=["files", "memory", "mine"])
            with anyio.fail_after(120):
                # Polled: what is measured is the compositions after it, not this wait.
                while await _state(client, "semantic") != "warming":  # noqa: ASYNC110 - no event to wait on from a client
                    await anyio.sleep(0.1)
            for budget in budgets:
                every = await client.compose(GOAL, budget=budget, ready_wait_ms=0)
                alone = await client.compose(GOAL, budget=budget, providers=["files", "memory"])
                out[str(budget)] = {"all four": _figures(every), "files+memory": _figures(alone)}
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the other checkout (before)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[800, 2000])
    parser.add_argument("--corpus", type=Path, help="files' root (default: BASE/docs)")
    args = parser.parse_args()
    sides = {"before": args.base.resolve(), "after": ROOT}
    # One corpus for both sides: the other checkout's docs/ (this one's may differ).
    corpus = (args.corpus or args.base / "docs").resolve()
    report: dict[str, Any] = {}
    for name, checkout in sides.items():
        with tempfile.TemporaryDirectory(prefix=f"bench-share-{name}-") as tmp:
            report[name] = await _side(checkout, Path(tmp), args.budgets, corpus)
    sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    anyio.run(main)
