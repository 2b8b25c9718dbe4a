"""``hostd check-provider``: drive any provider through the protocol and judge it.

Owns the checks and their report: handshake (H1–H3, H2, C5), a query whose frames
are valid (F1–F5, D1, P1–P5), budget honesty on recomputed costs (B1, B3, B4), the
kinds filter (Q1), malformed-input tolerance (R1), verify honesty (V1–V3) and
shutdown (R2), each a ``CheckResult``, and the pass/fail table. The binding is
the registry's (``hostd.transport.bindings``): one with a codec is driven by the
driver (``_check_driver``: the pipes through that codec, so it can send
malformed input on purpose); one carried by an SDK session has a check of its own
(``mcp``: ``_check_mcp``).
Every reply is judged by the daemon's own leg audit (``hostd.engine.audit_leg``),
and the query's frames by its verify stage's inline digest check
(``hostd.engine.verify``: ``check_inline_digest``, ``decide_frame``; D4), so a
provider that passes is never dropped or quarantined by the daemon for the same
reply; the handshake, R1, verify and shutdown checks are this module's. The queries
are the daemon's for a plain ``compose GOAL``: no ``query_text`` unless one is asked
for. A query answered with no frame judged nothing; a result without ``truncated``
(the schema requires it, the daemon reads it as false) and a malformed query answered
with a result (R1's SHOULD) broke what the daemon forgives: each row is a warning
(the exit status stays 0). A JSON-RPC handshake that got no reply is followed by the
CGP envelope handshake; a provider that answers that one is told to use ``--binding
cgp`` on the same row. A well-formed query answered an error that refuses nothing it
asked (``internal``: its handler raised) is the one failure: each check that judges a
query's answer is ``not run``, naming it, and malformed input holds an error reply to
the valid query after the bad lines for still serving (R1). A start, handshake or
warm-up that failed lists every check it kept from running as ``not run``. A call
past its deadline is one failure, naming the likely causes (a slow query, a blocked
event loop): its late reply is waited for a call's deadline more, and said on its row,
or the checks stop there, each later one ``not run``.
The provider runs as the daemon runs it: its command as ``hostd.toml`` would resolve
it (``daemon_command``: ``python`` is hostd's own interpreter), spawned by the
transport's ``ChildProcess`` (the daemon's scrubbed environment plus the provider's
own ``env``, its own process group under the reaper shim, stderr drained and its
tail kept, scrubbed by the provider's ``Redactor``; how much of it the daemon's log
would leave out is counted for the report), known by its configured id or its
command's name, each call held to the daemon's deadlines (``Deadlines``:
``timeout_ms`` by default); a check that fails
says what the provider said about it (``ChildProcess.failure_report``: its exit
status and the last lines of its stderr, as the daemon explains a crash).
A remote provider (``check_remote_provider``: a ``url``) is reached as the daemon
reaches it: the endpoint and connection are the engine ``Launcher``'s (C7, the
credential read at the handshake and scrubbed from every row, C8), the same checks
run over HTTP exchanges (``RemoteDriver``), and those only a child's pipes can show
(malformed input on its stdin, shutdown and its exit) are skipped, saying why.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio

from hostd._hints import FLAGS, NO_HANDSHAKE, key_named, no_remote_handshake
from hostd._root_advice import cited_path, covering_roots, roots_toml
from hostd.config import HostSettings, ProviderSettings, provider_command
from hostd.engine import Launcher, LegAudit, PoolSettings, ProviderSpec, audit_leg
from hostd.engine.verify import (
    Exclusion,
    SourceOutcome,
    SourceReader,
    check_inline_digest,
    decide_frame,
)
from hostd.errors import HostdError, ProviderCrashed, ProviderError
from hostd.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    ContextFrame,
    ContextQuery,
    FrameIdentity,
    HandshakeAck,
    Severity,
    Violation,
    check_handshake,
)
from hostd.transport import (
    ENV_ALLOW_LIST,
    ChildProcess,
    Redactor,
    RemoteConnection,
    TokenSource,
    secret_env_values,
    shown_url,
    stalled_words,
)
from hostd.transport.bindings import CGP_SDK_WIRE, UNKEYED, find_binding

from ._check_driver import HOST, QUERY_DOC, Driver, Failed, Link, Misshapen, RemoteDriver

__all__ = [
    "COMMON_GOAL",
    "OTHER_GOAL",
    "CHECKS",
    "DEFAULT_TIMEOUT_MS",
    "CheckResult",
    "Checked",
    "Deadline",
    "Deadlines",
    "check_provider",
    "check_remote_provider",
    "daemon_command",
    "digest_mismatches",
    "frame_title",
    "common_words_matched",
    "goal_probe_failed",
    "no_frame_result",
    "other_goal",
    "provider_name",
    "reply_fault",
    "render_header",
    "render_notes",
    "render_remote_header",
    "render_stderr",
    "render_table",
    "same_answer",
]

#: The daemon's defaults, read from the config's own models: a call's deadline
#: (``[[provider]] timeout_ms``), a start's (``host.start_timeout_s``) and the longest
#: line it reads (``host.max_line_bytes``); and the grace of its teardown ladder.
DEFAULT_TIMEOUT_MS: int = ProviderSettings.model_fields["timeout_ms"].default
_START_TIMEOUT_S: float = HostSettings.model_fields["start_timeout_s"].default
_MAX_LINE_BYTES: int = HostSettings.model_fields["max_line_bytes"].default
_GRACE_S: float = PoolSettings().grace_period_s

_BOGUS_DIGEST = "sha256:" + "0" * 64

#: Every check of a provider run as a child, in the order they run (``ready`` only runs
#: for a provider that warms up first); a remote provider's are the same.
CHECKS = (
    "handshake",
    "query",
    "budget honesty",
    "kinds filter",
    "malformed input",
    "verify honesty",
    "shutdown",
)
#: Rows whose failure means nothing after them was run.
_GATES = {
    "start": "the provider did not start",
    "handshake": "the handshake failed",
    "ready": "the provider never said it was ready",
}


@dataclass(slots=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""
    skipped: bool = False
    #: The rule ids that failed it (the leg audit's, as the daemon would report them).
    rules: tuple[str, ...] = ()
    #: Passed, but it judged nothing (a query answered with no frame): shown ``warn``,
    #: counted apart, and the exit status stays 0.
    warning: bool = False
    #: Never run: an earlier check failed (its detail says which). A failure.
    not_run: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "passed": self.passed,
            "skipped": self.skipped,
            "warning": self.warning,
            "not_run": self.not_run,
            "detail": self.detail,
            "rules": list(self.rules),
        }


def _errors(violations: Sequence[Any]) -> list[Any]:
    return [v for v in violations if v.severity == Severity.ERROR]


#: How a frame's ``token_cost`` is computed, told where one was refused (B3).
_COST_RULE = "token_cost must be ceil(UTF-8 bytes of content / 4), an integer (B3)"


def _bad_costs(violations: Iterable[Violation]) -> list[Violation]:
    """The schema's refusals of a frame's ``token_cost`` (a fraction, a string, none):
    the daemon drops such a frame before B3 can compare its cost."""
    return [v for v in violations if v.rule == "schema" and v.field.endswith("token_cost")]


def _cost_judged(raw: Any) -> bool:
    """Whether the leg audit compares this frame's declared cost as sent: B3 wherever its
    ``content`` is a string and its ``token_cost`` an integer (on a frame the schema
    refused too), P4 on a reference frame."""
    if not isinstance(raw, dict):
        return False
    if raw.get("representation") == "reference":
        return True
    return isinstance(raw.get("content"), str) and type(raw.get("token_cost")) is int


def _fmt(violations: Sequence[Any], limit: int = 3) -> str:
    violations = list(dict.fromkeys(violations))  # the same breach found by two queries
    text = "; ".join(f"{v.rule} {v.field}: {v.message}" for v in violations[:limit])
    more = len(violations) - limit
    return text + (f" (+{more} more)" if more > 0 else "")


#: How long a warming provider may take to say it is ready (a cold embedding build).
_WARM_S = 600.0


def daemon_command(command: Sequence[str], cwd: str | None = None) -> list[str]:
    """``command`` as the daemon runs it when ``hostd.toml`` names it (the config's own
    rule): ``python`` is the interpreter running hostd, a relative path (``./prov``)
    reads against ``cwd`` (default: the working directory), a bare name is PATH's."""
    return provider_command(list(command), Path(cwd) if cwd is not None else Path.cwd())


