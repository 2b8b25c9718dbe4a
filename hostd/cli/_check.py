"""``hostd check-provider``: drive any provider through the protocol, print pass/fail.

It needs no config: the provider is the command after ``--``, run as the daemon
would run it from ``hostd.toml`` (``python`` is hostd's own interpreter; the daemon's
scrubbed environment), or a remote provider's ``--url`` with the config's own keys
for its credential and TLS files, held to the daemon's default deadlines
(``_checks``). ``--provider ID`` reads the config in use and checks that provider
as it is configured there (its command or url, binding, env, cwd, credential,
``timeout_ms`` and ``start_timeout_s``). The human report is the header (what ran,
where, against which deadline, the goal asked), the table and its notes on stdout;
``--json`` puts the rows on stdout and the notes on stderr. The host's own log stays
at error unless ``--log-level`` says otherwise, so no log record lands in the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hostd._defaults import HOST_START_TIMEOUT_S, PROVIDER_TIMEOUT_MS
from hostd._hints import FLAGS
from hostd._root_advice import config_dir

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_json

if TYPE_CHECKING:
    from hostd.engine import ProviderSpec

    from ._checks import Deadlines

__all__ = ["add_check_command"]

#: A remote provider's options, as ``[[provider]]`` spells them: the flag's name.
_REMOTE_FLAGS = {
    "token_env": "--token-env",
    "token_file": "--token-file",
    "ca_file": "--ca-file",
    "client_cert": "--client-cert",
    "client_key": "--client-key",
}


def add_check_command(sub: Any) -> None:
    check = sub.add_parser(
        "check-provider",
        help="drive a provider through the protocol and print a pass/fail table",
        description="Drive any provider (any registered binding) through handshake, a query, "
        "budget honesty, the kinds filter, malformed-input tolerance, verify honesty and "
        "shutdown; an MCP server (--binding mcp) the way the host uses it: initialize, its "
        "resources and --tool results as frames, budget honesty, the kinds filter, its "
        "file:// ranges against the files, shutdown. A remote provider (--url) is reached "
        "over HTTPS as the daemon reaches a [[provider]] url; the checks a process alone "
        "can show (malformed input on its stdin, shutdown) are skipped. "
        "Usage: hostd check-provider [options] -- CMD ARG... | --url URL | --provider ID",
    )
    check.add_argument(
        "--binding",
        default=None,
        help="any registered binding: jsonrpc (default), cgp, mcp, …",
    )
    check.add_argument(
        "--url",
        help="a remote provider's https:// URL (http:// to loopback only), checked instead "
        "of a command",
    )
    check.add_argument(
        "--token-env", metavar="NAME", help="--url: the variable holding its bearer token"
    )
    check.add_argument(
        "--token-file", metavar="PATH", help="--url: the file holding its bearer token"
    )
    check.add_argument(
        "--ca-file", metavar="PATH", help="--url: the CA(s) to trust instead of the system's"
    )
    check.add_argument("--client-cert", metavar="PATH", help="--url: mutual TLS certificate")
    check.add_argument("--client-key", metavar="PATH", help="--url: mutual TLS key")
    check.add_argument(
        "--provider",
        metavar="ID",
        help="check the provider of this id in the config in use (hostd --config PATH), "
        "command or url, as configured there",
    )
    check.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,  # as hostd --config (the top-level option's default)
        help="--provider: the config file (default: the one hostd would use)",
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
    check.add_argument(
        "--query-text",
        metavar="TEXT",
        default=None,
        help="the queries' query_text (default: none, as the daemon sends for a plain "
        "`hostd compose GOAL`; providers then search for the goal)",
    )
    check.add_argument("--budget", type=int, default=400, help="max_tokens of the test query")
    check.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        help="a call's deadline (default: the daemon's default timeout_ms, "
        f"{PROVIDER_TIMEOUT_MS}; --provider: its configured one)",
    )
    check.add_argument(
        "--start-timeout-s",
        metavar="S",
        type=float,
        default=None,
        help="the handshake's deadline, as start_timeout_s (default: the daemon's, "
        f"{HOST_START_TIMEOUT_S:g}, or --timeout-ms when "
        "longer; --provider: its configured one)",
    )
    check.add_argument(
        "--env",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        type=_env_entry,
        help="a variable for the provider under test (repeatable; as [provider.env]): "
        "it runs in the daemon's scrubbed environment, so your shell's variables do not "
        "reach it",
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


def _env_entry(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--env``: a name, then its value (which may hold ``=``)."""
    name, eq, value = text.partition("=")
    if not eq or not name or "\0" in text:
        raise argparse.ArgumentTypeError("not NAME=VALUE")
    return name, value


