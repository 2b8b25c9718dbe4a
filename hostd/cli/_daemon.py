"""``hostd status`` and ``hostd stop``: the running daemon of this config (its socket,
or the one named), asked over its own API.

``status`` prints what ``host/status`` answers (the build, pid, uptime, socket and TCP
listener, the config it runs and whether that file changed since, the request and
connection counters), each provider's state from ``providers/list`` (under one that
is down, what its stderr ended with, as ``hostd providers`` shows it; after one that
is up, its restarts since start, if any) and the ``[reranker]``'s, exit 4 when one is
down; and, on stderr, a daemon that runs another build than the command's own.
``reload`` asks it to read its config file again and apply it (``host/reload``)
and prints what changed; an invalid file is told as a config error (exit 2). Named no
socket, it asks the daemon holding the config's lock wherever that one listens (after
an edit of ``host.socket``: at the old socket, said on stderr).
``stop`` asks for a graceful stop (``host/shutdown``:
in-flight requests finish within the grace period, every provider is shut down)
and says ``stopped`` only once the daemon's process has exited, watched through a
pidfd where the system has one; past ``--timeout`` it says the daemon is still
stopping, with its pid, and exits 1. Where nothing serves the socket both say so,
exit 3 (as does a socket of another user's daemon, which says whose).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hostd._build import build_version
from hostd._hints import down_state, failure_tail_lines, shown_stderr_tail
from hostd.errors import ConfigError, DaemonNotPermitted, HostdError, NoDaemon, RpcError

from ._common import (
    EXIT_DEGRADED,
    EXIT_OK,
    connect_client,
    duration,
    pid_alive,
    print_json,
    stale_config,
    tcp_address,
    time_left,
    token_file_arg,
    unloaded_note,
)

if TYPE_CHECKING:  # the models load with the config a command reads, not with --help
    from hostd.config import Config

__all__ = ["add_daemon_commands"]

#: How long ``stop`` waits for the daemon to exit by default: its grace period (30 s
#: at most by default) and the providers' own shutdown fit well inside.
_STOP_TIMEOUT_S = 60.0
#: Between two looks at a process where no pidfd can be had (not Linux).
_POLL_S = 0.05


class StillStopping(HostdError):
    """``hostd stop``: the daemon acknowledged the stop but had not exited in time."""

    reason = "still_stopping"


_SOCKET_HELP = "its socket, or tcp://HOST:PORT for a daemon shared on loopback TCP"


def add_daemon_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``status``, ``reload`` and ``stop``."""
    status = sub.add_parser(
        "status",
        parents=[common],
        help="show the running daemon of this config",
        description="Show the daemon serving this config's socket (or SOCKET): pid, "
        "uptime, the config it runs, requests in flight, each provider's state and the "
        "reranker's.",
    )
    status.add_argument("socket", nargs="?", metavar="SOCKET", help=_SOCKET_HELP)
    token_file_arg(status)
    status.add_argument("--json", action="store_true", help="print host/status as JSON")
    status.set_defaults(run=_status, socket_only=True)
    stop = sub.add_parser(
        "stop",
        parents=[common],
        help="stop the running daemon of this config",
        description="Stop the daemon serving this config's socket (or SOCKET) gracefully: "
        "requests in flight finish within its grace period, every provider is shut down. "
        "Returns once its process has exited.",
    )
    stop.add_argument("socket", nargs="?", metavar="SOCKET", help=_SOCKET_HELP)
    token_file_arg(stop)
    stop.add_argument(
        "--timeout",
        type=float,
        default=_STOP_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for it to exit (default: {_STOP_TIMEOUT_S:g})",
    )
    stop.set_defaults(run=_stop, socket_only=True)
    reload = sub.add_parser(
        "reload",
        parents=[common],
        help="apply the edited config file to the running daemon",
        description="Ask the daemon serving this config's socket (or SOCKET) to read its "
        "config file again and apply it (as SIGHUP does): providers added are started, "
        "removed ones stopped, changed ones restarted, unchanged ones keep running; "
        "per-request settings apply to the next request; what needs a restart (the "
        "socket, TCP, the log file, ...) is named and kept. An invalid file changes "
        "nothing and is told (exit 2).",
    )
    reload.add_argument("socket", nargs="?", metavar="SOCKET", help=_SOCKET_HELP)
    token_file_arg(reload)
    reload.add_argument("--json", action="store_true", help="print host/reload's reply as JSON")
    # Its own config need not load: the daemon reads the file, and says what is wrong
    # (once: no note of it here first).
    reload.set_defaults(run=_reload, socket_only=True, daemon_reads_config=True)


