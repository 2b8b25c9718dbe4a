"""``hostd mcp``: hostd's client API as an MCP server on stdio, on the official SDK.

Three tools, ``compose_context``, ``list_providers`` and
``report_used_evidence``, each one call of the client API (``context/compose``,
``providers/list``, ``usage/feedback``) on a session the CLI
hands in: the in-process daemon (``Daemon.local``) or a running ``hostd
serve`` (``hostd.client``). There is no second composition path, and no tool
changes consent (C1: the operator grants it with ``hostd consent``). The SDK's
lowlevel ``Server`` owns the MCP side: version negotiation (the ``initialize``
handshake and the stateless ``server/discover`` revision), ``tools/list`` and
``tools/call`` dispatch and ``notifications/cancelled`` (it cancels the
handler, and with it the composition). The byte stream is the caller's: the CLI
reserves stdout for the wire (fd 1 then points at stderr, so only protocol
messages reach it).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from jsonschema import Draft202012Validator
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import hostd
from hostd._log import get_logger
from hostd.errors import HostdError, RpcError
from hostd.protocol import DEFAULT_MAX_LINE_BYTES, INVALID_PARAMS, LineSplitter

from ._schema import (
    COMPOSE_INPUT_SCHEMA,
    COMPOSE_OUTPUT_SCHEMA,
    PROVIDERS_INPUT_SCHEMA,
    PROVIDERS_OUTPUT_SCHEMA,
    REPORT_INPUT_SCHEMA,
    REPORT_OUTPUT_SCHEMA,
    compose_params,
    feedback_params,
    structured_compose,
)

__all__ = ["TOOLS", "Backend", "build_server", "serve_mcp"]

log = get_logger("hostd.mcp")

_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

#: ``tools/list``, in this order every time.
TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name="compose_context",
        title="Compose context",
        description="Ask every configured context provider for evidence about a goal and get "
        "one budgeted, cited prompt block, with the audit of what was included and why.",
        input_schema=COMPOSE_INPUT_SCHEMA,
        output_schema=COMPOSE_OUTPUT_SCHEMA,
        annotations=_READ_ONLY.model_copy(update={"title": "Compose context"}),
    ),
    types.Tool(
        name="list_providers",
        title="List providers",
        description="The configured context providers: id, binding, state, health.",
        input_schema=PROVIDERS_INPUT_SCHEMA,
        output_schema=PROVIDERS_OUTPUT_SCHEMA,
        annotations=_READ_ONLY.model_copy(update={"title": "List providers"}),
    ),
    types.Tool(
        name="report_used_evidence",
        title="Report used evidence",
        description="After answering, say which citation labels of a compose_context result "
        "the answer actually used (and optionally whether the evidence helped). hostd keeps "
        "it beside that request's recording to measure its ranking policies.",
        input_schema=REPORT_INPUT_SCHEMA,
        output_schema=REPORT_OUTPUT_SCHEMA,
        # Writes a record, so not read-only; reporting again replaces the first report.
        annotations=types.ToolAnnotations(
            title="Report used evidence",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    ),
)

_VALIDATORS = {t.name: Draft202012Validator(t.input_schema) for t in TOOLS}


class Backend(Protocol):
    """A client API session: ``LocalSession`` or ``hostd.client.AsyncClient``."""

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any: ...


def _checked(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments when they fit the tool's schema; else a JSON-RPC error (−32602)."""
    validator = _VALIDATORS.get(name)
    if validator is None:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
    args = arguments or {}
    problems = sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path])
    if problems:
        where = "/".join(str(p) for p in problems[0].absolute_path) or "arguments"
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Invalid arguments for {name}: {where}: {problems[0].message}",
        )
    return args


def _failed(exc: HostdError) -> types.CallToolResult:
    """A composition that failed: the reason, for the model to read (isError)."""
    if isinstance(exc, RpcError) and exc.rpc_code == INVALID_PARAMS:
        # The API refused the params: a malformed call, so a protocol error (−32602).
        raise MCPError(code=INVALID_PARAMS, message=exc.message) from None
    reason = getattr(exc, "remote_reason", None) or exc.reason
    return types.CallToolResult(
        content=[types.TextContent(text=f"hostd: {exc.message} [{reason}]")], is_error=True
    )


def _content(structured: dict[str, Any]) -> list[types.ContentBlock]:
    """The prompt as text, one link per cited source with a URI, and any consent
    the operator still has to grant (for clients that ignore structured output)."""
    blocks: list[types.ContentBlock] = [types.TextContent(text=structured["prompt"])]
    for citation in structured["citations"]:
        uri = next((p["uri"] for p in citation["provenance"] if p.get("uri")), None)
        if uri is not None:
            frame = citation["frame"]
            blocks.append(
                types.ResourceLink(
                    name=citation["label"],
                    uri=uri,
                    description=f"cited as [{citation['label']}] "
                    f"({frame['provider_id']} {frame['frame_id']})",
                )
            )
    for need in structured["consent_required"]:
        scopes = ", ".join(need["scopes"])
        blocks.append(
            types.TextContent(
                text=f"hostd: provider {need['provider']} was not asked: it needs consent "
                f"for {scopes}; only the operator can grant it "
                f"(hostd consent grant {need['provider']} SCOPE)."
            )
        )
    return blocks


