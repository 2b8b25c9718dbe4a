"""structlog set-up and the daemon's log events.

Owns the log format: JSON lines (one object per event) to stderr or a file,
``timestamp`` (UTC, ISO 8601), ``level``, dotted ``event`` names, and whatever
is bound in contextvars (``request_id`` for the life of a client request).
It also owns the events that describe a request's evidence: one
``provider.leg`` per provider leg and one ``compose.audit`` per audit entry.

Frame content and credentials are never logged (C8): events carry FrameIds,
digests, sizes and token counts only.
"""

from __future__ import annotations

import atexit
import json
import logging as _stdlib_logging
import threading
from collections.abc import Iterable, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import IO, Any

import structlog

__all__ = [
    "LEVELS",
    "bind_request",
    "configure_logging",
    "flush_logs",
    "get_logger",
    "log_audit",
    "log_legs",
    "unbind_request",
]

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

#: Keys that may carry content or secrets; dropped from every event whatever its source (C8).
#: The configured threshold; per-entry events are not even built below it (hot path).
_LEVEL = LEVELS["info"]

_REDACTED_KEYS = frozenset({"content", "token", "authorization", "password", "secret", "prompt"})


def _redact(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in _REDACTED_KEYS.intersection(event):
        event[key] = "[redacted]"
    return event


#: One lock for every writer of the log stream (loggers, the audit fast path).
_WRITE_LOCK = threading.Lock()


class _LineLogger:
    """structlog's final logger: one line per event into a *buffered* stream.

    ``WriteLogger`` flushes after every event (a syscall each, ~30 per composition);
    here lines collect in the buffer and ``flush_logs()`` writes them out — at the
    end of every client request and from the daemon's flusher, so nothing waits long.
    """

    __slots__ = ("_write",)

    def __init__(self, out: IO[str]) -> None:
        self._write = out.write

    def msg(self, message: str) -> None:
        with _WRITE_LOCK:
            self._write(message + "\n")

    log = debug = info = warn = warning = err = error = critical = exception = msg


class _StdlibJson(_stdlib_logging.Formatter):
    """Third-party stdlib log records as JSON lines like ours (never their arguments' repr)."""

    def format(self, record: _stdlib_logging.LogRecord) -> str:
        return json.dumps(
            {
                "event": f"stdlib.{record.name}",
                "message": record.getMessage(),
                "level": record.levelname.lower(),
            },
            default=str,
        )


_OUT: IO[str] | None = None


def flush_logs() -> None:
    """Write buffered log lines out now (cheap when there is nothing to write)."""
    out = _OUT
    if out is not None:
        try:
            out.flush()
        except (OSError, ValueError):  # a closed or broken log stream must not fail a request
            pass


def configure_logging(
    level: str = "info", *, file: str | None = None, stream: IO[str] | None = None
) -> IO[str]:
    """Route structlog to JSON lines on ``stream`` (default stderr) or ``file``.

    Returns the stream written to. Never writes to stdout: when serving stdio
    the real stdout is the wire. Lines are buffered; ``flush_logs()`` writes them.
    """
    global _LEVEL, _OUT
    out: IO[str]
    if file is not None:
        out = open(file, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115 - process-long
    elif stream is not None:
        out = stream
    else:
        # Our own buffered writer on fd 2 (sys.stderr is line-buffered: a syscall a line).
        out = open(2, "w", encoding="utf-8", buffering=1 << 16, closefd=False)  # noqa: SIM115
    if _OUT is not None and _OUT is not out:
        flush_logs()
    _OUT = out
    atexit.register(flush_logs)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False, default=str),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=lambda *_args: _LineLogger(out),
        # Loggers are built once: an uncached lazy proxy rebuilds one per event (hot path).
        cache_logger_on_first_use=True,
    )
    _LEVEL = LEVELS[level]
    # Third-party libraries log through the stdlib; send them to the same place, never stdout.
    root = _stdlib_logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = _stdlib_logging.StreamHandler(out)
    handler.setFormatter(_StdlibJson())
    root.addHandler(handler)
    root.setLevel(max(LEVELS[level], _stdlib_logging.WARNING))
    # jsonrpcserver logs method exceptions itself; our error boundary already does.
    _stdlib_logging.getLogger("jsonrpcserver").setLevel(_stdlib_logging.CRITICAL)
    return out


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)


def bind_request(request_id: str, **extra: Any) -> None:
    """Bind ``request_id`` so every event this task (and its children) logs carries it."""
    structlog.contextvars.bind_contextvars(request_id=request_id, **extra)


def unbind_request(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars("request_id", *keys)


def log_legs(logger: Any, reports: Mapping[str, Any]) -> None:
    """One ``provider.leg`` event per provider leg: status, latency, frames, violations."""
    if _LEVEL > LEVELS["info"]:
        return
    for provider_id in sorted(reports):
        report = reports[provider_id]
        violations = getattr(report, "violations", ()) or ()
        logger.info(
            "provider.leg",
            provider=provider_id,
            status=str(getattr(report, "status", "unknown")),
            latency_ms=getattr(report, "latency_ms", None),
            frames_offered=getattr(report, "frames_offered", None),
            frames_accepted=getattr(report, "frames_accepted", None),
            error_code=getattr(report, "error_code", None),
            violations=[_violation(v) for v in violations],
        )


def _violation(v: Any) -> dict[str, Any]:
    if isinstance(v, Mapping):
        return {k: v.get(k) for k in ("rule", "field", "severity")}
    return {
        "rule": getattr(v, "rule", None),
        "field": getattr(v, "field", None),
        "severity": str(getattr(v, "severity", "")) or None,
    }


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


def log_audit(logger: Any, entries: Iterable[Mapping[str, Any]]) -> None:
    """One ``compose.audit`` event per audit entry (wire form), content never included.

    The same line shape as every other event (bound context, ``event``, ``level``,
    ``timestamp``), rendered here in one pass and written in one call: a composition
    has one entry per offered frame, so this is the log's hot path.
    """
    if _LEVEL > LEVELS["info"] or _OUT is None:
        return
    context = structlog.contextvars.get_contextvars()
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    lines = []
    for entry in entries:
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
        event["level"] = "info"
        event["timestamp"] = stamp
        lines.append(json.dumps(event, default=str))
    if lines:
        with _WRITE_LOCK:
            _OUT.write("\n".join(lines) + "\n")