@dataclass(frozen=True, slots=True)
class Deadline:
    """How long a step may take, and what that bound is in the daemon's terms."""

    seconds: float
    why: str
    #: What missing it means.
    what: str = "no answer"

    def missed(self) -> str:
        return f"{self.what} within {self.seconds * 1000:.0f} ms ({self.why})"


@dataclass(frozen=True, slots=True)
class Deadlines:
    """The daemon's deadlines for one provider: each call (``timeout_ms``), its start
    (``start_timeout_s``), a warm-up, and its exit after shutdown (the ladder's grace
    before SIGTERM); a call's deadline asked for longer than either stands for it."""

    call: Deadline
    start: Deadline
    ready: Deadline
    exit: Deadline

    @classmethod
    def of(
        cls,
        timeout_s: float | None = None,
        why: str | None = None,
        *,
        start_s: float | None = None,
        start_why: str | None = None,
        start_asked: float | None = None,
    ) -> Deadlines:
        """The daemon's defaults, or a call's deadline of ``timeout_s`` (``why``: what
        that bound is, when it was not asked for) and a start's of ``start_s`` (a
        config's ``start_timeout_s``; ``start_why``: where it comes from). A call's
        deadline asked for (``--timeout-ms``) longer than the start's stands for it,
        unless ``start_asked`` (``--start-timeout-s``) names the start's itself."""
        asked = why or "the timeout asked for"
        if timeout_s is None:
            call = Deadline(
                DEFAULT_TIMEOUT_MS / 1000,
                "the daemon's default timeout_ms; set timeout_ms in [[provider]] to allow more",
            )
        else:
            call = Deadline(timeout_s, f"{asked}; the daemon's default is {DEFAULT_TIMEOUT_MS} ms")
        if start_s is None:
            # No config names it (a command after --): the flag is what changes it here.
            start = Deadline(
                _START_TIMEOUT_S,
                "the daemon's default start_timeout_s; --start-timeout-s S sets it here",
            )
        else:
            start = Deadline(start_s, start_why or "the start_timeout_s asked for")
        if start_asked is not None:
            was = f"the daemon's default is {_START_TIMEOUT_S:g} s"
            if start_s is not None:
                was = f"{start_why or 'the configured one'} is {start_s:g} s"
            start = Deadline(start_asked, f"the start_timeout_s asked for; {was}")
        elif timeout_s is not None and why is None and call.seconds > start.seconds:
            # Only a deadline asked for (--timeout-ms): the daemon holds a start to its
            # start_timeout_s, whatever a call's timeout_ms.
            default = "default " if start_s is None else ""
            why = f"{asked}; the daemon's {default}start_timeout_s is {start.seconds:g} s"
            start = Deadline(call.seconds, why)
        ready = Deadline(max(call.seconds, _WARM_S), "a warm-up's bound here", "not ready")
        exit_ = Deadline(_GRACE_S, "the daemon then stops it with SIGTERM", "did not exit")
        if call.seconds > exit_.seconds:
            why = f"{asked}; the daemon stops it with SIGTERM after {_GRACE_S * 1000:.0f} ms"
            exit_ = Deadline(call.seconds, why, "did not exit")
        return cls(call, start, ready, exit_)


@dataclass(slots=True)
class Checked:
    """One run of check-provider: each check's result, the command as it ran, and the
    last lines of the provider's stderr when a check failed while it lived on (one that
    exited says so, and what it wrote, on the row of the check it ended); how many
    lines it wrote to stderr, and how many of them the daemon's log would leave out
    (its rate limit: the transport's ``StderrPump``)."""

    results: list[CheckResult]
    command: list[str]
    stderr: str = ""
    stderr_lines: int = 0
    stderr_unlogged: int = 0


def provider_name(command: Sequence[str]) -> str:
    """The id a provider run from ``command`` is known by here (in the log, in what the
    transport says): its command's name, as no config names it."""
    return Path(command[0]).name if command else "provider"


async def check_provider(
    command: Sequence[str],
    *,
    binding: str = "jsonrpc",
    goal: str = "how is the configuration loaded",
    budget: int = 400,
    timeout_s: float | None = None,
    deadlines: Deadlines | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    provider_id: str | None = None,
    query_text: str | None = None,
    configured: bool = False,
    roots: Sequence[str | os.PathLike[str]] | None = None,
    base: Path | None = None,
) -> Checked:
    """Run every check against a fresh child running ``command`` as the daemon would run
    it; never raises for a bad peer. ``binding``: any registered binding (``ValueError``
    for one that is not); ``timeout_s``: a call's deadline (default: the daemon's
    ``timeout_ms``), or ``deadlines`` all of them (a config's); ``env``: the provider's
    own variables (``[[provider]] env``), on top of the daemon's allow-list (their
    secret-named values are scrubbed from what it says, as the daemon scrubs them);
    ``provider_id``: its configured id (default: its command's name); ``query_text``:
    what the queries carry as ``query_text`` (default: none, as the daemon sends none
    unless its client gave one); ``configured``: it is a config's ``[[provider]]``
    (what to change is said in the config's words, else in check-provider's flags);
    ``roots``: the trusted roots that config gives it (``cfg.roots_of``; empty: its
    ``file`` sources are never re-read), ``None`` when not known (a command alone): what
    the daemon does with a frame citing a file depends on them; ``base``: that config's
    directory, which a relative root is read against (a root suggested for the files it
    cites is written relative to it when it holds them: ``hostd._root_advice``)."""
    row = find_binding(binding)
    ran = daemon_command(command, cwd)
    pid = provider_id or provider_name(command)
    if row.codec is None:  # an sdk-session binding has a check of its own (mcp: _check_mcp)
        detail = f"the {binding!r} binding has no codec for this driver: it has its own check"
        return Checked([CheckResult("binding", False, detail)], ran)
    deadlines = deadlines or Deadlines.of(timeout_s)
    redactor = Redactor(secret_env_values(env or {}))  # the daemon's (engine ``Launcher``)
    try:
        child = await ChildProcess.spawn(pid, ran, env=env, cwd=cwd, redactor=redactor)
    except HostdError as exc:  # the cwd, or the command (without the reaper shim)
        start = CheckResult("start", False, _unnamed(pid, redactor.error(exc).message))
        return Checked(_not_run_after([start]), ran)
    except OSError as exc:
        detail = f"cannot start {ran[0]!r}: {exc.strerror}"
        return Checked(_not_run_after([CheckResult("start", False, detail)]), ran)
    # The codec knows the provider by the id the audit's FrameIds carry, as the daemon's
    # knows it by its configured id: verify goes out as the daemon's does.
    driver = Driver(child, row.codec(pid), deadlines.call.seconds)
    run = _Run(driver, deadlines, pid, configured=configured, binding=binding)
    run.roots = None if roots is None else tuple(roots)
    run.base = base
    checked = Checked(run.results, ran)
    async with anyio.create_task_group() as tg:
        child.start_pumps(tg)  # stderr drained (its tail kept), the exit watched
        try:
            await child.start_reading(driver, _MAX_LINE_BYTES)
            await _run_checks(run, goal, budget, query_text)
        finally:
            with anyio.CancelScope(shield=True):
                checked.stderr = await _close(child, run)
        tg.cancel_scope.cancel()
    # Read once the ladder has read its stderr to the end (or given up on it).
    checked.stderr_lines, checked.stderr_unlogged = child.stderr_lines, child.stderr_suppressed
    _not_run_after(run.results)
    return checked


