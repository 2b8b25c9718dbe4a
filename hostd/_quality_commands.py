"""The evidence-quality commands of the ``hostd`` CLI: ``eval`` and ``shadow replay``.

Kept beside ``cli`` (which registers them and runs them like its own
commands) so the command line module stays one screenful per command. Both
print a table, or JSON with ``--json``; both spell policies as ``--strategy``
does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from hostd.config import Config

__all__ = ["add_quality_commands", "eval_command", "shadow_command"]


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
    from hostd.compose import strategy_from_wire

    questions = ev.load_questions(args.questions)
    policies = [ev.Policy(p, _strategy(p)) for p in args.policy or ev.DEFAULT_POLICIES]
    for p in policies:
        strategy_from_wire(p.strategy)  # a misspelt policy fails before any provider starts
    budgets = args.budget or [cfg.host.default_budget]
    async with _session(cfg, args.connect) as s:
        outcomes = await ev.run_eval(
            s, questions, budgets, policies, providers=_csv(args.providers)
        )
    if args.json:
        _print_json(ev.to_json(questions, outcomes))
    else:
        sys.stdout.write(ev.render_table(questions, ev.summarise(outcomes)))
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
