"""``binding = "mcp"``: an MCP server child as a context provider, on the official SDK.

The transport owns the child (spawn, scrubbed env, stderr into the log, the
teardown ladder) and feeds its stdout lines here (``on_line``/``on_end``), as
it does for the other bindings; this client hands them to the SDK's
``ClientSession`` and writes what the session sends back to the child's stdin.
``handshake`` is MCP's ``initialize`` (under the transport's handshake timeout),
answered to the engine as a CGP handshake: the server's name and version, the
configured kind, and the configured ``data_flow`` (``egress``), so the consent
gate, the leg timeout, the leg audit and the restart policy treat it like any
provider. ``query`` reads resources and calls the configured tools, side by side
(I/O, on the loop), then hands what they served to ``_build``: cutting and scoring
run in a worker thread, under the leg's deadline, so a server serving megabytes never
stalls the daemon. Every failure leaves as a ``HostdError`` (a ``TimeoutError`` when
every call ran out of time: the leg's timeout): a crashing, hanging or babbling server
costs its own leg only. Within a leg, the resource listing, each read and each tool
call end by a deadline of their own, before the leg's (``calls_deadline``), so a read
or a tool that fails or hangs costs its own results only: the leg answers with the
others' as a ``PartialResult`` saying what it lost (``lost_note``, ``unread_note``).
A call, read or listing given up (its own deadline, or its leg cancelled: the leg's
timeout, the composition cancelled by its caller) is cancelled on the server: the SDK's
session sends ``notifications/cancelled`` with its ``requestId`` (never for
``initialize``, MCP forbids it) into the outbox ``_write_out`` drains, and drops an
answer that still comes (MCP: the sender "SHOULD ignore" it), so a late answer is no
fault. A line on the server's stdout that is no JSON-RPC message at all (a banner, a log
line, JSON or not: no ``"jsonrpc"`` member) is skipped, not a fault; one that claims to
be JSON-RPC and is not valid is.

Nothing the server writes is quoted into an error or the log (it may echo a
credential): a line that is not JSON-RPC, a read or call refused, a tool's
``isError`` text are reported by size, position and code only. A start whose config
names a tool the server lacks says which tools it offers, by their names and
required arguments' names, identifier-shaped ones only (``_offered``). The SDK's own
loggers, which would quote method names and payloads, are given the same rule
(``_served.withhold_sdk_logs``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.abc import TaskStatus
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

import hostd
from hostd._log import get_logger
from hostd.errors import (
    HandshakeFailed,
    HostdError,
    NotSupported,
    ProtocolFault,
    ProviderCrashed,
    ProviderError,
)
from hostd.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    ProviderInfo,
    QueryCapability,
    RememberRequest,
    RememberResult,
    VerifyResponse,
)
from hostd.transport import (
    BindingRow,
    EmptyResult,
    PartialResult,
    RepeatedEvents,
    StartedCall,
    register_binding,
)

from ._build import Builder, Source
from ._cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, ReadCache
from ._frames import Cut, render_arguments
from ._offered import describe_tools, unmet_arguments
from ._served import document, tool_calls, tool_documents, withhold_sdk_logs

__all__ = [
    "McpBindingClient",
    "calls_deadline",
    "lost_note",
    "mcp_client_factory",
    "unread_note",
]

log = get_logger("hostd.mcp")

#: Messages from the server not yet taken by the session: past this the server is
#: flooding us, which is its fault (memory stays bounded).
_INBOX = 1024
#: Resources read at once per query.
_READS_AT_ONCE = 8
#: Of the time a leg has left when it starts, the share kept for its reply (cutting and
#: scoring what was served, the answer to the engine), at most ``_REPLY_MARGIN_MAX_S``:
#: every read and tool call is done, answered or cancelled, by then.
_REPLY_SHARE = 0.2
_REPLY_MARGIN_MAX_S = 0.5
#: A tool name shown in a leg's note: an identifier as MCP names tools. Any other name
#: is counted, not shown (the note reaches the model's prompt beside the evidence).
_SHOWN_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
#: Entries a note lists of the tools that gave nothing; the rest are counted.
_NAMES_SHOWN = 5


def calls_deadline(leg_deadline: float, now: float) -> float:
    """When every resource read and tool call of a leg must be done: its deadline less a
    margin for the reply, so a read or a tool that hangs costs its own results, not the
    leg's (``inf``: no deadline, none either)."""
    if math.isinf(leg_deadline):
        return leg_deadline
    left = max(leg_deadline - now, 0.0)
    return leg_deadline - min(left * _REPLY_SHARE, _REPLY_MARGIN_MAX_S)