def _check_provider(_cfg: None, args: argparse.Namespace) -> int:
    from hostd.engine import ProviderSpec
    from hostd.logs import configure_logging, flush_logs

    from ._checks import Deadlines

    given = list(args.cmd)
    if given and given[0] == "--":
        given = given[1:]
    problem = _usage_problem(args, given)
    if problem is not None:
        sys.stderr.write(f"hostd check-provider: {problem}\n")
        return EXIT_USAGE
    timeout_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    spec: ProviderSpec | None = None
    deadlines, said = Deadlines.of(timeout_s, start_asked=args.start_timeout_s), ""
    roots: list[Path] | None = None  # a command alone: which roots the daemon gives it is unknown
    base: Path | None = None  # the config's directory, a relative root's base
    if args.provider is not None:
        found = _configured(args, timeout_s)
        if isinstance(found, str):
            sys.stderr.write(f"hostd check-provider: {found}\n")
            return EXIT_USAGE
        spec, deadlines, said, roots, base = found
    elif args.url is not None:
        remote = {key: getattr(args, key) for key in _REMOTE_FLAGS}
        spec = ProviderSpec("check", url=args.url, binding=args.binding or "jsonrpc", **remote)
    # The host's own transport and bindings log as they do in the daemon, on stderr, but
    # at error unless told (--log-level), as the commands that report every failure
    # themselves: the table is the report, and what the log would say of the provider
    # (its stderr, how much of it the rate limit drops) is in it, in words.
    configure_logging(
        getattr(args, "log_level", None) or "error",
        log_format=getattr(args, "log_format", None) or "auto",
    )
    if spec is not None and spec.remote:
        status = _check_remote(spec, args, deadlines, said)
    else:
        status = _check_command(given, spec, args, deadlines, said, roots, base)
    flush_logs()
    return status


