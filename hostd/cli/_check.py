"""``hostd check-provider``: drive any provider through the protocol, print pass/fail.

It needs no config: the provider is the command after ``--``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_json

__all__ = ["add_check_command"]


def add_check_command(sub: Any) -> None:
    check = sub.add_parser(
        "check-provider",
        help="drive a provider through the protocol and print a pass/fail table",
        description="Drive any provider (any registered binding) through handshake, a query, "
        "budget honesty, the kinds filter, malformed-input tolerance, verify honesty and "
        "shutdown; an MCP server (--binding mcp) the way the host uses it: initialize, its "
        "resources and --tool results as frames, budget honesty, the kinds filter, its "
        "file:// ranges against the files, shutdown. "
        "Usage: hostd check-provider [options] -- CMD ARG...",
    )
    check.add_argument(
        "--binding",
        default="jsonrpc",
        help="any registered binding: jsonrpc (default), cgp, mcp, …",
    )
    check.add_argument(
        "--tool",
        action="append",
        default=[],
        help="mcp: a tool to call per query (repeatable; as [provider.mcp] tools)",
    )
    check.add_argument(
        "--arguments",
        action="append",
        default=[],
        type=_json_object,
        help="mcp: the JSON arguments of the --tool in the same position ({query}, {goal})",
    )
    check.add_argument("--goal", default="how is the configuration loaded", help="query goal")
    check.add_argument("--budget", type=int, default=400, help="max_tokens of the test query")
    check.add_argument("--timeout-ms", type=int, default=10_000, help="per-step timeout")
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.add_argument("cmd", nargs=argparse.REMAINDER, help="the provider command after --")
    check.set_defaults(run=_check_provider, needs_config=False)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not JSON") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return value


def _check_provider(_cfg: None, args: argparse.Namespace) -> int:
    from hostd.transport import binding_problem  # the binding registry, loaded when used

    from ._checks import check_provider, render_table

    problem = binding_problem(args.binding)
    if problem is not None:
        sys.stderr.write(f"hostd check-provider: {problem}\n")
        return EXIT_USAGE
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        sys.stderr.write("hostd check-provider: give the provider command after --\n")
        return EXIT_USAGE
    if (args.tool or args.arguments) and args.binding != "mcp":
        sys.stderr.write("hostd check-provider: --tool and --arguments are for --binding mcp\n")
        return EXIT_USAGE
    if len(args.arguments) > len(args.tool):
        sys.stderr.write("hostd check-provider: each --arguments goes with a --tool\n")
        return EXIT_USAGE
    if args.binding == "mcp":
        from hostd.logs import configure_logging

        from ._check_mcp import check_mcp_provider

        # The host's own transport and binding log as they do in the daemon: on stderr,
        # at warning unless told (the table is the report).
        configure_logging(getattr(args, "log_level", None) or "warning")

        arguments = [*args.arguments, *([{}] * (len(args.tool) - len(args.arguments)))]
        tools = [{"name": t, "arguments": a} for t, a in zip(args.tool, arguments, strict=True)]
        results = anyio.run(
            lambda: check_mcp_provider(
                cmd,
                options={"tools": tools},
                goal=args.goal,
                budget=args.budget,
                timeout_s=args.timeout_ms / 1000,
            ),
            backend="asyncio",
        )
    else:
        results = anyio.run(
            lambda: check_provider(
                cmd,
                binding=args.binding,
                goal=args.goal,
                budget=args.budget,
                timeout_s=args.timeout_ms / 1000,
            ),
            backend="asyncio",
        )
    if args.json:
        print_json([r.to_wire() for r in results])
    else:
        sys.stdout.write(render_table(results))
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED
