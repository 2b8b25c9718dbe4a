"""The provider-side runtime: a Python CGP provider as a small class and its server.

Owns the JSON-RPC provider binding (protocol.md §1) from the provider's side:
``context/handshake`` (H1/H3 version-family check), ``context/query``,
``context/verify`` and the ``context/shutdown`` notification, dispatched with
jsonrpcserver; and hostd's memory-write extension (``memory/remember``,
``memory/forget``) for a provider that implements ``remember``/``forget``.
Requests are served concurrently, so a host may pipeline them; a provider may bound
how many queries run at once (``Provider.queries_at_once``), the rest in arrival order.
A malformed line or bad request gets a ``bad_request`` error and the provider
keeps serving (R1); it exits on ``context/shutdown`` or stdin EOF (R2).

It also offers the helpers a provider author needs to be honest on the wire:
``make_frame`` computes ``token_cost`` (B3) and ``content_digest`` (D1) from
the content, ``file_provenance`` digests exactly the bytes a range addresses
(F5, F17). The envelope, the error boundary and the dispatcher are the ones
the daemon uses (``hostd.rpc``). This module imports only ``hostd.protocol``,
``hostd.errors``, ``hostd.rpc`` and its package's ``_warmup``; it never touches the
host side (engine, transport, server), and leaves the process's own settings (gc,
signals) alone. The loops that carry it (``_stdio``, ``_http``) import it, never the
reverse.
"""

from __future__ import annotations

import inspect
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.abc
from pydantic import BaseModel, ConfigDict, ValidationError

from hostd.errors import IncompatibleVersion, InvalidParam, ProviderRefusal
from hostd.protocol import (
    FORGET_METHOD,
    PROGRESS_METHOD,
    PROTOCOL_VERSION,
    REMEMBER_METHOD,
    Capabilities,
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    FrameVerdict,
    HandshakeAck,
    HandshakeRequest,
    Provenance,
    ProviderInfo,
    RememberRequest,
    RememberResult,
    UnverifiableRange,
    VerdictStatus,
    VerifyRequest,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
    versions_compatible,
)
from hostd.rpc import Dispatcher, Method

from ._warmup import BEAT_S, Progress, Readiness, Warming, warm_in_thread

__all__ = [
    "Provider",
    "ProviderServer",
    "file_provenance",
    "make_frame",
    "verify_file",
    "verify_file_range",
]


class Provider:
    """Base class of a Python provider. Set ``info`` and ``capabilities``; implement ``query``.

    ``info``/``capabilities`` may be class attributes or set in ``__init__``.
    ``verify`` is optional: the default vouches for nothing (every verdict
    ``unknown``), so the host re-queries (V2). Raise ``ProviderRefusal`` from
    ``query``/``verify`` to answer with a coded CGP error instead of frames.

    ``remember``/``forget`` are optional too (hostd's memory-write extension): a
    provider that implements ``remember`` answers ``memory/remember`` and
    ``memory/forget`` (one without them answers ``-32601``, no such method), and
    declares ``capabilities.remember`` so a host sends them.
    """

    info: ProviderInfo
    capabilities: Capabilities = Capabilities()
    #: Methods this program answers besides the protocol's, ``name -> Method`` whose
    #: handler gets ``(ProviderServer, params)`` (a reranker's ``rerank``, say).
    methods: ClassVar[Mapping[str, Method]] = {}
    #: While ``warm`` runs, its latest step is said again (with ``elapsed_s``, the
    #: seconds its phase has run) after this many seconds with no new one, so a client
    #: that resets its timeout on each progress note never waits out a long step.
    progress_beat_s: float = BEAT_S
    #: How many ``query`` calls run at once; the others wait their turn in the order
    #: their requests came (``None``: no bound, each runs as it comes). Set 1 for a
    #: query that is CPU work in Python (a BM25 ranking): run together, a burst of them
    #: shares the CPU and every one finishes late, together, past any deadline; one at a
    #: time, the first asked is answered first, so the early ones meet their deadline.
    queries_at_once: int | None = None
    #: How often, in seconds, ``recheck`` runs (when it is defined) once ready.
    recheck_every_s: float = 5.0

    def queries_waiting(self, count: int) -> None:
        """Told how many queries wait for their turn (``queries_at_once``) each time
        that changes, on the event loop: keep it cheap, never blocking. A query that
        waits on something it can do without (a refresh of its index under way) may
        stop waiting when one comes, so the queries behind it are not held up too."""

    async def query(self, query: ContextQuery) -> list[ContextFrame] | ContextQueryResult:
        raise NotImplementedError

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        return [FrameVerdict(frame=f, status="unknown") for f in frames]

    async def remember(self, request: RememberRequest) -> RememberResult:
        """Store one entry and return only once it is committed (``memory/remember``).
        Raise ``ProviderRefusal`` (``bad_request``, with ``field=`` and ``problem=``
        short tokens) for input it will not store: the host shows those tokens, never
        the message."""
        raise NotImplementedError

    async def forget(self, request: ForgetRequest) -> ForgetResult:
        """Delete one entry, once committed (``memory/forget``); refuse as ``remember``."""
        raise NotImplementedError

    def warm(self, progress: Progress) -> str | None:
        """Build or load what queries need (an index); runs once in a worker thread while
        the provider serves: queries get ``unavailable`` (``data.warming``) until it
        returns, or until it calls ``progress.answer_meanwhile()`` (an index searchable
        in part), ``progress(done, total, phase=...)`` reaches the host (``_warmup``).
        What it returns, if a text, is its ready message (``412 chunks from 28 files``):
        ``hostd status`` shows it beside ``ready``."""
        return None

    def ready_message(self) -> str | None:
        """What it holds now, asked after each query it answered once ready (and, by a
        provider with no ``warm``, once at its start): a text that differs from its ready
        message so far is sent as the new one (an index rebuilt for a changed tree says
        what it holds now), so ``hostd status`` stays true. Keep it cheap (a string kept
        up to date). ``None``: nothing new to say."""
        return None

    def recheck(self) -> None:
        """Look for changes others made to what it holds (another process writing its
        database), so ``ready_message`` says them with no query needed. When defined, the
        stdio runtime calls it once ready, every ``recheck_every_s`` seconds, in a worker
        thread, never two at once, and asks ``ready_message`` after each: keep it bounded,
        and cheap when nothing changed (``memory`` reads SQLite's ``data_version``)."""