async def check_remote_provider(
    spec: ProviderSpec,
    *,
    goal: str = "how is the configuration loaded",
    budget: int = 400,
    timeout_s: float | None = None,
    deadlines: Deadlines | None = None,
    query_text: str | None = None,
    section: str | None = None,
) -> Checked:
    """Run every check that applies to a remote provider against ``spec``'s ``url``
    (with its binding, credential and TLS files), over the endpoint and connection the
    daemon's engine makes for it (``Launcher``: C7 checked before anything is built,
    the token read at the handshake, every error scrubbed of it, C8); never raises for
    a bad peer. Malformed input and shutdown are skipped, with why: a remote provider
    has no stdin and no process here. ``timeout_s``/``deadlines``/``query_text`` as
    ``check_provider``'s. ``section``: what its keys are named after (``FLAGS`` for a
    provider given by flags: ``--ca-file``; by default its ``[[provider]]`` section, as
    the daemon says them)."""
    url = spec.url
    assert url is not None
    deadlines = deadlines or Deadlines.of(timeout_s)
    launcher = Launcher(PoolSettings(max_line_bytes=_MAX_LINE_BYTES), HOST)
    try:
        endpoint = launcher.endpoint(spec, section=section)
    except HostdError as exc:  # the URL (C7), or the TLS files cannot be loaded
        start = CheckResult("start", False, _reason_said(exc, _unnamed(spec.id, exc.message)))
        return Checked(_not_run_after([start], remote=True), [shown_url(url)])

    async def open_link(handshake_timeout: float) -> Link:
        # As the engine opens a remote provider: the token read again, the handshake's
        # rules (H1–H3, H2, C5) checked, egress forced (C4).
        return await RemoteConnection.open(endpoint, host=HOST, handshake_timeout=handshake_timeout)

    # Under its own id, as the audit's FrameIds carry it: verify goes out as the daemon's.
    driver = RemoteDriver(open_link, deadlines.call.seconds)
    run = _Run(driver, deadlines, spec.id, local=False, binding=spec.binding)
    try:
        await _run_checks(run, goal, budget, query_text)
    finally:
        await launcher.aclose()  # shielded: its pooled client is closed whatever happened
    if run.unanswered and driver.stalled is not None:  # where, before what to check
        row = next(r for r in run.results if r.name == "handshake")
        row.detail = f"{row.detail}: {stalled_words(driver.stalled)}"
    if run.unanswered:  # no reply at all: what to check, as a pipe's row says its causes
        row = next(r for r in run.results if r.name == "handshake")
        row.detail = f"{row.detail}; {no_remote_handshake(endpoint.section)}"
    _not_run_after(run.results, remote=True)
    # Nothing a row says may carry a token the source read, even one the server echoed
    # into its handshake (C8): every row leaves through the provider's redactor.
    redactor = launcher.redactor(spec)
    for result in run.results:
        result.detail = redactor.text(result.detail)
    return Checked(run.results, [shown_url(url)])


def _reason_said(exc: HostdError, message: str) -> str:
    """A failed check's detail: the error's reason, then ``message``, the reason said
    once: a message that begins with it (``certificate not trusted (…)``) is not
    prefixed with it again."""
    if message.startswith(f"{exc.reason} "):
        return message
    return f"{exc.reason}: {message}"


def _unnamed(pid: str, message: str) -> str:
    """A transport message about the provider ``pid`` without its id."""
    return message.removeprefix(f"provider {pid!r} ").replace(f"refused {pid!r}: ", "")


def _not_run_after(results: list[CheckResult], *, remote: bool = False) -> list[CheckResult]:
    """``results`` with a row for each check that was never run because a check that gates
    the rest failed (the start, the handshake, the warm-up): it says which. A remote
    provider's pipe-only checks keep their own ``skip`` rows. Returns ``results``."""
    gate = next((r for r in results if r.name in _GATES and not r.passed), None)
    if gate is None:
        return results
    names = {r.name for r in results}
    for name in CHECKS:
        if name in names:
            continue
        if remote and name in _REMOTE_SKIPS:
            results.append(CheckResult(name, True, _REMOTE_SKIPS[name], skipped=True))
        else:
            why = f"not run: {_GATES[gate.name]}"
            results.append(CheckResult(name, False, why, not_run=True))
    return results


async def _close(child: ChildProcess, run: _Run) -> str:
    """The teardown ladder, and what the provider said about a failure. One whose output
    ended: its exit status and stderr's last lines (``failure_report``, waited for
    before it is stopped, as the daemon explains a crash), told on the row of the check
    it ended. One that failed a check and lived on: its stderr's last lines once it is
    stopped (read to the end then), returned."""
    d = run.d
    crashed = d.dead and isinstance(d.ended, ProviderCrashed)
    report = ""
    if crashed:  # it is exiting: its own status says why
        report = await child.failure_report(anyio.current_time() + _GRACE_S, started=run.started)
    await child.aclose(grace=_GRACE_S)  # the ladder: stdin closed, grace, SIGTERM, SIGKILL
    # Its output is read to its end now: did it answer the CGP handshake probed for? One
    # that did not is told the usual causes of a handshake never answered.
    if run.unanswered and isinstance(d, Driver):
        row = next(r for r in run.results if r.name == "handshake")
        hint = _cgp_hint(run.configured) if run.probed and d.speaks_cgp() else NO_HANDSHAKE
        row.detail = f"{row.detail}; {hint}"
    if run.died_in is not None:
        assert d.ended is not None
        if d.ended.data.get("stage") == "start":
            run.died_in.name = "start"  # the command could not be run: the exec said why
            run.died_in.detail = _unnamed(run.pid, d.ended.message)
            return ""
        if not crashed:  # its output broke the wire (an over-long line): it was stopped
            report = await child.failure_report(anyio.current_time(), started=run.started)
        if report:
            run.died_in.detail = f"{run.died_in.detail}; {report}"
        return ""
    if all(r.passed for r in run.results):
        return ""
    # Stopped by the ladder, which read its stderr to the end (an exit after the shutdown
    # message: its own row says it): the stderr alone, shown under its own header.
    return child.stderr_reason()


