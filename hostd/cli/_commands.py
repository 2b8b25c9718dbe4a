"""The daemon's own commands: ``serve``, ``compose``, ``providers``, ``mcp`` (and
``consent``, registered from ``_consent``).

Each is registered here with its options and run by the handler beside it
(``set_defaults(run=…)``); ``_main`` only parses and reports errors. An empty
prompt from ``compose`` is exit status 1, saying leg by leg why (``_outcome``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
from anyio.abc import TaskStatus

from hostd._citations import ranked_citations
from hostd._defaults import HOST_OVERFETCH, PROVIDER_TIMEOUT_MS
from hostd._hints import (
    RESTARTING,
    absorbed_words,
    failure_tail_lines,
    one_shot_words,
    said_once,
    shown_stderr_tail,
)
from hostd._log import INFO, WARNING
from hostd._log import level as log_level
from hostd._root_advice import config_dir
from hostd.errors import HostdError

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    anchors_arg,
    asks_reranker,
    config_source,
    connect_arg,
    csv_arg,
    duration,
    print_json,
    session,
    strategy_arg,
    unloaded_error,
    unloaded_note,
)
from ._consent import add_consent_command
from ._outcome import (
    config_option,
    dropped_frames,
    frames_cap_note,
    interpreter_advice,
    leg_failures,
    no_evidence,
    policy_fallback,
    warming_lines,
)
from ._quality import caps_arg, floors_arg, overfetch_note
from ._ready import ReadySignal
from ._warm import ProgressBars, forward_progress

if TYPE_CHECKING:  # the models load with the config a command reads, not with --help
    from hostd.config import Config

__all__ = ["add_core_commands", "audit_summary"]

_T = TypeVar("_T")


def add_core_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve``, ``compose``, ``providers``, ``consent`` and ``mcp``."""
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
    serve.add_argument(
        "--ready-file",
        type=Path,
        metavar="PATH",
        help="write PATH (JSON: pid, socket, tcp, config) once serving; removed on stop "
        "(READY=1 goes to $NOTIFY_SOCKET too when a service manager set it)",
    )
    serve.set_defaults(run=_serve)

    compose = sub.add_parser(
        "compose",
        parents=[common],
        help="compose a prompt for a goal (one shot)",
        description="Start the configured providers (only those of --providers, when "
        "given), compose for GOAL, print the prompt (or the whole ComposedPrompt with "
        "--json).",
    )
    compose.add_argument("goal", help="what the agent is trying to do")
    compose.add_argument(
        "--budget",
        type=int,
        metavar="N",
        help="the most tokens the prompt may cost, all providers together "
        "(default: the config's host.default_budget, 4000 unless set)",
    )
    compose.add_argument(
        "--strategy",
        metavar="S",
        help="how the evidence is ranked across providers (default: the config's "
        "host.strategy, score unless set): score | round_robin | quota:K "
        "| rrf[:k=N,PROVIDER=W] | margin[:k=N,PROVIDER=W] | mmr[:lambda=L] | calibrated "
        "| rerank | a JSON object (docs/cli.md)",
    )
    compose.add_argument(
        "--placement",
        choices=("edges", "ranked", "grouped", "canonical"),
        help="the order of the evidence in the prompt: edges (default) the best first and "
        "the next best last, ranked best first, grouped by provider, canonical by frame id "
        "(docs/mcp.md)",
    )
    compose.add_argument(
        "--providers", metavar="IDS", help="ask only these providers (comma-separated ids)"
    )
    compose.add_argument(
        "--kinds",
        metavar="KINDS",
        help="ask only for frames of these kinds (comma-separated: snippet,doc,fact,…)",
    )
    compose.add_argument(
        "--query-text", metavar="TEXT", help="what the providers search for (default: the goal)"
    )
    compose.add_argument(
        "--as-of",
        metavar="WHEN",
        help="compose from what was true at this instant, YYYY-MM-DDTHH:MM:SS(.f)Z, UTC "
        "(default: now); providers that keep history, as the memory provider does, answer "
        "with what was valid then",
    )
    compose.add_argument(
        "--anchor",
        action="append",
        dest="anchors",
        metavar="PATH",
        help="a file or directory the agent works on, handed to every provider as a query "
        "anchor (repeat for more): a file:// URI, an absolute path, a path from the current "
        "directory, or one under the provider's root; the bundled files and semantic "
        "providers rank its chunks first",
    )
    compose.add_argument(
        "--max-frames",
        type=int,
        metavar="N",
        help="the most frames each provider may offer (default: 64)",
    )
    compose.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help="each provider's deadline for its answer (one shot: after it has started; "
        "default: each provider's own timeout_ms in its [[provider]], "
        f"{PROVIDER_TIMEOUT_MS} unless set)",
    )
    compose.add_argument(
        "--ready-wait-ms",
        type=_ready_wait_ms,
        metavar="MS",
        help="how long to wait for providers still starting or warming up before "
        "answering with the ready ones, the rest said warming (0 to 600,000; default: each "
        "one's start deadline; with --timeout-ms, this bounds the wait and that the query)",
    )
    compose.add_argument(
        "--overfetch",
        type=float,
        metavar="F",
        help="ask each provider for share × F tokens (default: the strategy's own, as "
        "[reranker] overfetch for rerank, else [host] overfetch, "
        f"{HOST_OVERFETCH} unless set)",
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
    connect_arg(compose)
    compose.set_defaults(run=_compose, connected_socket_only=True)

    providers = sub.add_parser(
        "providers",
        parents=[common],
        help="list the configured providers",
        description="List providers: id, binding, name/version, state, health.",
    )
    providers.add_argument("--json", action="store_true", help="print JSON")
    connect_arg(providers)
    providers.set_defaults(run=_providers, connected_socket_only=True)
    restart = providers.add_subparsers(dest="providers_command", metavar="COMMAND").add_parser(
        "restart",
        help="restart one provider now (a failed one too)",
        description="Stop the provider if it runs, forget its failures and start it now.",
    )
    restart.add_argument("id", help="the provider's id")
    restart.add_argument("--json", action="store_true", help="print its row as JSON")
    connect_arg(restart)

    add_consent_command(sub, common)

    mcp = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the client API as an MCP server on stdio (docs/mcp.md)",
        description="An MCP server on stdin/stdout with five tools, compose_context, "
        "list_providers, report_used_evidence, remember and forget_memory: over an "
        "in-process daemon from the "
        "config, or a running one (--connect). Logs go to stderr.",
    )
    connect_arg(mcp)
    mcp.add_argument(
        "--ready-wait-ms",
        type=_ready_wait_ms,
        default=MCP_READY_WAIT_MS,
        metavar="MS",
        help="how long a compose_context call waits for providers still starting or "
        "warming up before it answers with the ready ones, the rest said warming "
        f"(default: {MCP_READY_WAIT_MS}, within an MCP client's usual 5 s timeout; "
        "a call that names ready_wait_ms or timeout_ms decides for itself)",
    )
    mcp.set_defaults(run=_mcp, connected_socket_only=True)


