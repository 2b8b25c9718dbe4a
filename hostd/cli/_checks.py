"""``hostd check-provider``: drive any provider through the protocol and judge it.

Owns a small, deliberately raw driver (its own pipes, so it can send
malformed bytes on purpose) for either binding, and the checks: handshake
(H1–H3, H2, C5), a query whose frames are valid (F1–F5, D1, P1–P5), budget
honesty on recomputed costs (B1, B3, B4), the kinds filter (Q1),
malformed-input tolerance (R1), verify honesty (V1–V3) and shutdown (R2).
Every reply is judged by the daemon's own leg audit (``hostd.engine.audit_leg``),
so a provider that passes is never dropped or quarantined by the daemon for the
same reply; the handshake, R1, verify and shutdown checks are this module's.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process

import hostd
from hostd._teardown import stop_process
from hostd.engine import LegAudit, audit_leg
from hostd.errors import ParseError
from hostd.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    ContextFrame,
    ContextQuery,
    HandshakeAck,
    LineItem,
    LineSplitter,
    Severity,
    check_handshake,
)
from hostd.rpc import PendingTable, decode, encode_line, make_notification, make_request

__all__ = ["CheckResult", "check_provider", "render_table"]

_BOGUS_DIGEST = "sha256:" + "0" * 64
_MAX_LINE = 16 * 1024 * 1024
#: The provider id the audit's FrameIds carry (the daemon uses the configured id).
_PID = "p"


@dataclass(slots=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""
    skipped: bool = False
    #: The rule ids that failed it (the leg audit's, as the daemon would report them).
    rules: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "passed": self.passed,
            "skipped": self.skipped,
            "detail": self.detail,
            "rules": list(self.rules),
        }


class _Failed(Exception):
    """A check's verdict, raised to end that check (private control flow)."""

    def __init__(self, detail: str, rules: Sequence[str] = ()) -> None:
        super().__init__(detail)
        self.rules = tuple(rules)


@dataclass
class _Driver:
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
                    raise _Failed("provider wrote an over-long line")
                if not line.strip():
                    continue
                try:
                    return decode(line)
                except ParseError as exc:
                    raise _Failed(f"provider wrote a line that is not JSON: {line[:80]!r}") from exc
            try:
                self.lines.extend(self.splitter.feed(await self.process.stdout.receive(1 << 16)))
            except anyio.EndOfStream:
                self.dead = True
                raise _Failed("provider closed stdout (it exited)") from None

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
                        raise _Failed(f"warm-up failed: {params.get('message')}")

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
                raise _Failed(f"handshake refused: {reply['error']}")
            result = reply.get("result")
            self.warming = isinstance(result, dict) and result.get("ready") is False
            return HandshakeAck.model_validate(result)
        env = await self.envelope(
            {"type": "handshake", "protocol_version": PROTOCOL_VERSION}, ("handshake_ack",)
        )
        if env.get("type") == "error":
            raise _Failed(f"handshake refused: {env}")
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
                raise _Failed(f"verify answered an error: {reply['error']}")
            return list((reply.get("result") or {}).get("verdicts") or [])
        env = await self.envelope(
            {"type": "verify", "request": {"frames": identities}}, ("verified",)
        )
        if env.get("type") == "error":
            raise _Failed(f"verify answered an error: {env}")
        return list((env.get("response") or {}).get("verdicts") or [])

    async def shutdown(self) -> None:
        if self.binding == "jsonrpc":
            await self.send(make_notification("context/shutdown"))
        else:
            await self.send({"type": "shutdown"})


def _errors(violations: Sequence[Any]) -> list[Any]:
    return [v for v in violations if v.severity == Severity.ERROR]


def _fmt(violations: Sequence[Any], limit: int = 3) -> str:
    violations = list(dict.fromkeys(violations))  # the same breach found by two queries
    text = "; ".join(f"{v.rule} {v.field}: {v.message}" for v in violations[:limit])
    more = len(violations) - limit
    return text + (f" (+{more} more)" if more > 0 else "")


#: How long a warming provider may take to say it is ready (a cold embedding build).
_WARM_S = 600.0


