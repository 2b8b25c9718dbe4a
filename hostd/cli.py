"""The ``hostd`` command line: serve, compose, providers, consent, eval, shadow, check-provider.

Owns argument parsing and what each command prints. A bad config or a
refused listener ends with one line on stderr naming the problem and exit
status 2, never a stack trace. ``compose``, ``providers`` and ``consent`` run
in-process against the configured providers (one shot) unless ``--connect``
names a running daemon's socket (none there: exit status 3, naming it). An
empty prompt is exit status 1, saying leg by leg why (``_outcome``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import orjson

import hostd
from hostd._outcome import NoDaemon, config_hint, leg_failures, no_evidence
from hostd._progress_bars import ProgressBars, add_warm_command, forward_progress, warm_command
from hostd._quality_commands import (
    add_quality_commands,
    caps_arg,
    eval_command,
    floors_arg,
    overfetch_note,
    shadow_command,
)
from hostd.config import Config, load_config
from hostd.errors import ConfigError, HostdError

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: ``--connect`` found no daemon answering at the socket.
EXIT_NO_DAEMON = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hostd",
        description="An async context host: fans a query out to Context Graph Protocol "
        "providers, audits and verifies their frames, and composes them into a prompt.",
    )
    parser.add_argument("--version", action="version", version=f"hostd {hostd.__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="config file (default: $HOSTD_CONFIG, else the embedded config/hostd.toml)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="override log.level from the config",
    )
    # The same options after the command word too (`hostd compose --config f.toml …`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file")
    common.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=argparse.SUPPRESS,
        help="override log.level",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="run the daemon",
        description="Run the daemon: JSON-RPC 2.0 on a Unix socket (default), on stdio "
        "(--stdio), and on loopback TCP with a bearer token when [tcp] is enabled.",
    )
    serve.add_argument(
        "--stdio",
        action="store_true",
        help="serve one client on stdin/stdout (no socket unless --socket is given too)",
    )
    serve.add_argument("--socket", metavar="PATH", help="Unix socket path (overrides config)")
    serve.add_argument("--tcp", action="store_true", help="also listen on loopback TCP")
    serve.add_argument("--tcp-port", type=int, metavar="PORT", help="TCP port (overrides config)")

    compose = sub.add_parser(
        "compose",
        parents=[common],
        help="compose a prompt for a goal (one shot)",
        description="Start the configured providers, compose for GOAL, print the prompt "
        "(or the whole ComposedPrompt with --json).",
    )
    compose.add_argument("goal", help="what the agent is trying to do")
    compose.add_argument("--budget", type=int, metavar="N", help="global token budget")
    compose.add_argument(
        "--strategy",
        metavar="S",
        help="score | round_robin | quota:K | rrf[:k=N,PROVIDER=W] | margin[:k=N,PROVIDER=W] "
        "| a JSON object (docs/cli.md)",
    )
    compose.add_argument(
        "--placement", choices=("edges", "ranked", "grouped", "canonical"), help="placement"
    )
    compose.add_argument("--providers", metavar="IDS", help="comma-separated provider subset")
    compose.add_argument("--kinds", metavar="KINDS", help="comma-separated frame kinds")
    compose.add_argument("--query-text", metavar="TEXT", help="query text (default: the goal)")
    compose.add_argument("--max-frames", type=int, metavar="N", help="frames per provider")
    compose.add_argument("--timeout-ms", type=int, metavar="MS", help="per-leg timeout")
    compose.add_argument(
        "--overfetch", type=float, metavar="F", help="ask each provider for share × F tokens"
    )
    compose.add_argument(
        "--caps", metavar="CAPS", help="provider shares of the budget: files=0.5,*=0.3 or JSON"
    )
    compose.add_argument(
        "--floors",
        metavar="PATHS",
        help="files admitted before ranking: a,b or JSON [{label, content}]",
    )
    compose.add_argument("--json", action="store_true", help="print the ComposedPrompt as JSON")
    _connect_arg(compose)

    providers = sub.add_parser(
        "providers",
        parents=[common],
        help="list the configured providers",
        description="List providers: id, binding, name/version, state, health.",
    )
    providers.add_argument("--json", action="store_true", help="print JSON")
    _connect_arg(providers)
    restart = providers.add_subparsers(dest="providers_command", metavar="COMMAND").add_parser(
        "restart",
        help="restart one provider now (a failed one too)",
        description="Stop the provider if it runs, forget its failures and start it now.",
    )
    restart.add_argument("id", help="the provider's id")
    restart.add_argument("--json", action="store_true", help="print its row as JSON")
    _connect_arg(restart)

    consent = sub.add_parser(
        "consent",
        parents=[common],
        help="grant, revoke or list consent receipts (C1, C2, C6)",
        description="Durable consent receipts for providers that send data off the machine.",
    )
    csub = consent.add_subparsers(dest="consent_command", metavar="ACTION", required=True)
    for action, text in (("grant", "record consent"), ("revoke", "revoke consent")):
        p = csub.add_parser(
            action,
            help=text,
            description=f"{text.capitalize()} for a scope.",
            parents=[common],
        )
        p.add_argument("provider", help="provider id")
        p.add_argument("scope", help="egress scope, e.g. a host name")
        p.add_argument("--grantor", default="cli", help="who grants (default: cli)")
        _connect_arg(p)
    lst = csub.add_parser(
        "list", help="list receipts", description="List consent receipts.", parents=[common]
    )
    lst.add_argument("provider", nargs="?", help="only this provider")
    lst.add_argument("--json", action="store_true", help="print JSON")
    _connect_arg(lst)

    add_quality_commands(sub, common, _connect_arg)

    mcp = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the client API as an MCP server on stdio (docs/mcp.md)",
        description="An MCP server on stdin/stdout with the tools compose_context and "
        "list_providers: over an in-process daemon from --config, or a running one "
        "(--connect). Logs go to stderr.",
    )
    _connect_arg(mcp)
    add_warm_command(sub, common)

    check = sub.add_parser(
        "check-provider",
        help="drive a provider through the protocol and print a pass/fail table",
        description="Drive any provider (either binding) through handshake, a query, "
        "budget honesty, the kinds filter, malformed-input tolerance, verify honesty and "
        "shutdown. Usage: hostd check-provider [options] -- CMD ARG...",
    )
    check.add_argument("--binding", choices=("jsonrpc", "cgp"), default="jsonrpc")
    check.add_argument("--goal", default="how is the configuration loaded", help="query goal")
    check.add_argument("--budget", type=int, default=400, help="max_tokens of the test query")
    check.add_argument("--timeout-ms", type=int, default=10_000, help="per-step timeout")
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.add_argument("cmd", nargs=argparse.REMAINDER, help="the provider command after --")
    return parser


def _connect_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--connect",
        nargs="?",
        const="",
        metavar="SOCKET",
        help="use the running daemon (its socket; default: the configured socket)",
    )


# -- helpers ----------------------------------------------------------------------------


def _strategy(value: str | None) -> Any:
    """A ``--strategy`` value as the wire takes it: a text spelling as it is, a JSON
    value decoded; checked by the one parser (``strategy_from_wire``) before any
    provider starts."""
    if value is None:
        return None
    from hostd.compose import strategy_from_wire

    wire = orjson.loads(value) if value.lstrip().startswith(("{", "[", '"')) else value
    strategy_from_wire(wire)
    return wire


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


@contextlib.asynccontextmanager
async def _session(
    cfg: Config, connect: str | None, bars: ProgressBars | None = None, *, boot: bool = True
) -> AsyncIterator[Any]:
    """An object with ``call(method, params)``: a running daemon, or one in-process.
    ``bars`` hears every provider's warm-up progress (in-process; ``--connect`` asks
    the daemon for it per request)."""
    if connect is not None:
        from hostd.client import connect as connect_socket

        path = connect or cfg.socket_path
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(connect_socket(path))
            except OSError as exc:
                raise NoDaemon(
                    f"no daemon at {path} ({exc.strerror or exc}); "
                    f"start one with `hostd serve{config_hint(cfg)}`"
                ) from exc
            yield client
    else:
        from hostd.server import Daemon

        # One shot: start every provider up front, so a slow index build is not a timeout.
        if boot:
            cfg = cfg.model_copy(
                update={"host": cfg.host.model_copy(update={"start_providers": "boot"})}
            )
        daemon = Daemon(cfg)
        async with daemon.local() as local:
            if bars is not None and daemon.host is not None:
                daemon.host.pool.progress_listeners.append(bars)
            try:
                yield local
            finally:
                if bars is not None:
                    bars.close()


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def audit_summary(result: dict[str, Any]) -> str:
    """One line: included/excluded counts by reason, tokens, providers' statuses."""
    audit = result.get("audit") or {}
    entries = audit.get("entries") or []
    included = sum(1 for e in entries if e.get("disposition") == "included")
    reasons: dict[str, int] = {}
    for e in entries:
        if e.get("disposition") != "included":
            reasons[str(e.get("reason"))] = reasons.get(str(e.get("reason")), 0) + 1
    excluded = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items())) or "none"
    per_provider: dict[str, int] = {}
    for e in entries:
        if e.get("disposition") == "included":
            pid = (e.get("frame") or {}).get("provider_id", e.get("provider", "?"))
            per_provider[pid] = per_provider.get(pid, 0) + 1
    provs = ", ".join(
        f"{p.get('provider_id', p.get('id'))}={p.get('status')}"
        f"({per_provider.get(p.get('provider_id', p.get('id')), 0)})"
        for p in result.get("providers") or []
    )
    return (
        f"audit: {len(entries)} offered, {included} included, excluded: {excluded}; "
        f"tokens {audit.get('tokens_used')}/{audit.get('global_budget')}; "
        f"providers: {provs or 'none'}; request {result.get('request_id')}"
    )


