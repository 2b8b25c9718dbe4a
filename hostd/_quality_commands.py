"""The evidence-quality parts of the ``hostd`` CLI: ``eval``, ``shadow replay`` and the
policy options of ``compose`` (``--caps``, ``--floors``, the overfetch note).

Kept beside ``cli`` (which registers and runs them like its own commands) so
the command line module stays small. ``eval`` and ``shadow replay`` print a
table, or JSON with ``--json``; both spell policies as ``--strategy`` does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from hostd.config import Config

__all__ = [
    "add_quality_commands",
    "caps_arg",
    "eval_command",
    "floors_arg",
    "overfetch_note",
    "shadow_command",
]


def caps_arg(value: str | None) -> dict[str, float] | None:
    """``files=0.5,*=0.3`` (or a JSON object) → the ``caps`` param."""
    if value is None:
        return None
    if value.lstrip().startswith("{"):
        caps = orjson.loads(value)
        if not isinstance(caps, dict):
            raise ValueError("--caps: a JSON value must be an object of provider: share")
        return caps
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        provider, sep, share = part.partition("=")
        if not sep or not provider.strip():
            raise ValueError(f"--caps: expected provider=share, got {part!r}")
        try:
            out[provider.strip()] = float(share)
        except ValueError:
            raise ValueError(f"--caps: the share of {provider.strip()!r} is not a number") from None
    return out


def floors_arg(value: str | None) -> list[dict[str, Any]] | None:
    """Comma-separated files, each a floor labelled by its path (or a JSON array of floors)."""
    if value is None:
        return None
    if value.lstrip().startswith("["):
        floors = orjson.loads(value)
        if not isinstance(floors, list):
            raise ValueError("--floors: a JSON value must be an array of {label, content}")
        return floors
    out: list[dict[str, Any]] = []
    for path in filter(None, (p.strip() for p in value.split(","))):
        try:
            content = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--floors: cannot read {path}: {exc}") from None
        out.append({"label": path, "content": content})
    return out


def overfetch_note(result: dict[str, Any]) -> str | None:
    """Why the overfetch of a composition changed nothing, or ``None`` when it did.

    A provider is asked for ``min(budget, ceil(share × overfetch))``: when every
    provider's share already is the whole budget (one provider, say), each is
    asked for exactly its share and the factor is inert.
    """
    overfetch = ((result.get("audit") or {}).get("policy") or {}).get("overfetch")
    if not isinstance(overfetch, int | float) or overfetch <= 1:
        return None
    legs = [
        p
        for p in result.get("providers") or ()
        if p.get("share") is not None and p.get("max_tokens") is not None
    ]
    if not legs or any(p["max_tokens"] > p["share"] for p in legs):
        return None
    asked = ", ".join(f"{p['provider_id']} {p['max_tokens']}" for p in legs)
    return (
        f"overfetch {overfetch:g} cannot change what is asked: every provider's share is "
        f"already the whole budget, so each is asked for just its share ({asked} tokens)"
    )


def add_quality_commands(
    sub: Any,
    common: argparse.ArgumentParser,
    connect_arg: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Register ``eval`` and ``shadow replay`` on the CLI's subparsers."""
    ev = sub.add_parser(
        "eval",
        parents=[common],
        help="recall of each ranking policy on a question set",
        description="Ask every question of a JSONL set ({id, question, gold: [{file, phrase}], "
        "style}) through the configured providers, compose it under each policy and budget "
        "and under each provider alone, and print how often a gold passage reached the prompt, "
        "per style and policy (docs/eval.md).",
    )
    ev.add_argument("--questions", required=True, metavar="PATH", help="the question set")
    ev.add_argument(
        "--budget",
        type=int,
        action="append",
        metavar="N",
        help="global token budget (repeatable; default: the config's default_budget)",
    )
    ev.add_argument(
        "--policy",
        action="append",
        metavar="S",
        help="a strategy as --strategy spells it (repeatable; default: every registered one)",
    )
    ev.add_argument("--providers", metavar="IDS", help="comma-separated provider subset")
    ev.add_argument(
        "--pool-budget",
        type=int,
        metavar="N",
        help="ask the fan-out for N tokens and pack each --budget from that pool "
        "(default: the budget itself)",
    )
    ev.add_argument("--json", action="store_true", help="print the table and outcomes as JSON")
    connect_arg(ev)

    shadow = sub.add_parser(
        "shadow",
        parents=[common],
        help="replay recorded compositions under another policy",
        description="Shadow ranking: with [shadow] enabled the daemon records a sample of "
        "compositions (state_dir/shadow.db); replay composes them again under a policy.",
    )
    ssub = shadow.add_subparsers(dest="shadow_command", metavar="ACTION", required=True)
    replay = ssub.add_parser(
        "replay",
        parents=[common],
        help="compare a policy with the live one on the recorded requests",
        description="Compose every recorded candidate set under --policy and print what it "
        "would have admitted against what the live policy did: overlap, provider mix, the "
        "newly excluded and included frames, tokens.",
    )
    replay.add_argument("--policy", required=True, metavar="S", help="a strategy, as --strategy")
    replay.add_argument("--limit", type=int, metavar="N", help="only the newest N requests")
    replay.add_argument("--json", action="store_true", help="print JSON")


async def eval_command(cfg: Config, args: argparse.Namespace) -> int:
    from hostd import eval as ev
    from hostd.cli import EXIT_OK, _csv, _print_json, _session, _strategy
    from hostd.compose import DEFAULT_STRATEGY, strategy_text

    questions = ev.load_questions(args.questions)
    # _strategy checks each spelling, so a misspelt policy fails before any provider starts
    policies = [ev.Policy(p, _strategy(p)) for p in args.policy or ev.DEFAULT_POLICIES]
    budgets = args.budget or [cfg.host.default_budget]
    if args.pool_budget is not None and args.pool_budget <= 0:
        raise ValueError(f"--pool-budget must be a positive token count, got {args.pool_budget}")
    async with _session(cfg, args.connect) as s:
        outcomes = await ev.run_eval(
            s,
            questions,
            budgets,
            policies,
            providers=_csv(args.providers),
            pool_budget=args.pool_budget,
        )
    # Each policy is also set against the default, question by question.
    baseline = strategy_text(DEFAULT_STRATEGY)
    if args.json:
        _print_json(ev.to_json(questions, outcomes, baseline))
    else:
        sys.stdout.write(ev.render_table(questions, ev.summarise(outcomes)))
        pairs = ev.render_paired(ev.paired(outcomes, baseline))
        if pairs:
            sys.stdout.write("\n" + pairs)
    sys.stderr.write(ev.degraded_note(outcomes))
    return EXIT_OK


def shadow_command(cfg: Config, args: argparse.Namespace) -> int:
    from hostd import shadow
    from hostd.cli import EXIT_OK, _print_json, _strategy

    strategy = _strategy(args.policy)
    records = shadow.ShadowStore(shadow.shadow_path(cfg.state_path)).load(args.limit)
    replays = shadow.replay_all(records, strategy)
    if args.json:
        _print_json(shadow.replay_json(strategy, replays))
    else:
        sys.stdout.write(shadow.render_replay(args.policy, replays))
    return EXIT_OK
