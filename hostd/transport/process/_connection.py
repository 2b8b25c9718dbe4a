"""One provider connection: a child process, its binding client and the handshake.

Owns the order of things for one provider: spawn (own process group, scrubbed
env), start the binding's reader (from the registry's row for the binding: a
``PipeClient`` over its codec, or its SDK session's client), handshake before
any payload (H1–H3, H2, C5, under a timeout so a silent provider never hangs
the host), then serve
``query``/``verify`` until it breaks or is closed. A JSON-RPC handshake that got no
reply is followed, before the teardown, by the CGP envelope handshake: a provider
that answers it (one built on a CGP SDK, run under the wrong binding) is told to set
``binding = "cgp"`` in the same error. Closing walks the teardown ladder in
``ChildProcess.aclose``. Restart policy is not here (the engine
decides); a connection is single-use.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus

from hostd._hints import NO_HANDSHAKE
from hostd._log import get_logger
from hostd.errors import (
    HostdError,
    MethodNotFound,
    ProviderCrashed,
    ProviderTimeout,
    ShuttingDown,
)
from hostd.protocol import (
    DEFAULT_MAX_LINE_BYTES,
    ContextQuery,
    ContextQueryResult,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    RememberRequest,
    RememberResult,
    VerifyResponse,
)

from .._ack import Acked
from .._readiness import OnProgress, Readiness
from .._redact import Redactor, amend
from ..bindings import CGP_SDK_WIRE, CgpCodec, binding_problem, check_ack, find_binding
from ._client import PipeClient, StartedCall
from ._process import ChildProcess, StderrPolicy
from ._stdout import LineSink

__all__ = ["BindingClient", "ClientFactory", "ProviderConnection", "client_factory"]

log = get_logger("hostd.transport")

E = TypeVar("E", bound=HostdError)

#: The longest ``explain`` waits for a failed process's exit (and its stderr's end).
EXIT_WAIT_S = 2.0

#: The errors ``explain`` has already amended with what their process said.
_EXPLAINED: weakref.WeakSet[HostdError] = weakref.WeakSet()

#: Builds a connection's binding client: ``(send, provider_id=…, send_nowait=…)``.
ClientFactory = Callable[..., "BindingClient"]

#: What a provider that answered the CGP envelope handshake, after the JSON-RPC one got
#: no reply, is told (the envelope wire ignores a line it does not understand, so the
#: JSON-RPC handshake meets silence).
_CGP_WIRE_HINT = (
    f'it answers the CGP envelope handshake instead: {CGP_SDK_WIRE} and needs binding = "cgp" '
    "in its [[provider]]"
)


class BindingClient(Protocol):
    """What the engine needs of any binding's client (protocol.md §1, §2)."""

    binding: str
    #: Told when the stream becomes unusable (ended, broke, desynchronised): set by
    #: the connection, which keeps ``alive`` as a plain attribute from it.
    on_broken: Callable[[], None] | None

    @property
    def correlation(self) -> bool: ...

    @property
    def failure(self) -> HostdError | None: ...

    def on_line(self, line: bytes) -> bool: ...
    def on_end(self, error: HostdError) -> None: ...
    async def handshake(self, host: HostInfo) -> HandshakeAck: ...
    async def query(self, query: ContextQuery) -> ContextQueryResult: ...
    def start_query(
        self,
        query: ContextQuery | dict[str, Any],
        *,
        deadline: float | None = None,
        on_settled: Callable[[StartedCall], None] | None = None,
    ) -> StartedCall | None: ...
    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse: ...
    async def remember(
        self, request: RememberRequest, *, deadline: float | None = None
    ) -> RememberResult: ...
    async def forget(
        self, request: ForgetRequest, *, deadline: float | None = None
    ) -> ForgetResult: ...
    async def shutdown(self) -> None: ...
    def close(self, error: HostdError) -> None: ...


def _given_version(client: BindingClient, ack: HandshakeAck) -> str | None:
    """The version the provider gave, ``None`` when it gave none: a binding whose peer
    may name none (an MCP server's ``serverInfo.version`` may be empty) keeps what it
    was given as ``server_version`` and puts a stand-in in its ack (H2 needs one), which
    the log must not report as the provider's."""
    given: str | None = getattr(client, "server_version", ack.provider.version)
    return given