#: ``hostd mcp``'s wait for providers that are not ready, in ms. MCP clients give a
#: tool call a few seconds (openai-agents: 5 s, ``client_session_timeout_seconds``),
#: while a first start may load a model and embed a tree for half a minute: 3 s leaves
#: the ready providers' queries and the composition time to answer within such a
#: timeout, and the model reads which providers are still warming and may call again.
MCP_READY_WAIT_MS = 3000


def _ready_wait_ms(value: str) -> int:
    """``--ready-wait-ms``: the API's bounds (``ready_wait_ms``), refused at start."""
    try:
        ms = int(value)
    except ValueError:
        ms = -1
    if not 0 <= ms <= 600_000:
        raise argparse.ArgumentTypeError(
            f"got {value!r}; expected an integer from 0 to 600,000 (milliseconds)"
        )
    return ms


def audit_summary(result: dict[str, Any]) -> str:
    """One line: included/excluded counts by reason, tokens, providers' statuses (with
    how many of each one's offered frames were included), what
    left the composition short (``degraded_reasons``; ``no`` when it is whole), and a
    ``rerank`` or ``calibrated`` policy's fallback and its reason."""
    audit = result.get("audit") or {}
    entries = audit.get("entries") or []
    included = sum(1 for e in entries if e.get("disposition") == "included")
    reasons: dict[str, int] = {}
    for e in entries:
        if e.get("disposition") != "included":
            reasons[str(e.get("reason"))] = reasons.get(str(e.get("reason")), 0) + 1
    # Whose frames another provider's block took in, and which (``ok(0 of 2)`` alone
    # does not say): "contained_in 2 (scripts 2 in files package.json L23-34)".
    absorbed = absorbed_words(result)
    excluded = (
        ", ".join(
            f"{r} {n}" + (f" ({absorbed[r]})" if r in absorbed else "")
            for r, n in sorted(reasons.items())
        )
        or "none"
    )
    per_provider: dict[str, int] = {}
    for e in entries:
        if e.get("disposition") == "included":
            pid = (e.get("frame") or {}).get("provider_id", e.get("provider", "?"))
            per_provider[pid] = per_provider.get(pid, 0) + 1
    # Included of offered: "files=ok(0 of 3)" is a provider whose frames another's
    # copies outranked (duplicates, budget), not one that found nothing ("ok(0)"); and
    # how many were dropped for what it sent ("ok(0 of 18, 18 dropped)"): not outranked.
    faults = dropped_frames(result)
    provs = ", ".join(
        f"{pid}={p.get('status')}({per_provider.get(pid, 0)}"
        + (f" of {p['frames_offered']}" if p.get("frames_offered") else "")
        + (f", {n} dropped" if (n := sum(faults.get(str(pid), {}).values())) else "")
        + ")"
        for p in result.get("providers") or []
        for pid in [p.get("provider_id", p.get("id"))]
    )
    degraded = ", ".join(_degraded(d) for d in result.get("degraded_reasons") or [])
    fallback = policy_fallback(result)  # the ranking asked for did not rank: say so
    return (
        f"audit: {len(entries)} offered, {included} included, excluded: {excluded}; "
        f"tokens {audit.get('tokens_used')}/{audit.get('global_budget')}; "
        f"providers: {provs or 'none'}; degraded: {degraded or 'no'}; "
        + (f"policy: {fallback}; " if fallback else "")
        + f"request {result.get('request_id')}"
    )


