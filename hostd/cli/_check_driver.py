"""check-provider's driver: a provider child spoken to over raw pipes, either binding.

Owns the bytes: it sends well-formed requests and envelopes, and malformed bytes on
purpose (it writes its own pipes for that), reads replies line by line and matches
JSON-RPC replies through the one correlation table, and reaps the child by the one
teardown ladder. It judges nothing: what a reply means is ``_checks``'s (and the
daemon's leg audit's); it never imports the engine. A step that cannot go on raises
``Failed``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process

import hostd
from hostd._teardown import stop_process
from hostd.errors import ParseError
from hostd.protocol import PROTOCOL_VERSION, ContextQuery, HandshakeAck, LineItem, LineSplitter
from hostd.rpc import PendingTable, decode, encode_line, make_notification, make_request

__all__ = ["Driver", "Failed", "reap"]

_MAX_LINE = 16 * 1024 * 1024


class Failed(Exception):
    """A check's verdict, raised to end that check (control flow inside check-provider)."""

    def __init__(self, detail: str, rules: Sequence[str] = ()) -> None:
        super().__init__(detail)
        self.rules = tuple(rules)


@dataclass
class Driver:
    """One provider child and what has been read from it."""

    process: Process
    binding: str
    timeout_s: float
    splitter: LineSplitter = field(default_factory=lambda: LineSplitter(_MAX_LINE))
    lines: deque[LineItem] = field(default_factory=deque)
    next_id: int = 1
    #: JSON-RPC replies by id: the one correlation table every requesting end uses.
    calls: PendingTable = field(default_factory=PendingTable)
    correlation: bool = False
    #: Set once the provider's stdout ended: later checks cannot run (deterministically).
    dead: bool = False
    #: The handshake said ``"ready": false``: queries wait for its ``context/progress``.
    warming: bool = False

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, obj: Any) -> None:
        await self.send_raw(encode_line(obj))

    async def read_line(self) -> Any:
        assert self.process.stdout is not None
        while True:
            while self.lines:
                line = self.lines.popleft()
                if not isinstance(line, bytes):  # OVERLONG
                    raise Failed("provider wrote an over-long line")
                if not line.strip():
                    continue
                try:
                    return decode(line)
                except ParseError as exc:
                    raise Failed(f"provider wrote a line that is not JSON: {line[:80]!r}") from exc
            try:
                self.lines.extend(self.splitter.feed(await self.process.stdout.receive(1 << 16)))
            except anyio.EndOfStream:
                self.dead = True
                raise Failed("provider closed stdout (it exited)") from None

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """JSON-RPC: send one request and return its reply object (result or error).
        Lines are read until its reply; replies to nothing we wait for (the id-null
        answers to deliberate garbage) are passed over."""
        id_ = self.next_id
        self.next_id += 1
        slot = self.calls.add(id_)
        try:
            await self.send(make_request(method, params, id_))
            with anyio.fail_after(self.timeout_s):
                while not slot.done.is_set():
                    msg = await self.read_line()
                    key = msg.get("id") if isinstance(msg, dict) else None
                    reply = self.calls.pop(key) if type(key) is int else None
                    if reply is not None:
                        reply.resolve(msg)
        finally:
            self.calls.abandon(id_)
        reply_msg: dict[str, Any] = await slot.wait()
        return reply_msg

    async def wait_ready(self, timeout_s: float) -> int:
        """Read ``context/progress`` notifications until one says ready (or failed);
        the number of progress notes seen."""
        notes = 0
        with anyio.fail_after(timeout_s):
            while True:
                msg = await self.read_line()
                if isinstance(msg, dict) and msg.get("method") == "context/progress":
                    notes += 1
                    params = msg.get("params")
                    params = params if isinstance(params, dict) else {}
                    if params.get("state") == "ready":
                        self.warming = False
                        return notes
                    if params.get("state") == "failed":
                        raise Failed(f"warm-up failed: {params.get('message')}")

    async def envelope(self, message: dict[str, Any], expect: tuple[str, ...]) -> dict[str, Any]:
        """CGP: send one envelope and return the first reply envelope of an expected type."""
        await self.send(message)
        with anyio.fail_after(self.timeout_s):
            while True:
                msg = await self.read_line()
                if isinstance(msg, dict) and msg.get("type") in (*expect, "error"):
                    return msg

    # -- binding-neutral operations ------------------------------------------------------

    async def handshake(self) -> HandshakeAck:
        if self.binding == "jsonrpc":
            reply = await self.request(
                "context/handshake",
                {
                    "protocol_version": PROTOCOL_VERSION,
                    "host": {"name": "hostd-check-provider", "version": hostd.__version__},
                },
            )
            if "error" in reply:
                raise Failed(f"handshake refused: {reply['error']}")
            result = reply.get("result")
            self.warming = isinstance(result, dict) and result.get("ready") is False
            return HandshakeAck.model_validate(result)
        env = await self.envelope(
            {"type": "handshake", "protocol_version": PROTOCOL_VERSION}, ("handshake_ack",)
        )
        if env.get("type") == "error":
            raise Failed(f"handshake refused: {env}")
        return HandshakeAck.model_validate(env)

    async def query(
        self, query: ContextQuery, *, skip_errors: bool = False
    ) -> tuple[list[Any] | None, dict[str, Any] | None]:
        """Returns (raw frames, None) or (None, error object).

        ``skip_errors`` (CGP, after deliberate garbage): error envelopes that answer
        the garbage lines are passed over until the query's own reply.
        """
        if self.binding == "jsonrpc":
            reply = await self.request("context/query", {"query": query.to_wire()})
            if "error" in reply:
                return None, reply["error"]
            result = reply.get("result") or {}
            return list(result.get("frames") or []), None
        message: dict[str, Any] = {"type": "query", "query": query.to_wire()}
        if self.correlation:
            message["id"] = f"q{self.next_id}"
            self.next_id += 1
        await self.send(message)
        with anyio.fail_after(self.timeout_s):
            while True:
                env = await self.read_line()
                if not isinstance(env, dict) or env.get("type") not in ("frames", "error"):
                    continue
                if self.correlation and env.get("id") not in (None, message["id"]):
                    continue
                if env.get("type") == "error":
                    if skip_errors and (not self.correlation or env.get("id") is None):
                        continue
                    return None, env
                return list((env.get("result") or {}).get("frames") or []), None

    async def verify(self, identities: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.binding == "jsonrpc":
            reply = await self.request("context/verify", {"frames": identities})
            if "error" in reply:
                raise Failed(f"verify answered an error: {reply['error']}")
            return list((reply.get("result") or {}).get("verdicts") or [])
        env = await self.envelope(
            {"type": "verify", "request": {"frames": identities}}, ("verified",)
        )
        if env.get("type") == "error":
            raise Failed(f"verify answered an error: {env}")
        return list((env.get("response") or {}).get("verdicts") or [])

    async def shutdown(self) -> None:
        if self.binding == "jsonrpc":
            await self.send(make_notification("context/shutdown"))
        else:
            await self.send({"type": "shutdown"})


async def reap(process: Process) -> None:
    """Stdin closed, then the one teardown ladder over the provider's own session: its
    group and every descendant go with it, even after a clean exit."""
    with contextlib.suppress(Exception):
        if process.stdin is not None:
            await process.stdin.aclose()
    await stop_process(process, 2.0, group=True)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()