@dataclass
class _Run:
    """One run of the checks: the driver, the deadlines, the provider's id, the results
    so far."""

    d: Driver | RemoteDriver
    deadlines: Deadlines
    #: The provider's id: the FrameIds the audit gives its frames carry it.
    pid: str
    results: list[CheckResult] = field(default_factory=list)
    #: The check during which the provider's output ended (it exited).
    died_in: CheckResult | None = None
    #: A config's ``[[provider]]`` (``check_provider``'s ``configured``).
    configured: bool = False
    #: The trusted roots its config gives it (``check_provider``'s ``roots``).
    roots: tuple[str | os.PathLike[str], ...] | None = None
    #: That config's directory (``check_provider``'s ``base``).
    base: Path | None = None
    #: A JSON-RPC handshake got no reply, and the CGP envelope handshake was written after
    #: it (``Driver.probe_cgp``): ``_close`` says on the handshake row whether the
    #: provider answered that one.
    probed: bool = False
    #: The handshake got no reply within the start deadline (``_close`` says why it may
    #: not have come).
    unanswered: bool = False
    #: A provider on this machine: its ``file`` provenance names files here, which the
    #: query row re-reads (``source_faults``); a remote one's name its own machine's.
    local: bool = True
    #: The binding it is asked over: where its query sits on the wire.
    binding: str = "jsonrpc"
    #: A row already said where a well-formed query's members are (``refusal``).
    shown_shape: bool = False
    #: Why nothing more is asked: a call missed its deadline and its late reply was not
    #: read within a call's deadline more. The provider is still busy with it (a lock-step
    #: one's next reply would be its), so the later checks would fail for the same cause.
    stalled: str | None = None
    #: Why the checks that judge a query's answer are not run: the well-formed query was
    #: answered an error that refuses nothing it asked (not one of ``_QUERY_REFUSALS``;
    #: ``internal``: its handler raised). Each of their queries would be answered so too,
    #: and each row would fail for the one cause the query row already names.
    no_query: str | None = None

    @property
    def started(self) -> bool:
        """The provider answered its handshake: what its stderr ended with afterwards
        may be its ready line, not why it failed (``stderr_said``)."""
        return any(r.name == "handshake" and r.passed for r in self.results)

    async def step(
        self,
        name: str,
        coro: Coroutine[Any, Any, Any],
        deadline: Deadline | None = None,
        *,
        needs_query: bool = False,
    ) -> Any:
        """Run one check; its failure is its row. ``deadline``: the bound the step's calls
        are held to (default: a call's); ``needs_query``: it judges frames a well-formed
        query is answered with (``not run`` once that query was answered an error)."""
        d, results = self.d, self.results
        if d.dead:
            coro.close()
            if isinstance(d.ended, ProviderCrashed):
                why = "the provider had already exited"
            else:  # no more of its output is read, as the daemon reads no more of it
                why = f"its output was cut off ({d.ended.message if d.ended else 'ended'})"
            results.append(CheckResult(name, False, f"not run: {why}", not_run=True))
            return None
        if self.stalled is not None:
            coro.close()
            results.append(CheckResult(name, False, f"not run: {self.stalled}", not_run=True))
            return None
        if needs_query and self.no_query is not None:
            coro.close()
            results.append(CheckResult(name, False, f"not run: {self.no_query}", not_run=True))
            return None
        try:
            return await coro
        except TimeoutError:
            results.append(CheckResult(name, False, await self._missed(name, deadline)))
        except Failed as exc:
            results.append(CheckResult(name, False, str(exc), rules=exc.rules))
        except (ValueError, TypeError) as exc:  # pydantic ValidationError is a ValueError
            results.append(CheckResult(name, False, f"malformed reply: {str(exc).splitlines()[0]}"))
        except HostdError as exc:
            results.append(CheckResult(name, False, _reason_said(exc, exc.message)))
        if d.dead and self.died_in is None:
            self.died_in = results[-1]
        return None

    async def _missed(self, name: str, deadline: Deadline | None) -> str:
        """The row of a step that missed ``deadline``. A call's (``None``) also names the
        likely causes, and, over a pipe, waits a call's deadline more for the late reply:
        one that comes shows the provider works, only too slowly, and the next checks
        run on a provider that is free again; one that does not stops the checks
        (``stalled``), as every later one would miss its deadline behind it."""
        if deadline is not None:  # a start, a warm-up, an exit: its bound says it all
            return deadline.missed()
        call = self.deadlines.call
        said = call.missed()
        why = _slow_call("verify" if name == "verify honesty" else "query", self.configured)
        if not isinstance(self.d, Driver):  # an HTTP exchange past its deadline is dropped
            return f"{said}: {why}"
        try:
            took = await self.d.catch_up(call.seconds)
        except Failed as exc:  # its late output broke the wire: nothing more is read as a reply
            self.stalled = f"the {name} check missed its deadline, then its output broke the wire"
            return f"{said}; then {exc}"
        grace = f"{call.seconds * 1000:.0f} ms"
        if took is None:
            self.stalled = (
                f"the {name} check missed its deadline, and its call was still unanswered "
                f"{grace} after it"
            )
            return f"{said}, nor in the {grace} after it: {why}"
        late = max(0.0, took - call.seconds * 1000)
        return f"{said}; it answered {late:.0f} ms late (after {took:.0f} ms): {why}"

    def refusal(self, error: HostdError) -> str:
        """How a row tells an error answered to a well-formed query: its words, and for
        the first ``bad_request`` (the provider did not find the query where it looked:
        most often ``params.goal`` read for ``params.query.goal``) where the query's
        members are and where the provider said why. Its message stays unquoted."""
        if _cgp_code(error) != "bad_request" or self.shown_shape:
            return error.message
        self.shown_shape = True
        where = "stderr (shown after the table when it wrote any)" if self.local else "own log"
        return (
            f"{error.message}; bad_request to a well-formed query: {_query_shape(self.binding)}; "
            f"its {where} may say what it found wrong"
        )

    def audit(
        self, query: ContextQuery, raw: list[Any] | None, declared: Sequence[str] = ()
    ) -> LegAudit:
        """The daemon's verdict on one reply (an error reply offers no frame); ``declared``:
        the provider's ``capabilities.query.kinds`` (Q1)."""
        return audit_leg(self.pid, query, raw or [], declared_kinds=declared)


def _slow_call(handler: str, configured: bool) -> str:
    """Why a call most likely missed its deadline, and what to do, in one sentence
    (``handler``: the provider method that answers it): in the config's words when a
    config named the provider, else in the flag's too."""
    more = (
        "raise timeout_ms in its [[provider]]"
        if configured
        else "--timeout-ms MS allows more here, timeout_ms in its [[provider]] of hostd.toml"
    )
    return (
        f"either its {handler} takes longer than that ({more}), or synchronous work blocks the "
        f"provider's event loop (time.sleep or a blocking HTTP call inside async def {handler}: "
        "await asyncio.sleep instead, or run it in a thread with anyio.to_thread.run_sync)"
    )


def _cgp_hint(configured: bool) -> str:
    """What a provider that answered the CGP envelope handshake, when the JSON-RPC one
    got no reply, is told: in the config's words when a config named it, else in the
    flag's (a command after ``--`` has no ``[[provider]]``)."""
    fix = 'set binding = "cgp" in its [[provider]]' if configured else "check it with --binding cgp"
    return f"it answers the CGP envelope handshake instead: {CGP_SDK_WIRE}; {fix}"