@dataclass(slots=True, frozen=True)
class _Lost:
    """One call of a leg that served nothing this query: a configured tool (its name) or
    a resource read (``name`` ``None``: a URI is the server's text, never shown), how
    (a code, never the server's text), and the error it became (``None``: it timed
    out)."""

    name: str | None
    how: str
    error: HostdError | None


@dataclass(slots=True, frozen=True)
class _Read:
    """What a leg's resources gave: the pieces of reads still cached (``held``) and the
    reads done now (``fresh``), both by URI; whether the listing was cut at
    ``max_resources``; the reads lost, of the ``asked`` (``None``: the listing itself
    was lost, so no read was asked)."""

    held: tuple[list[Cut], ...] = ()
    fresh: tuple[Source, ...] = ()
    truncated: bool = False
    lost: tuple[_Lost, ...] = ()
    asked: int | None = 0


def _of_tools(n: int, k: int, what: str = "") -> str:
    """``n`` of a provider's ``k`` tools, for its note: ``its tool``, ``its 2 tools``,
    ``1 of its 2 tools``; with ``what`` their answers (``its tool's answer``)."""
    if n == k:
        whole = "its tool" if k == 1 else f"its {k} tools"
    else:
        whole = f"{n} of its {k} tools"
    if not what:
        return whole
    return f"{whole}'s {what}" if k == 1 else f"{whole}' {what}s"


def lost_note(lost: Sequence[tuple[str, str]], asked: int) -> str:
    """A leg's note for the tools that served nothing (``(name, how)`` in config
    order) of the ``asked`` it called: ``1 of 3 tools gave no results: always_fails
    (isError)``. A name that is not an identifier is counted, not shown; past
    ``_NAMES_SHOWN`` entries the rest are counted (``and 3 more``): the note reaches
    a prompt and a status line."""
    shown = [f"{name} ({how})" for name, how in lost if _SHOWN_NAME_RE.match(name)]
    unnamed: dict[str, int] = {}
    for name, how in lost:
        if not _SHOWN_NAME_RE.match(name):
            unnamed[how] = unnamed.get(how, 0) + 1
    shown += [f"{n} not named ({how})" for how, n in unnamed.items()]
    listed = ", ".join(shown[:_NAMES_SHOWN])
    if len(shown) > _NAMES_SHOWN:
        listed += f" and {len(shown) - _NAMES_SHOWN} more"
    tools = "tool" if asked == 1 else "tools"
    return f"{len(lost)} of {asked} {tools} gave no results: {listed}"


def unread_note(hows: Sequence[str], asked: int | None) -> str:
    """A leg's note for the resources that served nothing (each one's ``how``) of the
    ``asked`` it read: ``2 of 9 resources gave no results (timeout)``; ``asked``
    ``None``: the listing itself served nothing. Resources are counted, never named:
    a URI is the server's text."""
    if asked is None:
        return f"the resource listing gave no results ({hows[0]})"
    counts: dict[str, int] = {}
    for how in hows:
        counts[how] = counts.get(how, 0) + 1
    whole = f"{len(hows)} of {asked} {'resource' if asked == 1 else 'resources'} gave no results"
    if len(counts) == 1:
        return f"{whole} ({hows[0]})"
    return f"{whole}: {', '.join(f'{n} ({how})' for how, n in counts.items())}"


def _how(error: HostdError) -> str:
    """How a call that failed is told (note, log, ``provider_partial``): ``error`` for
    an error answer, else its reason (``protocol_fault``)."""
    return "error" if isinstance(error, ProviderError) else error.reason


def mcp_client_factory(options: Mapping[str, Any]) -> Any:
    """The transport's ``ClientFactory`` for one provider's ``[provider.mcp]`` options."""

    def build(send: Any, *, provider_id: str, send_nowait: Any = None) -> Any:
        return McpBindingClient(send, provider_id=provider_id, options=options)

    return build