def _warms(provider: Provider) -> bool:
    return type(provider).warm is not Provider.warm


def _restates(provider: Provider) -> bool:
    return type(provider).ready_message is not Provider.ready_message


def _rechecks(provider: Provider) -> bool:
    return type(provider).recheck is not Provider.recheck


def _stores(provider: Provider) -> bool:
    return type(provider).remember is not Provider.remember


# --- helpers for provider authors ---------------------------------------------------


def make_frame(
    *,
    id: str,  # noqa: A002 - the wire name
    kind: str,
    title: str,
    content: str,
    citation_label: str,
    score: float = 0.5,
    uri: str | None = None,
    provenance: Iterable[Provenance] = (),
    **extra: Any,
) -> ContextFrame:
    """A full frame whose ``token_cost`` (B3) and ``content_digest`` (D1) are computed, not guessed.

    ``extra`` takes any other ``ContextFrame`` member (``valid_from``, ``relations``, …).
    """
    return ContextFrame(
        id=id,
        kind=kind,
        title=title,
        content=content,
        content_digest=sha256_digest(content.encode("utf-8")),
        uri=uri,
        score=score,
        token_cost=canonical_token_cost(content),
        provenance=list(provenance),
        citation_label=citation_label,
        **extra,
    )


def file_provenance(
    uri: str,
    data: bytes,
    range: str | None = None,  # noqa: A002 - the wire name
    *,
    method: str | None = None,
    by: str | None = None,
) -> Provenance:
    """``file`` provenance whose digest covers exactly the bytes ``range`` addresses (F5, F17).

    Raises ``UnverifiableRange`` when the range addresses nothing (rather than
    silently digesting the whole file).
    """
    digest = sha256_digest(address_line_range(data, range))
    return Provenance(type="file", uri=uri, range=range, digest=digest, method=method, by=by)


def verify_file_range(identity: FrameIdentity, path: Path, range: str) -> FrameVerdict:  # noqa: A002 - the wire name
    """Re-read the lines ``range`` addresses in ``path`` and judge the held digest (V3, V4).

    ``valid`` only when the digest of those bytes now equals the held one; ``stale``
    (with the current digest) when they changed; ``gone`` when the file or the lines
    are no longer there (F17 ``start_past_end``); ``unknown`` when the identity holds
    no digest or the file cannot be read. Which paths a provider may re-read is its
    own decision, made before this call.
    """

    def addressed(data: bytes) -> str | None:
        try:
            return sha256_digest(address_line_range(data, range))
        except UnverifiableRange:
            return None

    return verify_file(identity, path, addressed)


