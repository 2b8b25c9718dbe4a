"""structlog set-up and the daemon's log events.

Owns the log format: JSON lines (one object per event) to stderr or a file,
``timestamp`` (UTC, ISO 8601), ``level``, dotted ``event`` names, and the
``request_id`` of the client request the logging task serves (``REQUEST_ID``).
It also owns the events that describe a composition's evidence: one
``compose.audit.summary`` (counts per disposition, reason and provider) with
per-entry ``compose.audit`` events as ``[log] audit`` says (``summary``:
at debug only; ``sample``: a share at info; ``entries``: all at info).
A log file is created 0600 and rotated by size with the stdlib's
``RotatingFileHandler`` rollover (``log.max_bytes``, ``log.backups``).

Frame content and credentials are never logged (C8): events carry FrameIds,
digests, sizes and token counts only.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import math
import os
import re
import stat
import threading
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Literal

import orjson

from hostd._log import get_logger
from hostd._log import level as _log_level

if TYPE_CHECKING:
    from hostd.config import LogSettings

import structlog

__all__ = [
    "AUDIT_MODES",
    "LEVELS",
    "REQUEST_ID",
    "bind_request",
    "configure_logging",
    "end_request",
    "flush_logs",
    "get_logger",
    "log_audit",
    "set_audit",
    "unbind_request",
]

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

#: ``[log] audit``: which per-entry ``compose.audit`` events are written at info.
AUDIT_MODES = ("summary", "sample", "entries")
AuditMode = Literal["summary", "sample", "entries"]

#: The client request the running task serves (None outside one): every event the task
#: logs carries it as ``request_id``. A request's task sets it (``set``, no undo: a task
#: runs in its own copy of the context, so the value ends with it), and a task started
#: in an empty context (the transport's long-lived readers) has none.
REQUEST_ID: ContextVar[str | None] = ContextVar("hostd_request_id", default=None)

#: The configured threshold; per-entry events are not even built below it (hot path).
_LEVEL = LEVELS["info"]
_AUDIT: AuditMode = "summary"
_AUDIT_SAMPLE = 0.0

#: Keys that may carry content or secrets; dropped from every event whatever its source (C8).
_REDACTED_KEYS = frozenset({"content", "token", "authorization", "password", "secret", "prompt"})


def _add_request_id(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The processor that gives an event its task's ``request_id`` (unless it names one)."""
    request_id = REQUEST_ID.get()
    if request_id is not None:
        event.setdefault("request_id", request_id)
    return event


def _redact(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in _REDACTED_KEYS.intersection(event):
        event[key] = "[redacted]"
    return event


#: One lock for every writer of the log stream (loggers, the audit fast path, the
#: stdlib handler and the file's rollover); re-entrant, as a handler's own lock is.
_WRITE_LOCK = threading.RLock()


class _LineLogger:
    """structlog's final logger: one line per event into a *buffered* stream.

    ``WriteLogger`` flushes after every event (a syscall each, ~30 per composition);
    here lines collect in the buffer and ``flush_logs()`` writes them out — at the
    end of every client request and from the daemon's flusher, so nothing waits long.
    """

    __slots__ = ("_write",)

    def __init__(self, out: IO[str] | _FileSink) -> None:
        self._write = out.write

    def msg(self, message: str) -> None:
        with _WRITE_LOCK:
            self._write(message + "\n")

    log = debug = info = warn = warning = err = error = critical = exception = msg


def _dumps(event: Any, **_: Any) -> str:
    """One log event as a JSON line (orjson). A value orjson cannot carry (an integer
    past 64 bits, say) is written as its text rather than losing the event."""
    try:
        return orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return orjson.dumps(_as_text(event), default=str).decode()


def _as_text(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_text(v) for v in value]
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return str(value)
    return value


#: How an event becomes a line: JSON (``_dumps``), or structlog's console renderer on
#: a terminal (``log_format="console"``). The audit's hand-built lines use it too.
_render: Any = _dumps


def _console(colors: bool) -> Any:
    renderer = structlog.dev.ConsoleRenderer(colors=colors)

    def render(event: Mapping[str, Any]) -> str:
        return str(renderer(None, str(event.get("level", "info")), dict(event)))

    return render


#: A URL's query, in a library's message (httpx logs each request's URL at info): a
#: server may take its key there, so it is never written (C8), whatever the level.
_URL_QUERY_RE = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#\"'<>]*)\?[^\s#\"'<>]*")


class _StdlibJson(logging.Formatter):
    """Third-party stdlib log records as lines like ours, with their time, a URL's
    query left out (never their arguments' repr)."""

    def format(self, record: logging.LogRecord) -> str:
        at = (
            datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="microseconds")
            .replace("+00:00", "Z")
        )
        return str(
            _render(
                {
                    "event": f"stdlib.{record.name}",
                    "message": _URL_QUERY_RE.sub(r"\1?<redacted>", record.getMessage()),
                    "level": record.levelname.lower(),
                    "timestamp": at,
                }
            )
        )