async def _run_checks(run: _Run, goal: str, budget: int, query_text: str | None = None) -> None:
    d, results, deadlines = run.d, run.results, run.deadlines

    # 1. Handshake (H1–H3, H2, C5).
    async def handshake() -> HandshakeAck:
        # From the handshake sent to its reply: a slow one holds up each request that
        # meets the provider starting (and the row says a slow one passed, and how slow).
        started = time.monotonic()
        try:
            ack = await d.handshake(deadlines.start.seconds)
        except TimeoutError:
            run.unanswered = True
            # The envelope wire ignores a line it does not understand: a CGP provider
            # meets the JSON-RPC handshake with silence. Asked its own, it says so.
            if isinstance(d, Driver) and d.codec.name == "jsonrpc":
                run.probed = await d.probe_cgp()
            raise
        bad = _errors(check_handshake(PROTOCOL_VERSION, ack))
        if bad:
            raise Failed(_fmt(bad))
        took = (time.monotonic() - started) * 1000
        who = f"{ack.provider.name} {ack.provider.version}, {ack.protocol_version}"
        results.append(CheckResult("handshake", True, f"{who}; answered in {took:.0f} ms"))
        return ack

    ack = await run.step("handshake", handshake(), deadlines.start)
    if ack is None:
        return
    caps: Capabilities = ack.capabilities
    # An index to build first: its progress notes end with "ready" (over a pipe only).
    if isinstance(d, Driver) and d.warming:
        ready = deadlines.ready
        notes = await run.step("ready", d.wait_ready(ready.seconds), ready)
        if notes is None:
            return
        results.append(CheckResult("ready", True, f"ready after {notes} progress notes"))

    # 2. A query whose frames are all valid; 3. budget honesty; 4. the kinds filter: each
    # reply judged by the daemon's leg audit, so the same rule ids fail here as there.
    # Each carries the query_text asked for, or none: the daemon sends one only when its
    # client gave one (a plain ``compose GOAL`` does not), so none is what most get.
    query = ContextQuery(goal=goal, query_text=query_text, max_frames=8, max_tokens=budget)
    frames: list[ContextFrame] = []
    first: list[LegAudit] = []
    #: What that query's reply sent, as sent (budget honesty counts the costs it judged).
    first_raw: list[Any] = []
    #: The query row of an answer with frames: the goal probe adds its warning to it.
    answered: list[CheckResult] = []
    #: Whether that answer said it was ``truncated``.
    cut: list[bool] = []
    kinds_seen: list[str] = []

    async def first_query() -> None:
        raw, error = await d.query(query)
        if error is not None:
            code = _cgp_code(error)
            if code not in _QUERY_REFUSALS:
                run.no_query = (
                    f"the query check's well-formed query was answered {code}, "
                    "as each of this check's would be"
                )
            raise Failed(f"query answered an error: {run.refusal(error)}")
        audit = run.audit(query, raw, caps.query.kinds)
        first.append(audit)
        first_raw.extend(raw or [])
        kinds_seen.extend(x["kind"] for x in raw or [] if isinstance(x, dict) and "kind" in x)
        frames.extend(audit.accepted)
        # The row judges the reply as the daemon takes it: its frames (F1–F5, D1 …), the
        # reply as a whole (B1–B4 quarantine it, B2) and each frame's inline digest (D4).
        fault = reply_fault(audit)
        if fault is None and run.local:
            fault = await anyio.to_thread.run_sync(
                functools.partial(source_fault, audit.accepted, run.roots, run.pid, run.base)
            )
        if fault is not None:
            raise Failed(*fault)
        took = f"in {d.last_ms:.0f} ms"
        result = d.last_result
        cut.append(result is not None and result.truncated)
        unsaid = result is not None and "truncated" not in result.model_fields_set
        if audit.offered == 0:
            row = no_frame_result(goal, took)
            if unsaid:
                row.detail = f"{row.detail}; {_NO_TRUNCATED}"
            results.append(row)
            return
        # Its honest cost against the budget it was asked for: the row judged that too (B1).
        cost = f"costing {audit.accepted_cost} of max_tokens {query.max_tokens}"
        detail = f"{audit.offered} valid frame(s) {cost} {took}; top: {_titles(audit.accepted)}"
        unchecked = unchecked_citations(audit.accepted, run.roots, run.pid, run.base)
        if unsaid:  # the daemon reads it as false; the schema requires it
            detail = f"{detail}; {_NO_TRUNCATED}"
        if unchecked is not None:
            detail = f"{detail}; {unchecked}"
        results.append(CheckResult("query", True, detail, warning=unsaid or unchecked is not None))
        answered.append(results[-1])

    await run.step("query", first_query())

    # Budget honesty on recomputed costs (B1, B3, B4), at the normal and a tight budget,
    # and one frame asked with room for many: a provider that packs by max_tokens alone
    # passes the others whenever the budget runs out before max_frames does.
    async def budget_honesty() -> None:
        tight = ContextQuery(goal=goal, query_text=query_text, max_frames=1, max_tokens=8)
        raw, error = await d.query(tight)
        _fail_on_error(run, error, "max_tokens=8", allowed="budget_unsatisfiable")
        held = run.audit(tight, raw, caps.query.kinds)
        one = ContextQuery(
            goal=goal, query_text=query_text, max_frames=1, max_tokens=max(budget, 100_000)
        )
        raw_one, error_one = await d.query(one)
        _fail_on_error(run, error_one, "max_frames=1", allowed="budget_unsatisfiable")
        held_one = run.audit(one, raw_one, caps.query.kinds)
        audits = [*first, held, held_one]
        breaches = [v for a in audits for v in a.quarantine if v.rule.startswith("B")]
        if breaches:
            raise Failed(f"the daemon would quarantine it: {_fmt(breaches)}", _rules(breaches))
        # A cost the schema refuses drops its frame before B3 compares it: not exact.
        unread = _bad_costs(v for a in audits for v in a.violations)
        if unread:
            raise Failed(f"costs not exact: {_fmt(unread)}; {_COST_RULE}", ("B3", "schema"))
        how = "an error" if error is not None else f"{len(raw or [])} frame(s)"
        answered = f"max_tokens=8 answered with {how}, max_frames=1 with {len(raw_one or [])}"
        answered += f" frame(s), in {d.last_ms:.0f} ms"
        sent = [*first_raw, *(raw or []), *(raw_one or [])]
        if sent and not any(map(_cost_judged, sent)):
            # Every frame refused before its cost could be compared: nothing was exact.
            unjudged = f"costs not judged: no frame it answered ({len(sent)} in all) had a "
            unjudged += f"string content and an integer token_cost; {answered}"
            results.append(CheckResult("budget honesty", True, unjudged, warning=True))
            return
        results.append(CheckResult("budget honesty", True, f"costs exact; {answered}"))

    await run.step("budget honesty", budget_honesty(), needs_query=True)

    # Kinds filter (Q1): ask for one kind, get only that kind (or an unsupported_kind error).
    async def kinds_filter() -> None:
        kind = (caps.query.kinds or kinds_seen or ["doc"])[0]
        q = ContextQuery(
            goal=goal, query_text=query_text, kinds=[kind], max_frames=8, max_tokens=budget
        )
        raw, error = await d.query(q)
        took = d.last_ms
        _fail_on_error(run, error, f"kinds=[{kind}]", allowed="unsupported_kind")
        breaches = [v for v in run.audit(q, raw, caps.query.kinds).quarantine if v.rule == "Q1"]
        other = ContextQuery(
            goal=goal,
            query_text=query_text,
            kinds=["x-no-such-kind"],
            max_frames=8,
            max_tokens=budget,
        )
        raw2, error2 = await d.query(other)
        _fail_on_error(run, error2, "kinds=[x-no-such-kind]", allowed="unsupported_kind")
        breaches += [
            v for v in run.audit(other, raw2, caps.query.kinds).quarantine if v.rule == "Q1"
        ]
        if breaches:
            raise Failed(f"the daemon would quarantine it: {_fmt(breaches)}", _rules(breaches))
        how = f"error {error.message!r}" if error is not None else f"{len(raw or [])} frame(s)"
        results.append(
            CheckResult("kinds filter", True, f"kinds=[{kind}] → {how} in {took:.0f} ms")
        )

    await run.step("kinds filter", kinds_filter(), needs_query=True)

    # 5. Malformed input (R1): garbage, a wrong-typed request, then a valid query still served.
    # R1's MUST is that the provider neither crashes nor stops serving (a failure); its
    # SHOULD, an error reply (bad_request) to the bad query: a result instead is a warning.
    async def malformed(d: Driver) -> None:
        await d.send_raw(b"this is not json\n")
        await d.send_raw(b'{"half": \n')
        bad = await d.send_query({"goal": 5})
        # Where the bad query has a key of its own its answer is told apart; a lock-step
        # provider's errors are passed over until the valid query's frames.
        refused = bad.key if bad.key is not UNKEYED else None
        detail = "bad lines answered or ignored; still serving"
        try:
            raw, error = await d.query(query, skip_errors=True, refused=refused)
        except Misshapen as exc:
            # It answered the valid query: it still serves. A result of the wrong shape
            # is the query row's to judge (its row says what is wrong) unless that row
            # passed: then the bad lines changed what it answers.
            if next((r.passed for r in results if r.name == "query"), False):
                raise Failed(f"after malformed input, a valid query got a {exc}") from None
            raw, error = [], None
            detail += (
                ": the valid query after them was answered with a result whose shape "
                "the query row judges"
            )
        if raw is None:
            assert error is not None
            if run.no_query is None:
                said = run.refusal(error)
                raise Failed(f"after malformed input, a valid query got an error: {said}")
            # The query row's failure, met again: an error reply to the valid query's own
            # id is the provider still serving. R1 asks of bad input only an error reply
            # (or none) and that it keep serving, so whatever code the bad lines got
            # (``internal`` too, from a handler that raises on everything) keeps it.
            code = _cgp_code(error)
            detail += f": the valid query after them was answered {code}, as the query row's was"
        if d.answered_refused:  # R1's MUST kept, its SHOULD not: said, not failed
            results.append(CheckResult("malformed input", True, _ANSWERED, warning=True))
            return
        results.append(CheckResult("malformed input", True, detail))

    if isinstance(d, Driver):
        # A lock-step provider's error to the valid query cannot be told from its errors
        # to the bad lines before it: with every query answered an error, only frames
        # would show it still serves, and none come.
        lock_step = not d.codec.correlation
        await run.step("malformed input", malformed(d), needs_query=lock_step)
    else:
        results.append(CheckResult("malformed input", True, _NO_STDIN, skipped=True))

    # Does the answer depend on the goal? Asked after every other query (a provider's
    # queries are counted by some: each check asks what it always did), said on the
    # query row as a warning: a provider that reads the goal where hostd does not send
    # it (params.goal) answers the same frames for any goal, and passes every check.
    # A corpus small enough to be served whole answers every goal the same: said, not
    # warned (``same_answer``).
    if answered and not d.dead and run.stalled is None:
        same: tuple[str, bool] | None
        try:
            same = await _same_whatever_asked(run, query, first[0], cut[0], caps.query.kinds)
        except TimeoutError:
            same = goal_probe_failed(f": {await run._missed('query', None)}"), True
        except (Failed, HostdError, ValueError, TypeError) as exc:
            same = goal_probe_failed(f", failed: {exc}"), True
        if same is not None:
            row = answered[0]
            row.detail, row.warning = f"{row.detail}; {same[0]}", row.warning or same[1]

    # 6. Verify honesty (V1–V3): held frames are valid; a wrong digest is not.
    async def verify() -> None:
        if not caps.verify:
            results.append(CheckResult("verify honesty", True, "verify not declared", True))
            return
        held = [f for f in frames if f.content_digest][:4]
        if not held:
            results.append(CheckResult("verify honesty", True, _nothing_to_verify(first), True))
            return
        # Under the configured id, as the daemon sends them: the binding's codec addresses
        # them as the daemon's does (over CGP by the handshake name; over JSON-RPC by an
        # id the provider never learns, so any id must do).
        idents = [
            FrameIdentity(provider_id=run.pid, frame_id=f.id, content_digest=f.content_digest)
            for f in held
        ]
        response = await d.verify(idents)
        status = {v.frame.frame_id: v.status for v in response.verdicts}
        not_valid = [f.id for f in held if status.get(f.id) != "valid"]
        if not_valid:
            raise Failed(f"frames just served are not 'valid': {not_valid[:3]}")
        bogus = [
            FrameIdentity(provider_id=run.pid, frame_id=held[0].id, content_digest=_BOGUS_DIGEST)
        ]
        response = await d.verify(bogus)
        if any(v.status == "valid" for v in response.verdicts):
            raise Failed("a wrong content_digest was answered 'valid' (rubber stamp)")
        results.append(
            CheckResult("verify honesty", True, f"{len(held)} valid; a wrong digest is not valid")
        )

    # It asks about the frames the query served: without them a declared verify has
    # nothing to be asked about.
    await run.step("verify honesty", verify(), needs_query=caps.verify)

    # 7. Shutdown (R2): the provider exits after the shutdown message.
    async def shutdown(d: Driver) -> None:
        started = time.monotonic()
        await d.shutdown()
        try:
            with anyio.fail_after(deadlines.exit.seconds):
                await d.child.exited.wait()
        except TimeoutError:
            raise Failed(deadlines.exit.missed()) from None
        took = round((time.monotonic() - started) * 1000)
        code = d.child.returncode
        results.append(CheckResult("shutdown", True, f"exited with {code} after {took} ms"))

    if isinstance(d, Driver):
        await run.step("shutdown", shutdown(d), deadlines.exit)
    else:
        results.append(CheckResult("shutdown", True, _NO_PROCESS, skipped=True))


