"""How far one HTTP exchange got: the stage a request stalled in, told by httpcore's trace.

A remote exchange has no timeout of httpx's own (the caller's deadline bounds it), so a
request that outlives its deadline is cancelled wherever it was. ``Progress`` is that
request's ``trace`` extension: it keeps the last stage httpcore began (waiting for a
connection, connecting, the TLS handshake, sending, waiting for the response head,
reading its body), so the timeout can say which one stalled, as httpx's own timeout
types would (``PoolTimeout``, ``ConnectTimeout``, ``WriteTimeout``, ``ReadTimeout``),
and more precisely (a TLS handshake from a TCP connect, a head from a body). Plain
code: imports nothing, not even httpx.
"""

from __future__ import annotations

from typing import Any

__all__ = ["STAGES", "Progress", "stalled_found", "stalled_words"]

#: httpcore's trace events that begin each stage (its ``.started`` events, HTTP/1.1).
_BEGINS = {
    "connection.connect_tcp.started": "connect",
    "connection.start_tls.started": "tls",
    "http11.send_request_headers.started": "send",
    "http11.receive_response_headers.started": "head",
    "http11.receive_response_body.started": "body",
}

#: What each stage is, when an exchange stalled in it: what was waited for, and the
#: httpx timeout type that would have said it. Short: a handshake timeout's message,
#: its hint included, is read whole in a health's ``last_failure`` (``MAX_ERROR_CHARS``).
STAGES = {
    "pool": "waiting for a free connection (PoolTimeout)",
    "connect": "connecting (ConnectTimeout)",
    "tls": "in the TLS handshake (ConnectTimeout)",
    "send": "sending the request (WriteTimeout)",
    "head": "waiting for the response head, the request sent (ReadTimeout)",
    "body": "reading the response body, its head come (ReadTimeout)",
}

#: What a later leg says a check that timed out found (``stalled_found``).
_FOUND = {
    "pool": "waiting for a free connection",
    "connect": "connecting",
    "tls": "in the TLS handshake",
    "send": "sending the request",
    "head": "waiting for the reply",
    "body": "reading the reply",
}


class Progress:
    """One exchange's stage (``STAGES``' keys), advanced by httpcore's trace events:
    give ``trace`` as the request's ``trace`` extension."""

    __slots__ = ("stage",)

    def __init__(self) -> None:
        self.stage = "pool"  # before any event: waiting for the pool's connection

    def __repr__(self) -> str:
        return f"<Progress {self.stage}>"

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        self.stage = _BEGINS.get(event, self.stage)


def stalled_words(stage: str) -> str:
    """``stalled <what>``: the stage an exchange that outlived its deadline was in."""
    return f"stalled {STAGES.get(stage, STAGES['pool'])}"


def stalled_found(stage: object) -> str:
    """What a check that timed out in ``stage`` found, for a later leg: ``timed out
    waiting for the reply (…)``; ``timed out`` when the stage is not known."""
    found = _FOUND.get(stage) if isinstance(stage, str) else None
    return "timed out" if found is None else f"timed out {found}"
