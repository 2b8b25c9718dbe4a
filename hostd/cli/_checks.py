"""``hostd check-provider``: drive any provider through the protocol and judge it.

Owns the checks and their report: handshake (H1–H3, H2, C5), a query whose frames
are valid (F1–F5, D1, P1–P5), budget honesty on recomputed costs (B1, B3, B4), the
kinds filter (Q1), malformed-input tolerance (R1), verify honesty (V1–V3) and
shutdown (R2), each a ``CheckResult``, and the pass/fail table. The binding is
the registry's (``hostd.transport.bindings``): one with a codec is driven by the
driver (``_check_driver``: raw pipes through that codec, so it can send
malformed input on purpose); one carried by an SDK session has a check of its own
(``mcp``: ``_check_mcp``).
Every reply is judged by the daemon's own leg audit (``hostd.engine.audit_leg``),
so a provider that passes is never dropped or quarantined by the daemon for the
same reply; the handshake, R1, verify and shutdown checks are this module's.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from hostd.engine import LegAudit, audit_leg
from hostd.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    ContextFrame,
    ContextQuery,
    FrameIdentity,
    HandshakeAck,
    Severity,
    check_handshake,
)
from hostd.transport.bindings import UNKEYED, find_binding

from ._check_driver import Driver, Failed, reap

__all__ = ["CheckResult", "check_provider", "render_table"]

_BOGUS_DIGEST = "sha256:" + "0" * 64
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
    """Run every check against a fresh child running ``command``; never raises for a bad peer.
    ``binding``: any registered binding (``ValueError`` for one that is not)."""
    row = find_binding(binding)
    if row.codec is None:  # an sdk-session binding has a check of its own (mcp: _check_mcp)
        detail = f"the {binding!r} binding has no codec for this driver: it has its own check"
        return [CheckResult("binding", False, detail)]
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
    # The codec knows the provider by the id the audit's FrameIds carry (``_PID``), as
    # the daemon's knows it by its configured id: verify goes out as the daemon's does.
    driver = Driver(process, row.codec(_PID), timeout_s)
    try:
        await _run_checks(driver, results, goal, budget)
    finally:
        with anyio.CancelScope(shield=True):
            await reap(process)
    return results


async def _step(d: Driver, results: list[CheckResult], name: str, coro: Any) -> Any:
    if d.dead:
        coro.close()
        results.append(CheckResult(name, False, "not run: the provider had already exited"))
        return None
    try:
        return await coro
    except TimeoutError:
        results.append(CheckResult(name, False, "no answer within the timeout"))
    except Failed as exc:
        results.append(CheckResult(name, False, str(exc), rules=exc.rules))
    except (ValueError, TypeError) as exc:  # pydantic ValidationError is a ValueError
        results.append(CheckResult(name, False, f"malformed reply: {str(exc).splitlines()[0]}"))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        d.dead = True
        results.append(CheckResult(name, False, "the provider's pipe broke (it exited)"))
    return None


async def _run_checks(d: Driver, results: list[CheckResult], goal: str, budget: int) -> None:
    # 1. Handshake (H1–H3, H2, C5).
    async def handshake() -> HandshakeAck:
        ack = await d.handshake()
        bad = _errors(check_handshake(PROTOCOL_VERSION, ack))
        if bad:
            raise Failed(_fmt(bad))
        who = f"{ack.provider.name} {ack.provider.version}, {ack.protocol_version}"
        results.append(CheckResult("handshake", True, who))
        return ack

    ack = await _step(d, results, "handshake", handshake())
    if ack is None:
        return
    caps: Capabilities = ack.capabilities
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
            raise Failed(f"query answered an error: {error}")
        audit = _audit(query, raw, caps.query.kinds)
        first.append(audit)
        kinds_seen.extend(x["kind"] for x in raw or [] if isinstance(x, dict) and "kind" in x)
        frames.extend(audit.accepted)
        invalid = [v for v in _errors(audit.violations) if v not in audit.quarantine]
        if invalid:
            raise Failed(
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
            raise Failed(f"the daemon would quarantine it: {_fmt(breaches)}", _rules(breaches))
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
            raise Failed(f"the daemon would quarantine it: {_fmt(breaches)}", _rules(breaches))
        how = f"error {error.message!r}" if error is not None else f"{len(raw or [])} frame(s)"
        results.append(CheckResult("kinds filter", True, f"kinds=[{kind}] → {how}"))

    await _step(d, results, "kinds filter", kinds_filter())

    # 5. Malformed input (R1): garbage, a wrong-typed request, then a valid query still served.
    async def malformed() -> None:
        await d.send_raw(b"this is not json\n")
        await d.send_raw(b'{"half": \n')
        bad = await d.send_query({"goal": 5})
        # Where the bad query has a key of its own its answer must be an error; a
        # lock-step provider's errors are passed over until the valid query's frames.
        refused = bad.key if bad.key is not UNKEYED else None
        raw, error = await d.query(query, skip_errors=True, refused=refused)
        if raw is None:
            raise Failed(f"after malformed input, a valid query got an error: {error}")
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
        # Under the configured id, as the daemon sends them: the binding's codec addresses
        # them as the daemon's does (over CGP by the handshake name; over JSON-RPC by an
        # id the provider never learns, so any id must do).
        idents = [
            FrameIdentity(provider_id=_PID, frame_id=f.id, content_digest=f.content_digest)
            for f in held
        ]
        response = await d.verify(idents)
        status = {v.frame.frame_id: v.status for v in response.verdicts}
        not_valid = [f.id for f in held if status.get(f.id) != "valid"]
        if not_valid:
            raise Failed(f"frames just served are not 'valid': {not_valid[:3]}")
        bogus = [FrameIdentity(provider_id=_PID, frame_id=held[0].id, content_digest=_BOGUS_DIGEST)]
        response = await d.verify(bogus)
        if any(v.status == "valid" for v in response.verdicts):
            raise Failed("a wrong content_digest was answered 'valid' (rubber stamp)")
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


def render_table(results: Sequence[CheckResult]) -> str:
    width = max((len(r.name) for r in results), default=5)
    lines = [f"{'check'.ljust(width)}  result  detail"]
    for r in results:
        mark = "skip" if r.skipped else ("pass" if r.passed else "FAIL")
        lines.append(f"{r.name.ljust(width)}  {mark.ljust(6)}  {r.detail}")
    passed = sum(1 for r in results if r.passed)
    lines.append(f"{passed}/{len(results)} passed")
    return "\n".join(lines) + "\n"
