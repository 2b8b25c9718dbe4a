"""``hostd``'s entry point: the top-level options, the commands' registration, and the
one place a command's error becomes a line on stderr and an exit status.

A bad config or a refused listener ends with one line naming the problem and
exit status 2, never a stack trace; ``--connect`` with no daemon there is 3;
any other hostd error is 1.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import anyio

from hostd._build import build_version
from hostd.errors import ConfigError, HostdError

from ._check import add_check_command
from ._commands import add_core_commands
from ._common import EXIT_FAILED, EXIT_NO_DAEMON, EXIT_USAGE, socket_only_note
from ._daemon import add_daemon_commands
from ._memory import add_memory_command
from ._outcome import NoDaemon, unloaded_no_daemon
from ._project import add_project_commands
from ._quality import add_quality_commands
from ._warm import add_warm_command

if TYPE_CHECKING:  # the models load with the config a command reads, not with --help
    from hostd.config import Config

__all__ = ["build_parser", "main"]

#: ``--log-format``: ``auto`` is human-readable lines when stderr is a terminal.
LOG_FORMATS = ("auto", "json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")

_CONFIG_HELP = (
    "the config file to use (default: $HOSTD_CONFIG, else the nearest hostd.toml here or "
    "above, else $XDG_CONFIG_HOME/hostd/hostd.toml, else the embedded default; "
    "`hostd config path` shows which)"
)
_LOG_LEVEL_HELP = "override log.level from the config"
_LOG_FORMAT_HELP = (
    "log lines on stderr: human-readable on a terminal, else JSON (auto, the default), "
    "or always json or console; a log.file is always JSON"
)


class _Version(argparse.Action):
    """``--version``: ``hostd 0.1.0+g0fda9cc`` (hostd/_build.py), worked out only when
    asked: from a checkout that is a ``git status``, which no other command pays for."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"hostd {build_version()}\n")
        parser.exit()


