"""``hostd mcp``: hostd's client API as an MCP server on stdio, on the official SDK.

Five tools, ``compose_context``, ``list_providers``, ``report_used_evidence``,
``remember`` and ``forget_memory``, each one call of the client API
(``context/compose``, ``providers/list``, ``usage/feedback``, ``memory/remember``,
``memory/forget``) on a session the CLI hands in: the in-process daemon
(``Daemon.local``) or a running ``hostd serve`` (``hostd.client``, through
``reconnecting``). There is no second composition path, and no tool changes consent (C1:
the operator grants it with ``hostd consent``). Every cited frame is a resource
(``hostd://citation/…``) that ``resources/read`` serves from a bounded store
(``_citations``). The SDK's lowlevel ``Server`` owns the MCP side: version negotiation
(the ``initialize`` handshake and the stateless ``server/discover`` revision), dispatch
and ``notifications/cancelled`` (it cancels the handler, and with it the composition);
``_wire`` stands between it and the byte stream, so every request read is answered once.
The byte stream is the caller's: the CLI reserves stdout for the wire (fd 1 then points
at stderr, so only protocol messages reach it).

A tool's bad arguments (its input schema's, or the client API's refusal, −32602)
come back as a result with ``isError`` and the one-line reason, so the model reads
it and can correct its call: MCP 2025-11-25 made input validation errors tool
execution errors (SEP-1303, server/tools "Error Handling"). Every revision served
gets that one behaviour: the SEP calls itself a backwards-compatible clarification
of the older texts (which listed both "invalid arguments" as a protocol error and
"invalid input data" as a tool error), and the SDK's own ``MCPServer`` does the
same on every revision. An unknown tool or a malformed request stays a JSON-RPC
error (−32602). A failure while a tool runs is a tool error too: the API's
(``hostd: MESSAGE [REASON]``) and a fault of hostd's own (``request.crashed`` in the
log; the model reads only ``[internal]``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

import hostd
from hostd._hints import down_state, failure_tail_lines
from hostd._log import get_logger
from hostd._param_words import expected, field_name, given, quoted, refusal
from hostd.errors import HostdError, RpcError
from hostd.protocol import DEFAULT_MAX_LINE_BYTES, INVALID_PARAMS

from ._citations import CitationStore, CitedText, cited_texts
from ._schema import (
    COMPOSE_INPUT_SCHEMA,
    COMPOSE_OUTPUT_SCHEMA,
    FORGET_INPUT_SCHEMA,
    FORGET_OUTPUT_SCHEMA,
    PROVIDERS_INPUT_SCHEMA,
    PROVIDERS_OUTPUT_SCHEMA,
    REMEMBER_INPUT_SCHEMA,
    REMEMBER_OUTPUT_SCHEMA,
    REPORT_INPUT_SCHEMA,
    REPORT_OUTPUT_SCHEMA,
    ProgressTrack,
    compose_params,
    consent_hints,
    failed_hints,
    feedback_params,
    forget_params,
    no_evidence,
    remember_params,
    structured_compose,
    warming_hints,
)
from ._wire import DRAIN_S, serve_stdio

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
        "one budgeted, cited prompt block, with the audit of what was included and why. "
        "Name the files or symbols you are working on in anchors; max_frames bounds how "
        "many frames each provider offers.",
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
    types.Tool(
        name="remember",
        title="Remember",
        description="Store something worth knowing later (a fact, a memory, an episode) with "
        "the configured memory provider; later compose_context calls cite it. When a fact "
        "changes, remember the new one with supersedes naming the old entry's id (mem-3): "
        "the old one then holds only until the new one's valid_from. Answered once stored.",
        input_schema=REMEMBER_INPUT_SCHEMA,
        output_schema=REMEMBER_OUTPUT_SCHEMA,
        # Adds an entry (a second call adds a second); it removes nothing.
        annotations=types.ToolAnnotations(
            title="Remember",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    ),
    types.Tool(
        name="forget_memory",
        title="Forget a memory",
        description="Delete one remembered entry for good, by its id (mem-3). Safe to "
        "retry: an entry already forgotten answers already: true. To record that something "
        "stopped being true, remember its successor with supersedes instead: that keeps "
        "what was true before.",
        input_schema=FORGET_INPUT_SCHEMA,
        output_schema=FORGET_OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(
            title="Forget a memory",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    ),
)

#: Each tool's input schema validator, built with the first call that is checked:
#: jsonschema (its format checkers, referencing, rpds) costs ``hostd mcp`` about a
#: tenth of its start, and ``initialize`` or ``tools/list`` never validates anything.
_VALIDATORS: dict[str, Any] = {}
_SCHEMAS = {t.name: t.input_schema for t in TOOLS}


def _validator(name: str) -> Any:
    validator = _VALIDATORS.get(name)
    if validator is None:
        from jsonschema import Draft202012Validator

        validator = _VALIDATORS[name] = Draft202012Validator(_SCHEMAS[name])
    return validator


class Backend(Protocol):
    """A client API session: ``LocalSession`` or ``hostd.client.AsyncClient``."""

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any: ...


def _tool_error(text: str) -> types.CallToolResult:
    """A tool execution error: one text block the model reads (``isError``). No
    ``structuredContent``: the output schema describes results, and clients skip it
    for an error (MCP 2025-11-25, server/tools "Output Schema"; the SDK's client)."""
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _problem(name: str, arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit tool ``name``'s input schema, in the client API's
    form (``invalid params: FIELD: what is wrong; expected …``, as its own refusals
    read), so the model meets one form whichever side refused; None when they fit."""
    validator = _validator(name)
    problems = sorted(
        validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path]
    )
    if not problems:
        return None
    first = problems[0]
    schema = first.schema if isinstance(first.schema, dict) else {}
    known = list(schema.get("properties", {}))
    field = field_name(first.absolute_path, "arguments")
    if first.validator == "additionalProperties" and isinstance(first.instance, dict):
        # jsonschema's words name the stray member but not what the tool takes.
        stray = next(k for k in first.instance if k not in known)
        what = quoted(stray, "unknown argument")
        wanted = ", ".join(known) or "no arguments"
    elif first.validator == "required" and isinstance(first.instance, dict):
        missing = next(k for k in schema["required"] if k not in first.instance)
        field, what, wanted = missing, "missing", expected(schema["properties"][missing])
    else:  # a value of the wrong type, out of range, too long, not among the choices
        what, wanted = f"got {given(first.instance)}", expected(schema)
    return refusal(field, what, wanted)


def _failed(exc: HostdError) -> types.CallToolResult:
    """A call that failed: the reason, for the model to read (isError)."""
    if isinstance(exc, RpcError) and exc.rpc_code == INVALID_PARAMS:
        # The API refused the arguments (a blank goal, an unknown strategy or
        # provider): an input validation error, so a tool execution error (SEP-1303).
        return _tool_error(exc.message)
    reason = getattr(exc, "remote_reason", None) or exc.reason
    return _tool_error(f"hostd: {exc.message} [{reason}]")


def _links(cited: list[CitedText]) -> list[types.ContentBlock]:
    """One ``resource_link`` per cited source range, each one ``resources/read`` serves."""
    return [
        types.ResourceLink(
            name=text.label,
            title=f"[{text.label}]",
            uri=text.uri,
            description=text.description,
            mime_type=text.mime_type,
            size=text.size,
        )
        for text in cited
    ]


async def _compose(
    backend: Backend,
    ctx: ServerRequestContext[Any],
    args: dict[str, Any],
    citations: CitationStore,
    where: tuple[str | None, str | None],
    ready_wait_ms: int | None,
) -> types.CallToolResult:
    wants_progress = (ctx.meta or {}).get("progress_token") is not None
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
    track = ProgressTrack()

    async def forward() -> None:
        # Each finished leg (and warm-up news), as MCP progress: values only increase.
        async with receive:
            async for note in receive:
                update = track.update(note)
                if update is not None:
                    await ctx.session.report_progress(*update)

    failure: HostdError | None = None
    with receive:  # closed on every way out, a cancellation included
        async with anyio.create_task_group() as tg:
            if wants_progress:
                tg.start_soon(forward)
                await ctx.session.report_progress(*track.start())
            params = compose_params(args, ready_wait_ms)
            added = "ready_wait_ms" in params and "ready_wait_ms" not in args
            try:
                result = await _compose_call(
                    backend, params, added, _pusher(send) if wants_progress else None
                )
            except HostdError as exc:
                failure = exc  # answered below, outside the task group (no ExceptionGroup)
            finally:
                send.close()
    if failure is not None:
        return _failed(failure)
    structured = structured_compose(result)
    hints: list[types.ContentBlock] = [
        types.TextContent(text=hint) for hint in consent_hints(structured, *where)
    ]
    empty = no_evidence(result, *where)
    if empty is not None:
        # Nothing to cite: a tool error the model reads, naming each provider and why.
        return types.CallToolResult(
            content=[types.TextContent(text=empty), *hints],
            structured_content=structured,
            is_error=True,
        )
    # Reading the blocks back is one pass over the prompt, which the budget bounds.
    # A provider still warming gave nothing this time: the model reads that it may ask again.
    hints += [types.TextContent(text=hint) for hint in warming_hints(result, *where)]
    hints += [types.TextContent(text=hint) for hint in failed_hints(result, *where)]
    kept = citations.add(cited_texts(result))
    content: list[types.ContentBlock] = [types.TextContent(text=structured["prompt"])]
    return types.CallToolResult(
        content=[*content, *_links(kept), *hints], structured_content=structured
    )


async def _compose_call(
    backend: Backend,
    params: dict[str, Any],
    added_wait: bool,
    on_progress: Callable[[dict[str, Any]], None] | None,
) -> Any:
    """``context/compose`` with ``params``. A daemon of an older hostd (``--connect``,
    still running after an upgrade) refuses the ``ready_wait_ms`` that ``hostd mcp``
    added on its own (``added_wait``: the client named none) as a member it does not
    know: it gets the call again as the client made it, with that daemon's own wait."""
    try:
        return await backend.call("context/compose", params, on_progress=on_progress)
    except RpcError as exc:
        data = exc.rpc_data if isinstance(exc.rpc_data, dict) else {}
        refused = exc.rpc_code == INVALID_PARAMS and data.get("field") == "ready_wait_ms"
        if not (added_wait and refused):
            raise
    without = {k: v for k, v in params.items() if k != "ready_wait_ms"}
    return await backend.call("context/compose", without, on_progress=on_progress)


def _pusher(send: MemoryObjectSendStream[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """The API's progress callback (called synchronously, from its read loop)."""

    def push(leg: dict[str, Any]) -> None:
        # A leg reported after the end: the call returned (``send`` closed), or it was
        # cancelled and ``forward`` with it (its receiving end closed) while legs finish.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait(leg)

    return push


async def _providers(backend: Backend, connect: str | None) -> types.CallToolResult:
    try:
        result = await backend.call("providers/list", {})
    except HostdError as exc:
        return _failed(exc)
    reranker = result.get("reranker")  # a daemon older than the key has none
    structured = {"providers": result["providers"], "reranker": reranker}
    lines = []
    for p in result["providers"]:
        lines.append(f"{p['id']}\t{p['binding']}\t{p['state']}")
        # Under one that is down, its failure in `hostd status`'s words (a restart command
        # only for a daemon's provider: nothing else restarts a session's own), then what
        # its stderr ended with (as `hostd providers` shows it).
        down = down_state(p, restart=connect is not None)
        if down is not None:
            lines.append(f"  {p['id']}: {down}")
        lines += [f"  {said}" for said in failure_tail_lines(p)]
    if isinstance(reranker, dict):  # whether strategy "rerank" is ranked by it now
        asks, fell = reranker.get("asks", 0), reranker.get("fallbacks", 0)
        lines.append(
            f"[reranker]\t{reranker.get('kind')}\t{reranker.get('state')}\t"
            f"asks {asks}, fallbacks {fell}"
        )
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
            return _tool_error(f"hostd: {exc.message} [unknown_citation]")
        return _failed(exc)
    text = f"recorded: {len(result['used'])} cited frames used in {result['request_id']}"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result)


async def _remember(backend: Backend, args: dict[str, Any]) -> types.CallToolResult:
    try:
        result = await backend.call("memory/remember", remember_params(args))
    except HostdError as exc:
        return _failed(exc)
    window = f"valid from {result['valid_from']}"
    if result.get("valid_to"):
        window += f" to {result['valid_to']}"
    closes = f"; {result['supersedes']} now holds until then" if result.get("supersedes") else ""
    text = f"remembered {result['id']} ({args['kind']}, {window}) in {result['provider']}{closes}"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result)


async def _forget(
    backend: Backend, args: dict[str, Any], citations: CitationStore
) -> types.CallToolResult:
    try:
        result = await backend.call("memory/forget", forget_params(args))
    except HostdError as exc:
        return _failed(exc)
    # What was forgotten is not served again from this server's cited texts either.
    citations.drop_frame(str(result["provider"]), str(result["forgotten"]))
    if result.get("already"):  # a retried call: what it asked for holds
        text = f"{result['forgotten']} was already forgotten (in {result['provider']})"
        if result.get("reopened"):  # what that forget did, for a model that missed its reply
            text += f"; {result['reopened']}, which it had superseded, was made valid again"
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=result
        )
    text = f"forgot {result['forgotten']} (deleted from {result['provider']})"
    if result.get("reopened"):
        text += f"; {result['reopened']}, which it had superseded, is valid again"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result)