def verify_file(
    identity: FrameIdentity, path: Path, digest_of: Callable[[bytes], str | None]
) -> FrameVerdict:
    """Re-read ``path`` and judge the held digest against ``digest_of`` its bytes now
    (``None``: what the frame addressed is no longer there): ``valid``, ``stale`` with
    the current digest, ``gone`` (no such file, nothing addressed), or ``unknown`` (no
    digest held, the file unreadable). ``verify_file_range`` for a line range; a
    provider whose frames digest something else of a file (a notebook cell's text)
    passes its own ``digest_of``."""
    if identity.content_digest is None:
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FrameVerdict(frame=identity, status=VerdictStatus.GONE.value)
    except OSError:
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    current = digest_of(data)
    if current is None:
        return FrameVerdict(frame=identity, status=VerdictStatus.GONE.value)
    if current == identity.content_digest:
        return FrameVerdict(frame=identity, status=VerdictStatus.VALID.value)
    return FrameVerdict(
        frame=identity, status=VerdictStatus.STALE.value, replacement_digest=current
    )


# --- the JSON-RPC methods -------------------------------------------------------------


class _QueryParams(BaseModel):
    model_config = ConfigDict(extra="ignore")  # U1: unknown members are ignored

    query: ContextQuery


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="ignore")


async def _handshake(server: ProviderServer, req: HandshakeRequest) -> dict[str, Any]:
    # H1/H3: a different major family is a named error, never a hang.
    if not versions_compatible(PROTOCOL_VERSION, req.protocol_version):
        raise IncompatibleVersion(
            f"provider speaks {PROTOCOL_VERSION}, host asked for {req.protocol_version}"
        )
    provider = server.provider
    ack = HandshakeAck(
        protocol_version=PROTOCOL_VERSION,
        provider=provider.info,
        capabilities=provider.capabilities,
    )
    wire = ack.to_wire()
    if not server.readiness.ready:
        wire["ready"] = False  # context/progress says when it is (docs/providers.md)
    return wire


async def _query(server: ProviderServer, params: _QueryParams) -> dict[str, Any]:
    if not server.readiness.answers:
        raise server.readiness.refusal()  # answered now: a host never waits on a warm-up
    turns = server.query_turns
    if turns is None:
        return await _run_query(server, params)
    # First come, first served (``Provider.queries_at_once``); the provider is told how
    # many wait, so the one that runs need not hold them up (``Provider.queries_waiting``).
    queued = turns.available_tokens < 1 or turns.statistics().tasks_waiting > 0
    if queued:
        server.queries_queued += 1
        server.provider.queries_waiting(server.queries_queued)
    try:
        await turns.acquire()
    finally:
        if queued:
            server.queries_queued -= 1
            server.provider.queries_waiting(server.queries_queued)
    try:
        return await _run_query(server, params)
    finally:
        turns.release()


async def _run_query(server: ProviderServer, params: _QueryParams) -> dict[str, Any]:
    # Read before the query runs: a build that ends while it searches does not make
    # its answer whole, and the ready note may reach the host before this reply does.
    meanwhile = server.readiness.meanwhile()
    query: Any = server.provider.query  # async as declared, or a plain def
    try:
        if inspect.iscoroutinefunction(query):
            out = await query(params.query)
        else:  # a plain ``def query``: in a worker thread, so a slow one blocks nothing
            out = await anyio.to_thread.run_sync(query, params.query)
            if inspect.isawaitable(out):
                out = await out
    except ValidationError as exc:
        raise _ModelRefused("query()", exc) from exc
    if server.restates:  # before the reply: a host that reads it has the new message
        server.readiness.restate(server.provider.ready_message())
    if isinstance(out, ContextQueryResult):
        # Frames are usually wire dicts already; a pydantic dump of list[Any] would
        # only copy them (it is the provider's hot path).
        result: dict[str, Any] = {
            "frames": _frames_to_wire(out.frames),
            "truncated": out.truncated,
        }
        if out.dropped_estimate is not None:
            result["dropped_estimate"] = out.dropped_estimate
        if out.unindexed_changes is not None:
            result["unindexed_changes"] = out.unindexed_changes
    elif not isinstance(out, Iterable) or isinstance(out, str | bytes | Mapping | BaseModel):
        raise _WrongReturn(f"query() returned {_type_name(out)}")  # None: a missing return
    else:
        result = {"frames": _frames_to_wire(out), "truncated": False}
    if meanwhile is not None:
        result["warming"] = meanwhile
    return result