async def check_provider(
    command: Sequence[str],
    *,
    binding: str = "jsonrpc",
    goal: str = "how is the configuration loaded",
    budget: int = 400,
    timeout_s: float = 10.0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> list[CheckResult]:
    """Run every check against a fresh child running ``command``; never raises for a bad peer."""
    results: list[CheckResult] = []
    try:
        process = await anyio.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return [CheckResult("start", False, f"cannot start {command[0]!r}: {exc.strerror}")]
    driver = _Driver(process, binding, timeout_s)
    try:
        await _run_checks(driver, results, goal, budget)
    finally:
        with anyio.CancelScope(shield=True):
            await _reap(process)
    return results


async def _step(d: _Driver, results: list[CheckResult], name: str, coro: Any) -> Any:
    if d.dead:
        coro.close()
        results.append(CheckResult(name, False, "not run: the provider had already exited"))
        return None
    try:
        return await coro
    except TimeoutError:
        results.append(CheckResult(name, False, "no answer within the timeout"))
    except _Failed as exc:
        results.append(CheckResult(name, False, str(exc), rules=exc.rules))
    except (ValueError, TypeError) as exc:  # pydantic ValidationError is a ValueError
        results.append(CheckResult(name, False, f"malformed reply: {str(exc).splitlines()[0]}"))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        d.dead = True
        results.append(CheckResult(name, False, "the provider's pipe broke (it exited)"))
    return None


async def _run_checks(d: _Driver, results: list[CheckResult], goal: str, budget: int) -> None:
    # 1. Handshake (H1–H3, H2, C5).
    async def handshake() -> HandshakeAck:
        ack = await d.handshake()
        bad = _errors(check_handshake(PROTOCOL_VERSION, ack))
        if bad:
            raise _Failed(_fmt(bad))
        who = f"{ack.provider.name} {ack.provider.version}, {ack.protocol_version}"
        results.append(CheckResult("handshake", True, who))
        return ack

    ack = await _step(d, results, "handshake", handshake())
    if ack is None:
        return
    caps: Capabilities = ack.capabilities
    d.correlation = caps.correlation
    if d.warming:  # an index to build first: its progress notes end with "ready"
        notes = await _step(d, results, "ready", d.wait_ready(max(d.timeout_s, _WARM_S)))
        if notes is None:
            return
        results.append(CheckResult("ready", True, f"ready after {notes} progress notes"))

    # 2. A query whose frames are all valid; 3. budget honesty; 4. the kinds filter: each
    # reply judged by the daemon's leg audit, so the same rule ids fail here as there.
    query = ContextQuery(goal=goal, query_text=goal, max_frames=8, max_tokens=budget)
    frames: list[ContextFrame] = []
    first: list[LegAudit] = []
    kinds_seen: list[str] = []

    async def first_query() -> None:
        raw, error = await d.query(query)
        if error is not None:
            raise _Failed(f"query answered an error: {error}")
        audit = _audit(query, raw, caps.query.kinds)
        first.append(audit)
        kinds_seen.extend(x["kind"] for x in raw or [] if isinstance(x, dict) and "kind" in x)
        frames.extend(audit.accepted)
        invalid = [v for v in _errors(audit.violations) if v not in audit.quarantine]
        if invalid:
            raise _Failed(
                f"{len(invalid)} invalid frame finding(s): {_fmt(invalid)}", _rules(invalid)
            )
        results.append(CheckResult("query", True, f"{audit.offered} valid frame(s)"))

    await _step(d, results, "query", first_query())

    # Budget honesty on recomputed costs (B1, B3, B4), at the normal and a tight budget.
    async def budget_honesty() -> None:
        tight = ContextQuery(goal=goal, query_text=goal, max_frames=1, max_tokens=8)
        raw, error = await d.query(tight)
        held = _audit(tight, raw, caps.query.kinds).quarantine
        breaches = [*(first[0].quarantine if first else ()), *held]
        breaches = [v for v in breaches if v.rule.startswith("B")]
        if breaches:
            raise _Failed(f"the daemon would quarantine it: {_fmt(breaches)}", _rules(breaches))
        how = "an error" if error is not None else f"{len(raw or [])} frame(s)"
        detail = f"costs exact; max_tokens=8 answered with {how}"
        results.append(CheckResult("budget honesty", True, detail))

    await _step(d, results, "budget honesty", budget_honesty())

    # Kinds filter (Q1): ask for one kind, get only that kind (or an unsupported_kind error).
    async def kinds_filter() -> None:
        kind = (caps.query.kinds or kinds_seen or ["doc"])[0]
        q = ContextQuery(goal=goal, query_text=goal, kinds=[kind], max_frames=8, max_tokens=budget)
        raw, error = await d.query(q)
        breaches = [v for v in _audit(q, raw, caps.query.kinds).quarantine if v.rule == "Q1"]
        other = ContextQuery(
            goal=goal, query_text=goal, kinds=["x-no-such-kind"], max_frames=8, max_tokens=budget
        )
        raw2, _ = await d.query(other)
        breaches += [v for v in _audit(other, raw2, caps.query.kinds).quarantine if v.rule == "Q1"]
        if breaches:
            raise _Failed(f"the daemon would quarantine it: {_fmt(breaches)}", _rules(breaches))
        how = (
            f"error {error.get('message', '')!r}"
            if error is not None
            else f"{len(raw or [])} frame(s)"
        )
        results.append(CheckResult("kinds filter", True, f"kinds=[{kind}] → {how}"))

    await _step(d, results, "kinds filter", kinds_filter())

    # 5. Malformed input (R1): garbage, a wrong-typed request, then a valid query still served.
    async def malformed() -> None:
        await d.send_raw(b"this is not json\n")
        await d.send_raw(b'{"half": \n')
        if d.binding == "jsonrpc":
            reply = await d.request("context/query", {"query": {"goal": 5}})
            if "error" not in reply:
                raise _Failed("a query with goal=5 was answered with a result, not an error")
        else:
            await d.send({"type": "query", "query": {"goal": 5}})
        raw, error = await d.query(query, skip_errors=d.binding == "cgp")
        if raw is None:
            raise _Failed(f"after malformed input, a valid query got an error: {error}")
        results.append(
            CheckResult("malformed input", True, "bad lines answered or ignored; still serving")
        )

    await _step(d, results, "malformed input", malformed())

    # 6. Verify honesty (V1–V3): held frames are valid; a wrong digest is not.
    async def verify() -> None:
        if not caps.verify:
            results.append(CheckResult("verify honesty", True, "verify not declared", True))
            return
        held = [f for f in frames if f.content_digest][:4]
        if not held:
            results.append(CheckResult("verify honesty", True, "no digest-carrying frame", True))
            return
        # As the daemon addresses them: over CGP by the handshake name (``_cgp``); over
        # JSON-RPC by a configured id the provider never learns, so any id must do.
        pid = ack.provider.name if d.binding == "cgp" else "p"
        idents = [
            {"provider_id": pid, "frame_id": f.id, "content_digest": f.content_digest} for f in held
        ]
        verdicts = await d.verify(idents)
        status = {str((v.get("frame") or {}).get("frame_id")): v.get("status") for v in verdicts}
        not_valid = [f.id for f in held if status.get(f.id) != "valid"]
        if not_valid:
            raise _Failed(f"frames just served are not 'valid': {not_valid[:3]}")
        bogus = [{"provider_id": pid, "frame_id": held[0].id, "content_digest": _BOGUS_DIGEST}]
        verdicts = await d.verify(bogus)
        if any(v.get("status") == "valid" for v in verdicts):
            raise _Failed("a wrong content_digest was answered 'valid' (rubber stamp)")
        results.append(
            CheckResult("verify honesty", True, f"{len(held)} valid; a wrong digest is not valid")
        )

    await _step(d, results, "verify honesty", verify())

    # 7. Shutdown (R2): the provider exits after the shutdown message.
    async def shutdown() -> None:
        started = time.monotonic()
        await d.shutdown()
        with anyio.fail_after(d.timeout_s):
            code = await d.process.wait()
        took = round((time.monotonic() - started) * 1000)
        results.append(CheckResult("shutdown", True, f"exited with {code} after {took} ms"))

    await _step(d, results, "shutdown", shutdown())


def _audit(query: ContextQuery, raw: list[Any] | None, declared: Sequence[str] = ()) -> LegAudit:
    """The daemon's verdict on one reply (an error reply offers no frame); ``declared``:
    the provider's ``capabilities.query.kinds`` (Q1)."""
    return audit_leg(_PID, query, raw or [], declared_kinds=declared)


def _rules(violations: Sequence[Any]) -> list[str]:
    return sorted({v.rule for v in violations})


async def _reap(process: Process) -> None:
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


def render_table(results: Sequence[CheckResult]) -> str:
    width = max((len(r.name) for r in results), default=5)
    lines = [f"{'check'.ljust(width)}  result  detail"]
    for r in results:
        mark = "skip" if r.skipped else ("pass" if r.passed else "FAIL")
        lines.append(f"{r.name.ljust(width)}  {mark.ljust(6)}  {r.detail}")
    passed = sum(1 for r in results if r.passed)
    lines.append(f"{passed}/{len(results)} passed")
    return "\n".join(lines) + "\n"