def _nothing_to_verify(first: Sequence[LegAudit]) -> str:
    """Why the verify check had no frame to ask about: the query's reply was quarantined
    (the daemon serves none of its frames, so it never asks about them) or its frames were
    all dropped, the query got none, or none carried a ``content_digest``."""
    if not first:
        return "no frame to ask about: the query got none (its row says why)"
    audit = first[0]
    if audit.quarantine:
        rules = ", ".join(_rules(audit.quarantine))
        return (
            f"not asked: the query's reply was quarantined ({rules}; its row says why), "
            "so none of its frames is served and none can be asked about"
        )
    if audit.offered and not audit.accepted:
        return "not asked: every frame of the query's reply was dropped (its row says why)"
    if not audit.accepted:
        return "no frame to ask about: the query returned none"
    return "no digest-carrying frame"


#: The malformed-input row of a provider that kept serving but answered the bad query
#: with a result.
_ANSWERED = (
    "still serving, but a malformed query (goal: 5) was answered with a result, not an "
    "error: R1 says a provider SHOULD reply error bad_request (it MUST NOT crash: it did not)"
)

#: The query row's warning for a result without ``truncated``: the CGP schema's
#: ``ContextQueryResult`` requires it, the daemon reads it as false.
_NO_TRUNCATED = (
    'its result has no "truncated": the CGP schema requires it (ContextQueryResult: '
    '"frames" and "truncated"); the daemon reads it as false. Send "truncated": false, '
    f"or true when frames that matched were left out to keep within the budget ({QUERY_DOC})"
)

#: The errors that refuse what a query asks, not the provider failing: a query asking
#: otherwise may be served, so the checks after the query row still ask theirs. A
#: ``bad_request`` to a well-formed query says where the provider looked for it (``_Run.
#: refusal``), and each later row says so in its own words. Any other error (``internal``:
#: its handler raised) is the provider's own failure, which every later query would meet.
_QUERY_REFUSALS = frozenset({"bad_request", "budget_unsatisfiable", "unsupported_kind"})

#: Why a remote provider is not asked what only a child's pipes can show.
_NO_STDIN = "not asked of a remote provider: no stdin here (the daemon POSTs whole requests)"
_NO_PROCESS = (
    "not asked of a remote provider: no process here to exit or show its stderr "
    "(the daemon sends it no shutdown)"
)
_REMOTE_SKIPS = {"malformed input": _NO_STDIN, "shutdown": _NO_PROCESS}


def reply_fault(audit: LegAudit) -> tuple[str, tuple[str, ...]] | None:
    """Why the daemon would not serve a query's reply whole, and the rule ids; ``None``
    when it would: invalid frames (dropped, each costing only itself), a reply it
    quarantines (B2: every frame dropped), or a frame its verify stage drops for an
    inline digest that is not its content's (D4, ``digest_mismatch``)."""
    invalid = [v for v in _errors(audit.violations) if v not in audit.quarantine]
    said = []
    if invalid:
        said.append(f"{len(invalid)} invalid frame finding(s): {_fmt(invalid)}")
        if _bad_costs(invalid):
            said.append(_COST_RULE)
    if audit.quarantine:
        said.append(f"the daemon would quarantine the whole reply: {_fmt(audit.quarantine)}")
    if said:
        return "; ".join(said), tuple(_rules([*invalid, *audit.quarantine]))
    dropped = digest_mismatches(audit.accepted)
    if not dropped:
        return None
    fid, declared, computed = dropped[0]
    more = f" (and {len(dropped) - 1} more frame(s))" if len(dropped) > 1 else ""
    detail = (
        f"the daemon drops frame {_shown_id(fid)} ({Exclusion.DIGEST_MISMATCH.value}, D4): "
        "its content_digest must be 'sha256:' and the lowercase hex SHA-256 of its "
        f"content's UTF-8 bytes: declared {declared}, computed from the content "
        f"{computed}{more}"
    )
    return detail, ("D4",)


#: Where docs/providers.md shows file provenance computed, in a few lines of Node.js.
FILE_PROVENANCE_DOCS = "docs/providers.md#file-provenance"


def source_fault(
    frames: Sequence[ContextFrame],
    roots: Sequence[str | os.PathLike[str]] | None = None,
    provider_id: str = "",
    base: Path | None = None,
) -> tuple[str, tuple[str, ...]] | None:
    """A frame whose ``file`` provenance digest is not the sha256 of the lines it cites as
    the file on this machine holds them now (F5, F17), by the daemon's own source check;
    ``None`` when every such digest matches (or names no readable file). What the daemon
    does with it depends on the trusted roots (``roots``, its config's; ``None``: not
    known, a command alone): it drops such a frame (``source_mismatch``) under them;
    with none it never re-reads the file and keeps the frame, fenced ``verified="no"``
    (the root that would have it checked is named: ``hostd._root_advice``, with the config's
    directory ``base``). Still a failure: the citation is false whatever the config.
    Sync (it reads files): run it in a worker thread."""
    reader = SourceReader([os.sep])  # the author's own files: only digests are compared
    bad = []
    for frame in frames:
        check = reader.check_frame(frame)
        if check is not None and check.outcome is SourceOutcome.MISMATCH:
            bad.append((frame.id, check.detail))
    if not bad:
        return None
    fid, detail = bad[0]
    more = f" (and {len(bad) - 1} more frame(s))" if len(bad) > 1 else ""
    cited = f"{detail.get('uri')} {detail.get('range') or '(the whole file)'}"
    mismatch = SourceOutcome.MISMATCH.value
    if roots is None:
        does = (
            f"the daemon drops frame {_shown_id(fid)}{more} ({mismatch}, F5) under "
            'trusted_roots (with none it keeps it unchecked, fenced verified="no")'
        )
    elif roots:
        does = f"the daemon drops frame {_shown_id(fid)}{more} ({mismatch}, F5)"
    else:
        # A root that holds the cited file: "." only when it is under the config's folder.
        paths = [path for _, d in bad if (path := cited_path(d.get("uri"))) is not None]
        root = roots_toml(covering_roots(paths, base) if paths else ["."])
        does = (
            f"under this config the daemon keeps frame {_shown_id(fid)}{more} unchecked, "
            f'fenced verified="no": [[provider]] {provider_id} has no trusted_roots, so '
            f"the file is never re-read (with trusted_roots = {root} it drops the frame, "
            f"{mismatch}, F5)"
        )
    return (
        f"{does}: its file provenance digest is not the sha256 of {cited} as the file "
        "holds it; the digest covers the cited lines' bytes in the file, each line with "
        "its final LF (F17), not the frame's text (hostd.provider.file_provenance "
        f"computes it; in another language, {FILE_PROVENANCE_DOCS})",
        ("F5",),
    )