_PAGE = 256


def _not_found(ctx: ServerRequestContext[Any], uri: str) -> MCPError:
    """resources/read of a URI not held: −32002 in the handshake revisions, −32602 from
    2026-07-28 on (which retired −32002). Either way with ``data.uri``, as MCP's
    server/resources "Error Handling" shows, whatever the URI's scheme."""
    code = -32002 if ctx.protocol_version < "2026-07-28" else INVALID_PARAMS
    if uri.startswith("hostd://citation/"):
        message = (
            "Resource not found: hostd serves the texts cited by its latest compositions "
            "only (this one was never cited or has been evicted); compose again"
        )
    else:  # a file or web URI: reading it is the client's own business
        message = (
            "Resource not found: hostd serves only hostd://citation/ URIs, the texts its "
            "compositions cite (compose_context's resource links)"
        )
    return MCPError(code=code, message=message, data={"uri": uri})


def build_server(
    backend: Backend,
    *,
    config: str | None = None,
    connect: str | None = None,
    citations: CitationStore | None = None,
    ready_wait_ms: int | None = None,
) -> Server[Any]:
    """The MCP server over one client API session. ``config``: the config file hostd
    was started with, and ``connect`` the daemon's socket when the session is a running
    daemon's (both named in consent hints); ``citations``: the store of cited texts
    ``resources/read`` serves (a fresh default-bounded one if not given);
    ``ready_wait_ms``: how long a ``compose_context`` that names neither it nor
    ``timeout_ms`` waits for providers that are not ready (None: the API's own wait,
    up to each one's start deadline)."""
    store = citations if citations is not None else CitationStore()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in _SCHEMAS:
            # A protocol error (MCP server/tools "Error Handling"): nothing the model can fix.
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        args = params.arguments or {}
        problem = _problem(params.name, args)
        if problem is not None:
            # An input validation error: a tool execution error (SEP-1303).
            return _tool_error(problem)
        try:
            if params.name == "compose_context":
                return await _compose(backend, ctx, args, store, (config, connect), ready_wait_ms)
            if params.name == "report_used_evidence":
                return await _report(backend, args)
            if params.name == "remember":
                return await _remember(backend, args)
            if params.name == "forget_memory":
                return await _forget(backend, args, store)
            return await _providers(backend, connect)
        except anyio.get_cancelled_exc_class():
            log.info("mcp.call.cancelled", tool=params.name)
            raise
        except MCPError:
            raise
        except Exception as exc:
            # A fault of hostd's own (a bug, a daemon reply it cannot read): the SDK would
            # answer code 0 with the exception's own text, which may quote a peer. A tool
            # error instead, as the SDK's MCPServer gives; the traceback goes to the log.
            log.error("request.crashed", method="tools/call", tool=params.name, exc_info=exc)
            return _tool_error(f"hostd: {params.name} failed inside hostd mcp [internal]")

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        texts, after = store.page(cursor, _PAGE)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name=t.label,
                    title=f"[{t.label}]",
                    uri=t.uri,
                    description=t.description,
                    mime_type=t.mime_type,
                    size=t.size,
                )
                for t in texts
            ],
            next_cursor=after,
        )

    async def list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        # The resources are the cited texts, each its own URI: none is made from a
        # template. Listed empty, not -32601, since the resources capability is declared
        # and clients that list everything (the Inspector, fastmcp) ask for it too.
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = store.get(uri)
        if text is None:
            raise _not_found(ctx, uri)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=text.mime_type, text=text.text)]
        )

    return Server(
        "hostd",
        version=hostd.__version__,
        title="hostd context host",
        instructions="Call compose_context with the goal you are working on to get cited "
        "evidence from the configured context providers, within a token budget; call "
        "remember to keep what is worth knowing in a later session.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )


async def serve_mcp(
    backend: Backend,
    receive: Callable[[], Awaitable[bytes]],
    send: Callable[[bytes], Awaitable[None]],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    config: str | None = None,
    connect: str | None = None,
    citations: CitationStore | None = None,
    drain_s: float = DRAIN_S,
    ready_wait_ms: int | None = None,
) -> None:
    """Serve MCP on a byte stream (``hostd mcp``: stdin and the reserved stdout) until
    its input ends and every request read from it has been answered. ``ready_wait_ms``
    as ``build_server`` takes it."""
    server = build_server(
        backend, config=config, connect=connect, citations=citations, ready_wait_ms=ready_wait_ms
    )

    async def run(inbox: Any, outbox: Any) -> None:
        await server.run(inbox, outbox, server.create_initialization_options())

    log.info("mcp.serving", tools=[t.name for t in TOOLS])
    await serve_stdio(run, receive, send, max_line_bytes=max_line_bytes, drain_s=drain_s)
    log.info("mcp.stopped")
