"""What every ``hostd`` command shares: exit statuses, the ``--connect`` option, the
session a command talks through, and how values are spelt and printed.

A command reaches providers through ``session``: a running daemon's socket with
``--connect`` (or its loopback TCP listener, ``--connect tcp://HOST:PORT``, with the
token from ``--token-file`` or ``$HOSTD_TOKEN``), else a daemon started in-process for
the one shot. Either way it
is one ``call(method, params)``, so the command's code is the same. A daemon runs
the config it was started from: on connecting, one ``host/status`` tells which file
that was and its digest then, and a file edited since is said once, on stderr
(``stale_config``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio
import orjson

from hostd._defaults import DEFAULT_WAIT_S
from hostd._hints import duration
from hostd.errors import ConfigError, DaemonNotPermitted, HostdError, RpcError
from hostd.protocol import CgpErrorCode, sha256_digest

from ._outcome import NoDaemon, config_hint, unloaded_no_daemon, unloaded_start

if TYPE_CHECKING:  # the models load with the config a command reads, not with --help
    from hostd.config import Config

__all__ = [
    "pid_alive",
    "DEFAULT_WAIT_S",
    "EXIT_FAILED",
    "EXIT_DEGRADED",
    "EXIT_NO_DAEMON",
    "EXIT_OK",
    "EXIT_USAGE",
    "TOKEN_ENV",
    "TokenRefused",
    "UsageError",
    "anchors_arg",
    "connect_arg",
    "config_source",
    "connect_client",
    "csv_arg",
    "duration",
    "print_json",
    "session",
    "socket_only_note",
    "stale_config",
    "unloaded_error",
    "unloaded_note",
    "strategy_arg",
    "token_file_arg",
]


class ProgressListener(Protocol):
    """A provider's warm-up progress, as the pool tells it (``_warm.ProgressBars``)."""

    def __call__(self, provider_id: str, progress: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


EXIT_OK = 0
EXIT_FAILED = 1
#: A command line that cannot be run as given (argparse's own errors exit 2 too).
EXIT_USAGE = 2
#: ``--connect`` found no daemon answering at the socket.
EXIT_NO_DAEMON = 3
#: ``status``: the daemon serves, but a provider is down (crashed, failed) or is asked
#: by no request (consent missing), or the reranker gives no verdict (down, failing).
EXIT_DEGRADED = 4


class UsageError(HostdError):
    """A command line that cannot be run as given: exit ``EXIT_USAGE``."""

    code = CgpErrorCode.BAD_REQUEST
    reason = "usage"


class TokenRefused(DaemonNotPermitted):
    """A daemon on TCP refused the token this command sent (``--token-file``,
    ``$HOSTD_TOKEN``): there is a daemon, this user may not use it, so it exits as
    ``DaemonNotPermitted`` does (``EXIT_NO_DAEMON``); the text names where the token came
    from, never the token."""

    reason = "unauthorized"


#: The variable a ``--connect tcp://…`` reads its bearer token from, unless
#: ``--token-file`` names a file: never a command-line value, which other users may read
#: in the process list.
TOKEN_ENV = "HOSTD_TOKEN"

_TCP = "tcp://"


def connect_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--connect",
        nargs="?",
        const="",
        metavar="SOCKET",
        help="use the running daemon (its socket; default: the configured socket; or "
        "tcp://HOST:PORT, a daemon shared on loopback TCP, with the token from "
        f"--token-file or ${TOKEN_ENV})",
    )
    token_file_arg(p)
    p.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help="with --connect: wait this long for a daemon that is starting "
        f"(default: {DEFAULT_WAIT_S:g}; 0: fail at once)",
    )


def socket_only_note(error: ConfigError) -> str:
    """The line a command that needs only the daemon's socket says of a config that
    does not load, before going on with that socket (``_main._config``)."""
    return f"hostd: note: {error.message}; using its socket only\n"


def unloaded_error(args: argparse.Namespace) -> ConfigError | None:
    """This config's error when it did not load and its socket was read raw from it, or
    named to a client command's ``--connect`` (``_main._config``): a daemon that answers
    there goes with its note
    (``unloaded_note``); none there, and the line that says so names the error."""
    broken = getattr(args, "config_error", None)
    return broken[0] if broken is not None else None


def config_source(cfg: Config, args: argparse.Namespace) -> str:
    """The config file a hint's commands name (``--config FILE``): the user's, even when
    it did not load and the embedded default stands in for it (``unloaded_error``: its
    socket only), never the default's path, whose daemon has no provider of theirs."""
    error = unloaded_error(args)
    file = error.data.get("file") if error is not None else None
    return file if isinstance(file, str) else cfg.source