_library_log = get_logger("hostd.rpc")


class _ToStructlog(logging.Handler):
    """A library's stdlib records as our events: ``rpc.library.failed`` with the
    ``logger`` it came from, at the record's level, with whatever is bound (the request
    id), the exception's type and where it was raised; never the record's message or
    the exception's text (either may quote what a peer sent)."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        fields = {
            "logger": record.name,
            "error": type(error).__name__ if error is not None else None,
            # Where it failed, without the exception's text: that may quote a peer.
            "traceback": "".join(traceback.format_tb(error.__traceback__)) if error else None,
        }
        if record.levelno >= logging.ERROR:
            _library_log.error("rpc.library.failed", **fields)
        elif record.levelno >= logging.WARNING:
            _library_log.warning("rpc.library.failed", **fields)
        else:
            _library_log.debug("rpc.library.failed", **fields)


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """The log file: created 0600, written through a 64 KiB buffer, rotated by size.

    Our events are written straight to ``stream`` (see ``_FileSink``); the size is
    checked when the buffer is flushed, and the stdlib's ``doRollover`` renames
    ``hostd.log`` → ``hostd.log.1`` … ``.N`` and opens a fresh file.
    """

    def createLock(self) -> None:  # noqa: N802 - the stdlib's name
        # The same lock as every other writer: a rollover never meets a half-written line.
        self.lock = _WRITE_LOCK

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return open(fd, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115 - kept open


class _FileSink:
    """The stream our loggers write to when ``log.file`` is set (callers hold the lock)."""

    __slots__ = ("handler",)

    def __init__(self, handler: _PrivateRotatingFile) -> None:
        self.handler = handler

    def write(self, text: str) -> int:
        stream = self.handler.stream
        if stream is None:  # a failed rollover left no file: lose lines, not the request
            return 0
        return int(stream.write(text))

    def flush(self) -> None:
        handler = self.handler
        with _WRITE_LOCK:
            if handler.stream is None:
                return
            handler.stream.flush()
            if handler.maxBytes > 0 and handler.stream.tell() >= handler.maxBytes:
                handler.doRollover()


def _open_file(path: str, max_bytes: int, backups: int) -> _PrivateRotatingFile:
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
        # A directory that does not exist yet is made, private (0700), as state_dir is.
        parent = os.path.dirname(os.path.abspath(path))
        missing: list[str] = []
        while not os.path.exists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(missing):
            os.mkdir(folder, 0o700)
    # A FIFO or a device (``/dev/stderr``) cannot be rotated; it is only written.
    return _PrivateRotatingFile(
        path, maxBytes=max_bytes if regular else 0, backupCount=backups, encoding="utf-8"
    )


_OUT: IO[str] | _FileSink | None = None
_FILE: _PrivateRotatingFile | None = None


def flush_logs() -> None:
    """Write buffered log lines out now (cheap when there is nothing to write)."""
    out = _OUT
    if out is not None:
        try:
            out.flush()
        except (OSError, ValueError):  # a closed or broken log stream must not fail a request
            pass


def configure_logging(
    level: str | None = None,
    *,
    settings: LogSettings | None = None,
    file: str | None = None,
    stream: IO[str] | None = None,
    log_format: Literal["auto", "json", "console"] = "json",
) -> IO[str] | _FileSink:
    """Route structlog to JSON lines on ``stream`` (default stderr) or a file.

    ``settings`` is the ``[log]`` table (level, file, audit mode, rotation); ``level``
    and ``file`` override it. Returns the stream written to. Never writes to stdout:
    when serving stdio the real stdout is the wire. Lines are buffered;
    ``flush_logs()`` writes them (and rotates the file when it is due).
    ``log_format``: ``console`` renders human-readable lines (colours on a terminal);
    ``auto`` is ``console`` when the log goes to stderr and stderr is a terminal, else
    JSON. A log file is always JSON lines.
    """
    global _LEVEL, _OUT, _FILE, _AUDIT, _AUDIT_SAMPLE, _render
    level = level or (settings.level if settings is not None else "info")
    if file is None and settings is not None and settings.file is not None:
        file = str(settings.file)
    _AUDIT = settings.audit if settings is not None else "summary"
    _AUDIT_SAMPLE = settings.audit_sample if settings is not None else 0.0
    out: IO[str] | _FileSink
    previous = _FILE
    _FILE = None
    if file is not None:
        max_bytes = settings.max_bytes if settings is not None else 0
        backups = settings.backups if settings is not None else 0
        _FILE = _open_file(file, max_bytes, backups)
        out = _FileSink(_FILE)
    elif stream is not None:
        out = stream
    else:
        # Our own buffered writer on fd 2 (sys.stderr is line-buffered: a syscall a line).
        out = open(2, "w", encoding="utf-8", buffering=1 << 16, closefd=False)  # noqa: SIM115
    tty = file is None and stream is None and os.isatty(2)
    console = file is None and (log_format == "console" or (log_format == "auto" and tty))
    _render = _console(colors=tty) if console else _dumps
    if _OUT is not None and _OUT is not out:
        flush_logs()
    if previous is not None:
        previous.close()
    _OUT = out
    atexit.register(flush_logs)
    structlog.configure(
        processors=[
            _add_request_id,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=tty)
            if console
            else structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=lambda *_args: _LineLogger(out),
        # Loggers are built once: an uncached lazy proxy rebuilds one per event (hot path).
        cache_logger_on_first_use=True,
    )
    _LEVEL = LEVELS[level]
    _log_level.at = _LEVEL  # what the engine's hot paths read (it imports no hostd.logs)
    # Third-party libraries log through the stdlib; send them to the same place, never stdout.
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler: logging.Handler = _FILE if _FILE is not None else logging.StreamHandler(out)
    handler.setFormatter(_StdlibJson())
    # Their info is chatter (a line per HTTP request): at most warning unless log.level is
    # debug. The threshold is the handler's too: a library that sets its own logger to
    # DEBUG (bm25s does, on import) would otherwise bypass the root's level.
    threshold = LEVELS[level] if level == "debug" else max(LEVELS[level], logging.WARNING)
    handler.setLevel(threshold)
    root.addHandler(handler)
    root.setLevel(threshold)
    # jsonrpcserver logs what fails inside the library itself (a method's own failures
    # never reach it: the error boundary answers them): through our loggers, with the
    # request id bound, at its own level.
    library = logging.getLogger("jsonrpcserver")
    for old in list(library.handlers):
        library.removeHandler(old)
    library.addHandler(_ToStructlog())
    library.setLevel(logging.NOTSET)
    library.propagate = False
    return out


def set_audit(settings: LogSettings) -> None:
    """Apply ``[log] audit`` and ``audit_sample`` from ``settings`` to the compositions
    logged from now on (a daemon's config reload); the rest of ``[log]`` stays as
    ``configure_logging`` set it."""
    global _AUDIT, _AUDIT_SAMPLE
    _AUDIT, _AUDIT_SAMPLE = settings.audit, settings.audit_sample


def bind_request(request_id: str) -> None:
    """Set ``request_id`` (``REQUEST_ID``) so every event this task (and the tasks it
    starts) logs carries it."""
    REQUEST_ID.set(request_id)


def unbind_request() -> None:
    """Forget the request id set in this context."""
    REQUEST_ID.set(None)


def end_request(
    logger: Any,
    started: float,
    method: str | None,
    connection: str,
    error_code: int | None,
    error_reason: str | None,
) -> None:
    """A client request's end: one ``request.done`` (info; none when ``logger`` is None)
    with its ``duration_ms`` since ``started`` (``time.perf_counter`` at its start; the
    server reads it only when this event is written), then every buffered
    line written (one write for all the events the request caused). Below the log level
    the event is not even built."""
    if logger is not None and _LEVEL <= LEVELS["info"]:
        logger.info(
            "request.done",
            method=method,
            connection=connection,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            error_code=error_code,
            error_reason=error_reason,
        )
    flush_logs()


_AUDIT_KEYS = (
    "disposition",
    "reason",
    "rank",
    "score",
    "position",
    "tokens",
    "provider",
    "verification",
)


def log_audit(
    logger: Any,
    entries: Iterable[Mapping[str, Any]],
    legs: Iterable[Mapping[str, Any]] = (),
    *,
    done: Mapping[str, Any] | None = None,
) -> None:
    """A composition's audit in the log: one summary, and entries as ``[log] audit`` says;
    then, given ``done`` (its figures), the composition's ``compose.done`` event, through
    ``logger``. Below info level neither is written (the summary not even counted): a
    composition's whole log is this one call.

    ``compose.audit.summary`` (info) counts the entries per disposition, reason and
    provider, and names the providers whose leg (``legs``: the ``providers[]`` reports)
    was ``warming``: they offered no entry, so only this says why. Each entry is a
    ``compose.audit`` event (FrameId, disposition, reason, rank, score, position,
    tokens, verification; content never), at info in ``entries`` mode and for the
    sampled share in ``sample`` mode, at debug otherwise. The entries are rendered in
    one pass and written in one call: a composition has one entry per offered frame,
    so this is the log's hot path.
    """
    if _LEVEL > LEVELS["info"]:  # the level the loggers filter by (configure_logging)
        return
    out = _OUT
    if out is not None:
        _write_audit(out, entries, legs)
    if done is not None:
        logger.info("compose.done", **done)


def _write_audit(
    out: IO[str] | _FileSink,
    entries: Iterable[Mapping[str, Any]],
    legs: Iterable[Mapping[str, Any]],
) -> None:
    entries = list(entries)
    request_id = REQUEST_ID.get()
    context = {"request_id": request_id} if request_id is not None else {}
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    at_info = _entries_at_info(entries, request_id or "")
    lines = []
    if at_info is None or at_info or _LEVEL <= LEVELS["debug"]:
        for i, entry in enumerate(entries):
            info = at_info is None or i in at_info
            if info or _LEVEL <= LEVELS["debug"]:
                lines.append(_audit_line(context, entry, "info" if info else "debug", stamp))
    warming = sorted(str(r.get("provider_id")) for r in legs if r.get("status") == "warming")
    lines.append(_summary_line(context, entries, at_info, stamp, warming))
    with _WRITE_LOCK:
        out.write("\n".join(lines) + "\n")


def _entries_at_info(entries: list[Mapping[str, Any]], request_id: str) -> set[int] | None:
    """Indexes of the entries logged at info: ``None`` for all (``entries`` mode).

    ``sample`` picks ``ceil(rate × n)`` entries by a hash of the request id and the
    FrameId: spread over providers and ranks, and the same pick for the same request.
    """
    if _AUDIT == "entries":
        return None
    if _AUDIT == "summary" or not entries or _AUDIT_SAMPLE <= 0:
        return set()
    k = math.ceil(_AUDIT_SAMPLE * len(entries))

    def key(i: int) -> tuple[int, int]:
        frame = entries[i].get("frame") or {}
        ident = f"{request_id}\0{frame.get('provider_id')}\0{frame.get('frame_id')}"
        ident += f"\0{frame.get('content_digest')}"
        return (zlib.crc32(ident.encode("utf-8", "surrogatepass")), i)

    return set(sorted(range(len(entries)), key=key)[:k])


def _audit_line(
    context: Mapping[str, Any], entry: Mapping[str, Any], level: str, stamp: str
) -> str:
    event: dict[str, Any] = dict(context)
    frame = entry.get("frame")
    if frame is None:
        keys = ("provider_id", "frame_id", "content_digest")
        frame = {k: entry[k] for k in keys if k in entry}
    event["frame"] = frame
    for key in _AUDIT_KEYS:
        value = entry.get(key)
        if value is not None:
            event[key] = value
    event["event"] = "compose.audit"
    event["level"] = level
    event["timestamp"] = stamp
    return str(_render(event))


def _summary_line(
    context: Mapping[str, Any],
    entries: list[Mapping[str, Any]],
    at_info: set[int] | None,
    stamp: str,
    warming: list[str],
) -> str:
    dispositions: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    providers: dict[str, Counter[str]] = {}
    for entry in entries:
        disposition = str(entry.get("disposition"))
        dispositions[disposition] += 1
        if entry.get("reason") is not None:
            reasons[str(entry["reason"])] += 1
        frame = entry.get("frame") or {}
        provider = str(entry.get("provider") or frame.get("provider_id"))
        providers.setdefault(provider, Counter())[disposition] += 1
    event: dict[str, Any] = dict(context)
    event.update(
        entries=len(entries),
        dispositions=dict(sorted(dispositions.items())),
        reasons=dict(sorted(reasons.items())),
        providers={p: dict(sorted(c.items())) for p, c in sorted(providers.items())},
        logged=len(entries) if at_info is None else len(at_info),
        warming=warming,
        event="compose.audit.summary",
        level="info",
        timestamp=stamp,
    )
    return str(_render(event))