async def _verify(server: ProviderServer, req: VerifyRequest) -> dict[str, Any]:
    verify: Any = server.provider.verify  # async as declared, or a plain def
    try:
        if inspect.iscoroutinefunction(verify):
            verdicts = await verify(list(req.frames))
        else:
            verdicts = await anyio.to_thread.run_sync(verify, list(req.frames))
    except ValidationError as exc:
        raise _ModelRefused("verify()", exc) from exc
    return {"verdicts": [v.to_wire() for v in verdicts]}


async def _call_provider(method: Any, name: str, arg: Any) -> Any:
    """A provider's own method, async as declared or a plain def (in a worker thread)."""
    try:
        if inspect.iscoroutinefunction(method):
            return await method(arg)
        out = await anyio.to_thread.run_sync(method, arg)
        return await out if inspect.isawaitable(out) else out
    except ValidationError as exc:
        raise _ModelRefused(f"{name}()", exc) from exc
    except ProviderRefusal as exc:
        # The host shows the refusal's tokens, never its words: they go to the log here.
        sys.stderr.write(f"provider: {name} refused: {exc.message}\n")
        raise


async def _remember(server: ProviderServer, req: RememberRequest) -> dict[str, Any]:
    out = await _call_provider(server.provider.remember, "remember", req)
    if not isinstance(out, RememberResult):
        raise _WrongReturn(f"remember() returned {_type_name(out)}", "a RememberResult")
    if server.restates:  # what it holds changed: said before the reply, as after a query
        server.readiness.restate(server.provider.ready_message())
    return out.to_wire()


async def _forget(server: ProviderServer, req: ForgetRequest) -> dict[str, Any]:
    out = await _call_provider(server.provider.forget, "forget", req)
    if not isinstance(out, ForgetResult):
        raise _WrongReturn(f"forget() returned {_type_name(out)}", "a ForgetResult")
    if server.restates:
        server.readiness.restate(server.provider.ready_message())
    return out.to_wire()


async def _shutdown(server: ProviderServer, params: _NoParams) -> None:
    server.shutdown_requested.set()


class _ModelRefused(RuntimeError):
    """A model the provider's own method built refused its values (a
    ``ContextQueryResult(truncated=True)`` with no ``frames``): the author's bug, so
    answered ``internal`` with its traceback, not ``bad_request`` as if the host's
    request had been malformed."""

    def __init__(self, method: str, exc: ValidationError) -> None:
        super().__init__(f"{method} built an invalid {exc.title}: {exc}")


class _WrongReturn(TypeError):
    """A provider's method returned what its wire answer cannot be made of (``None``
    from a ``query`` that forgot its ``return``): answered ``internal``, and said on
    stderr in one line with what to return, since a traceback would point into this
    module, not at the author's method."""

    def __init__(self, what: str, fix: str = "a list of frames or a ContextQueryResult") -> None:
        super().__init__(f"{what}: return {fix}")