def unloaded_note(args: argparse.Namespace) -> str:
    """The note of ``unloaded_error``, said once a daemon answers (or ``""``): with none
    there, the no-daemon line names the error instead, so it is said once."""
    error = unloaded_error(args)
    return socket_only_note(error) if error is not None else ""


def token_file_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="with tcp://HOST:PORT: the file whose one line is the daemon's bearer token "
        f"(default: ${TOKEN_ENV})",
    )


def tcp_address(value: str | None) -> tuple[str, int] | None:
    """``tcp://HOST:PORT`` (``tcp://[::1]:PORT``) as ``(host, port)``; None for anything
    else (a socket path, or none). A ``tcp://`` value without a host and a port is a
    ``UsageError``."""
    if not value or not value.startswith(_TCP):
        return None
    try:
        parts = urlsplit(value)
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is no number, or out of range
        host = port = None
    else:
        if parts.path or parts.query or parts.fragment or parts.username or parts.password:
            host = None
    if not host or port is None:
        raise UsageError(
            f"--connect {value[:_SHOWN_CHARS]}: a TCP address is written "
            "tcp://HOST:PORT (tcp://127.0.0.1:7341), the daemon's [tcp] host and port"
        )
    return host, port


def _token(value: str, token_file: str | None) -> str:
    """The bearer token for ``--connect value`` (TCP): ``token_file``'s one line, else
    ``$HOSTD_TOKEN``; a ``UsageError`` naming the file or the variable (never a token)
    when there is none."""
    if token_file is not None:
        try:
            lines = Path(token_file).expanduser().read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not text"
            raise UsageError(f"--token-file {token_file}: cannot read it ({why})") from None
        words = [line.strip() for line in lines if line.strip()]
        if len(words) != 1:
            raise UsageError(
                f"--token-file {token_file}: not one line holding the token "
                f"({len(words)} non-empty lines)"
            )
        return words[0]
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise UsageError(
            f"--connect {value}: no token to send: set ${TOKEN_ENV} or give --token-file PATH "
            "(the token the daemon's [tcp] token_file holds; docs/config.md, \"Sharing a "
            'daemon with other users")'
        )
    return token


def _said_token(token_file: str | None) -> str:
    return f"the token in {token_file}" if token_file is not None else f"${TOKEN_ENV}"


async def connect_client(
    stack: contextlib.AsyncExitStack,
    value: str,
    path: Path,
    wait: float,
    token_file: str | None = None,
) -> Any:
    """A client of the daemon ``--connect value`` names: its loopback TCP listener for
    ``tcp://HOST:PORT`` (authenticated with ``_token``), else its socket ``path``,
    waiting up to ``wait`` seconds for a daemon that is starting either way. A refused
    token is ``TokenRefused``; nothing listening is ``NoDaemon`` (an ``OSError``)."""
    address = tcp_address(value)
    if address is None:
        if token_file is not None:
            raise UsageError("--token-file applies to --connect tcp://HOST:PORT only")
        return await _connect(stack, path, wait)
    from hostd.client import connect_tcp

    token = _token(value, token_file)
    try:
        return await stack.enter_async_context(
            connect_tcp(*address, token, wait=max(wait, 0.0), on_wait=_waiting)
        )
    except RpcError as exc:
        if exc.remote_reason != "unauthorized":
            raise
        # The daemon reads its token file as it is now: a refused token is an old one (a
        # rotation revoked it), a mistyped one, or the daemon has none it can read.
        why = (
            "the daemon cannot read its [tcp] token_file now; its operator must fix it"
            if "cannot read its [tcp] token_file" in exc.message
            else "use the token its [tcp] token_file holds now (a rotated token replaces "
            "the old one at once)"
        )
        raise TokenRefused(
            f"the daemon at {value} refused {_said_token(token_file)} (unauthorized): "
            f'{why} (docs/config.md, "Sharing a daemon with other users")'
        ) from None


def _waiting(where: Path | str, wait: float) -> None:
    """A ``--connect`` wait for a daemon that is starting, said once, in the log and to
    the person."""
    from hostd.logs import flush_logs, get_logger

    get_logger("hostd.cli").info("client.waiting", socket=str(where), wait_s=wait)
    flush_logs()
    # Said to the person too: the wait is otherwise silent (--wait 0: none).
    sys.stderr.write(
        f"hostd: waiting up to {wait:g} s for a daemon at {where} (--wait 0: do not wait)\n"
    )


#: The characters of a command-line value an error quotes at most.
_SHOWN_CHARS = 80


