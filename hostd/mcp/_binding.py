"""``binding = "mcp"``: an MCP server child as a context provider, on the official SDK.

The transport owns the child (spawn, scrubbed env, stderr into the log, the
teardown ladder) and feeds its stdout lines here (``on_line``/``on_end``), as
it does for the other bindings; this client hands them to the SDK's
``ClientSession`` and writes what the session sends back to the child's stdin.
``handshake`` is MCP's ``initialize`` (under the transport's handshake timeout),
answered to the engine as a CGP handshake: the server's name and version, the
configured kind, and the configured ``data_flow`` (``egress``), so the consent
gate, the leg timeout, the leg audit and the restart policy treat it like any
provider. ``query`` reads resources and calls the configured tools (I/O, on the
loop), then hands what they served to ``_build``: cutting and scoring run in a
worker thread, under the leg's deadline, so a server serving megabytes never stalls
the daemon. Every failure leaves as a ``HostdError``: a crashing, hanging or
babbling server costs its own leg only.

Nothing the server writes is quoted into an error or the log (it may echo a
credential): a line that is not JSON-RPC, a read or call refused, a tool's
``isError`` text are reported by size, position and code only. The SDK's own
loggers, which would quote method names and payloads, are given the same rule
(``_served.withhold_sdk_logs``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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
from hostd.errors import HandshakeFailed, HostdError, ProtocolFault, ProviderCrashed, ProviderError
from hostd.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    ProviderInfo,
    QueryCapability,
    VerifyResponse,
)
from hostd.transport import BindingRow, StartedCall, register_binding

from ._build import Builder, Source
from ._cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, ReadCache
from ._frames import Cut, render_arguments
from ._served import document, tool_calls, tool_documents, withhold_sdk_logs

__all__ = ["McpBindingClient", "mcp_client_factory"]

log = get_logger("hostd.mcp")

#: Messages from the server not yet taken by the session: past this the server is
#: flooding us, which is its fault (memory stays bounded).
_INBOX = 1024
#: Resources read at once per query.
_READS_AT_ONCE = 8


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
        self._ended = anyio.Event()
        self._inbox_send, self._inbox = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](_INBOX)
        self._outbox_send, self._outbox = anyio.create_memory_object_stream[SessionMessage](
            math.inf
        )
        self._session: ClientSession | None = None
        self._server = "?"
        self._tools = tool_calls(self.options)
        self._kind = str(self.options.get("kind", "doc"))
        self.cache = ReadCache(
            anyio.current_time,
            float(self.options.get("cache_ttl_s", 30.0)),
            max_entries=int(self.options.get("cache_max_entries", DEFAULT_MAX_ENTRIES)),
            max_bytes=int(self.options.get("cache_max_bytes", DEFAULT_MAX_BYTES)),
        )
        self._builder = Builder(provider_id)
        withhold_sdk_logs()

    def __repr__(self) -> str:
        return (
            f"<McpBindingClient {self.provider_id} server={self._server!r} "
            f"failure={self._failure!r} cache={self.cache!r}>"
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
            # Its size only: the line may hold anything the server echoes (a credential).
            self.on_end(
                ProtocolFault(f"MCP server wrote a line that is not JSON-RPC ({len(line)} bytes)")
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
            offered = await self._tool_names(session) if self._tools else set()
        except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
            raise self._error("initialize", exc) from None
        caps = init.capabilities
        missing = sorted({name for name, _ in self._tools} - offered)
        if missing:  # the names are this config's, not the server's
            raise HandshakeFailed(f"MCP server offers no tool {', '.join(map(repr, missing))}")
        if not self._tools and (not self.options.get("resources", True) or caps.resources is None):
            raise HandshakeFailed("MCP server offers no resources and no tool is configured")
        name = init.server_info.name or "mcp-server"
        self._server = name
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
                version=init.server_info.version or "unknown",
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

    async def _tool_names(self, session: ClientSession) -> set[str]:
        names: set[str] = set()
        cursor: str | None = None
        for _ in range(64):  # pages: a server paging forever costs a bounded handshake
            page = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            names.update(t.name for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return names

    def start_query(self, query: ContextQuery | dict[str, Any], **_: Any) -> StartedCall | None:
        return None  # an SDK call always takes a loop turn: the engine awaits ``query``

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        session = self._live()
        held: list[list[Cut]] = []
        fresh: list[Source] = []
        truncated = False
        try:
            if self.options.get("resources", True) and session.server_capabilities:
                if session.server_capabilities.resources is not None:
                    truncated = await self._resources(session, held, fresh)
            if self._tools:
                await self._call_tools(session, query, fresh, resources=bool(held or fresh))
        except HostdError:
            raise
        except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
            raise self._error("query", exc) from None
        result = await self._builder.build(
            held, fresh, query, kind=self._kind, server=self._server, keep=self._keep
        )
        if truncated and not result.truncated:
            result = result.model_copy(update={"truncated": True})
        return result

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

    async def _resources(
        self, session: ClientSession, held: list[list[Cut]], fresh: list[Source]
    ) -> bool:
        prefixes = tuple(self.options.get("uri_prefixes") or ())
        wanted = [
            r for r in await self._listing(session) if not prefixes or r.uri.startswith(prefixes)
        ]
        wanted.sort(key=lambda r: r.uri)
        limit = int(self.options.get("max_resources", 256))
        limiter = anyio.CapacityLimiter(_READS_AT_ONCE)
        found: dict[str, list[Cut] | Source] = {}
        failed: list[HostdError] = []

        async def read(position: int, resource: types.Resource, scope: anyio.CancelScope) -> None:
            modified = resource.annotations.last_modified if resource.annotations else None
            cached = self.cache.get(resource.uri, modified)
            if isinstance(cached, list):
                found[resource.uri] = cached
                return
            async with limiter:
                try:
                    result = await session.read_resource(resource.uri)
                except MCPError as exc:
                    if self._failure is None and exc.code != types.CONNECTION_CLOSED:
                        # One unreadable resource costs only itself; its position in
                        # the listing and the code say which and why, nothing it wrote.
                        log.info(
                            "mcp.resource.unreadable",
                            provider=self.provider_id,
                            position=position,
                            code=exc.code,
                        )
                        return
                    failed.append(self._error("resources/read", exc))
                    scope.cancel()
                    return
                except (ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
                    # Kept as a value: sibling reads must not raise an ExceptionGroup.
                    failed.append(self._error("resources/read", exc))
                    scope.cancel()
                    return
            title = resource.title or resource.name or None
            docs = tuple(d for d in (document(c, title) for c in result.contents) if d is not None)
            found[resource.uri] = Source(docs, resource.uri, result.ttl_ms, modified)

        async with anyio.create_task_group() as tg:
            for position, resource in enumerate(wanted[:limit]):
                tg.start_soon(read, position, resource, tg.cancel_scope)
        if failed:
            raise failed[0]
        for uri in sorted(found):  # by URI, never by arrival
            item = found[uri]
            if isinstance(item, Source):
                fresh.append(item)
            else:
                held.append(item)
        return len(wanted) > limit

    async def _call_tools(
        self, session: ClientSession, query: ContextQuery, fresh: list[Source], *, resources: bool
    ) -> None:
        """Every configured tool, at once; a tool that fails costs only its own results
        unless nothing else served anything (then the leg fails, saying which)."""
        text = (query.query_text or "").strip() or query.goal
        results: dict[int, Source] = {}
        failures: dict[int, HostdError] = {}

        async def call(i: int, name: str, template: Any) -> None:
            arguments = render_arguments(template, query=text, goal=query.goal)
            try:
                result = await session.call_tool(name, cast(dict[str, Any], arguments))
            except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
                failures[i] = self._error(f"tool {name!r}", exc)
                return
            if result.is_error:
                sizes = sum(
                    len(b.text.encode()) for b in result.content if isinstance(b, types.TextContent)
                )
                failures[i] = ProviderError(
                    f"MCP tool {name!r} answered isError "
                    f"({len(result.content)} block(s), {sizes} bytes of text, not quoted)"
                )
                return
            results[i] = Source(tuple(tool_documents(name, result.content)))

        async with anyio.create_task_group() as tg:
            for i, (name, template) in enumerate(self._tools):
                tg.start_soon(call, i, name, template)
        if self._failure is not None:
            raise self._failure
        for i in sorted(failures):
            log.info(
                "mcp.tool.failed",
                provider=self.provider_id,
                tool=self._tools[i][0],
                reason=failures[i].reason,
            )
        if failures and not results and not resources:
            raise failures[min(failures)]
        fresh.extend(results[i] for i in sorted(results))  # config order, never arrival

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        # Capabilities say verify: false, so the engine never asks; file provenance is
        # re-read by the host itself (F5).
        return VerifyResponse(verdicts=[])

    async def shutdown(self) -> None:
        """MCP over stdio ends by closing the server's input: the ladder's next step."""


# The binding registry's "mcp" row, completed here: the registry imports this module
# the first time an "mcp" provider starts (the SDK is the mcp extra's).
register_binding(
    BindingRow("mcp", carrier="sdk-session", session=mcp_client_factory, extra="mcp", needs="mcp")
)