@contextlib.asynccontextmanager
async def _daemon(
    cfg: Config,
    socket: str | None,
    doing: str,
    token_file: str | None = None,
    note: str = "",
) -> AsyncIterator[Any]:
    """A client of the daemon at ``socket`` (a path, or ``tcp://HOST:PORT`` with its
    token: ``connect_client``), else at this config's socket; not waited for. ``note``
    is said on stderr once it answers (``unloaded_note``)."""
    tcp = tcp_address(socket) is not None
    path = Path(socket) if socket and not tcp else cfg.socket_path
    async with contextlib.AsyncExitStack() as stack:
        try:
            client = await connect_client(stack, socket or "", path, 0.0, token_file)
        except DaemonNotPermitted:
            raise  # a daemon may well be running: whose it is, not "none is running"
        except NoDaemon as exc:
            elsewhere = _serving_elsewhere(cfg, path) if not socket else ""
            where = socket if tcp else path
            raise NoDaemon(
                f"no daemon at {where} ({exc.strerror or exc}): {doing}{elsewhere}"
            ) from exc
        sys.stderr.write(note)
        yield client


def _serving_at(cfg: Config, path: Path) -> tuple[str, object, str] | None:
    """``(socket, pid, state_dir)`` of the daemon holding the config's lock when it
    listens on another socket than ``path`` (started with another ``XDG_RUNTIME_DIR``,
    ``--socket``, or before ``host.socket`` was edited), its lock wherever it started
    (before an edit of ``host.state_dir`` too: ``serving_holder``); ``None`` when none
    does."""
    from hostd._daemon_lock import serving_holder  # a leaf: none of the daemon loads
    from hostd.config import default_socket_path, default_state_dir

    try:
        name = default_socket_path(cfg.file).name
        holder = serving_holder(cfg.state_path, default_state_dir(), name)
    except OSError:
        return None
    other = holder.get("socket") if holder else None
    if not isinstance(other, str) or not other or other == str(path):
        return None
    assert holder is not None
    return other, holder.get("pid"), str(holder.get("state_dir"))


def _config_daemon(cfg: Config, socket: str | None, doing: str, then: str) -> str | None:
    """The socket to ask: ``socket`` when named, else that of the daemon serving this
    config wherever it listens (``_serving_at``), said on stderr with ``doing`` there
    and ``then``; else None (the config's own)."""
    if socket is not None:
        return socket
    serving = _serving_at(cfg, cfg.socket_path)
    if serving is None:
        return None
    found, pid, state = serving
    moved = ""
    if os.path.realpath(state) != os.path.realpath(cfg.state_path):
        moved = f", with its state in {state}, not in {cfg.state_path} (the config's state_dir)"
    sys.stderr.write(
        f"hostd: this config's daemon (pid {pid}) serves at {found}, not at "
        f"{cfg.socket_path} (the socket the config names){moved}: {doing} there; {then}\n"
    )
    return found


def _serving_elsewhere(cfg: Config, path: Path) -> str:
    """``; but hostd (pid N) serves this config at OTHER``: the daemon holding the
    config's lock listens on another socket (``_serving_at``); empty when none does."""
    serving = _serving_at(cfg, path)
    if serving is None:
        return ""
    other, pid, _ = serving
    return (
        f"; but hostd (pid {pid}) serves this config at {other} "
        f"(started with another XDG_RUNTIME_DIR or --socket): `hostd status {other}`"
    )


#: What ``status`` and ``reload`` add on finding the daemon at another socket.
_RESTART_MOVES = "it listens at {} only once restarted (`hostd stop`, then `hostd serve`)"