def strategy_arg(value: str | None, option: str = "--strategy") -> Any:
    """A ``--strategy`` (or ``--policy``: ``option``) value as the wire takes it: a text
    spelling as it is, a JSON value decoded; checked by the one parser
    (``strategy_from_wire``) before any provider starts. A value it cannot read is a
    ``UsageError`` naming ``option``."""
    if value is None:
        return None
    from hostd.compose import strategy_from_wire

    wire: Any = value
    if value.lstrip().startswith(("{", "[", '"')):
        try:
            wire = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            shown = value if len(value) <= _SHOWN_CHARS else value[: _SHOWN_CHARS - 1] + "…"
            raise UsageError(
                f"{option}: {shown} is not valid JSON ({exc}); a strategy object is "
                """written like '{"rrf": {"k": 60}}'"""
            ) from None
    try:
        strategy_from_wire(wire)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{option}: {exc}") from None
    return wire


def asks_reranker(strategy: Any) -> bool:
    """Whether a composition with ``strategy`` (a wire value, checked; ``None``: the
    default, ``score``) asks the ``[reranker]``: ``rerank`` bare, not a verdict the
    request brings (``PrecomputedOrder.judged``)."""
    if strategy is None:
        return False  # no import of the composition library for the default
    from hostd.compose import PrecomputedOrder, strategy_from_wire

    order = strategy_from_wire(strategy)
    return isinstance(order, PrecomputedOrder) and not order.judged


def anchors_arg(values: list[str] | None) -> list[str] | None:
    """``--anchor`` values, each relative path that names a file or directory from the
    current directory made absolute: a shell user's relative path is from where they
    stand, the provider's root may be elsewhere. Any other value (a URI, a path only
    under the provider's root, a symbol's name) as given."""
    if values is None:
        return None
    here = Path.cwd()
    out = []
    for value in values:
        path = Path(value)
        named = value and "://" not in value and not path.is_absolute()
        try:
            found = named and (here / path).exists()
        except (OSError, ValueError):  # a name too long, a NUL: not a path here
            found = False
        out.append(os.path.normpath(here / path) if found else value)
    return out