def _usage_problem(args: argparse.Namespace, given: list[str]) -> str | None:
    """What is wrong with how check-provider was called, or ``None``."""
    from hostd.transport import binding_problem, remote_url_problem  # loaded when used

    if given and given[0].lower().startswith(("https://", "http://")):
        # Never echoed: a URL may carry a credential (C8).
        return "a URL is not a command: check a remote provider with --url URL"
    targets = [bool(given), args.url is not None, args.provider is not None]
    if sum(targets) != 1:
        how = "the provider command after --, --url URL or --provider ID"
        return f"give {'one of ' if sum(targets) > 1 else ''}{how}"
    remote = [flag for key, flag in _REMOTE_FLAGS.items() if getattr(args, key) is not None]
    if args.env and args.url is not None:
        return "--env: only for a command (a remote provider has no process here)"
    if remote and args.url is None:
        return f"{', '.join(remote)}: only with --url"
    if args.token_env is not None and args.token_file is not None:
        return "give --token-env or --token-file, not both"
    if (args.client_cert is None) != (args.client_key is None):
        return "--client-cert and --client-key go together"
    if args.provider is not None and (args.binding or args.tool or args.arguments):
        return "--provider ID takes its binding and its options from the config"
    binding = args.binding or "jsonrpc"
    if args.url is not None:
        problem = remote_url_problem(args.url)  # C7, C8: the config's rule, and the transport's
        if problem is not None:
            return f"--url: {problem}"
    problem = binding_problem(binding, remote=args.url is not None)
    if problem is not None:
        return problem
    if (args.tool or args.arguments) and binding != "mcp":
        return "--tool and --arguments are for --binding mcp"
    if len(args.arguments) > len(args.tool):
        return "each --arguments goes with a --tool"
    if args.timeout_ms is not None and args.timeout_ms <= 0:
        return "--timeout-ms must be positive"
    if args.start_timeout_s is not None and not args.start_timeout_s > 0:
        return "--start-timeout-s must be positive"
    if binding == "mcp" and args.query_text is not None:
        # Its check fills {query} from --goal.
        return "--query-text: --binding mcp asks its tools with --goal"
    if binding == "mcp" and args.provider is None:
        # The config's rule (C1): a check that passes means the daemon would run it too.
        from pydantic import ValidationError

        from hostd.config import McpSettings

        from ._checks import provider_name

        try:
            settings = McpSettings.model_validate(_mcp_options(args))
        except ValidationError as exc:  # an empty --tool: said as the config says it
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            return f"--tool, --arguments: mcp.{where}: {error['msg']}"
        return settings.egress_problem(provider_name(given))
    return None