async def _status(cfg: Config, args: argparse.Namespace) -> int:
    asked = _config_daemon(cfg, args.socket, "asking it", _RESTART_MOVES.format(cfg.socket_path))
    async with _daemon(
        cfg, asked, "none is running", args.token_file, unloaded_note(args)
    ) as client:
        status = await client.call("host/status", {})
        providers = (await client.call("providers/list", {})).get("providers") or []
    reranker = status.get("reranker")  # none without a [reranker] (or from an older daemon)
    down = any(_degraded(row) for row in providers)
    if isinstance(reranker, dict) and reranker_degraded(reranker):
        down = True
    code = EXIT_DEGRADED if down else EXIT_OK
    tcp = tcp_address(asked) is not None  # another user's daemon, as a rule
    socket = Path(asked) if asked else cfg.socket_path
    stale = None if tcp else stale_config(cfg, status, socket)
    # A daemon over TCP may be another user's, run from their own install: not compared.
    built = None if tcp else other_build(status, socket, build_version())
    notes = [said for said in (stale, built) if said is not None]
    # Less this command's own host/status, in the text and the JSON alike.
    others = max(int(status.get("in_flight") or 1) - 1, 0)
    if args.json:
        print_json(
            {
                **status,
                "in_flight": others,
                # Each provider as its text line says it, not a count: what is down and why.
                "providers": [
                    {
                        "id": row.get("id"),
                        "state": row.get("state"),
                        "degraded": _degraded(row),
                        "detail": _provider_line(row),
                        # What the text shows under its line, its lines joined as on the wire.
                        "stderr_tail": _shown_tail(row),
                        # Since the daemon started: a crash it recovered from shows here.
                        "restarts": int((row.get("health") or {}).get("restarts") or 0),
                        "crashes": int((row.get("health") or {}).get("crashes") or 0),
                    }
                    for row in providers
                ],
                # A restart pending is no fault (exit 0 stays): a health check reads it here.
                "config_changed": _config_changed(cfg, status, stale),
            }
        )
        sys.stderr.write("".join(f"hostd: {said}\n" for said in notes))
        return code
    config = status.get("config") or {}
    uptime = float(status.get("uptime_s") or 0.0)
    out = [
        f"hostd {status.get('version')} (pid {status.get('pid')}), {status.get('state')} "
        f"for {duration(uptime)}",
        _listeners(status),
        f"config: {config.get('file') or 'built in code'}",
        _traffic(status, others),
    ]
    pending = status.get("config_needs_restart") or []
    if pending:  # a reload kept them: the running daemon differs from its file
        out.append(
            f"needs-restart: {', '.join(pending)} (changed in the config file; "
            "kept as they were until the daemon restarts)"
        )
    for row in providers:
        out.append(f"provider {row.get('id')}: {_provider_line(row)}")
        if row.get("state") in ("crashed", "failed"):  # its line says its last failure
            out += [f"  {said}" for said in failure_tail_lines(row)]
    if isinstance(reranker, dict):
        out.append(f"[reranker] {reranker.get('kind')}: {reranker_state(reranker)}")
    sys.stdout.write("".join(f"{line}\n" for line in out))
    sys.stderr.write("".join(f"hostd: {said}\n" for said in notes))
    return code


def _listeners(status: dict[str, Any]) -> str:
    """Where the daemon listens, one line: ``socket: PATH; tcp: HOST:PORT`` (each one
    it has), so an operator of a shared daemon sees the TCP port beside the socket."""
    where = []
    if status.get("socket"):
        where.append(f"socket: {status['socket']}")
    tcp = status.get("tcp")
    if isinstance(tcp, list) and len(tcp) == 2:
        where.append(f"tcp: {tcp[0]}:{tcp[1]}")
    return "; ".join(where) or "socket: none"


def _traffic(status: dict[str, Any], others: int) -> str:
    """The counters an operator watches, one line: requests done since start and how
    many failed, the others in flight, the other connections open and every one since
    start (``host/status``'s ``counters``), and connections refused at
    ``host.max_connections`` when there were any. This command's own request and
    connection are left out of what is open, as of ``in_flight``."""
    counters = status.get("counters") or {}
    done, failed = int(counters.get("requests_total", 0)), int(counters.get("requests_failed", 0))
    opened = int(counters.get("connections_total", 0))
    open_now = max(int(counters.get("connections_open", 1)) - 1, 0)
    line = (
        f"requests: {done} done ({failed} failed), {_others(others)} in flight; "
        f"connections: {_others(open_now)} open, {opened} since start"
    )
    refused = int(counters.get("connections_refused", 0))
    if refused:
        line += f", {refused} refused at max_connections"
    return line


def _provider_line(row: dict[str, Any]) -> str:
    """A provider's words after ``provider ID: ``: its state, then its restarts."""
    return provider_state(row) + _restarts(row)