class _Stdout:
    """A JSON-RPC child's stdout sink: its binding client, until a handshake that got no
    reply is probed for the CGP envelope wire (``probe``). From then on each line is
    read as that wire's handshake reply (``speaks_cgp``); the client, whose start has
    failed, hears no more of it."""

    __slots__ = ("client", "probe", "speaks_cgp")

    def __init__(self, client: BindingClient) -> None:
        self.client = client
        self.probe: CgpCodec | None = None
        self.speaks_cgp = False

    def on_line(self, line: bytes) -> bool:
        probe = self.probe
        if probe is None:
            return self.client.on_line(line)
        if not self.speaks_cgp:
            self.speaks_cgp = probe.answers_handshake(line)
        return True

    def on_end(self, error: HostdError) -> None:
        self.client.on_end(error)


async def start_in_clean_context(
    task_group: TaskGroup, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any
) -> Any:
    """``await task_group.start(func, *args)``, with the new task in an empty
    ``contextvars`` context.

    A connection's reader and stderr pump live as long as the provider, not as
    long as the request that happened to start it: started from the request's
    context they would inherit its bound log fields (``request_id``) and tag
    every later stderr line with it.
    """
    outcome: dict[str, Any] = {}
    ready = anyio.Event()

    async def starter() -> None:
        try:
            outcome["value"] = await task_group.start(func, *args)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            ready.set()

    # asyncio copies the *current* context into a new task: make that an empty one.
    contextvars.Context().run(task_group.start_soon, starter)
    with anyio.CancelScope(shield=True):  # quick: the task does no I/O before started()
        await ready.wait()
    error = outcome.get("error")
    if isinstance(error, anyio.get_cancelled_exc_class()):
        # The task group was cancelled under it: its owner closing (hostd stopping, a
        # one-shot command ending), not the provider's failure.
        raise ShuttingDown("hostd is closing: the provider's start was cancelled")
    if error is not None:
        raise error
    return outcome["value"]


def client_factory(binding: str, options: Mapping[str, Any] | None = None) -> ClientFactory:
    """The registry's client for ``binding``: a ``PipeClient`` over its codec, or its
    SDK session's client built from the provider's ``options``. Raises ``ValueError``
    for a binding not registered (or whose extra is missing)."""
    row = find_binding(binding)
    if row.session is not None:
        built: ClientFactory = row.session(options or {})
        return built
    codec = row.codec
    assert codec is not None  # a full row has one or the other (register_binding)

    def build(send: Any, *, provider_id: str, send_nowait: Any = None) -> PipeClient:
        return PipeClient(
            codec(provider_id), send, provider_id=provider_id, send_nowait=send_nowait
        )

    return build