def _mcp_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``[provider.mcp]`` options that ``--tool`` and ``--arguments`` spell."""
    arguments = [*args.arguments, *([{}] * (len(args.tool) - len(args.arguments)))]
    tools = zip(args.tool, arguments, strict=True)
    return {"tools": [{"name": t, "arguments": a} for t, a in tools]}


def _configured(
    args: argparse.Namespace, timeout_s: float | None
) -> tuple[ProviderSpec, Deadlines, str, list[Path], Path | None] | str:
    """The provider ``--provider`` names in the config in use, the daemon's deadlines
    for it (``--timeout-ms`` wins over its ``timeout_ms``), the line saying where it
    came from, the trusted roots its ``file`` sources are re-read under (none: never
    re-read) and the config's directory (``hostd._root_advice.config_dir``); or why it cannot be
    checked. A bad config raises ``ConfigError``."""
    from hostd.config import load_config

    from ._checks import Deadlines

    cfg = load_config(args.config)
    specs = {spec.id: spec for spec in cfg.provider_specs()}
    spec = specs.get(args.provider)
    if spec is None:
        ids = ", ".join(sorted(specs)) or "none"
        return f"no provider {args.provider!r} in {cfg.source} (its providers: {ids})"
    if spec.binding == "mcp" and args.query_text is not None:
        return f"--provider {spec.id}: the mcp check asks its tools with --goal"
    of = f"of [[provider]] {spec.id}"
    if spec.start_timeout_s is not None:
        start_s, start_why = spec.start_timeout_s, f"start_timeout_s {of}"
    else:
        start_s, start_why = cfg.host.start_timeout_s, f"host.start_timeout_s in {cfg.source}"
    deadlines = Deadlines.of(
        spec.timeout_ms / 1000 if timeout_s is None else timeout_s,
        f"timeout_ms {of}" if timeout_s is None else None,
        start_s=start_s,
        start_why=start_why,
        start_asked=args.start_timeout_s,
    )
    said = f"provider {spec.id} of {cfg.source}\n"
    return spec, deadlines, said, cfg.roots_of(spec.id), config_dir(cfg.source)


def _check_remote(
    spec: ProviderSpec, args: argparse.Namespace, deadlines: Deadlines, said: str
) -> int:
    from ._checks import check_remote_provider, render_remote_header, render_table

    checked = anyio.run(
        lambda: check_remote_provider(
            spec,
            goal=args.goal,
            budget=args.budget,
            deadlines=deadlines,
            query_text=args.query_text,
            # Given by flags (--ca-file), its options are named as the flags, not as keys.
            section=FLAGS if args.url is not None else None,
        ),
        backend="asyncio",
    )
    # A credential file others may read, in the daemon's words (config.secret_file_open).
    from hostd.config import secret_file_open, secret_file_words, secret_files_open

    flags = args.url is not None
    named = [
        ("--token-file" if flags else f"provider {spec.id}: token_file", spec.token_file),
        ("--client-key" if flags else f"provider {spec.id}: client_key", spec.client_key),
    ]
    files = [(key, None if path is None else Path(path)) for key, path in named]
    warned = "".join(
        secret_file_words(secret_file_open(*found)) + "\n" for found in secret_files_open(files)
    )
    if args.json:
        sys.stderr.write(warned)  # stdout is the rows' JSON
        print_json([r.to_wire() for r in checked.results])
    else:
        header = render_remote_header(
            spec,
            deadlines,
            goal=args.goal,
            budget=args.budget,
            query_text=args.query_text,
            section=FLAGS if flags else None,  # named as the flags that gave them
        )
        sys.stdout.write(said + warned + header + render_table(checked.results))
    return EXIT_OK if all(r.passed for r in checked.results) else EXIT_FAILED


def _check_command(
    given: list[str],
    spec: ProviderSpec | None,
    args: argparse.Namespace,
    deadlines: Deadlines,
    said: str,
    roots: Sequence[Path] | None = None,
    base: Path | None = None,
) -> int:
    """Check the command after ``--``, or the configured one of ``spec`` (its binding,
    options, cwd and env, ``roots``: the trusted roots the config gives it, and ``base``:
    the config's directory)."""
    from ._checks import (
        Checked,
        check_provider,
        daemon_command,
        provider_name,
        render_header,
        render_notes,
        render_stderr,
        render_table,
    )

    binding = args.binding or "jsonrpc"
    options: dict[str, Any] = {}
    cwd: str | None = None
    env: dict[str, str] = {}
    # Known by its configured id, else by its command's name (in the log, as in the daemon's).
    pid = provider_name(given)
    if spec is not None:
        given, binding, options = list(spec.command), spec.binding, dict(spec.options)
        env, cwd = dict(spec.env), None if spec.cwd is None else str(spec.cwd)
        pid = spec.id
    env.update(args.env)  # --env, over its [provider.env]
    # Run as the daemon runs it from hostd.toml: "python" is hostd's own interpreter.
    cmd = daemon_command(given, cwd)
    if binding == "mcp":
        from ._check_mcp import check_mcp_provider

        if spec is None:
            options = _mcp_options(args)
        results = anyio.run(
            lambda: check_mcp_provider(
                cmd,
                options=options,
                goal=args.goal,
                budget=args.budget,
                deadlines=deadlines,
                cwd=cwd,
                env=env,
                provider_id=pid,
            ),
            backend="asyncio",
        )
        checked = Checked(results, cmd)
    else:
        checked = anyio.run(
            lambda: check_provider(
                cmd,
                binding=binding,
                goal=args.goal,
                budget=args.budget,
                deadlines=deadlines,
                cwd=cwd,
                env=env,
                provider_id=pid,
                query_text=args.query_text,
                configured=spec is not None,
                roots=roots,
                base=base,
            ),
            backend="asyncio",
        )
    notes = render_stderr(checked.stderr, checked.results) + render_notes(checked)
    if args.json:
        print_json([r.to_wire() for r in checked.results])
        sys.stderr.write(notes)
    else:
        header = render_header(
            given,
            checked.command,
            deadlines,
            cwd=cwd,
            goal=args.goal,
            budget=args.budget,
            query_text=args.query_text,
            given_env=[name for name, _ in args.env],
        )
        sys.stdout.write(said + header + render_table(checked.results) + notes)
    return EXIT_OK if all(r.passed for r in checked.results) else EXIT_FAILED