def other_build(status: dict[str, Any], socket: object, mine: str) -> str | None:
    """The line saying the daemon at ``socket`` runs another build of hostd than this
    command's (``mine``: ``0.1.0+g0fda9cc``), or None: the same, or one too old to
    say. After an upgrade installed under a running daemon, the daemon still runs the
    old code until it is started again; this says so where an operator looks."""
    theirs = status.get("version")
    if not isinstance(theirs, str) or theirs == mine:
        return None
    return (
        f"the daemon at {socket} runs hostd {theirs}; this hostd is {mine} (another "
        "install, or an upgrade since the daemon started): `hostd stop` and start it "
        "again to run this one"
    )


def _others(n: int) -> str:
    return f"{n} {'other' if n == 1 else 'others'}"


def _restarts(row: dict[str, Any]) -> str:
    """What the line of a provider that is up (or starting) adds of its history since
    the daemon started, only when there is some: how often it was started again (after
    a crash, or asked), how many queries it crashed during, and how long ago its last
    failure was (``hostd providers --connect`` says what it was). One that crashed and
    recovered would read plain ``ready`` without it; one down says its failure already.
    A remote provider (a ``remote`` member) has no process: its starts are checks of
    its server (a handshake) and its crashes requests whose exchange broke, said so."""
    health = row.get("health") or {}
    if row.get("state") in ("crashed", "failed"):
        return ""
    restarts, crashes = int(health.get("restarts") or 0), int(health.get("crashes") or 0)
    remote = row.get("remote") is not None
    said = []
    if restarts:
        again = "checked again" if remote else "restarted"
        said.append(f"{again} {restarts} {'time' if restarts == 1 else 'times'}")
    if crashes and remote:
        said.append(f"{crashes} failed {'request' if crashes == 1 else 'requests'}")
    elif crashes:
        said.append(f"crashed during {crashes} {'query' if crashes == 1 else 'queries'}")
    ago = health.get("last_failure_s_ago")
    if said and ago is not None:
        said.append(f"last failure {duration(float(ago))} ago")
    return f"; {', '.join(said)}" if said else ""


def _shown_tail(row: dict[str, Any]) -> str | None:
    """``status --json``'s ``stderr_tail`` of a provider: the lines the text shows under
    a down provider's line (``failure_tail_lines``: bounded, scrubbed), joined by `` | ``
    as ``providers/list`` joins them; None where the text shows none."""
    if row.get("state") not in ("crashed", "failed") or not failure_tail_lines(row):
        return None
    return " | ".join(shown_stderr_tail((row.get("health") or {}).get("stderr_tail")))


def _config_changed(cfg: Config, status: dict[str, Any], stale: str | None) -> bool | None:
    """``status --json``'s ``config_changed``: True when the daemon's config file changed
    since it started (the stale-config line), False when the file read here is the one
    it runs and unchanged, None when that cannot be told (a daemon of another file, or
    of a config built in code, or one that does not say). True too while a reload left
    keys for a restart (``config_needs_restart``): the file differs from what runs."""
    if stale is not None or status.get("config_needs_restart"):
        return True
    started = status.get("config")
    if not isinstance(started, dict) or cfg.source.startswith("<"):
        return None
    file = started.get("file")
    if not isinstance(file, str) or os.path.realpath(file) != os.path.realpath(cfg.source):
        return None
    return False if os.access(cfg.source, os.R_OK) else None


#: Queries in a row a running provider must fail before ``status`` calls it degraded
#: (one timeout is a slow moment, not an outage).
FAILING_LEGS = 3


def _degraded(row: dict[str, Any]) -> bool:
    """A provider no request gets all its evidence from until something changes: down
    (crashed, failed, its warm-up included), lacking consent, or up but failing its
    last ``FAILING_LEGS`` queries, answering each of them short (an MCP tool of its
    failing every time), or with frames hostd refused every one of (a frame with no
    title). Warming, starting and idle are not."""
    health = row.get("health") or {}
    return (
        row.get("state") in ("crashed", "failed")
        or bool(row.get("consent_missing"))
        or int(health.get("failing_legs") or 0) >= FAILING_LEGS
        or int(health.get("partial_legs") or 0) >= FAILING_LEGS
        or int(health.get("invalid_legs") or 0) >= FAILING_LEGS
    )