def _type_name(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _log_unexpected(method: str, exc: BaseException) -> None:
    # A provider's log is its stderr; refusals are answers, not news. Params the
    # request got wrong are the caller's mistake (say so in one line, not as this
    # provider's failure); a wrong return value is the author's, said with its fix;
    # anything else is a bug here: its whole traceback, so the author finds the line.
    if isinstance(exc, ProviderRefusal | IncompatibleVersion | Warming):
        return
    if isinstance(exc, _WrongReturn):
        sys.stderr.write(f"provider: {method} failed: {exc}\n")
        return
    if isinstance(exc, InvalidParam):  # the params boundary's refusal (``hostd.rpc``)
        where, errors = exc.data.get("field"), exc.data.get("errors")
        count = len(errors) if isinstance(errors, list) else 1
        sys.stderr.write(
            f"provider: {method}: refused a request with malformed params ({count} error(s)"
            f"{f', the first at {where}' if where else ''}); answered bad_request\n"
        )
        return
    if isinstance(exc, ValidationError):
        sys.stderr.write(
            f"provider: {method}: refused a request with malformed params "
            f"({exc.error_count()} error(s)); answered bad_request\n"
        )
        return
    sys.stderr.write(f"provider: {method} failed: {type(exc).__name__}: {exc}\n")
    sys.stderr.write("".join(traceback.format_exception(exc)))


_METHODS: Mapping[str, Method] = {
    "context/handshake": Method(HandshakeRequest, _handshake),
    "context/query": Method(_QueryParams, _query),
    "context/verify": Method(VerifyRequest, _verify),
    "context/shutdown": Method(_NoParams, _shutdown),
}
_DISPATCHER = Dispatcher(_METHODS, on_error=_log_unexpected)
#: Answered only by a provider that implements ``remember`` (and ``forget``).
_MEMORY_METHODS: Mapping[str, Method] = {
    REMEMBER_METHOD: Method(RememberRequest, _remember),
    FORGET_METHOD: Method(ForgetRequest, _forget),
}


class ProviderServer:
    """Answers JSON-RPC lines for a ``Provider``; transport-free so tests can drive it in memory.

    ``shutdown_requested`` is set by the ``context/shutdown`` notification.
    """

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.shutdown_requested = anyio.Event()
        extra = {**_MEMORY_METHODS, **provider.methods} if _stores(provider) else provider.methods
        self._dispatcher = (
            Dispatcher({**_METHODS, **extra}, on_error=_log_unexpected) if extra else _DISPATCHER
        )
        #: Ready unless ``start_warming`` runs a warm-up (in memory, tests build first).
        self.readiness = Readiness()
        #: Whether the provider says what it holds after a query (``ready_message``).
        self.restates = _restates(provider)
        #: The turns its queries wait for in the order they came, when it bounds how many
        #: run at once (``Provider.queries_at_once``; FIFO: anyio serves waiters in order).
        at_once = provider.queries_at_once
        self.query_turns = anyio.CapacityLimiter(at_once) if at_once else None
        #: How many queries wait for a turn now (``Provider.queries_waiting``).
        self.queries_queued = 0

    def start_warming(self, notify: Callable[[bytes], None]) -> threading.Thread | None:
        """Run ``provider.warm`` in a daemon thread; each progress step goes to ``notify``
        (called from that thread) as one encoded ``context/progress`` notification line."""
        readiness = self.readiness

        def send(progress: dict[str, Any]) -> None:
            msg = {"jsonrpc": "2.0", "method": PROGRESS_METHOD, "params": progress}
            notify(_DISPATCHER.encode_reply(msg))

        readiness.attach(send)
        if not _warms(self.provider):
            # Nothing to warm, but something to say: what it holds is its ready message
            # from the start (a database's entries), as a warm-up's is when it ends.
            if self.restates:
                readiness.restate(self.provider.ready_message())
            return None
        readiness.begin()
        return warm_in_thread(self.provider.warm, readiness, self.provider.progress_beat_s)

    async def run_rechecks(self) -> None:
        """Until cancelled: every ``recheck_every_s`` seconds, once ready, the provider's
        ``recheck`` in a worker thread, then its ready message said when new. On the event
        loop only the wait and that message; returns at once for a provider without
        ``recheck``. A failing recheck is said on stderr (once while it fails alike) and
        tried again at the next turn: the provider still serves."""
        if not _rechecks(self.provider):
            return
        every, failed = self.provider.recheck_every_s, None
        while True:
            await anyio.sleep(every)
            if not self.readiness.ready:
                continue
            try:
                await anyio.to_thread.run_sync(self.provider.recheck)
            except Exception as exc:  # a status figure, not an answer: never fatal
                said = f"{type(exc).__name__}: {exc}"
                if said != failed:
                    sys.stderr.write(f"provider: recheck failed: {said}\n")
                failed = said
                continue
            failed = None
            if self.restates:  # on the loop, as after a query: the newest message last
                self.readiness.restate(self.provider.ready_message())

    async def handle_line(self, line: bytes | str) -> bytes | None:
        """The reply line (UTF-8, with its newline) to one input line; ``None`` for a
        notification."""
        if not line.strip():
            return None
        return await self._dispatcher.answer_line(line, self)


def _frames_to_wire(frames: Iterable[ContextFrame | dict[str, Any]]) -> list[Any]:
    """Frames as wire dicts. Dicts pass as they are; when every frame is one (the usual
    case) the type check runs in C, with no Python call per frame."""
    frames = list(frames)
    if set(map(type, frames)) <= {dict}:
        return frames
    for i, f in enumerate(frames):
        if not isinstance(f, dict | ContextFrame):
            raise _WrongReturn(f"query()'s frame [{i}] is {_type_name(f)}")
    return [f if isinstance(f, dict) else f.to_wire() for f in frames]