class McpBindingClient:
    """One MCP server, seen by the engine as a CGP provider (``BindingClient``)."""

    binding = "mcp"
    #: Queries may overlap: the SDK correlates its requests by id.
    correlation = True

    def __init__(self, send: Any, *, provider_id: str, options: Mapping[str, Any]) -> None:
        self._send = send
        self.provider_id = provider_id
        self.options = dict(options)
        self._failure: HostdError | None = None
        #: Told once the stream ends or breaks (``BindingClient.on_broken``).
        self.on_broken: Callable[[], None] | None = None
        self._ended = anyio.Event()
        self._inbox_send, self._inbox = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](_INBOX)
        self._outbox_send, self._outbox = anyio.create_memory_object_stream[SessionMessage](
            math.inf
        )
        self._session: ClientSession | None = None
        self._server = "?"
        #: The version the server gave at ``initialize``; ``None`` when it gave none (its
        #: ack says ``unknown`` then: a CGP handshake names one, H2). The connection's
        #: ``provider.handshake.ok`` logs this, not the stand-in.
        self.server_version: str | None = None
        self._tools = tool_calls(self.options)
        self._kind = str(self.options.get("kind", "doc"))
        self.cache = ReadCache(
            anyio.current_time,
            float(self.options.get("cache_ttl_s", 30.0)),
            max_entries=int(self.options.get("cache_max_entries", DEFAULT_MAX_ENTRIES)),
            max_bytes=int(self.options.get("cache_max_bytes", DEFAULT_MAX_BYTES)),
        )
        self._builder = Builder(provider_id)
        #: The warnings a server can cause on every query, rate-limited.
        self._repeats = RepeatedEvents(log)
        #: Lines on its stdout that were not JSON, skipped (``on_line``).
        self.stray_lines = 0
        withhold_sdk_logs()

    def __repr__(self) -> str:
        return (
            f"<McpBindingClient {self.provider_id} server={self._server!r} "
            f"failure={self._failure!r} stray_lines={self.stray_lines} cache={self.cache!r}>"
        )

    @property
    def failure(self) -> HostdError | None:
        return self._failure

    # -- the line stream (fed by the child's pipe) --------------------------------------

    def on_line(self, line: bytes) -> bool:
        if self._failure is not None:
            return False
        if not line.strip():
            return True
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            if not _claims_jsonrpc(line):
                # MCP: a server "MUST NOT write anything to its stdout that is not a
                # valid MCP message", yet a banner or a log line is common, JSON ones
                # too (``{"level":"info","msg":"started"}``), and the SDK's stdio client
                # only logs any line it cannot read and reads on. A line that does not
                # claim to be JSON-RPC answers nothing: skipped, counted, logged by its
                # size (its text may hold a credential).
                self.stray_lines += 1
                self._repeats.warning(
                    "mcp.stdout.not_jsonrpc",
                    provider=self.provider_id,
                    bytes=len(line),
                    lines=self.stray_lines,
                )
                return True
            # A JSON-RPC message (``"jsonrpc"`` in it) MCP cannot read: the server meant
            # to answer and broke the protocol. A request may wait on that very answer:
            # the stream is at fault.
            self.on_end(
                ProtocolFault(
                    f"MCP server wrote a JSON-RPC line that is no valid MCP message "
                    f"({len(line)} bytes, not quoted)"
                )
            )
            return False
        try:
            self._inbox_send.send_nowait(SessionMessage(message))
        except anyio.WouldBlock:
            self.on_end(ProtocolFault(f"MCP server sent over {_INBOX} unread messages"))
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def on_end(self, error: HostdError) -> None:
        if self._failure is None:
            self._failure = error
            log.debug("provider.stream.ended", provider=self.provider_id, reason=error.reason)
            if self.on_broken is not None:  # its connection's ``alive`` falls
                self.on_broken()
        # The session sees the end of its stream: every request it waits on fails.
        self._inbox_send.close()
        self._ended.set()

    def close(self, error: HostdError) -> None:
        self.on_end(error)

    async def run_session(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The SDK session and the writer to the child, until the stream ends."""
        info = types.Implementation(name="hostd", version=hostd.__version__)
        try:
            async with (
                ClientSession(self._inbox, self._outbox_send, client_info=info) as session,
                anyio.create_task_group() as tg,
            ):
                self._session = session
                tg.start_soon(self._write_out)
                task_status.started()
                await self._ended.wait()
                tg.cancel_scope.cancel()
        finally:
            self.on_end(ProviderCrashed("provider connection closed"))
            self._repeats.summarise(final=True)
            for stream in (self._inbox, self._outbox_send, self._outbox):
                stream.close()

    async def _write_out(self) -> None:
        async for item in self._outbox:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await self._send(data.encode() + b"\n")
            except HostdError as exc:
                self.on_end(exc)
                return

    # -- the engine's calls --------------------------------------------------------------

    def _live(self) -> ClientSession:
        if self._failure is not None:
            raise self._failure
        if self._session is None:
            raise ProviderCrashed("MCP session not started")
        return self._session

    def _error(self, what: str, exc: Exception) -> HostdError:
        """A session failure as the leg's typed error (the stream's end when it ended).
        The server's own words (an error message, the values a reply failed to
        validate with) are never quoted: its code, or how many fields failed."""
        if self._failure is not None:
            return self._failure
        if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
            return ProviderCrashed(f"MCP {what}: the server closed the connection")
        if isinstance(exc, MCPError):
            return ProviderError(
                f"MCP {what}: the server answered error {exc.code} "
                f"({len(exc.message.encode())} bytes of message, not quoted)",
                mcp_code=exc.code,
            )
        if isinstance(exc, ValidationError):
            return ProtocolFault(
                f"MCP {what}: a reply that does not fit MCP ({exc.error_count()} field(s))"
            )
        return ProtocolFault(f"MCP {what}: {type(exc).__name__}")

    async def handshake(self, host: HostInfo) -> HandshakeAck:
        session = self._live()
        try:
            init = await session.initialize()
            offered = await self._tool_list(session) if self._tools else []
        except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
            raise self._error("initialize", exc) from None
        caps = init.capabilities
        missing = sorted({t.name for t in self._tools} - {t.name for t in offered})
        # Either is the config's fault, not the process's: ``stage: config`` parks it at
        # once (no restart cures it), and what the server does offer says how to fix it.
        if missing:  # names of this config's; of the server's, identifier-shaped ones only
            raise HandshakeFailed(
                f"MCP server offers no tool {', '.join(map(repr, missing))}; "
                f"{describe_tools(offered)}",
                stage="config",
            )
        by_name = {t.name: t for t in offered}
        unmet = [unmet_arguments(by_name[t.name], t.arguments) for t in self._tools]
        if any(unmet):  # every such call is refused: the config's fault, found here
            raise HandshakeFailed("; ".join(u for u in unmet if u), stage="config")
        if not self._tools and (not self.options.get("resources", True) or caps.resources is None):
            offers = ""
            with contextlib.suppress(HostdError):  # the config's fault all the same
                offers = f"; {describe_tools(await self.offered_tools())}"
            raise HandshakeFailed(
                f"MCP server offers no resources and no tool is configured{offers}",
                stage="config",
            )
        name = init.server_info.name or "mcp-server"
        self._server = name
        self.server_version = init.server_info.version.strip() or None
        log.info(
            "mcp.provider.initialized",
            provider=self.provider_id,
            server=name,
            protocol_version=init.protocol_version,
        )
        egress = bool(self.options.get("egress"))
        return HandshakeAck(
            protocol_version=PROTOCOL_VERSION,
            provider=ProviderInfo(
                name=name,
                version=self.server_version or "unknown",
                data_flow=DataFlow(
                    reads=True,
                    egress=egress,
                    egress_scopes=list(self.options.get("egress_scopes") or []) if egress else [],
                ),
            ),
            capabilities=Capabilities(
                query=QueryCapability(kinds=[self._kind]),
                correlation=True,
            ),
        )

    async def offered_tools(self) -> list[types.Tool]:
        """Every tool the server lists, none when it declares no tools: what
        check-provider shows (the engine asks only for the configured ones, at the
        handshake)."""
        session = self._live()
        caps = session.server_capabilities
        if caps is None or caps.tools is None:
            return []
        try:
            return await self._tool_list(session)
        except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
            raise self._error("tools/list", exc) from None

    async def _tool_list(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(64):  # pages: a server paging forever costs a bounded handshake
            page = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def start_query(self, query: ContextQuery | dict[str, Any], **_: Any) -> StartedCall | None:
        return None  # an SDK call always takes a loop turn: the engine awaits ``query``

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        session = self._live()
        caps = session.server_capabilities
        reading = bool(self.options.get("resources", True)) and (
            caps is not None and caps.resources is not None
        )
        # The leg's deadline is the engine's scope around this call. Reads and tools run
        # side by side, each to this deadline: a read that hangs cannot take the tools'
        # time, nor a tool the reads', and the leg's time is the slowest call's, not
        # the sum.
        deadline = calls_deadline(anyio.current_effective_deadline(), anyio.current_time())
        read = _Read()
        called: tuple[list[Source], list[_Lost]] = ([], [])

        async def resources() -> None:
            nonlocal read
            read = await self._resources(session, deadline)

        async def tools() -> None:
            nonlocal called
            called = await self._call_tools(session, query, deadline)

        async with anyio.create_task_group() as tg:
            if reading:
                tg.start_soon(resources)
            if self._tools:
                tg.start_soon(tools)
        if self._failure is not None:
            raise self._failure
        served, lost = called
        fresh = [*read.fresh, *served]  # resources by URI, then tools in config order
        if (read.lost or lost) and not (read.held or fresh):
            raise self._nothing_served(read, lost)
        result = await self._builder.build(
            list(read.held), fresh, query, kind=self._kind, server=self._server, keep=self._keep
        )
        if read.truncated and not result.truncated:
            result = result.model_copy(update={"truncated": True})
        if read.lost or lost:
            return PartialResult(
                frames=result.frames,
                truncated=result.truncated,
                dropped_estimate=result.dropped_estimate,
                lost=self._lost_notes(read, lost),
                causes=tuple(sorted({x.how for x in (*read.lost, *lost)})),
            )
        empty = not (result.frames or result.truncated)
        why = self._why_empty(query, read if reading else None, served) if empty else None
        if why is not None:
            return EmptyResult(frames=[], truncated=False, why=why)
        return result

    def _why_empty(
        self, query: ContextQuery, read: _Read | None, served: Sequence[Source]
    ) -> str | None:
        """Why an answer that lost nothing holds no frame, for the leg's note: every call
        answered, and nothing it gave matched the goal (a tool's answer that matches
        nothing is offered as its head when the server chose it for the goal or the
        config says ``always``, so only an empty one, or one asked the same whatever
        the goal, leaves nothing).
        ``read`` ``None``: no resources are read. ``served``: what each tool answered.
        ``None`` when the query asked for nothing this server could give (no frame, or
        none of its kind): the engine says so itself."""
        if query.max_frames == 0 or (query.kinds and self._kind not in query.kinds):
            return None
        reasons = []
        if read is not None:
            n = len(read.held) + len(read.fresh)
            if n:
                resources = "resource" if n == 1 else "resources"
                reasons.append(f"none of its {n} {resources} matched the goal")
            else:
                under = " under uri_prefixes" if self.options.get("uri_prefixes") else ""
                reasons.append(f"it lists no resources{under}")
        if self._tools:
            k = len(self._tools)
            # A tool that answered text which holds something, and yet gave no frame: it is
            # asked the same whatever the goal (no ``{query}``), and none of it matched.
            answered = sum(1 for s in served if any(not d.hollow for d in s.docs))
            if answered < k:
                reasons.append(f"{_of_tools(k - answered, k)} found nothing (an empty answer)")
            if answered:
                reasons.append(f"{_of_tools(answered, k, 'answer')} matched none of the goal")
        return "; ".join(reasons) or None

    def _lost_notes(self, read: _Read, lost: Sequence[_Lost]) -> str:
        """What a leg lost, in the words of its note: the resources, then the tools."""
        notes = []
        if read.lost:
            notes.append(unread_note([x.how for x in read.lost], read.asked))
        if lost:
            notes.append(lost_note([(x.name or "", x.how) for x in lost], len(self._tools)))
        return "; ".join(notes)

    def _nothing_served(self, read: _Read, lost: Sequence[_Lost]) -> Exception:
        """The leg's failure when every call failed: a timeout when every one timed out
        (the leg's timeout); else the first error, which sets the leg's status and code.
        When more than one call failed its message starts with what the note would say
        of them all, so the first is not taken for the only one."""
        failed = (*read.lost, *lost)
        first = next((x.error for x in failed if x.error is not None), None)
        if first is None:
            return TimeoutError()
        if len(failed) == 1:
            return first
        told = copy.copy(first)  # its class and data, hostd's words for the whole leg
        told.message = f"{self._lost_notes(read, lost)}; the first failure: {first.message}"
        told.args = (told.message,)
        return told

    def _keep(self, source: Source, cuts: list[Cut]) -> None:
        """A resource's pieces, once cut, into the read cache (on the event loop)."""
        if source.key is not None:
            size = sum(c.size for c in cuts) + 64
            self.cache.put(
                source.key,
                cuts,
                size=size,
                ttl_ms=source.ttl_ms,
                last_modified=source.last_modified,
            )

    async def _listing(self, session: ClientSession) -> list[types.Resource]:
        cached = self.cache.get("\x00list")
        if isinstance(cached, list):
            return cached
        resources: list[types.Resource] = []
        cursor: str | None = None
        ttl: int | None = None
        limit = int(self.options.get("max_resources", 256))
        while True:
            page = await session.list_resources(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            resources.extend(page.resources)
            ttl = page.ttl_ms if ttl is None else min(ttl, page.ttl_ms)
            cursor = page.next_cursor
            if not cursor or len(resources) > limit:
                break
        size = sum(len(r.uri) + len(r.name) + len(r.title or "") + 64 for r in resources)
        self.cache.put("\x00list", resources, size=size, ttl_ms=ttl)
        return resources

    async def _resources(self, session: ClientSession, deadline: float) -> _Read:
        """The listing, then every resource in it, eight at a time, each until
        ``deadline``. A read that fails (refused, broke the protocol) or runs out of time
        costs only itself, and is told; a listing that does, every read."""
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                listing = await self._listing(session)
            except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
                error = self._error("resources/list", exc)
                return self._unread(_Read(lost=(_Lost(None, _how(error), error),), asked=None))
        if scope.cancelled_caught:
            # The SDK sent ``notifications/cancelled`` for it, as for a read below.
            return self._unread(_Read(lost=(_Lost(None, "timeout", None),), asked=None))
        prefixes = tuple(self.options.get("uri_prefixes") or ())
        wanted = sorted(
            (r for r in listing if not prefixes or r.uri.startswith(prefixes)),
            key=lambda r: r.uri,
        )
        limit = int(self.options.get("max_resources", 256))
        limiter = anyio.CapacityLimiter(_READS_AT_ONCE)
        found: dict[str, list[Cut] | Source] = {}
        lost: dict[int, _Lost] = {}

        async def read(position: int, resource: types.Resource) -> None:
            modified = resource.annotations.last_modified if resource.annotations else None
            cached = self.cache.get(resource.uri, modified)
            if isinstance(cached, list):
                found[resource.uri] = cached
                return
            with anyio.CancelScope(deadline=deadline) as scope:
                async with limiter:
                    try:
                        result = await session.read_resource(resource.uri)
                    except (
                        MCPError,
                        ValidationError,
                        RuntimeError,
                        anyio.ClosedResourceError,
                    ) as exc:
                        # Kept as a value: sibling reads must not raise an ExceptionGroup.
                        # A read refused (an error answer) is lost as one that timed out
                        # is: the resource was listed, so the answer lacks what it holds.
                        error = self._error("resources/read", exc)
                        lost[position] = _Lost(None, _how(error), error)
                        return
            if scope.cancelled_caught:
                # The SDK sent ``notifications/cancelled`` for it (MCP: the server may stop
                # its work) and drops its answer should one still come.
                lost[position] = _Lost(None, "timeout", None)
                return
            title = resource.title or resource.name or None
            docs = tuple(d for d in (document(c, title) for c in result.contents) if d is not None)
            found[resource.uri] = Source(docs, resource.uri, result.ttl_ms, modified)

        asked = wanted[:limit]
        async with anyio.create_task_group() as tg:
            for position, resource in enumerate(asked):
                tg.start_soon(read, position, resource)
        items = [found[uri] for uri in sorted(found)]  # by URI, never by arrival
        return self._unread(
            _Read(
                held=tuple(x for x in items if not isinstance(x, Source)),
                fresh=tuple(x for x in items if isinstance(x, Source)),
                truncated=len(wanted) > limit,
                lost=tuple(lost[i] for i in sorted(lost)),
                asked=len(asked),
            )
        )

    def _unread(self, read: _Read) -> _Read:
        """``read``, its lost reads logged: once per query while they keep failing,
        rate-limited, by their count and how (``asked`` ``None``: the listing), never a
        URI."""
        if read.lost and self._failure is None:
            self._repeats.warning(
                "mcp.resource.failed",
                provider=self.provider_id,
                lost=len(read.lost),
                asked=read.asked,
                reasons=sorted({x.how for x in read.lost}),
            )
        return read

    async def _call_tools(
        self, session: ClientSession, query: ContextQuery, deadline: float
    ) -> tuple[list[Source], list[_Lost]]:
        """Every configured tool, at once, each until ``deadline``: what they served and
        the tools that served nothing, both in config order. A tool that fails or runs
        out of time costs only its own results (the leg fails only when nothing else
        served anything: ``query``)."""
        text = (query.query_text or "").strip() or query.goal
        results: dict[int, Source] = {}
        lost: dict[int, _Lost] = {}

        async def call(i: int, name: str, template: Any, always: bool) -> None:
            arguments = render_arguments(template, query=text, goal=query.goal)
            with anyio.CancelScope(deadline=deadline) as scope:
                try:
                    result = await session.call_tool(name, cast(dict[str, Any], arguments))
                except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
                    error = self._error(f"tool {name!r}", exc)
                    lost[i] = _Lost(name, _how(error), error)
                    return
            if scope.cancelled_caught:
                # The SDK sent ``notifications/cancelled`` for it (MCP: the server may
                # stop its work) and drops its answer should one still come.
                lost[i] = _Lost(name, "timeout", None)
                return
            if result.is_error:
                sizes = sum(
                    len(b.text.encode()) for b in result.content if isinstance(b, types.TextContent)
                )
                error = ProviderError(
                    f"MCP tool {name!r} answered isError "
                    f"({len(result.content)} block(s), {sizes} bytes of text, not quoted)"
                )
                lost[i] = _Lost(name, "isError", error)
                return
            results[i] = Source(tuple(tool_documents(name, result.content, always=always)))

        async with anyio.create_task_group() as tg:
            for i, (name, template, always) in enumerate(self._tools):
                tg.start_soon(call, i, name, template, always)
        if self._failure is None:
            for i in sorted(lost):
                # Once per query while a tool keeps failing: rate-limited, and its name
                # only when the note would show it (else its place in the config).
                name = lost[i].name or ""
                self._repeats.warning(
                    "mcp.tool.failed",
                    provider=self.provider_id,
                    tool=name if _SHOWN_NAME_RE.match(name) else None,
                    position=i,
                    reason=lost[i].how,
                )
        return [results[i] for i in sorted(results)], [lost[i] for i in sorted(lost)]

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        # Capabilities say verify: false, so the engine never asks; file provenance is
        # re-read by the host itself (F5).
        return VerifyResponse(verdicts=[])

    async def remember(self, request: RememberRequest, **_: Any) -> RememberResult:
        raise self._no_writes()

    async def forget(self, request: ForgetRequest, **_: Any) -> ForgetResult:
        raise self._no_writes()

    def _no_writes(self) -> NotSupported:
        # Its capabilities declare no remember, so the engine never asks: said plainly if
        # anything does.
        return NotSupported(
            f"provider {self.provider_id!r} is an MCP server (binding mcp), which takes no "
            "memory write",
            provider=self.provider_id,
        )

    async def shutdown(self) -> None:
        """MCP over stdio ends by closing the server's input: the ladder's next step."""


def _claims_jsonrpc(line: bytes) -> bool:
    """Whether ``line`` is a JSON object with a ``jsonrpc`` member: a message meant for
    us. Anything else (not JSON, or JSON of another shape: a log record, a number) is
    no message at all."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError included: not UTF-8
        return False
    return isinstance(value, dict) and "jsonrpc" in value


# The binding registry's "mcp" row, completed here: the registry imports this module
# the first time an "mcp" provider starts (the SDK is the mcp extra's).
register_binding(
    BindingRow("mcp", carrier="sdk-session", session=mcp_client_factory, extra="mcp", needs="mcp")
)