def unchecked_citations(
    frames: Sequence[ContextFrame],
    roots: Sequence[str | os.PathLike[str]] | None,
    pid: str,
    base: Path | None = None,
) -> str | None:
    """What the query row warns of when the config gives the provider no trusted root
    (``roots`` empty) and some frame cites a file: the daemon keeps such frames without
    re-reading the file, fenced ``verified="no"``; with the roots that would hold the
    files cited (``hostd._root_advice``: relative to the config's directory ``base`` when under it,
    else absolute); ``None`` otherwise."""
    if roots is None or roots:
        return None
    citing = 0
    cited: list[str] = []
    for frame in frames:
        files = [p for p in frame.provenance if p.type == "file"]
        citing += bool(files)
        cited.extend(path for p in files if (path := cited_path(p.uri)) is not None)
    if not citing:
        return None
    root = roots_toml(covering_roots(cited, base) if cited else ["."])
    return (
        f"{citing} frame(s) cite a file that the daemon will not re-read: [[provider]] {pid} "
        f'has no trusted_roots, so they are fenced verified="no" (add trusted_roots = {root} '
        "to have their digests checked)"
    )


def digest_mismatches(frames: Sequence[ContextFrame]) -> list[tuple[str, str, str]]:
    """The frames the daemon's verify stage excludes for their inline digest (D4), by its
    own check (``check_inline_digest``, ``decide_frame``): each id, the digest it
    declares and the one computed from its content."""
    out = []
    for frame in frames:
        inline = check_inline_digest(frame)
        if decide_frame(inline, None, reused=False).excluded is Exclusion.DIGEST_MISMATCH:
            # A mismatch names both digests.
            assert inline.declared is not None and inline.computed is not None
            out.append((frame.id, inline.declared, inline.computed))
    return out


#: The goal of the query that tells whether a provider's answer depends on what it is
#: asked: no words a real project's evidence is likely to match.
OTHER_GOAL = "zqx vexillology of basalt lighthouses"
#: ``OTHER_GOAL`` with common words mixed in, each one the bundled providers leave out
#: of a search (``hostd.chunking.STOPWORDS``): a provider that answers this one, but not
#: ``OTHER_GOAL``, matched those words alone, so its frames would lead every prompt.
COMMON_GOAL = "what is the zqx vexillology of basalt lighthouses, and where and when was that from"
#: Frame titles a query row shows, and the characters of each: what the provider
#: answered, at a glance, quoting no more of it than the start of a title line.
_TITLES_SHOWN = 3
_TITLE_CHARS = 40


def frame_title(frame: ContextFrame) -> str:
    """A frame's title as a row shows it: its first line, cut to its start, quoted
    (control characters escaped)."""
    lines = frame.title.strip().splitlines() or [""]
    title = lines[0]
    if len(title) > _TITLE_CHARS or len(lines) > 1:
        title = title[: _TITLE_CHARS - 1] + "…"
    return repr(title)


def _titles(frames: Sequence[ContextFrame]) -> str:
    """The titles of the best-scored frames (``frame_title``), ``(+N more)`` for the
    rest."""
    shown = [frame_title(f) for f in sorted(frames, key=lambda f: -f.score)[:_TITLES_SHOWN]]
    more = len(frames) - _TITLES_SHOWN
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def other_goal(query: ContextQuery) -> ContextQuery:
    """``query`` with a goal unlike it (``OTHER_GOAL``, and as its ``query_text`` when it
    had one): what tells whether an answer depends on the goal."""
    return query.model_copy(
        update={
            "goal": OTHER_GOAL,
            "query_text": None if query.query_text is None else OTHER_GOAL,
        }
    )


def same_answer(
    query: ContextQuery, first: LegAudit, again: LegAudit, *, truncated: bool, where: str
) -> tuple[str, bool] | None:
    """What the query row adds when ``query`` (answered ``first``) and ``other_goal(query)``
    (answered ``again``) got the very same frames (ids, contents, scores), and whether
    it is a warning; ``None`` when the answers differ. The same frames that neither
    answer cut (``truncated`` said of neither, fewer frames than ``max_frames``, a cost
    under ``max_tokens``) are a corpus served whole: a small one is every frame it has,
    whatever the goal, so that is no warning. The same frames cut to the query's limits
    are: the answer was chosen by something other than the goal, most often a goal read
    where hostd does not send it (``where``: where it is sent)."""
    frames, other = first.accepted, again.accepted
    if [(f.id, f.content, f.score) for f in other] != [(f.id, f.content, f.score) for f in frames]:
        return None
    asked = "goal" if query.query_text is None else "goal and query_text"
    got = f"the {asked} {OTHER_GOAL!r} got the same {len(frames)} frame(s)"
    if not truncated and len(frames) < query.max_frames and first.accepted_cost < query.max_tokens:
        return (
            f"served whole: {got}, neither answer cut (fewer than max_frames "
            f"{query.max_frames}, under max_tokens {query.max_tokens}, not truncated): "
            "a corpus that small is served whatever the goal",
            False,
        )
    return (
        f"{got}: its answer does not depend on the goal (fine if it serves the same frames "
        f"whatever is asked); {where}",
        True,
    )


def common_words_matched(other: LegAudit, common: LegAudit) -> str | None:
    """The query row's warning when ``OTHER_GOAL`` got no frame (``other``) but
    ``COMMON_GOAL``, the same words with common ones mixed in, got some (``common``):
    the provider matches words such as "the", and answers every question with weak
    frames that take the top of a prompt. ``None`` otherwise (a provider that answers
    any goal, a semantic one, is not judged by this)."""
    if other.offered or not common.accepted:
        return None
    return (
        f"the goal {COMMON_GOAL!r} got {len(common.accepted)} frame(s) where {OTHER_GOAL!r}, "
        "the same words without the common ones, got none: it matches common words (what, "
        "the, where, that…), so it answers every question and its weak frames take the top "
        'of a prompt; leave such words out of what it matches (docs/providers.md, "Return '
        'only frames you would cite")'
    )


def goal_probe_failed(why: str) -> str:
    """The query row's warning when the query with ``OTHER_GOAL`` got no answer to
    compare (``why``: ``": …"`` or ``", failed: …"``)."""
    return f"a second query, with the goal {OTHER_GOAL!r}{why}"


async def _same_whatever_asked(
    run: _Run, query: ContextQuery, first: LegAudit, truncated: bool, declared: Sequence[str]
) -> tuple[str, bool] | None:
    """Asks ``other_goal(query)`` and judges its answer beside ``first`` (``same_answer``;
    ``truncated``: the first answer said so); when it got no frame, asks ``COMMON_GOAL``
    too (``common_words_matched``). ``None`` when the answers differ or the second
    query was answered an error (it told them apart), and the third got nothing."""
    other = other_goal(query)
    raw, error = await run.d.query(other)
    if error is not None:
        return None
    again = run.audit(other, raw, declared)
    result = run.d.last_result
    cut = truncated or (result is not None and result.truncated)
    same = same_answer(query, first, again, truncated=cut, where=_goal_where(run.binding))
    if same is not None or again.offered:
        return same
    # Nothing for the unlike goal: does it answer once common words are mixed in?
    common = other.model_copy(
        update={"goal": COMMON_GOAL, "query_text": other.query_text and COMMON_GOAL}
    )
    raw, error = await run.d.query(common)
    if error is not None:
        return None
    said = common_words_matched(again, run.audit(common, raw, declared))
    return None if said is None else (said, True)


def _goal_where(binding: str) -> str:
    """Where the goal is on ``binding``'s wire, as a warning says it."""
    if binding == "cgp":
        return f'the goal is in the query envelope\'s "query": {{"goal": …}} ({QUERY_DOC})'
    return (
        "the goal is params.query.goal, not params.goal, which reads as undefined or None "
        f"and may still match ({QUERY_DOC})"
    )


def no_frame_result(goal: str, took: str = "", *, hint: str = "", ask: str = "") -> CheckResult:
    """The query row of a reply with no frame: nothing was judged, said as a warning
    naming the goal asked (``took``: how long it took; ``hint``: what else may be why;
    ``ask``: what to pass instead, when no goal would help)."""
    when = f" {took}" if took else ""
    why = f" ({hint})" if hint else ""
    detail = (
        f"the query returned no frame for goal {goal!r}{when}: check-provider judged nothing; "
        f"{ask or 'pass --goal with words your provider matches'}{why}"
    )
    return CheckResult("query", True, detail, warning=True)