class _CommandParser(argparse.ArgumentParser):
    """A command's parser. ``--connect`` takes an optional value, so in ``hostd compose
    --connect "how is the config loaded?"`` it takes the goal as its socket, and the
    goal is then missing: the error says so and how to write it, not only that a
    positional argument is required."""

    _args: Sequence[str] = ()

    # typeshed declares overloads; this is the plain call, its args kept for ``error``.
    def parse_known_args(  # type: ignore[override]  # see above
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._args = list(args) if args is not None else sys.argv[1:]
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        taken = _connect_value(self._args)
        if taken is not None and "arguments are required" in message:
            message += (
                f"; --connect took {taken!r} as its socket: give the "
                f"{message.rsplit(': ', 1)[-1]} before --connect, or name a socket as "
                "--connect=SOCKET"
            )
        super().error(message)


def _connect_value(args: Sequence[str]) -> str | None:
    """The value ``--connect`` took as a separate word (``--connect WORD``), if any."""
    for i, arg in enumerate(args[:-1]):
        if arg == "--connect" and not args[i + 1].startswith("-"):
            return args[i + 1]
    return None


def build_parser() -> argparse.ArgumentParser:
    """The ``hostd`` argument parser: global options and one sub-command per verb."""
    parser = argparse.ArgumentParser(
        prog="hostd",
        description="An async context host: fans a query out to Context Graph Protocol "
        "providers, audits and verifies their frames, and composes them into a prompt.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        help="show the version and the commit this hostd was built from, and exit",
    )
    parser.add_argument("--config", metavar="PATH", help=_CONFIG_HELP)
    parser.add_argument("--log-level", choices=LOG_LEVELS, help=_LOG_LEVEL_HELP)
    parser.add_argument("--log-format", choices=LOG_FORMATS, help=_LOG_FORMAT_HELP)
    # The same options after the command word too (`hostd compose --config f.toml …`),
    # with the same help: a command's --help is often the only one a user reads.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=_CONFIG_HELP)
    common.add_argument(
        "--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS, help=_LOG_LEVEL_HELP
    )
    common.add_argument(
        "--log-format", choices=LOG_FORMATS, default=argparse.SUPPRESS, help=_LOG_FORMAT_HELP
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser
    )
    add_project_commands(sub, common)
    add_core_commands(sub, common)
    add_daemon_commands(sub, common)
    add_quality_commands(sub, common)
    add_warm_command(sub, common)
    add_memory_command(sub)
    add_check_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``hostd`` command line; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    cfg: Config | None = None
    try:
        if getattr(args, "needs_config", True):
            cfg = _config(args)
            from hostd.logs import configure_logging

            level = args.log_level or _default_level(args.command, cfg.log.level)
            # ``log.file`` is the daemon's log: a one-shot command logs to stderr, so it
            # never writes into (or rotates) the file a running daemon writes.
            settings = (
                cfg.log if args.command in _SERVERS else cfg.log.model_copy(update={"file": None})
            )
            try:
                configure_logging(level, settings=settings, log_format=args.log_format or "auto")
            except OSError as err:
                raise ConfigError(
                    f"{cfg.source}: log.file: cannot open {cfg.log.file}: {err.strerror or err}",
                    file=cfg.source,
                    key="log.file",
                ) from err
        if inspect.iscoroutinefunction(args.run):
            status: int = anyio.run(args.run, cfg, args, backend="asyncio")
        else:
            status = args.run(cfg, args)
        return status
    except BaseExceptionGroup as group:
        # Errors raised inside task groups arrive wrapped; report the first hostd one plainly.
        matched, _rest = group.split(HostdError)
        if matched is None:
            raise
        return _failed(_first(matched), args, cfg)
    except HostdError as exc:
        return _failed(exc, args, cfg)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"hostd: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


#: The commands that serve until stopped: ``log.file`` is their log.
_SERVERS = frozenset({"serve", "mcp"})


def _failed(exc: HostdError, args: argparse.Namespace, cfg: Config | None) -> int:
    """A command's error: its line on stderr, and its exit status. A server that refuses
    to start (exit 2) says so in its ``log.file`` too (``_log_refusal``)."""
    sys.stderr.write(f"hostd: {_said(exc, args)}\n")
    status = _exit_status(exc)
    if status == EXIT_USAGE and args.command in _SERVERS:
        _log_refusal(exc, args, cfg)
    return status


def _log_refusal(exc: HostdError, args: argparse.Namespace, cfg: Config | None) -> None:
    """One ``host.start.refused`` event in the server's ``log.file``: an operator who
    reads only that file (a service's log) learns why the daemon is not there. The log
    is configured already when the config loaded; else the file the config names, read
    raw (``discover_log_file``), is opened for this one line. Nothing when there is no
    ``log.file`` (the log is stderr, where the line went), or when it cannot be opened
    (that may be the refusal itself)."""
    from hostd.config import discover_log_file
    from hostd.logs import configure_logging, flush_logs, get_logger

    if exc.data.get("key") == "log.file" or (cfg is not None and cfg.log.file is None):
        return  # the file itself cannot be opened, or the log is stderr
    if cfg is None:
        try:
            file = discover_log_file(args.config)
        except (OSError, ValueError):  # a config that cannot be found or read
            return
        if file is None:
            return
        try:
            configure_logging("error", file=str(file))
        except OSError:
            return
    get_logger("hostd.cli").error(
        "host.start.refused",
        reason=exc.reason,
        key=exc.data.get("key"),
        config=exc.data.get("file") or (cfg.source if cfg is not None else args.config),
        error=exc.message,
    )
    flush_logs()


def _config(args: argparse.Namespace) -> Config:
    """The config a command runs with. ``status`` and ``stop`` (``socket_only``), and a
    client command with ``--connect`` (``connected_socket_only``: compose, providers,
    mcp), need only the daemon's socket: a config that no longer loads (an edit under a
    running daemon) does not lock them out of it; they say why and use the socket named
    (the file is moot then), else its ``host.socket``. Read raw, or named to a client
    command's ``--connect``, the error is kept in ``args.config_error`` for a
    ``NoDaemon`` to name (``_said``, ``_common.session``: the file to fix before a
    daemon starts from it) and its note is said only once a daemon answers
    (``_common.unloaded_note``): with none, the line of the ``NoDaemon`` names the error,
    so it is said once. ``reload``
    (``daemon_reads_config``) says no note at all: the daemon reads the file and its
    refusal names the error."""
    from hostd.config import DEFAULT_CONFIG_PATH, discover_socket, load_config

    try:
        return load_config(args.config)
    except ConfigError as exc:
        connect = getattr(args, "connect", None)
        connected = connect is not None and getattr(args, "connected_socket_only", False)
        if not getattr(args, "socket_only", False) and not connected:
            raise
        named = getattr(args, "socket", None) or connect
        if named:  # named on the command line: the file is moot
            socket = Path(named)
        else:  # its one key, read raw (a file that is not TOML: its `socket =` line);
            # still a ConfigError when the file cannot be read at all
            socket = discover_socket(args.config)
        # A client's socket, read raw or named: with no daemon there, the file is what a
        # daemon would start from, so the NoDaemon names it and its error, never the
        # embedded default's (a TCP address is another user's daemon: not this file's).
        client = connected and not str(connect).startswith("tcp://")
        if not named or client:
            args.config_error = (exc, socket)
        # Said once. Kept, the note waits for a daemon to answer (the command says it
        # then: unloaded_note): with none, the NoDaemon's line names the error; reload's
        # daemon names it itself.
        elif not getattr(args, "daemon_reads_config", False):
            sys.stderr.write(socket_only_note(exc))
        base = load_config(DEFAULT_CONFIG_PATH)
        return base.model_copy(update={"host": base.host.model_copy(update={"socket": socket})})


#: Commands whose own output reports every provider failure (a leg's error, a row's
#: last failure): their log stays at error unless told, so a failure is said once.
_REPORTING = frozenset({"compose", "providers", "consent", "eval", "shadow", "calibrate"})


def _default_level(command: str, configured: str) -> str:
    """``serve`` logs at ``log.level``; a one-shot command that reports failures itself
    at ``error``; the others (``mcp``, ``warm``: the log is where a failure shows) at
    ``warning``."""
    if command == "serve":
        return configured
    return "error" if command in _REPORTING else "warning"


def _exit_status(exc: HostdError) -> int:
    if exc.reason in ("bad_config", "listener_failed", "usage"):
        return EXIT_USAGE
    return EXIT_NO_DAEMON if isinstance(exc, NoDaemon) else EXIT_FAILED


def _first(group: BaseExceptionGroup[HostdError]) -> HostdError:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, HostdError)
    return exc


def _said(exc: HostdError, args: argparse.Namespace) -> str:
    """The line a command's error is told in. No daemon at the socket read raw from a
    config that does not load (``_config``): the file may mean another socket, and
    `hostd serve` would refuse it, so its error is what to fix, named."""
    broken = getattr(args, "config_error", None)
    # A session's own NoDaemon names the error already (``_common.session``).
    if isinstance(exc, NoDaemon) and broken is not None and broken[0].message not in str(exc):
        error, socket = broken
        return f"{unloaded_no_daemon(socket, exc.strerror, error.message)} [no_daemon]"
    return _one_line(exc)


def _one_line(exc: HostdError) -> str:
    text = str(exc)
    reason = getattr(exc, "remote_reason", None) or exc.reason
    return f"{text} [{reason}]" if reason and reason not in text else text