def csv_arg(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


async def _connect(stack: contextlib.AsyncExitStack, path: Path, wait: float) -> Any:
    """A client on the daemon's socket, waiting up to ``wait`` seconds for a daemon that
    is starting (``hostd.client.connect``): ``hostd serve &`` binds its socket a moment
    after it is started. The wait is said once, in the log and to the person."""
    from hostd.client import connect as connect_socket

    return await stack.enter_async_context(
        connect_socket(path, wait=max(wait, 0.0), on_wait=_waiting)
    )


def stale_config(cfg: Config, status: Mapping[str, Any], socket: Path) -> str | None:
    """The line saying the daemon at ``socket`` runs an older version of the config file
    this command read (``status``: its ``host/status``), or None: a daemon started from
    another file, or from this one as it still is, or one too old to say (no
    ``config``). Only the daemon's own figures and this file's bytes are used."""
    started = status.get("config")
    if not isinstance(started, Mapping) or cfg.source.startswith("<"):
        return None
    file, digest = started.get("file"), started.get("digest")
    if not isinstance(file, str) or not isinstance(digest, str):
        return None
    if os.path.realpath(file) != os.path.realpath(cfg.source):
        return None
    try:
        now = sha256_digest(Path(cfg.source).read_bytes())
    except OSError:  # gone or unreadable now: nothing to compare
        return None
    if now == digest:
        return None
    since = _local_time(started.get("loaded_at"))
    return (
        f"the daemon at {socket} was started from an older {cfg.source}"
        f"{f' (changed since {since})' if since else ''}: "
        f"`hostd reload{config_hint(cfg)}` applies the edits"
    )


def _local_time(value: Any) -> str | None:
    """A ``host/status`` time (UTC, RFC 3339) as local time to the second."""
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S") if when is not None else None


async def _say_if_stale(client: Any, cfg: Config, socket: Path) -> None:
    """One ``host/status`` on a new connection; the ``stale_config`` line on stderr when
    the daemon's config file has changed since it started. A daemon that cannot say
    (an error answered, the connection lost) is let be: the command's own call tells."""
    try:
        status = await client.call("host/status", {})
    except (HostdError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return
    line = stale_config(cfg, status, socket) if isinstance(status, Mapping) else None
    if line is not None:
        sys.stderr.write(f"hostd: {line}\n")


@contextlib.asynccontextmanager
async def session(
    cfg: Config,
    connect: str | None,
    bars: ProgressListener | None = None,
    *,
    boot: bool = True,
    behind: bool = False,
    hangup: bool = False,
    wait: float = DEFAULT_WAIT_S,
    token_file: str | None = None,
    only: Sequence[str] | None = None,
    rerank: bool = True,
    unloaded: ConfigError | None = None,
) -> AsyncIterator[Any]:
    """An object with ``call(method, params)``: a running daemon, or one in-process.
    ``bars`` hears every provider's warm-up progress (in-process; ``--connect`` asks
    the daemon for it per request) and is closed at the end. ``behind`` (in-process,
    ``boot=False``): a ``boot`` config's providers start behind the block, not before it
    (``Daemon.local``); ``hangup`` (in-process): SIGHUP reloads its config file, as a
    daemon's. ``wait``: how long a ``--connect`` waits for a daemon that is
    starting; ``token_file``: where a ``--connect tcp://…`` reads its token
    (``connect_client``); ``only`` (in-process): the providers the command's request
    names, the only ones started up front (the others are not waited for); ``rerank``
    false (in-process): the command's request is not ranked by the reranker, which is
    then not started (``asks_reranker``). ``unloaded`` (``--connect``): the error of
    a config that did not load (``unloaded_error``): no daemon there, and the
    ``NoDaemon`` names it (a socket named: as the file to fix, then serve from); the
    caller says its note once one answers."""
    if connect is not None:
        tcp = tcp_address(connect) is not None
        path = Path(connect) if connect and not tcp else cfg.socket_path
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await connect_client(stack, connect, path, wait, token_file)
            except DaemonNotPermitted:
                raise  # another user's socket: starting one there is not the cure
            except OSError as exc:
                waited = f"; waited {wait:g} s" if wait > 0 else ""
                if tcp:
                    raise NoDaemon(
                        f"no daemon at {connect} ({exc.strerror or exc}{waited}); its "
                        "daemon serves TCP when its config has [tcp] enabled = true (or "
                        "`hostd serve --tcp`)"
                    ) from exc
                if unloaded is not None:  # the file is what to fix, not the default's
                    why = f"{exc.strerror or exc}{waited}"
                    raise NoDaemon(
                        unloaded_start(path, why, unloaded)
                        if connect  # a socket named: sure, unlike one read raw
                        else unloaded_no_daemon(path, why, unloaded.message)
                    ) from exc
                start = _start_at(path, cfg) or f"start one with `hostd serve{config_hint(cfg)}`"
                if not connect and not cfg.provider:  # this config's daemon: nothing to ask
                    start = cfg.no_providers()
                raise NoDaemon(
                    f"no daemon at {path} ({exc.strerror or exc}{waited}); {start}"
                ) from exc
            # Once per connection, so once per command (not per request): an edit the
            # daemon does not run is said before it can surprise (an unknown provider, a
            # provider silently left out of a composition). A daemon on TCP is another
            # user's, as a rule: its config is not the one read here.
            if not tcp:
                await _say_if_stale(client, cfg, path)
            yield client
    else:
        from hostd.server import Daemon

        # One shot: start every provider the request can reach up front, so a slow index
        # build is not a timeout; one it does not name is neither started nor waited for.
        if boot:
            cfg = cfg.model_copy(
                update={"host": cfg.host.model_copy(update={"start_providers": "boot"})}
            )
        daemon = Daemon(cfg)
        async with daemon.local(
            behind=behind, hangup=hangup, boot_only=only, rerank_boot=rerank
        ) as local:
            if bars is not None and daemon.host is not None:
                daemon.host.pool.progress_listeners.append(bars)
            try:
                yield local
            finally:
                if bars is not None:
                    bars.close()


def _start_at(path: Path, cfg: Config) -> str | None:
    """What starts a daemon at ``path`` when the config read here does not serve there
    (``hostd mcp`` run from a folder of its own, ``--connect`` to a project's daemon):
    ``hostd serve`` in the project it is for, told to bind there; None when it does."""
    if os.path.realpath(path) == os.path.realpath(cfg.socket_path):
        return None
    here = (
        ""
        if cfg.source.startswith("<")
        else f" ({cfg.source}, read here, serves at {cfg.socket_path})"
    )
    return f"start one with `hostd serve --socket {path}` in the project whose daemon it is{here}"


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def time_left(seconds: float) -> str:
    """``about 25 min left``: a warm-up's rate wanders (an embedding's does), so minutes,
    not seconds; ``hostd warm`` and ``hostd status`` say it alike."""
    if seconds < 60:
        return "less than a minute left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes} min left"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts: signal 0 is refused it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