# -- commands ---------------------------------------------------------------------------


def _serve(cfg: Config, args: argparse.Namespace) -> int:
    from hostd.server import Daemon

    updates: dict[str, Any] = {}
    if args.socket:
        from pathlib import Path

        updates["socket"] = Path(args.socket).resolve()
    if updates:
        cfg = cfg.model_copy(update={"host": cfg.host.model_copy(update=updates)})
    if args.tcp_port is not None:
        cfg = cfg.model_copy(update={"tcp": cfg.tcp.model_copy(update={"port": args.tcp_port})})
    unix = not args.stdio or bool(args.socket)
    tcp = True if args.tcp else None
    anyio.run(
        lambda: Daemon(cfg).run(stdio=args.stdio, unix=unix, tcp=tcp),
        backend="asyncio",
    )
    return EXIT_OK


async def _compose(cfg: Config, args: argparse.Namespace) -> int:
    optional = {
        "budget": args.budget,
        "strategy": _strategy(args.strategy),
        "placement": args.placement,
        "providers": _csv(args.providers),
        "kinds": _csv(args.kinds),
        "query_text": args.query_text,
        "max_frames": args.max_frames,
        "timeout_ms": args.timeout_ms,
        "overfetch": args.overfetch,
        "caps": caps_arg(args.caps),
        "floors": floors_arg(args.floors),
    }
    params: dict[str, Any] = {"goal": args.goal}
    params.update({k: v for k, v in optional.items() if v is not None})
    bars = ProgressBars()
    async with _session(cfg, args.connect, bars) as s:
        if args.connect is not None and bars.enabled:  # the daemon forwards its progress
            forward = forward_progress(bars)
            result = await s.call("context/compose", params, on_progress=forward)
        else:
            result = await s.call("context/compose", params)
    note = overfetch_note(result)
    if note:
        sys.stderr.write(f"hostd: note: {note}\n")
    if args.json:
        _print_json(result)
    else:
        sys.stdout.write(result["prompt"])
        if not result["prompt"].endswith("\n"):
            sys.stdout.write("\n")
        sys.stderr.write(audit_summary(result) + "\n")
    empty = no_evidence(result)
    for line in empty if empty is not None else leg_failures(result):
        sys.stderr.write(f"hostd: {line}\n")
    return EXIT_OK if empty is None else EXIT_FAILED