async def _compose(
    backend: Backend, ctx: ServerRequestContext[Any], args: dict[str, Any]
) -> types.CallToolResult:
    wants_progress = (ctx.meta or {}).get("progress_token") is not None
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)

    async def forward() -> None:
        # Each finished leg, as MCP progress (the API's ``$/progress`` per leg).
        async with receive:
            async for leg in receive:
                await ctx.session.report_progress(
                    float(leg.get("done", 0)),
                    float(leg["total"]) if leg.get("total") else None,
                    f"{leg.get('provider')}: {leg.get('status')}, "
                    f"{leg.get('frames_accepted', 0)} frames",
                )

    failure: HostdError | None = None
    async with anyio.create_task_group() as tg:
        if wants_progress:
            tg.start_soon(forward)
            await ctx.session.report_progress(0.0, None, "asking the providers")
        try:
            result = await backend.call(
                "context/compose",
                compose_params(args),
                on_progress=_pusher(send) if wants_progress else None,
            )
        except HostdError as exc:
            failure = exc  # answered below, outside the task group (no ExceptionGroup)
        finally:
            send.close()
    receive.close()
    if failure is not None:
        return _failed(failure)
    structured = structured_compose(result)
    return types.CallToolResult(content=_content(structured), structured_content=structured)


def _pusher(send: MemoryObjectSendStream[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """The API's progress callback (called synchronously, from its read loop)."""

    def push(leg: dict[str, Any]) -> None:
        with contextlib.suppress(anyio.ClosedResourceError):  # a leg reported after the end
            send.send_nowait(leg)

    return push


async def _providers(backend: Backend) -> types.CallToolResult:
    try:
        result = await backend.call("providers/list", {})
    except HostdError as exc:
        return _failed(exc)
    structured = {"providers": result["providers"]}
    lines = [f"{p['id']}\t{p['binding']}\t{p['state']}" for p in result["providers"]]
    return types.CallToolResult(
        content=[types.TextContent(text="\n".join(lines) or "no providers configured")],
        structured_content=structured,
    )


async def _report(backend: Backend, args: dict[str, Any]) -> types.CallToolResult:
    try:
        result = await backend.call("usage/feedback", feedback_params(args))
    except HostdError as exc:
        if isinstance(exc, RpcError) and exc.remote_reason == "unknown_citation":
            # The model named labels its prompt did not hold: it can read and retry.
            return types.CallToolResult(
                content=[types.TextContent(text=f"hostd: {exc.message} [unknown_citation]")],
                is_error=True,
            )
        return _failed(exc)
    text = f"recorded: {len(result['used'])} cited frames used in {result['request_id']}"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result)


def build_server(backend: Backend) -> Server[Any]:
    """The MCP server over one client API session."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = _checked(params.name, params.arguments)
        try:
            if params.name == "compose_context":
                return await _compose(backend, ctx, args)
            if params.name == "report_used_evidence":
                return await _report(backend, args)
            return await _providers(backend)
        except anyio.get_cancelled_exc_class():
            log.info("mcp.call.cancelled", tool=params.name, request=ctx.request_id)
            raise

    return Server(
        "hostd",
        version=hostd.__version__,
        title="hostd context host",
        instructions="Call compose_context with the goal you are working on to get cited "
        "evidence from the configured context providers, within a token budget.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_mcp(
    backend: Backend,
    receive: Callable[[], Awaitable[bytes]],
    send: Callable[[bytes], Awaitable[None]],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Serve MCP on a byte stream (``hostd mcp``: stdin and the reserved stdout) until
    its input ends. The streams are the event loop's own pipes, as ``hostd serve
    --stdio`` uses, not the SDK's ``stdio_server``, which moves every line through a
    worker thread; a line past ``max_line_bytes`` is refused, never buffered."""
    server = build_server(backend)
    inbox_send, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    outbox, outbox_receive = anyio.create_memory_object_stream[SessionMessage](16)

    async def read_in() -> None:
        splitter = LineSplitter(max_line_bytes)
        async with inbox_send:
            while chunk := await receive():
                for line in splitter.feed(chunk):
                    if not isinstance(line, bytes):
                        await inbox_send.send(ValueError(f"line over {max_line_bytes} bytes"))
                    elif line.strip():
                        await inbox_send.send(_message(line))

    async def write_out() -> None:
        async with outbox_receive:
            async for item in outbox_receive:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await send(data.encode() + b"\n")
                except (anyio.BrokenResourceError, OSError):
                    return  # the client is gone; the read side ends too

    log.info("mcp.serving", tools=[t.name for t in TOOLS])
    async with anyio.create_task_group() as tg:
        tg.start_soon(read_in)
        tg.start_soon(write_out)
        async with outbox:
            await server.run(inbox, outbox, server.create_initialization_options())
        tg.cancel_scope.cancel()
    log.info("mcp.stopped")


def _message(line: bytes) -> SessionMessage | Exception:
    """One inbound line as the SDK reads it; a bad one is handed on as a value (the SDK
    answers a parse error), never a crash of the read loop."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc
