"""``binding = "mcp"``: an MCP server child as a context provider, on the official SDK.

The transport owns the child (spawn, scrubbed env, stderr into the log, the
teardown ladder) and feeds its stdout lines here (``on_line``/``on_end``), as
it does for the other bindings; this client hands them to the SDK's
``ClientSession`` and writes what the session sends back to the child's stdin.
``handshake`` is MCP's ``initialize`` (under the transport's handshake timeout),
answered to the engine as a CGP handshake: the server's name and version, the
configured kind, and the configured ``data_flow`` (``egress``), so the consent
gate, the leg timeout, the leg audit and the restart policy treat it like any
provider. ``query`` turns resources and/or one tool's results into frames
(``_frames``). Every failure leaves as a ``HostdError``: a crashing, hanging or
babbling server costs its own leg only.
"""

from __future__ import annotations

import base64
import binascii
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
    sha256_digest,
)
from hostd.transport import BindingRow, StartedCall, register_binding

from ._frames import Document, ReadCache, frames_for, render_arguments

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
        self._cache = ReadCache(anyio.current_time, float(self.options.get("cache_ttl_s", 30.0)))

    def __repr__(self) -> str:
        return (
            f"<McpBindingClient {self.provider_id} server={self._server!r} "
            f"failure={self._failure!r}>"
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
            self.on_end(ProtocolFault(f"garbage line from MCP server: {line[:80]!r}"))
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
        """A session failure as the leg's typed error (the stream's end when it ended)."""
        if self._failure is not None:
            return self._failure
        if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
            return ProviderCrashed(f"MCP {what}: the server closed the connection")
        if isinstance(exc, MCPError):
            return ProviderError(f"MCP {what}: {exc.message[:500]}", mcp_code=exc.code)
        return ProtocolFault(f"MCP {what}: {type(exc).__name__}: {str(exc)[:300]}")

    async def handshake(self, host: HostInfo) -> HandshakeAck:
        session = self._live()
        try:
            init = await session.initialize()
            tools = await session.list_tools() if self.options.get("tool") else None
        except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
            raise self._error("initialize", exc) from None
        caps = init.capabilities
        tool = self.options.get("tool")
        if tool and tools is not None and tool not in {t.name for t in tools.tools}:
            raise HandshakeFailed(f"MCP server offers no tool {tool!r}")
        if not tool and (not self.options.get("resources", True) or caps.resources is None):
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
                query=QueryCapability(kinds=[str(self.options.get("kind", "doc"))]),
                correlation=True,
            ),
        )

    def start_query(self, query: ContextQuery | dict[str, Any]) -> StartedCall | None:
        return None  # an SDK call always takes a loop turn: the engine awaits ``query``

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        session = self._live()
        docs: list[Document] = []
        truncated = False
        try:
            if self.options.get("resources", True) and session.server_capabilities:
                if session.server_capabilities.resources is not None:
                    truncated = await self._resources(session, docs)
            if self.options.get("tool"):
                await self._tool(session, query, docs)
        except HostdError:
            raise
        except (MCPError, ValidationError, RuntimeError, anyio.ClosedResourceError) as exc:
            raise self._error("query", exc) from None
        result = frames_for(
            docs, query, kind=str(self.options.get("kind", "doc")), server=self._server
        )
        if truncated and not result.truncated:
            result = result.model_copy(update={"truncated": True})
        return result

    async def _listing(self, session: ClientSession) -> list[types.Resource]:
        cached = self._cache.get("\x00list")
        if isinstance(cached, list):
            return cached
        resources: list[types.Resource] = []
        cursor: str | None = None
        ttl: int | None = None
        while True:
            page = await session.list_resources(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            resources.extend(page.resources)
            ttl = page.ttl_ms if ttl is None else min(ttl, page.ttl_ms)
            cursor = page.next_cursor
            if not cursor or len(resources) > int(self.options.get("max_resources", 256)):
                break
        self._cache.put("\x00list", resources, ttl_ms=ttl)
        return resources

    async def _resources(self, session: ClientSession, docs: list[Document]) -> bool:
        prefixes = tuple(self.options.get("uri_prefixes") or ())
        wanted = [
            r for r in await self._listing(session) if not prefixes or r.uri.startswith(prefixes)
        ]
        wanted.sort(key=lambda r: r.uri)
        limit = int(self.options.get("max_resources", 256))
        limiter = anyio.CapacityLimiter(_READS_AT_ONCE)
        found: dict[str, list[Document]] = {}

        failed: list[HostdError] = []

        async def read(resource: types.Resource, scope: anyio.CancelScope) -> None:
            modified = resource.annotations.last_modified if resource.annotations else None
            cached = self._cache.get(resource.uri, modified)
            if isinstance(cached, list):
                found[resource.uri] = cached
                return
            async with limiter:
                try:
                    result = await session.read_resource(resource.uri)
                except MCPError as exc:
                    if self._failure is None and exc.code != types.CONNECTION_CLOSED:
                        # One unreadable resource costs only itself.
                        log.info(
                            "mcp.resource.unreadable",
                            provider=self.provider_id,
                            uri=resource.uri,
                            error=exc.message[:200],
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
            title = resource.title or resource.name
            read_docs = [d for d in (_document(c, title) for c in result.contents) if d]
            found[resource.uri] = read_docs
            self._cache.put(resource.uri, read_docs, ttl_ms=result.ttl_ms, last_modified=modified)

        async with anyio.create_task_group() as tg:
            for resource in wanted[:limit]:
                tg.start_soon(read, resource, tg.cancel_scope)
        if failed:
            raise failed[0]
        for uri in sorted(found):  # by URI, never by arrival
            docs.extend(found[uri])
        return len(wanted) > limit

    async def _tool(
        self, session: ClientSession, query: ContextQuery, docs: list[Document]
    ) -> None:
        name = str(self.options["tool"])
        text = (query.query_text or "").strip() or query.goal
        arguments = render_arguments(
            self.options.get("arguments") or {}, query=text, goal=query.goal
        )
        result = await session.call_tool(name, cast(dict[str, Any], arguments))
        if result.is_error:
            message = " ".join(b.text for b in result.content if isinstance(b, types.TextContent))
            raise ProviderError(f"MCP tool {name!r} failed: {message[:500]}")
        method = f"tools/call:{name}"
        for block in result.content:
            if isinstance(block, types.TextContent) and block.text.strip():
                docs.append(Document(method=method, text=block.text, title=f"{name}", always=True))
            elif isinstance(block, types.EmbeddedResource):
                doc = _document(block.resource, None, method=method)
                if doc is not None:
                    docs.append(doc)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        # Capabilities say verify: false, so the engine never asks; file provenance is
        # re-read by the host itself (F5).
        return VerifyResponse(verdicts=[])

    async def shutdown(self) -> None:
        """MCP over stdio ends by closing the server's input: the ladder's next step."""


def _document(
    contents: types.TextResourceContents | types.BlobResourceContents,
    title: str | None,
    *,
    method: str = "resources/read",
) -> Document | None:
    """One resource content as a document; binary contents that are not UTF-8 are skipped."""
    if isinstance(contents, types.TextResourceContents):
        text, data = contents.text, contents.text.encode()
    else:
        try:
            data = base64.b64decode(contents.blob, validate=True)
            text = data.decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
    if not text.strip():
        return None
    uri = str(contents.uri)
    digest = sha256_digest(data) if uri.startswith("file:") else None
    return Document(
        method=method,
        text=text,
        uri=uri,
        title=title or uri,
        file_digest=digest,
        always=method != "resources/read",
    )


# The binding registry's "mcp" row, completed here: the registry imports this module
# the first time an "mcp" provider starts (the SDK is the mcp extra's).
register_binding(
    BindingRow("mcp", carrier="sdk-session", session=mcp_client_factory, extra="mcp", needs="mcp")
)