async def _providers(cfg: Config, args: argparse.Namespace) -> int:
    if getattr(args, "providers_command", None) == "restart":
        async with _session(cfg, args.connect) as s:
            row = (await s.call("providers/restart", {"provider": args.id}))["provider"]
        if args.json:
            _print_json(row)
        else:
            sys.stdout.write(f"{row.get('id')}\t{row.get('state')}\n")
        return EXIT_OK
    async with _session(cfg, args.connect) as s:
        result = await s.call("providers/list", {})
    providers = result["providers"]
    if args.json:
        _print_json(providers)
        return EXIT_OK
    if not providers:
        sys.stdout.write("no providers configured\n")
    for p in providers:
        info = p.get("info") or {}
        name = f"{info.get('name', '?')} {info.get('version', '')}".strip()
        line = f"{p.get('id')}\t{p.get('binding')}\t{p.get('state')}\t{name}"
        remote = p.get("remote")
        if isinstance(remote, dict):  # the URL, and the credential only as "<redacted>" (C8)
            line += f"\t{remote.get('url')}"
            if remote.get("credential"):
                line += f" bearer {remote['credential']}"
        sys.stdout.write(line + "\n")
        failure = (p.get("health") or {}).get("last_failure")
        if failure and p.get("state") != "ready":
            sys.stderr.write(f"hostd: {p.get('id')}: {failure}\n")
    return EXIT_OK