def _shown_id(fid: str) -> str:
    """A frame id as a row shows it: quoted (control characters escaped), bounded."""
    return repr(fid if len(fid) <= 80 else fid[:79] + "…")


def _rules(violations: Sequence[Any]) -> list[str]:
    return sorted({v.rule for v in violations})


def _mark(r: CheckResult) -> str:
    if r.not_run:  # no result: its detail says why it was not run (counted as a failure)
        return "-"
    if r.skipped:
        return "skip"
    if r.warning:
        return "warn"
    return "pass" if r.passed else "FAIL"


def render_table(results: Sequence[CheckResult]) -> str:
    width = max((len(r.name) for r in results), default=5)
    lines = [f"{'check'.ljust(width)}  result  detail"]
    for r in results:
        lines.append(f"{r.name.ljust(width)}  {_mark(r).ljust(6)}  {r.detail}")
    # A skipped check ran nothing, a warned one judged nothing: each is counted apart,
    # never as passed. A check never run is a failure, counted too.
    skipped = sum(1 for r in results if r.skipped)
    warned = sum(1 for r in results if r.warning and not r.skipped)
    passed = sum(1 for r in results if r.passed and not r.skipped and not r.warning)
    not_run = sum(1 for r in results if r.not_run)
    summary = f"{passed}/{len(results) - skipped - warned} passed"
    if not_run:
        summary += f", {not_run} not run"
    if warned:
        summary += f", {warned} warning{'s' if warned > 1 else ''}"
    if skipped:
        summary += f", {skipped} skipped"
    last = results[-1] if results else None
    if last is not None and last.name in _GATES and not last.passed:
        # Nothing after it was run (a check with no row for what it did not run).
        summary += f": {_GATES[last.name]}, nothing else was checked"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def render_header(
    given: Sequence[str],
    ran: Sequence[str],
    deadlines: Deadlines,
    *,
    cwd: str | None = None,
    goal: str | None = None,
    budget: int | None = None,
    query_text: str | None = None,
    given_env: Sequence[str] = (),
) -> str:
    """What was run and against which deadline, before the table: the command as the
    daemon runs it and where (``cwd``, default: here; saying so when ``python``
    became hostd's interpreter), in the daemon's environment (and the names of the
    variables ``--env`` gave it: ``given_env``), a call's deadline, and the query asked
    (``goal``, ``budget``, ``query_text``)."""
    where = os.path.abspath(cwd if cwd is not None else os.getcwd())
    how = ""
    if given and ran and given[0] != ran[0] and ran[0] == sys.executable:
        how = f"; {given[0]!r} is hostd's own interpreter, as in hostd.toml"
    call = deadlines.call
    passed = [name for name in ENV_ALLOW_LIST if name in os.environ]
    added = f"; and --env {', '.join(dict.fromkeys(given_env))}" if given_env else ""
    return (
        f"ran {shlex.join(ran)} (in {where}{how})\n"
        f"in the daemon's environment: of yours only {', '.join(passed) or 'nothing'}"
        f"{added}\n"
        f"each call must answer within {call.seconds * 1000:.0f} ms "
        f"({call.why.split(';')[0]})\n" + _asked(goal, budget, query_text)
    )


def _asked(goal: str | None, budget: int | None, query_text: str | None = None) -> str:
    """The header's line naming the query asked (the defaults are shown nowhere else)."""
    if goal is None:
        return ""
    text = "" if query_text is None else f", query_text {query_text!r} (--query-text)"
    within = "" if budget is None else f", max_tokens {budget} (--budget)"
    return f"asked the goal {goal!r} (--goal){text}{within}\n"


def render_notes(checked: Checked) -> str:
    """What the run showed beside its rows, one line each: a provider's stderr the
    daemon's log would not keep (its rate limit), counted, never quoted."""
    if checked.stderr_unlogged <= 0:
        return ""
    return (
        f"note: the provider wrote {checked.stderr_lines} lines to stderr; the daemon's "
        f"log would leave out {checked.stderr_unlogged} of them (its rate limit)\n"
    )


def render_remote_header(
    spec: ProviderSpec,
    deadlines: Deadlines,
    *,
    goal: str | None = None,
    budget: int | None = None,
    query_text: str | None = None,
    section: str | None = None,
) -> str:
    """What was asked and against which deadline, before the table: the URL, how the
    daemon reaches it (its binding; where its credential comes from, named, never its
    value, C8; the TLS files), and a call's deadline. ``section`` ``FLAGS``: a provider
    given by flags, whose options are named as the flags that gave them (``--ca-file
    PATH``), as its rows' advice names them; else by the config's keys."""
    assert spec.url is not None
    parts = urlsplit(spec.url)
    scheme = parts.scheme.upper()
    # The query may hold a server's key: sent, never shown (C8), as in providers/list.
    hidden = " (its query not shown)" if parts.query else ""
    named = "" if section is None else section
    where = TokenSource(spec.token_file, spec.token_env).named_in(named)  # reads nothing
    credential = "none" if where is None else f"the bearer token in {where} (never shown)"
    # The config's bare keys (the header names the provider already), or the flags.
    ca_file, client_cert = (
        (key_named(FLAGS, "ca_file"), key_named(FLAGS, "client_cert"))
        if section == FLAGS
        else ("ca_file", "client_cert")
    )
    if scheme != "HTTPS":
        trust = "no TLS: loopback only (C7)"
    elif spec.ca_file is not None:
        trust = f"trusting {ca_file} {spec.ca_file}"
    else:
        trust = "trusting the system's CAs"
    mutual = f"; {client_cert} {spec.client_cert}" if spec.client_cert is not None else ""
    call = deadlines.call
    return (
        f"asked {shown_url(spec.url)}{hidden} over {scheme} ({spec.binding}), as the daemon "
        "asks a [[provider]] url\n"
        f"credential: {credential}; {trust}{mutual}\n"
        f"each call must answer within {call.seconds * 1000:.0f} ms "
        f"({call.why.split(';')[0]})\n" + _asked(goal, budget, query_text)
    )


def _fail_on_error(run: _Run, error: HostdError | None, asked: str, *, allowed: str) -> None:
    """A check's failure when a valid query (``asked``) was answered an error other than
    the one CGP ``allowed`` for it: the daemon reports such a leg error, with none of
    its frames."""
    if error is None:
        return
    if _cgp_code(error) != allowed:
        raise Failed(
            f"{asked} answered an error: {run.refusal(error)} "
            "(the daemon reports such a leg error, with none of its frames)"
        )


def _cgp_code(error: HostdError) -> str:
    """The CGP code of an error a provider answered, as the codec read it (an unknown or
    absent one is ``internal``: X1, X2), else its class's (``incompatible_version``)."""
    code = error.data.get("cgp_code") if isinstance(error, ProviderError) else None
    return str(code) if code is not None else error.cgp.value


def _query_shape(binding: str) -> str:
    """Where a query's members are on ``binding``'s wire, as a row says it."""
    if binding == "cgp":
        return (
            'the query envelope carries them nested, {"type": "query", "query": {"goal": …, '
            '"max_frames": …, "max_tokens": …, "kinds": […], …}}'
        )
    return (
        "hostd sends the query nested, as params.query: params.query.goal, "
        "params.query.max_frames, params.query.max_tokens, params.query.kinds … "
        f"({QUERY_DOC})"
    )


def render_stderr(stderr: str, results: Sequence[CheckResult] = ()) -> str:
    """The last lines of a provider's stderr, after the table (a check failed while it
    ran); ``""`` when it wrote none. When the malformed-input check ran after the first
    failure, its bad requests came last: the note says so, so what the provider logged
    about them is not read as the failure's cause. One skipped (a remote provider) or
    never run (after a failed handshake) sent nothing."""
    if not stderr:
        return ""
    names = [r.name for r in results]
    failed = next((i for i, r in enumerate(results) if not r.passed), None)
    probe = results[names.index("malformed input")] if "malformed input" in names else None
    probed = probe is not None and not probe.skipped and not probe.not_run
    if failed is not None and probed and names.index("malformed input") > failed:
        return (
            "the provider's stderr ended with (the malformed-input check came after the "
            f"failure and sends bad requests on purpose: its last lines may be about them): "
            f"{stderr}\n"
        )
    return f"the provider's stderr ended with: {stderr}\n"
