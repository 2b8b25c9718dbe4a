"""``hostd check-provider``: drive any provider through the protocol, print pass/fail.

It needs no config: the provider is the command after ``--``, run as the daemon
would run it from ``hostd.toml`` (``python`` is hostd's own interpreter; the daemon's
scrubbed environment) and held to the daemon's default deadlines (``_checks``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from hostd.config import ProviderSettings

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_json

__all__ = ["add_check_command"]

#: ``--binding mcp``: the one timeout its check holds the handshake and each call to.
_MCP_TIMEOUT_S = 10.0


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
    check.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        help="a call's deadline (default: the daemon's default timeout_ms, "
        f"{ProviderSettings.model_fields['timeout_ms'].default}; mcp: "
        f"{_MCP_TIMEOUT_S * 1000:.0f}, its handshake included)",
    )
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
    from hostd.logs import configure_logging, flush_logs
    from hostd.transport import binding_problem  # the binding registry, loaded when used

    from ._checks import (
        Checked,
        Deadlines,
        check_provider,
        daemon_command,
        render_header,
        render_stderr,
        render_table,
    )

    problem = binding_problem(args.binding)
    if problem is not None:
        sys.stderr.write(f"hostd check-provider: {problem}\n")
        return EXIT_USAGE
    given = list(args.cmd)
    if given and given[0] == "--":
        given = given[1:]
    if not given:
        sys.stderr.write("hostd check-provider: give the provider command after --\n")
        return EXIT_USAGE
    if (args.tool or args.arguments) and args.binding != "mcp":
        sys.stderr.write("hostd check-provider: --tool and --arguments are for --binding mcp\n")
        return EXIT_USAGE
    if len(args.arguments) > len(args.tool):
        sys.stderr.write("hostd check-provider: each --arguments goes with a --tool\n")
        return EXIT_USAGE
    if args.timeout_ms is not None and args.timeout_ms <= 0:
        sys.stderr.write("hostd check-provider: --timeout-ms must be positive\n")
        return EXIT_USAGE
    # Run as the daemon runs it from hostd.toml: "python" is hostd's own interpreter.
    cmd = daemon_command(given)
    timeout_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    # The host's own transport and bindings log as they do in the daemon: on stderr, at
    # warning unless told (the table is the report; a provider's stderr is in it).
    configure_logging(
        getattr(args, "log_level", None) or "warning",
        log_format=getattr(args, "log_format", None) or "auto",
    )
    if args.binding == "mcp":
        from ._check_mcp import check_mcp_provider

        arguments = [*args.arguments, *([{}] * (len(args.tool) - len(args.arguments)))]
        tools = [{"name": t, "arguments": a} for t, a in zip(args.tool, arguments, strict=True)]
        # Its check holds the handshake and each call to one timeout: the daemon's start
        # deadline is not a call's, so it keeps its own default.
        if timeout_s is None:
            timeout_s = _MCP_TIMEOUT_S
            deadlines = Deadlines.of(timeout_s, "the mcp check's default, its handshake included")
        else:
            deadlines = Deadlines.of(timeout_s)
        results = anyio.run(
            lambda: check_mcp_provider(
                cmd,
                options={"tools": tools},
                goal=args.goal,
                budget=args.budget,
                timeout_s=timeout_s,
            ),
            backend="asyncio",
        )
        checked = Checked(results, cmd)
    else:
        deadlines = Deadlines.of(timeout_s)
        checked = anyio.run(
            lambda: check_provider(
                cmd,
                binding=args.binding,
                goal=args.goal,
                budget=args.budget,
                timeout_s=timeout_s,
            ),
            backend="asyncio",
        )
    flush_logs()
    if args.json:
        print_json([r.to_wire() for r in checked.results])
        sys.stderr.write(render_stderr(checked.stderr))
    else:
        sys.stdout.write(
            render_header(given, checked.command, deadlines)
            + render_table(checked.results)
            + render_stderr(checked.stderr)
        )
    return EXIT_OK if all(r.passed for r in checked.results) else EXIT_FAILED