def _one_shot(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with each leg's error message in a one-shot command's words
    (``one_shot_words``), for the lines on stderr; the reply itself is not changed."""
    legs = []
    for p in result.get("providers") or []:
        error = p.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            p = {**p, "error": {**error, "message": one_shot_words(error["message"])}}
        legs.append(p)
    return {**result, "providers": legs}


def _degraded(reason: dict[str, Any]) -> str:
    """One of ``degraded_reasons`` as the audit line says it: its reason and provider,
    and what the reason and the leg's status alone do not say: for
    ``frames_unverified`` the checks its frames failed (``source_mismatch``: the digest
    is not the file's), for a crash loop's ``provider_failed`` its ``restarting`` (its
    leg is ``crashed``, as after one crash)."""
    said, pid, detail = str(reason.get("reason")), reason.get("provider"), reason.get("detail")
    shown = said == "frames_unverified" or (said == "provider_failed" and detail == RESTARTING)
    if shown and pid and detail:
        return f"{said}({pid}: {detail})"
    return f"{said}({pid})" if pid else said


#: Container allocations (net of frees) between two young collections while serving,
#: against the interpreter's 700: a composition allocates and frees tens of thousands
#: of objects, nearly all freed by their reference counts, so the default ran a young
#: collection every few hundred microseconds to find almost nothing (docs/benchmarks.md).
SERVING_GC_THRESHOLD = (10_000, 20, 20)


def _freeze_boot_heap() -> None:
    """Move everything loaded so far (modules, the config, the models' schemas) out of
    the collector's reach: it lives as long as the process, and a long-running server's
    full collections would otherwise walk it again and again (docs/benchmarks.md: the
    daemon's p99 halves); then collect less often while serving (``SERVING_GC_THRESHOLD``).
    Only the commands that own their process call it."""
    gc.freeze()
    gc.set_threshold(*SERVING_GC_THRESHOLD)


def _serve(cfg: Config, args: argparse.Namespace) -> int:
    from hostd.server import Daemon

    _freeze_boot_heap()

    loaded = cfg  # as the file says: what a reload compares the file with
    updates: dict[str, Any] = {}
    if args.socket:
        updates["socket"] = Path(args.socket).resolve()
    if updates:
        cfg = cfg.model_copy(update={"host": cfg.host.model_copy(update=updates)})
    if args.tcp_port is not None:
        cfg = cfg.model_copy(update={"tcp": cfg.tcp.model_copy(update={"port": args.tcp_port})})
    unix = not args.stdio or bool(args.socket)
    tcp = True if args.tcp else None
    ready_file = args.ready_file.resolve() if args.ready_file else None
    # Once serving (its first log line, host.serving, names the config file): a daemon
    # with no provider says where hostd looked and what to do.
    empty = cfg.no_providers() if not cfg.provider else None
    with ReadySignal(ready_file, cfg.source, empty).held() as ready:
        ready.prepare()
        anyio.run(
            lambda: Daemon(cfg, loaded=loaded).run(
                stdio=args.stdio, unix=unix, tcp=tcp, ready=ready, stopping=ready.stopping
            ),
            backend="asyncio",
        )
    return EXIT_OK


def _default_max_frames() -> int:
    """``context/compose``'s ``max_frames`` when a request names none."""
    from hostd.server import ComposeParams

    default: int = ComposeParams.model_fields["max_frames"].default
    return default


def _check_params(params: dict[str, Any]) -> None:
    """Refuse what the daemon would refuse (``InvalidParam``, the same message) before
    any provider is started for it, or the request sent."""
    from pydantic import ValidationError

    from hostd.errors import params_refused
    from hostd.server import ComposeParams

    try:
        ComposeParams.model_validate(params)
    except ValidationError as exc:
        raise params_refused(ComposeParams, params, exc) from None
    as_of = params.get("as_of")
    if as_of is not None:  # as the pipeline refuses it (Q2/F4), before any provider starts
        from hostd.errors import InvalidParam
        from hostd.protocol import check_timestamp

        bad_time = check_timestamp(as_of, "as_of")
        if bad_time:
            raise InvalidParam(f"invalid params: as_of: {bad_time[0].message}", field="as_of")


def _instant(value: str | None) -> str | None:
    """``--as-of`` as the API takes it: a date or an offset time made its UTC stamp."""
    if value is None:
        return None
    from hostd.protocol import utc_timestamp

    return utc_timestamp(value) or value


async def _compose(cfg: Config, args: argparse.Namespace) -> int:
    optional = {
        "budget": args.budget,
        "strategy": strategy_arg(args.strategy),
        "placement": args.placement,
        "providers": csv_arg(args.providers),
        "kinds": csv_arg(args.kinds),
        "query_text": args.query_text,
        "as_of": _instant(args.as_of),
        "anchors": anchors_arg(args.anchors),
        "max_frames": args.max_frames,
        "timeout_ms": args.timeout_ms,
        "ready_wait_ms": args.ready_wait_ms,
        "overfetch": args.overfetch,
        "caps": caps_arg(args.caps),
        "floors": floors_arg(args.floors),
    }
    params: dict[str, Any] = {"goal": args.goal}
    params.update({k: v for k, v in optional.items() if v is not None})
    _check_params(params)
    if args.connect is None:
        from hostd.server import socket_is_live

        if await anyio.to_thread.run_sync(socket_is_live, cfg.socket_path):
            # This one-shot starts a second set of providers, cold, beside the daemon's.
            sys.stderr.write(
                f"hostd: a daemon is serving this config at {cfg.socket_path}: this answer "
                "starts providers of its own; `hostd compose --connect` asks the daemon's, "
                "warm\n"
            )
    bars = ProgressBars()
    async with session(
        cfg,
        args.connect,
        bars,
        wait=args.wait,
        token_file=args.token_file,
        only=params.get("providers"),
        # One shot, the reranker (a model to load: seconds) starts only for a composition
        # it ranks: the request's strategy, or the config's default when it names none.
        rerank=asks_reranker(params.get("strategy", cfg.host.strategy)),
        unloaded=unloaded_error(args),
    ) as s:
        sys.stderr.write(unloaded_note(args))
        if args.connect is not None and bars.enabled:  # the daemon forwards its progress
            forward = forward_progress(bars)
            result = await s.call("context/compose", params, on_progress=forward)
        else:
            result = await s.call("context/compose", params)
    note = overfetch_note(result) if args.overfetch is not None else None  # the one asked
    if note:
        sys.stderr.write(f"hostd: note: {note}\n")
    capped = frames_cap_note(result, args.max_frames or _default_max_frames())
    if capped:
        sys.stderr.write(f"hostd: note: {capped}\n")
    if args.json:
        # The wire's citations carry no rank (the audit's entries do): each gets its
        # own, so the JSON has the citation fields hostd mcp's structured output has.
        print_json({**result, "citations": ranked_citations(result)})
    else:
        sys.stdout.write(result["prompt"])
        if not result["prompt"].endswith("\n"):
            sys.stdout.write("\n")
        sys.stderr.write(audit_summary(result) + "\n")
    roots = {p.id: cfg.roots_of(p.id) for p in cfg.provider}  # named when they drop frames
    if args.connect is None:  # its providers end with it: a daemon's "run again" is moot
        result = _one_shot(result)
    base = config_dir(cfg.source)  # a root to add is written as the config reads it
    empty = no_evidence(result, roots, base)
    hint = config_option(config_source(cfg, args))  # the user's file, loaded or not
    advice = warming_lines(result, connected=args.connect is not None, config=hint)
    failures = empty if empty is not None else leg_failures(result, roots=roots, base=base)
    failures += interpreter_advice(
        cfg,
        {
            str(p.get("provider_id")): str((p.get("error") or {}).get("message") or "")
            for p in result.get("providers") or []
        },
    )
    if any("provider.stderr" in line for line in failures):
        # The log puts a provider's error report (a traceback, an error line and its
        # stack) at warning and the rest of its stderr at info: say what this log shows.
        if args.connect is not None:  # the provider runs under the daemon: its log has it
            failures.append(
                "what a provider writes on stderr is in the daemon's log "
                "(its [log] file, else its stderr): its errors (a traceback) at warning, "
                "the rest at info"
            )
        elif log_level.at > INFO:  # this log leaves out the rest, or (at error) all of it
            level, shown = (
                ("warning", "its errors") if log_level.at > WARNING else ("info", "the rest")
            )
            failures.append(
                "a provider's errors on stderr (a traceback) are logged at warning, the rest "
                f"at info: `hostd --log-level {level} compose …` shows {shown}"
            )
    for line in [*failures, *advice]:
        sys.stderr.write(f"hostd: {line}\n")
    return EXIT_OK if empty is None else EXIT_FAILED


async def _providers(cfg: Config, args: argparse.Namespace) -> int:
    if getattr(args, "providers_command", None) == "restart":
        connect = args.connect
        if connect is None:
            from hostd.server import socket_is_live

            # A restart is of a running provider: the daemon's, when one serves this
            # config (a one-shot's would start and stop a copy, leaving the daemon's as
            # it was).
            if socket_is_live(cfg.socket_path):
                connect = ""
                sys.stderr.write(
                    f"hostd: a daemon is serving this config at {cfg.socket_path}: "
                    "restarting its provider\n"
                )
        async with session(
            cfg, connect, wait=args.wait, token_file=args.token_file, unloaded=unloaded_error(args)
        ) as s:
            sys.stderr.write(unloaded_note(args))
            row = (await s.call("providers/restart", {"provider": args.id}))["provider"]
        if args.json:
            print_json(row)
        else:
            sys.stdout.write(f"{row.get('id')}\t{row.get('state')}\n")
        return EXIT_OK
    connect = args.connect
    if connect is None:
        from hostd.server import socket_is_live

        # The states worth listing are the running daemon's: a one-shot's would be a
        # fresh copy's, alike in every line, and tell nothing of the daemon's.
        if socket_is_live(cfg.socket_path):
            connect = ""
            sys.stderr.write(
                f"hostd: a daemon is serving this config at {cfg.socket_path}: "
                "listing its providers\n"
            )
    async with session(
        cfg, connect, wait=args.wait, token_file=args.token_file, unloaded=unloaded_error(args)
    ) as s:
        sys.stderr.write(unloaded_note(args))
        result = await s.call("providers/list", {})
    providers = result["providers"]
    reranker = result.get("reranker")  # a daemon older than the key has none to show
    if args.json:
        print_json({"providers": providers, "reranker": reranker})
        return EXIT_OK
    if not providers:
        sys.stdout.write("no providers configured\n")
        if connect is None:  # the config read here is the one that has none
            sys.stderr.write(f"hostd: {cfg.no_providers()}\n")
    for p in providers:
        info = p.get("info") or {}
        # What its handshake said; one that never answered one has no name to show.
        name = f"{info['name']} {info.get('version', '')}".strip() if info.get("name") else "-"
        line = f"{p.get('id')}\t{p.get('binding')}\t{p.get('state')}\t{name}"
        remote = p.get("remote")
        if isinstance(remote, dict):  # the URL, and the credential only as "<redacted>" (C8)
            line += f"\t{remote.get('url')}"
            if remote.get("credential"):
                line += f" bearer {remote['credential']}"
        sys.stdout.write(line + "\n")
        health = p.get("health") or {}
        failure = health.get("last_failure")
        progress = health.get("progress")
        if health.get("readiness") == "failed" and isinstance(progress, dict):
            failure = f"its warm-up failed: {progress.get('message') or 'no reason given'}"
        if failure and p.get("state") != "ready":
            ago = (
                health.get("last_failure_s_ago") if failure == health.get("last_failure") else None
            )
            when = f" ({duration(float(ago))} ago)" if ago is not None else ""
            tail = failure_tail_lines(p)  # what its stderr ended with, a line each
            # Its failure's own excerpt of that stderr, less the lines under it.
            shown = said_once(str(failure), shown_stderr_tail(health.get("stderr_tail")))
            sys.stderr.write(f"hostd: {p.get('id')}: {shown if tail else failure}{when}\n")
            for said in tail:
                sys.stderr.write(f"hostd: {said}\n")
            for line in interpreter_advice(cfg, {str(p.get("id")): str(failure)}):
                sys.stderr.write(f"hostd: {line.strip()}\n")
    if isinstance(reranker, dict):
        _reranker_lines(reranker)
    return EXIT_OK


def _reranker_lines(r: dict[str, Any]) -> None:
    """The ``[reranker]``'s line after the providers' (named as its config table is: a
    provider id cannot hold brackets), with what became of its verdicts and, while it
    cools down (a server) or is parked (a process), when it is tried again; on stderr,
    why the latest ask fell back, or why it is down, as a provider's last failure."""
    health, info = r.get("health") or {}, r.get("info") or {}
    if info.get("name"):  # a process: what its handshake said
        name = f"{info['name']} {info.get('version', '')}".strip()
    else:  # a server: its API and the model asked for
        name = " ".join(str(w) for w in (r.get("api"), r.get("model")) if w) or "-"
    where = "-"
    remote = r.get("remote")
    if isinstance(remote, dict):  # the URL (no query), the credential as "<redacted>" (C8)
        where = str(remote.get("url"))
        if remote.get("credential"):
            where += f" bearer {remote['credential']}"
    figures = [f"asks {r.get('asks', 0)}", f"fallbacks {r.get('fallbacks', 0)}"]
    failures = health.get("consecutive_failures") or 0
    if failures:
        figures.append(f"{failures} failure{'' if failures == 1 else 's'} in a row")
    retry = health.get("retry_in_s")
    if isinstance(retry, int | float):
        again = "next try" if r.get("kind") == "url" else "next start"
        figures.append(f"cooling down: {again} in {retry:.1f} s")
    state = r.get("state")
    line = f"[reranker]\t{r.get('kind')}\t{state}\t{name}\t{where}\t{', '.join(figures)}"
    sys.stdout.write(line + "\n")
    fell_back, failure = r.get("last_fallback"), health.get("last_failure")
    if fell_back:
        sys.stderr.write(f"hostd: [reranker]: the last ask fell back: {fell_back}\n")
    elif failure and state in ("crashed", "failed"):
        sys.stderr.write(f"hostd: [reranker]: {failure}\n")


#: What ``hostd mcp`` needs installed, and how to get it.
_MCP_EXTRA = 'the mcp extra (pip install "/path/to/hostd[mcp]", a checkout or a wheel)'


def _mcp_server() -> Callable[..., Awaitable[None]]:
    """``serve_mcp``: importing it imports the MCP SDK, the longest part of a cold start
    after the providers' own, and most of what ``initialize`` waits for
    (docs/benchmarks.md)."""
    # One import at a time with an MCP provider's binding, which imports the same SDK
    # as providers start beside this thread (``import_one_at_a_time``).
    from hostd.transport.bindings import import_one_at_a_time

    try:
        face = import_one_at_a_time("hostd.mcp._server")  # the module, not a lazy name
    except ImportError as exc:  # installed, yet it does not import (a broken dependency)
        raise HostdError(f"hostd mcp needs {_MCP_EXTRA}: {exc}") from None
    return cast(Callable[..., Awaitable[None]], face.serve_mcp)


@contextlib.asynccontextmanager
async def _loading(
    load: Callable[[], _T], loaded: Callable[[int], None]
) -> AsyncIterator[Callable[[], Awaitable[_T]]]:
    """Run ``load`` in a worker thread while the block runs, so its time overlaps what
    the block does on the event loop (``hostd mcp``: the SDK's import beside the
    providers' start); the block awaits its result, or its exception, with the callable
    given. ``loaded`` is told the milliseconds it took, on the loop, as it ends. Leaving
    the block waits for the thread: an import cannot be stopped halfway."""
    done = anyio.Event()
    outcome: list[tuple[_T | None, Exception | None]] = []

    async def run() -> None:
        started = time.perf_counter()
        try:
            value = await anyio.to_thread.run_sync(load)
        except Exception as exc:  # raised where the block awaits it, not in this task
            outcome.append((None, exc))
        else:
            outcome.append((value, None))
            loaded(round((time.perf_counter() - started) * 1000))
        finally:
            done.set()

    async def result() -> _T:
        await done.wait()
        value, error = outcome[0]
        if error is not None:
            raise error
        return cast(_T, value)

    # The block's own exception is not fed to the task group (it would come back
    # wrapped in an ExceptionGroup): the stack is left with none, and it propagates.
    stack = contextlib.AsyncExitStack()
    tg = await stack.enter_async_context(anyio.create_task_group())
    tg.start_soon(run)
    try:
        yield result
    finally:
        await stack.aclose()


def _sdk_loaded(ms: int) -> None:
    from hostd.logs import flush_logs, get_logger

    get_logger("hostd.cli").info("mcp.sdk.loaded", ms=ms)
    flush_logs()  # said as it happens: a cold start's order is read in the log


async def _forward_hangups(
    backend: Any, where: str, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """``hostd mcp --connect``: its config belongs to the daemon, so SIGHUP asks the
    daemon to read its file again (``host/reload``, as ``hostd reload`` does), over the
    current connection. What it did is logged (``mcp.reload.forwarded``); a reload
    refused (a bad file) or a daemon not reached is logged (``mcp.reload.failed``), and
    the MCP server serves on."""
    from hostd.logs import flush_logs, get_logger

    log = get_logger("hostd.cli")
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        async for _ in signals:
            log.info("host.signal", signal="SIGHUP")
            try:
                said = await backend.call("host/reload")
            except Exception as exc:  # a signal must never end the server: said, served on
                error = exc.message if isinstance(exc, HostdError) else str(exc) or repr(exc)
                log.warning("mcp.reload.failed", trigger="SIGHUP", socket=where, error=error)
            else:
                done = said if isinstance(said, dict) else {}
                log.info(
                    "mcp.reload.forwarded",
                    trigger="SIGHUP",
                    socket=where,
                    started=done.get("started", []),
                    stopped=done.get("stopped", []),
                    restarted=done.get("restarted", []),
                )
            flush_logs()


def _connected(
    cfg: Config, args: argparse.Namespace
) -> Callable[[bool], contextlib.AbstractAsyncContextManager[Any]]:
    """``hostd mcp --connect``'s opener of a connection (``reconnecting``): waiting for a
    daemon that is starting when ``patient``. The note of a config that did not load is
    said once, at the first connection a daemon answers (``unloaded_note``); while none
    does, each call's ``no_daemon`` error names that config's error."""
    unsaid = [unloaded_note(args)]

    @contextlib.asynccontextmanager
    async def connected(patient: bool) -> AsyncIterator[Any]:
        async with session(
            cfg,
            args.connect,
            wait=args.wait if patient else 0,
            token_file=args.token_file,
            unloaded=unloaded_error(args),
        ) as s:
            sys.stderr.write(unsaid.pop() if unsaid else "")
            yield s

    return connected


async def _mcp(cfg: Config, args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:  # said before any provider starts
        raise HostdError(f"hostd mcp needs {_MCP_EXTRA}: no module named 'mcp'")

    from hostd.mcp import reconnecting  # no SDK in it: a light module of hostd's own
    from hostd.rpc import open_stdio, reserve_stdout

    wire = reserve_stdout()  # before any provider starts: only MCP messages reach stdout
    source = config_source(cfg, args)
    config = None if source == "<defaults>" else source
    where = None if args.connect is None else args.connect or str(cfg.socket_path)
    async with (
        _loading(_mcp_server, _sdk_loaded) as server,
        contextlib.AsyncExitStack() as stack,
    ):
        if where is None:
            # Long-lived: providers start as the config says, behind the SDK's import and
            # the first MCP lines, so the client's initialize never waits for a handshake;
            # a call made meanwhile joins their start, as a serving daemon's request does.
            # SIGHUP reloads the config file, as `hostd serve`'s: its client keeps it for
            # hours, and an edit need not wait for the client's restart.
            s = await stack.enter_async_context(
                session(cfg, None, boot=False, behind=True, hangup=True)
            )
        else:
            # Connected at the first call, and again after the daemon restarts.
            s = await stack.enter_async_context(reconnecting(_connected(cfg, args), where))
            # The config is the daemon's: SIGHUP asks it to reload (never the default
            # action, which would end the MCP client's server).
            hangups = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(hangups.cancel_scope.cancel)  # run first as the stack unwinds
            await hangups.start(_forward_hangups, s, where)
        serve_mcp = await server()
        # Once the SDK is in (its modules, its models' schemas): it lives as long as
        # the process.
        _freeze_boot_heap()
        stdio = await open_stdio(0, wire)
        try:
            await serve_mcp(
                s,
                stdio.receive,
                stdio.send,
                max_line_bytes=cfg.host.max_line_bytes,
                config=config,
                connect=where,
                ready_wait_ms=args.ready_wait_ms,
            )
        finally:
            stdio.close()
    return EXIT_OK