def _step(progress: dict[str, Any]) -> str | None:
    """A warming step with no count (``load model``, a provider's own phase), and how
    long it has run when the provider said so again (``elapsed_s``): a long step is
    not mistaken for a stuck one. ``None`` before its first step (``start``)."""
    phase = progress.get("phase")
    if not isinstance(phase, str) or not phase or phase == "start":
        return None
    elapsed = progress.get("elapsed_s")
    return f"{phase}, {duration(float(elapsed))} so far" if elapsed else phase


def reranker_degraded(r: dict[str, Any]) -> bool:
    """A reranker no ``rerank`` composition gets a verdict from until something changes:
    a process down (crashed, failed: parked), a server cooling down (``failed``: it is
    not asked), or either one up but failing its last ``FAILING_LEGS`` asks (a refused
    request, a timeout). A server's ``crashed`` is one failure short of its cool-down, as
    one timeout is a slow moment; ``not_configured`` never reaches here (no row)."""
    health = r.get("health") or {}
    down = ("crashed", "failed") if r.get("kind") == "process" else ("failed",)
    return r.get("state") in down or int(health.get("failing_legs") or 0) >= FAILING_LEGS


def reranker_state(r: dict[str, Any]) -> str:
    """The reranker's state, as a provider's (``provider_state``): one down also how long
    ago its last failure was and what it was, one up whose asks fail why (the last
    fallback's reason), and either when it is tried again; then what became of its
    verdicts (``asks N, fallbacks M``): what ``hostd providers`` prints for it, one line."""
    health = r.get("health") or {}
    state = str(r.get("state"))
    shown = state
    failure = health.get("last_failure")
    failing = int(health.get("failing_legs") or 0)
    if state in ("crashed", "failed") and failure:
        ago = health.get("last_failure_s_ago")
        when = f" {duration(float(ago))} ago" if ago is not None else ""
        said = " ".join(str(failure).split())
        # The failure's own kind, when it is the state's, is said once (``provider_state``).
        said = said.removeprefix(f"{state}: ")
        if state == "crashed" and r.get("kind") == "url":
            # A server's ``crashed`` is a failed connection (``unavailable``): nothing of
            # the reranker's own crashed, and the word would send the reader after a process.
            shown, said = "unreachable", said.removeprefix("unavailable: ")
        shown += f"{when}: {said}"
    elif failing:  # up, yet its asks fail: say so, and why
        why = " ".join(str(r.get("last_fallback") or health.get("last_error") or "").split())
        asks = "ask" if failing == 1 else f"{failing} asks"
        shown += f"; its last {asks} failed: {why or 'no reason given'}"
    retry = health.get("retry_in_s")
    if isinstance(retry, int | float):  # cooling down (a server), parked (a process)
        again = "next try" if r.get("kind") == "url" else "next start"
        shown += f"; {again} in {duration(float(retry))}"
    return f"{shown}; asks {r.get('asks', 0)}, fallbacks {r.get('fallbacks', 0)}"


async def _stop(cfg: Config, args: argparse.Namespace) -> int:
    then = f"`hostd serve` starts it at {cfg.socket_path}"
    asked = _config_daemon(cfg, args.socket, "stopping it", then)
    async with _daemon(
        cfg, asked, "nothing to stop", args.token_file, unloaded_note(args)
    ) as client:
        status = await client.call("host/status", {})
        await client.call("host/shutdown", {})
    pid = int(status["pid"])
    where = status.get("socket") or asked or cfg.socket_path
    with anyio.move_on_after(max(args.timeout, 0.0)):
        await _exited(pid)
        sys.stdout.write(f"stopped hostd (pid {pid}) at {where}\n")
        return EXIT_OK
    raise StillStopping(
        f"hostd (pid {pid}) is still stopping after {args.timeout:g} s "
        f"(its providers may be slow to exit); `kill {pid}` stops it now"
    )


async def _reload(cfg: Config, args: argparse.Namespace) -> int:
    # The daemon serving this config (it holds the config's lock), wherever it
    # listens: after an edit of host.socket it is still at the old one, which it
    # keeps until a restart (the reply names host.socket under needs-restart).
    then = _RESTART_MOVES.format(cfg.socket_path)
    socket = _config_daemon(cfg, args.socket, "reloading it", then)
    async with _daemon(cfg, socket, "nothing to reload", args.token_file) as client:
        try:
            result = await client.call("host/reload", {})
        except RpcError as exc:
            if exc.remote_reason != ConfigError.reason:
                raise
            data = exc.rpc_data if isinstance(exc.rpc_data, dict) else {}
            raise ConfigError(exc.message, **data) from None
    if args.json:
        print_json(result)
        return EXIT_OK
    sys.stdout.write("".join(f"{line}\n" for line in reload_lines(result)))
    return EXIT_OK