async def _consent(cfg: Config, args: argparse.Namespace) -> int:
    action = args.consent_command
    async with _session(cfg, args.connect) as s:
        if action == "list":
            result = await s.call(
                "consent/list", {"provider": args.provider} if args.provider else {}
            )
        else:
            result = await s.call(
                f"consent/{action}",
                {"provider": args.provider, "scope": args.scope, "grantor": args.grantor},
            )
    if action == "list" and not args.json:
        receipts = result["receipts"]
        if not receipts:
            sys.stdout.write("no consent receipts\n")
        for r in receipts:
            state = "active" if r.get("active") else f"revoked {r.get('revoked_at')}"
            sys.stdout.write(
                f"{r.get('provider_id')}\t{r.get('scope')}\t{r.get('grantor')}\t"
                f"granted {r.get('granted_at')}\t{state}\n"
            )
    else:
        _print_json(result)
    return EXIT_OK


async def _mcp(cfg: Config, args: argparse.Namespace) -> int:
    try:
        from hostd.mcp import serve_mcp
    except ImportError as exc:
        extra = 'the mcp extra (pip install "hostd[mcp]")'
        raise HostdError(f"hostd mcp needs {extra}: {exc}") from None

    from hostd.server import open_stdio, reserve_stdout

    wire = reserve_stdout()  # before any provider starts: only MCP messages reach stdout
    # Long-lived: providers start as the config says, so the MCP handshake never waits.
    async with _session(cfg, args.connect, boot=False) as s:
        stdio = await open_stdio(0, wire)
        try:
            await serve_mcp(s, stdio.receive, stdio.send, max_line_bytes=cfg.host.max_line_bytes)
        finally:
            stdio.close()
    return EXIT_OK


def _check_provider(args: argparse.Namespace) -> int:
    from hostd._check_provider import check_provider, render_table

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        sys.stderr.write("hostd check-provider: give the provider command after --\n")
        return EXIT_USAGE
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
        _print_json([r.to_wire() for r in results])
    else:
        sys.stdout.write(render_table(results))
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check-provider":
            return _check_provider(args)
        cfg = load_config(args.config)
        from hostd.logs import configure_logging

        level = args.log_level or (cfg.log.level if args.command == "serve" else "warning")
        try:
            configure_logging(level, settings=cfg.log)
        except OSError as err:
            raise ConfigError(
                f"{cfg.source}: log.file: cannot open {cfg.log.file}: {err.strerror or err}",
                file=cfg.source,
                key="log.file",
            ) from err
        if args.command == "serve":
            return _serve(cfg, args)
        if args.command == "shadow":
            return shadow_command(cfg, args)
        runner = {
            "compose": _compose,
            "eval": eval_command,
            "providers": _providers,
            "consent": _consent,
            "warm": warm_command,
            "mcp": _mcp,
        }[args.command]
        return anyio.run(runner, cfg, args, backend="asyncio")
    except BaseExceptionGroup as group:
        # Errors raised inside task groups arrive wrapped; report the first hostd one plainly.
        matched, _rest = group.split(HostdError)
        if matched is None:
            raise
        exc = _first(matched)
        sys.stderr.write(f"hostd: {_one_line(exc)}\n")
        return _exit_status(exc)
    except HostdError as exc:
        sys.stderr.write(f"hostd: {_one_line(exc)}\n")
        return _exit_status(exc)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"hostd: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


def _exit_status(exc: HostdError) -> int:
    if exc.reason in ("bad_config", "listener_failed"):
        return EXIT_USAGE
    return EXIT_NO_DAEMON if isinstance(exc, NoDaemon) else EXIT_FAILED


def _first(group: BaseExceptionGroup[HostdError]) -> HostdError:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, HostdError)
    return exc


def _one_line(exc: HostdError) -> str:
    text = str(exc)
    reason = getattr(exc, "remote_reason", None) or exc.reason
    return f"{text} [{reason}]" if reason and reason not in text else text