class ProviderConnection(Acked):
    """A started, handshaken provider. Create with ``await ProviderConnection.open(...)``."""

    def __init__(
        self,
        provider_id: str,
        child: ChildProcess,
        client: BindingClient,
        scope: anyio.CancelScope,
        grace: float,
        on_progress: OnProgress | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.child = child
        self.client = client
        self._scope = scope
        self._grace = grace
        self.ack = None
        #: The handshake ended well (``ack`` stays None for one that had none to give).
        self.handshaken = False
        self.closed = False
        #: Usable for another request: running, stream intact, in sync, not closed. A
        #: plain attribute the engine reads per leg, lowered when the child exits, the
        #: stream breaks or desynchronises (``on_exit``, ``on_broken``) or it is closed.
        self.alive = (
            child.returncode is None
            and client.failure is None
            and not getattr(client, "desynchronised", False)
        )
        client.on_broken = child.on_exit = self._down
        #: The process's account of its failure (``explain``), gathered once: its exit
        #: status and stderr's reason, the status alone, and its stderr's last lines.
        self._report: anyio.Event | None = None
        self._report_text = ""
        self._exit_text = ""
        self._stderr_tail = ""
        #: Warming until the provider says it is ready (``_readiness``); fed from the
        #: first line on, as a provider may report progress before its handshake reply.
        self.readiness = Readiness(provider_id, on_progress)
        #: Replies that came after their caller gave up: a process that answers, late.
        #: Told by the client as each comes (a binding may not count them: then 0), so
        #: the pool reads a number after every leg, not a property.
        self.late_replies = 0
        #: The sink of a JSON-RPC child's stdout (``_serve``): probes a silent handshake.
        self._stdout: _Stdout | None = None
        if isinstance(client, PipeClient):
            client.on_notification = self.readiness.on_notification
            client.on_late = self._count_late

    def __repr__(self) -> str:
        return (
            f"<ProviderConnection {self.provider_id} {self.client.binding} "
            f"alive={self.alive} {self.child!r}>"
        )

    @property
    def given_version(self) -> str | None:
        """The version its handshake named, ``None`` when it named none (an MCP server
        with an empty ``serverInfo.version``, whose ack holds a stand-in H2 needs) or
        it had no handshake: what is shown of it, never the stand-in."""
        return None if self.ack is None else _given_version(self.client, self.ack)

    def _count_late(self, total: int) -> None:
        self.late_replies = total

    def _down(self) -> None:
        self.alive = False

    @classmethod
    async def open(
        cls,
        provider_id: str,
        command: Sequence[str],
        *,
        task_group: TaskGroup,
        binding: str = "jsonrpc",
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        host: HostInfo | None = None,
        handshake_timeout: float = 5.0,
        grace: float = 2.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stderr_policy: StderrPolicy | None = None,
        options: Mapping[str, Any] | None = None,
        on_progress: OnProgress | None = None,
        redactor: Redactor | None = None,
        optional_handshake: bool = False,
    ) -> ProviderConnection:
        """Spawn and handshake (``handshake_timeout``: the start deadline; ``on_progress``:
        told of each ``context/progress`` the provider sends). Raises ``HandshakeFailed``/
        ``IncompatibleVersion`` (with ``data["violations"]``), ``ProviderTimeout`` or
        ``ProviderCrashed``; on any failure the child is already torn down, and the error
        says what the process said (``explain``). ``binding``: a registered binding's name
        (``ValueError`` otherwise); ``options``: its own settings (``mcp``'s).
        ``redactor``: the provider's secrets, scrubbed from its stderr and every error
        (C8). Background tasks run in ``task_group``. ``optional_handshake``: a process
        that answers ``-32601`` to ``context/handshake`` (a reranker written to its one
        method) is kept, with no ack (``info`` is ``None``) and ready at once; a
        provider always needs one."""
        problem = binding_problem(binding)  # refused before anything runs (imports nothing)
        if problem is not None:
            raise ValueError(problem)
        redactor = redactor if redactor is not None else Redactor()
        try:
            child = await ChildProcess.spawn(
                provider_id, command, env=env, cwd=cwd, policy=stderr_policy, redactor=redactor
            )
        except HostdError as exc:  # the cwd, or the command (without the shim)
            redactor.error(exc)
            raise
        except OSError as exc:
            raise redactor.error(ProviderCrashed(f"cannot start provider: {exc}")) from exc
        # Its stderr read from now on, not once the binding's module is imported: a child
        # that writes more than a pipe holds before its handshake would wait there. In an
        # empty context, as the connection's other long-lived tasks (``_serve``): its
        # lines never carry the request that started it.
        contextvars.Context().run(child.drain_stderr, task_group)
        try:
            # In a worker thread: a lazy binding's module (the MCP SDK's client) imports
            # there, a second or two that would otherwise stop every other connection's
            # loop. After the spawn, so the child boots (an MCP server's interpreter and
            # its own imports, seconds on a busy machine) while it imports, not after:
            # beside `hostd mcp`'s own import of the SDK, which holds that import back.
            factory = await anyio.to_thread.run_sync(client_factory, binding, options)
        except BaseException:
            # Nothing was asked of the child yet (its output waits in the pipes).
            await child.aclose(grace=grace, abandoned=True)
            raise
        try:
            conn: ProviderConnection = await start_in_clean_context(
                task_group,
                cls._serve,
                provider_id,
                child,
                factory,
                grace,
                max_line_bytes,
                on_progress,
            )
        except BaseException:
            # Never leave a spawned child behind; nothing was asked of it yet.
            await child.aclose(grace=grace, abandoned=True)
            raise
        try:
            ack: HandshakeAck | None = None
            try:
                with anyio.fail_after(handshake_timeout):
                    ack = await conn.client.handshake(host or HostInfo(name="hostd", version="0"))
            except TimeoutError:
                raise ProviderTimeout(
                    f"no handshake reply within {handshake_timeout * 1000:.0f} ms",
                    stage="handshake",
                ) from None
            except MethodNotFound:
                if not optional_handshake:
                    raise
            if ack is not None:
                check_ack(ack)
        except HostdError as exc:
            # Shielded (each wait is bounded): a host closing meanwhile still gets the
            # start's typed failure, not a cancellation that would swallow it.
            with anyio.CancelScope(shield=True):
                if isinstance(exc, ProviderCrashed):  # it is exiting: its status says why
                    await conn.explain(exc)
                    await conn.aclose()
                else:  # it runs (a stuck handshake): stopped first, its stderr read to the end
                    probed = isinstance(exc, ProviderTimeout) and not optional_handshake
                    if probed:
                        conn.probe_cgp(host or HostInfo(name="hostd", version="0"))
                    await conn.aclose()
                    answered_cgp = probed and conn.speaks_cgp
                    quote_stderr = True
                    if answered_cgp:
                        amend(exc, _CGP_WIRE_HINT)
                    elif isinstance(exc, ProviderTimeout):
                        # Nothing came back: its usual causes (a reply left in a stdout
                        # buffer, set-up before the handshake), so the leg, the status
                        # and the log event say them, as a remote provider's say its own,
                        # whole: what its stderr ended with (where its error is) goes in
                        # its own field (``stderr_tail``), not squeezed in after them.
                        amend(exc, NO_HANDSHAKE)
                        quote_stderr = False
                    await conn.explain(exc, anyio.current_time(), quote_stderr=quote_stderr)
            raise
        except BaseException:  # cancelled: the host closes before the handshake ended
            await conn.aclose(abandoned=True)
            raise
        conn.ack = ack
        conn.handshaken = True
        conn.readiness.handshake(getattr(conn.client, "handshake_result", None))
        if ack is None:  # it answered: alive and in sync, it only has no handshake
            log.info("provider.handshake.skipped", provider=provider_id, why="method_not_found")
            return conn
        log.info(
            "provider.handshake.ok",
            provider=provider_id,
            name=ack.provider.name,
            version=_given_version(conn.client, ack),
            protocol_version=ack.protocol_version,
        )
        return conn

    @classmethod
    async def _serve(
        cls,
        provider_id: str,
        child: ChildProcess,
        client_cls: ClientFactory,
        grace: float,
        max_line_bytes: int,
        on_progress: OnProgress | None,
        *,
        task_status: TaskStatus[ProviderConnection],
    ) -> None:
        client = client_cls(child.send, provider_id=provider_id, send_nowait=child.send_nowait)
        with anyio.CancelScope() as scope:
            conn = cls(provider_id, child, client, scope, grace, on_progress)
            try:
                async with anyio.create_task_group() as tg:
                    child.start_pumps(tg)
                    # Replies are dispatched from the pipe's read callback; the child's
                    # output is still read to its end before the teardown. Under JSON-RPC
                    # through a sink that can tell, should the handshake meet silence,
                    # whether the provider speaks the CGP envelope wire instead.
                    sink: LineSink = client
                    if client.binding == "jsonrpc":
                        sink = conn._stdout = _Stdout(client)
                    await child.start_reading(sink, max_line_bytes)
                    # A binding built on a session library (mcp) runs that session here,
                    # for as long as the connection lives.
                    session = getattr(client, "run_session", None)
                    if session is not None:
                        await tg.start(session)
                    tg.start_soon(child.output_ended.wait)
                    task_status.started(conn)
            except anyio.get_cancelled_exc_class():
                # Cancelled with the host: the child still walks the ladder (shielded),
                # at once when its start is given up before the handshake.
                await conn.aclose(abandoned=True)
                raise
            finally:
                await conn.aclose()

    def probe_cgp(self, host: HostInfo) -> None:
        """After a JSON-RPC handshake got no reply: write the CGP envelope handshake, so
        the teardown that follows (which reads the output to its end) hears whether
        the provider answers it (``speaks_cgp``). Not waited for: a pipe with no room
        for it, or one the provider closed, leaves nothing to say."""
        sink = self._stdout
        if sink is None or self.child.returncode is not None:
            return
        sink.probe = CgpCodec(self.provider_id)
        try:
            self.child.send_nowait(sink.probe.handshake(host).line)
        except HostdError:
            pass

    @property
    def speaks_cgp(self) -> bool:
        """It answered the CGP envelope handshake ``probe_cgp`` wrote."""
        return self._stdout is not None and self._stdout.speaks_cgp

    async def explain(
        self, exc: E, deadline: float | None = None, *, quote_stderr: bool = True
    ) -> E:
        """``exc`` as it leaves the transport: for a crash (or a start that timed out), with
        what the process says about it (its exit status, the tail of its stderr:
        ``ChildProcess.failure_report``, waiting for them no later than ``deadline``
        and ``EXIT_WAIT_S``), and its stderr's last lines as ``data["stderr_tail"]``
        (``ChildProcess.stderr_tail``; absent when it wrote nothing); always scrubbed of
        the provider's secrets (C8). ``quote_stderr=False``: the message adds the exit
        status alone, its stderr left to ``stderr_tail`` (a text that must be read whole,
        a hint, keeps its room). Changed in place and returned."""
        # A command that never ran has nothing to add: the status and stderr are the
        # shim's, and the exec's error already says all (``_shim``).
        never_ran = exc.data.get("stage") == "start"
        if isinstance(exc, ProviderCrashed | ProviderTimeout) and not never_ran:
            await self._failure_report(deadline)
            # One error may reach many waiters (every call pending when the stream ended):
            # it is amended once.
            if exc not in _EXPLAINED:
                _EXPLAINED.add(exc)
                amend(exc, self._report_text if quote_stderr else self._exit_text)
                if self._stderr_tail:
                    exc.data["stderr_tail"] = self._stderr_tail
        return self.child.redactor.error(exc)

    async def _failure_report(self, deadline: float | None) -> None:
        """The process's own account of its failure, gathered once per connection (a
        process fails once); later callers wait for the first one's."""
        if self._report is None:
            self._report = anyio.Event()
            # A crashed process is gone within moments; one that closed its output and
            # lives on is not waited for long (the pool tears it down).
            limit = anyio.current_time() + min(self._grace, EXIT_WAIT_S)
            deadline = limit if deadline is None else min(deadline, limit)
            try:
                # After a good start its last lines may be its ready line: worded so.
                self._report_text = await self.child.failure_report(
                    deadline, started=self.handshaken
                )
                # As the report read them: its stderr's end (or all the deadline let in).
                self._exit_text = self.child.exit_status() or ""
                self._stderr_tail = self.child.stderr_tail()
            finally:
                self._report.set()
        else:
            await self._report.wait()

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        return await self.client.query(query)

    def start_query(
        self,
        query: ContextQuery | dict[str, Any],
        *,
        deadline: float | None = None,
        on_settled: Callable[[StartedCall], None] | None = None,
    ) -> StartedCall | None:
        """Write ``query`` now, with no event-loop turn, when the binding pipelines and
        the pipe takes it whole; ``None`` (nothing written) otherwise. The call's reply
        is validated in the read callback, ``on_settled`` told then (or at ``deadline``,
        with ``TimeoutError``). Raises ``ProviderCrashed`` when the provider closed its
        input."""
        return self.client.start_query(query, deadline=deadline, on_settled=on_settled)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        return await self.client.verify(frames)

    async def remember(
        self, request: RememberRequest, *, deadline: float | None = None
    ) -> RememberResult:
        """``memory/remember`` on this connection (``deadline``: the event loop's clock)."""
        return await self.client.remember(request, deadline=deadline)

    async def forget(
        self, request: ForgetRequest, *, deadline: float | None = None
    ) -> ForgetResult:
        return await self.client.forget(request, deadline=deadline)

    async def aclose(self, *, abandoned: bool = False) -> int | None:
        """Teardown ladder (shielded): shutdown message → grace → SIGTERM → SIGKILL.
        ``abandoned``: its start given up before the handshake ended (the host is
        closing): SIGTERM at once (``ChildProcess.aclose``); never for one handshaken."""
        with anyio.CancelScope(shield=True):
            self.closed = True
            self.alive = False
            shutdown = self.client.shutdown if self.child.returncode is None else None
            code = await self.child.aclose(
                shutdown=shutdown, grace=self._grace, abandoned=abandoned and not self.handshaken
            )
            self.client.close(ProviderCrashed("provider connection closed"))
            self._scope.cancel()
        return code