def reload_lines(result: dict[str, Any]) -> list[str]:
    """``hostd reload``'s text: what the reload did to each provider, the settings it
    applied, and each change that waits for a restart."""
    config = result.get("config") or {}
    out = [f"reloaded {config.get('file') or 'the config'}"]
    for word in ("started", "stopped", "restarted", "updated", "kept"):
        ids = result.get(word)
        if ids is None and word == "updated":  # a daemon older than the key
            continue
        out.append(f"{word}: {', '.join(ids) if ids else '-'}")
    applied = result.get("applied") or []
    if applied:
        out.append(f"applied: {', '.join(applied)}")
    for item in result.get("needs_restart") or []:
        out.append(f"needs-restart: {item.get('key')} ({item.get('reason')}); kept as it was")
    tcp = result.get("tcp_token") or {}
    if tcp.get("state") == "changed":
        closed = tcp.get("closed") or 0
        out.append(
            f"tcp-token: changed; the old one is refused ({closed} connection"
            f"{'' if closed == 1 else 's'} opened with it closed)"
        )
    elif tcp.get("state") == "unusable":
        out.append(
            f"tcp-token: none usable ({tcp.get('error')}); every TCP authentication is "
            "refused until the [tcp] token_file holds one token"
        )
    return out


async def _exited(pid: int) -> None:
    """Return once process ``pid`` has exited: a pidfd turns readable then (Linux);
    elsewhere, a look every ``_POLL_S``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd here: look, then look again
        while pid_alive(pid):  # noqa: ASYNC110 - no event tells another process's exit
            await anyio.sleep(_POLL_S)
        return
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)


def provider_state(row: dict[str, Any]) -> str:
    """A provider's state; one that is ready also what it said it holds (its ready
    message: ``412 chunks from 28 files``), one warming how far it is, one that is down
    (crashed, failed) why, how long ago and when it is tried again: what an operator
    reads status for."""
    state = str(row.get("state"))
    health = row.get("health") or {}
    if state in ("ready", "warming"):  # what it holds, or how far its build is
        progress = health.get("progress") or {}
        said = progress.get("message") if isinstance(progress, dict) else None
        if state == "warming" and isinstance(progress, dict) and progress.get("total"):
            said = f"{progress.get('phase', 'warming')} {progress.get('done')}/{progress['total']}"
            left = health.get("left_s")
            if left is not None:  # once the daemon measured its rate, as `hostd warm` says it
                said += f", {time_left(float(left))}"
        elif state == "warming" and isinstance(progress, dict) and not said:
            said = _step(progress)
        shown = f"{state} ({' '.join(str(said).split())})" if said else state
        failing = int(health.get("failing_legs") or 0)
        partial = int(health.get("partial_legs") or 0)
        invalid = int(health.get("invalid_legs") or 0)
        why = " ".join(str(health.get("last_error") or "no reason given").split())
        if state == "ready" and failing:  # up, yet its queries fail: say so, and why
            queries = "query" if failing == 1 else f"{failing} queries"
            shown += f"; its last {queries} failed: {why}"
        elif state == "ready" and invalid:  # up, answering, yet none of it usable: why
            answers = "answer's" if invalid == 1 else f"{invalid} answers'"
            shown += f"; its last {answers} frames were all refused: {why}"
        elif state == "ready" and partial:  # up, yet each answer lacks a part: which
            queries = "query" if partial == 1 else f"{partial} queries"
            shown += f"; its last {queries} lost part of their answer: {why}"
        elif state == "ready" and health.get("found_nothing"):
            # Answering, yet with nothing: why (an MCP provider's reads and tools that
            # matched none of the goal), where a user asks why it never gives anything.
            said = " ".join(str(health["found_nothing"]).split())
            shown += f"; its last query found nothing: {said}"
        missing = row.get("consent_missing") or []
        if missing:  # ready, yet asked by no request until the operator grants these
            grants = "; ".join(f"hostd consent grant {row.get('id')} {s}" for s in missing)
            shown += f"; not asked: it needs consent for {', '.join(missing)} ({grants})"
        return shown
    # Down: in the words `hostd mcp`'s list_providers shares (its failure, its retry).
    return down_state(row) or state
