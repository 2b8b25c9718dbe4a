"""Provider health and restart decisions: plain sync functions, no I/O.

Owns the state machine the engine follows for each provider: whether a leg
may use the running connection, must (re)start it now, must wait out a
backoff first, or must give up because the bounded restart attempts are
spent (``backoff_delay``: 0.5 s, doubling, so the default 5 attempts span 7.5 s, long
enough to outlast a passing cause). A provider that gave up is parked, not lost: it
gets one start after each cool-down (``RestartPolicy.retry_failed_after_s``;
``decide_parked``), which doubles with each retry that fails in a row, up to
``retry_failed_max_s`` (``retry_cool_down_s``: a provider that can never start costs
its log a failure an hour, not one a minute), and ``providers/restart`` clears its
failures at once (``record_restart_requested``).
A start that outlived its deadline (a handshake never answered) marks the provider
``start_timed_out``: its next starts still follow the backoff and parking of any
failure, but no request waits for them (``awaits_start``), so a stuck provider costs
one start deadline once, not once per request. A provider in a crash loop (it failed
again after its last restart, answering nothing between) is restarted behind the
requests (``restarts_behind``), none waiting for it, whatever its ``ready_wait_ms``. A
provider that is down starts again on its own too, with no request asking, once its
backoff (or, parked, its cool-down) has passed (``idle_restart_in``). A
remote provider that refused its credential (HTTP 401/403, or none could be read) did
not crash and no restart cures it: ``record_refused`` parks it at once, with no backoff
and no failure counted, and ``decide_start`` starts it again as soon as its credential
changes (a token file rewritten), else as any parked provider (its cool-down, or
``providers/restart``). A remote provider whose server was not reached (no connection,
no answer in time, a 5xx: ``record_failure``'s ``unreachable``) has no process that
could be broken for good: the server may come back at any moment. It is never parked
for it: its next start (a check: one handshake) comes after a backoff that stays short
(``check_delay``: 0.5, 1, 2, 2 … s by default; when: ``check_due``), and once it has
failed no request waits for the next check (``awaits_start``): it fails at once, and
the first request after a check that succeeded is answered. One whose server's TLS
certificate failed verification (``record_untrusted``) was reached, and no check cures
it until the user fixes ``ca_file`` or the server's certificate is renewed: it is
parked at once, no failure counted, and checked again after each cool-down that does
not grow (``retry_failed_after_s``: a renewed certificate is taken within it).
The engine does the I/O these decisions name; tests drive them with a fake clock.

A peer asked once per request with no process to restart (a rerank server) keeps the
same ``Health`` and is judged by ``decide_ask``: after ``CoolDownPolicy.after``
failures in a row it is not asked for a cool-down that doubles with each failed try
(``record_down``), then asked once; a verdict forgets its failures (``record_answer``),
unless its ask was sent before the latest-sent one that failed: asks are news in the
order they were sent, not in the order their answers come. One whose certificate failed
verification (``record_down``'s ``untrusted``) no ask cures: it is left alone at once,
for the longest cool-down, which does not grow (``ask_cool_down_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from hostd.errors import MAX_ERROR_CHARS, MAX_STDERR_TAIL_CHARS

__all__ = [
    "MAX_ERROR_CHARS",
    "CoolDownPolicy",
    "Health",
    "ProviderState",
    "RestartPolicy",
    "StartAction",
    "StartDecision",
    "awaits_start",
    "backoff_delay",
    "ask_cool_down_s",
    "bounded_error",
    "failure_text",
    "failures_in_a_row",
    "check_delay",
    "check_due",
    "cool_down_s",
    "decide_ask",
    "decide_parked",
    "decide_start",
    "idle_restart_in",
    "is_parked",
    "record_restart_requested",
    "record_retry",
    "record_untrusted",
    "restart_due",
    "retry_due",
    "is_hung",
    "is_warming_leg",
    "record_answer",
    "record_down",
    "record_failure",
    "record_leg",
    "record_refused",
    "record_refusals",
    "record_started",
    "restarts_behind",
    "retry_cool_down_s",
]


class ProviderState(StrEnum):
    IDLE = "idle"  # never started (lazy start)
    READY = "ready"  # running and handshaken
    CRASHED = "crashed"  # died or broke; restarts after its backoff
    FAILED = "failed"  # attempts spent, or its credential refused: parked until its
    # cool-down or a restart (a refused one also until its credential changes)
    STOPPED = "stopped"  # the host shut it down
    WARMING = "warming"  # running and handshaken, building its index (not a fault)
    # Reported only (``Slot.state``), never recorded: its first start is under way, not
    # handshaken yet (a daemon or ``hostd mcp`` that starts its providers behind serving).
    STARTING = "starting"


class StartAction(StrEnum):
    USE = "use"
    START = "start"
    WAIT = "wait"
    GIVE_UP = "give_up"


@dataclass(slots=True, frozen=True)
class RestartPolicy:
    """Exponential backoff: ``base * 2**(n-1)`` after the n-th consecutive failure, capped
    (never below ``base``); at most ``max_attempts`` consecutive failed starts or crashes
    before giving up. By default 0.5, 1, 2 and 4 s between the 5 attempts: 7.5 s in all,
    so a cause that passes in a few seconds (a port still held, a lock, a slow disk) is
    outlasted rather than parking the provider within a second."""

    base_delay_s: float = 0.5
    max_delay_s: float = 5.0
    max_attempts: int = 5
    #: A running provider that misses this many deadlines in a row with no reply at all
    #: in between, not even a late one, is hung: it is restarted (counted as a failure)
    #: rather than waited on again. One whose late replies still come is slow, not hung.
    #: "In a row" is in time: requests that were out together (a burst) and time out
    #: together are one miss, not one each (``record_leg``'s ``sent_mark``).
    max_consecutive_timeouts: int = 3
    #: A parked provider (attempts spent) gets one start this long after its last
    #: failure, and again after each failed one; 0: never (only ``providers/restart``).
    retry_failed_after_s: float = 60.0
    #: Each retry that fails in a row doubles that cool-down, up to this (never below
    #: ``retry_failed_after_s``); a start that succeeds, or a restart asked, resets it.
    retry_failed_max_s: float = 3600.0


def bounded_error(error: str) -> str:
    """``error`` cut to ``MAX_ERROR_CHARS``: a health record stays the same size forever."""
    if len(error) <= MAX_ERROR_CHARS:
        return error
    return error[: MAX_ERROR_CHARS - 1] + "…"


def failure_text(reason: str, message: str) -> str:
    """A failure as its health's ``last_failure`` says it: ``reason: message``, the reason
    said once, so a message that begins with the reason's own word (``certificate not
    trusted …``) reads ``certificate: not trusted …``, as ``crashed: provider process
    ended`` does."""
    return f"{reason}: {message.removeprefix(f'{reason} ')}"


def failures_in_a_row(count: int) -> str:
    """``3 failures in a row``, ``1 failure in a row``: the count its messages quote."""
    return f"{count} failure{'' if count == 1 else 's'} in a row"


def _bounded_tail(tail: str | None) -> str | None:
    """A stderr tail cut at its start to ``MAX_STDERR_TAIL_CHARS`` (its end is the
    provider's last words); ``None`` for none."""
    if not tail:
        return None
    if len(tail) <= MAX_STDERR_TAIL_CHARS:
        return tail
    return "…" + tail[-(MAX_STDERR_TAIL_CHARS - 1) :]


@dataclass(slots=True, frozen=True)
class StartDecision:
    action: StartAction
    delay_s: float = 0.0


@dataclass(slots=True, frozen=True)
class Health:
    """Counters and restart state of one provider (reported by ``providers/list``)."""

    state: ProviderState = ProviderState.IDLE
    starts: int = 0
    restarts: int = 0
    consecutive_failures: int = 0
    failed_at: float | None = None
    legs: int = 0
    ok: int = 0
    timeouts: int = 0
    crashes: int = 0
    errors: int = 0
    quarantines: int = 0
    no_consent: int = 0
    #: Timeouts since the provider last answered, on time or late (``is_hung`` reads it),
    #: each sent after the one before it had timed out: a leg that was out as an
    #: earlier one timed out is part of that same miss, not another.
    consecutive_timeouts: int = 0
    #: Timeouts counted into ``consecutive_timeouts`` over its life: what a leg reads as
    #: it is sent (its ``sent_mark``), so its miss tells whether one was counted while
    #: it was out. Not reported: a mark, not a figure.
    timeout_mark: int = 0
    #: Replies that came after their leg gave up: the process answers, past the deadline.
    late_replies: int = 0
    #: The last leg's error, and the last start or crash failure (what a give-up quotes).
    last_error: str | None = None
    last_failure: str | None = None
    #: When ``last_failure`` happened (the clock ``now`` reads); kept after a recovery,
    #: as the failure is, so a reader can tell old history from a fresh failure.
    last_failure_at: float | None = None
    #: The last lines its process wrote on stderr before ``last_failure`` (bounded, one
    #: line, scrubbed: the transport's ``stderr_tail``), ``None`` when it wrote none or
    #: the failure had no process to ask (a hang, a refusal). Replaced by each failure,
    #: never added to: the record stays the same size however often it fails.
    stderr_tail: str | None = None
    #: Legs answered "not ready yet" (``warming``): counted apart, never as failures.
    warming: int = 0
    #: Starts of a parked provider after its cool-down, and restarts asked by a client.
    retries: int = 0
    restarts_requested: int = 0
    #: The last start outlived its deadline: later starts run without a request waiting.
    start_timed_out: bool = False
    #: Parked because its credential was refused (``record_refused``), not for crashes.
    refused: bool = False
    #: Its last failure was a remote server not reached (``record_failure``): checked
    #: again on ``check_delay``, never parked for it. Not reported: its last failure
    #: says it, and ``next_check_in_s`` (``check_due``) when it is checked again.
    unreachable: bool = False
    #: Parked because its server's TLS certificate failed verification
    #: (``record_untrusted``): checked again after each cool-down, which does not grow.
    untrusted: bool = False
    #: Legs in a row that failed (an error, a quarantined reply, a timeout, a crash)
    #: since its last ``ok`` one: a provider that is up yet answers no query usefully.
    failing_legs: int = 0
    #: ``ok`` legs in a row that lost part of their answer (an MCP tool that failed or
    #: ran out of time) since its last whole one: up, answering, yet short each time.
    partial_legs: int = 0
    #: Why its last ``ok`` leg held no frame, when its binding could tell (an MCP
    #: provider: ``none of its 3 resources matched the goal``): hostd's own words, kept
    #: until an ``ok`` leg gives a frame, so "why does it never give anything?" is
    #: answered where its health is read.
    found_nothing: str | None = None
    #: ``ok`` legs in a row whose every offered frame was refused as invalid (a frame
    #: with no title, a string id) since its last answer that was not: up, answering,
    #: yet nothing it offers is usable. ``last_error`` holds the last one's words.
    invalid_legs: int = 0
    #: Retries of a parked provider that failed in a row (a start after its cool-down,
    #: failed or refused again), since it last started or a restart was asked: each
    #: doubles its next cool-down (``retry_cool_down_s``).
    failed_retries: int = 0
    #: A peer asked per request (a rerank server): the place in send order of the
    #: latest-sent ask whose failure was counted (``record_down``'s ``ask``; 0: none).
    #: An answer to an ask sent before it is older news than that failure
    #: (``record_answer``). Not reported: a mark, not a figure.
    down_ask: int = 0

    def to_wire(self, now: float | None = None) -> dict[str, Any]:
        """The counters; with ``now`` (the clock ``failed_at`` reads), also
        ``last_failure_s_ago``: how long ago the last failure was."""
        ago = None
        if now is not None and self.last_failure_at is not None:
            ago = round(max(0.0, now - self.last_failure_at), 1)
        return {
            "state": self.state.value,
            "starts": self.starts,
            "restarts": self.restarts,
            "consecutive_failures": self.consecutive_failures,
            "legs": self.legs,
            "ok": self.ok,
            "timeouts": self.timeouts,
            "crashes": self.crashes,
            "errors": self.errors,
            "quarantines": self.quarantines,
            "no_consent": self.no_consent,
            "consecutive_timeouts": self.consecutive_timeouts,
            "late_replies": self.late_replies,
            "last_error": self.last_error,
            "last_failure": self.last_failure,
            "last_failure_s_ago": ago,
            "stderr_tail": self.stderr_tail,
            "warming": self.warming,
            "retries": self.retries,
            "restarts_requested": self.restarts_requested,
            "start_timed_out": self.start_timed_out,
            "failing_legs": self.failing_legs,
            "partial_legs": self.partial_legs,
            "found_nothing": self.found_nothing,
            "invalid_legs": self.invalid_legs,
            "failed_retries": self.failed_retries,
        }


#: Doublings past which a doubling wait is its cap for any sane base and cap: a provider
#: or a peer down for weeks counts failures past where ``2.0 ** n`` overflows.
_MAX_DOUBLINGS = 64


def backoff_delay(consecutive_failures: int, policy: RestartPolicy) -> float:
    """Seconds to wait after the n-th consecutive failure before the next start (0 for n=0)."""
    if consecutive_failures <= 0:
        return 0.0
    doublings = min(consecutive_failures - 1, _MAX_DOUBLINGS)
    delay: float = policy.base_delay_s * 2.0**doublings
    return min(delay, max(policy.max_delay_s, policy.base_delay_s))


#: The shortest wait between two checks of a remote server that was not reached, even
#: with ``base_delay_s`` 0 (a local process restarted at once): never a busy loop of
#: connections to a server that is down.
CHECK_MIN_S = 0.1
#: Doublings of a check's wait before it holds: 0.5, 1, 2, 2, 2 … s by default.
_CHECK_DOUBLINGS = 2


def check_delay(consecutive_failures: int, policy: RestartPolicy) -> float:
    """Seconds to wait after the n-th consecutive failure of a remote provider whose
    server was not reached before its next check (0 for n=0): ``base_delay_s`` (at least
    ``CHECK_MIN_S``), doubling twice, then steady (never past ``max_delay_s`` unless the
    base is): a server back after a deploy is found within a few seconds, however long it
    was gone, and one that stays down costs one handshake per interval, one at a time."""
    if consecutive_failures <= 0:
        return 0.0
    step = max(policy.base_delay_s, CHECK_MIN_S)
    doublings = min(consecutive_failures - 1, _CHECK_DOUBLINGS)
    return min(step * 2.0**doublings, max(policy.max_delay_s, step))


def check_due(health: Health, policy: RestartPolicy) -> float | None:
    """When (clock time) a remote provider whose server was not reached is checked again
    (its next handshake, ``check_delay`` after its last failure); ``None``: it is not
    waiting for its server (up, never started, parked, or down for another cause)."""
    if not health.unreachable or health.state is not ProviderState.CRASHED:
        return None
    if health.failed_at is None:
        return None
    return health.failed_at + check_delay(health.consecutive_failures, policy)


def restart_due(health: Health, policy: RestartPolicy) -> float | None:
    """When (clock time) a crashed provider waiting out its backoff is started again
    (``backoff_delay`` after its last failure, as ``decide_start`` lets a request or
    ``idle_restart_in`` the host start it); ``None``: it is not (up, never started,
    parked: ``retry_due``, or a remote server not reached: ``check_due``)."""
    if health.state is not ProviderState.CRASHED or health.unreachable:
        return None
    if is_parked(health, policy) or health.failed_at is None:
        return None
    return health.failed_at + backoff_delay(health.consecutive_failures, policy)


def decide_start(
    health: Health,
    *,
    alive: bool,
    now: float,
    policy: RestartPolicy,
    credential_changed: bool = False,
) -> StartDecision:
    """What a leg does before it can send a request. ``credential_changed``: the
    credential source now gives another credential than the one refused (asked only of
    a ``refused`` provider): it starts at once, whatever its cool-down."""
    if alive:
        return StartDecision(StartAction.USE)
    if health.refused and credential_changed:
        return StartDecision(StartAction.START)
    if is_parked(health, policy):
        return decide_parked(health, now=now, policy=policy)
    if health.failed_at is None:
        return StartDecision(StartAction.START)
    wait = check_delay if health.unreachable else backoff_delay
    backoff = wait(health.consecutive_failures, policy)
    due = health.failed_at + backoff
    if now >= due:
        return StartDecision(StartAction.START)
    # Clamped: (t + d) - t can round to just over d, and a wait never exceeds its backoff.
    return StartDecision(StartAction.WAIT, min(due - now, backoff))


def idle_restart_in(health: Health, *, now: float, policy: RestartPolicy) -> float | None:
    """Seconds until a provider that is down starts again with no request asking (0: now),
    by the rules a request meets (``decide_start``): a crashed one after its backoff, a
    parked one once its cool-down has passed (one start). ``None``: not on its own, as it
    is not down (never started, running, stopped by the host), or it is parked with the
    cool-down off (only ``providers/restart`` starts it). So a provider that crashes while
    no request is out is up again before the next one comes, and one in a crash loop is
    started no more often than its backoff lets a request start it."""
    if health.state not in (ProviderState.CRASHED, ProviderState.FAILED):
        return None
    decision = decide_start(health, alive=False, now=now, policy=policy)
    if decision.action is StartAction.START:
        return 0.0
    if decision.delay_s == float("inf"):
        return None
    return decision.delay_s


def awaits_start(health: Health) -> bool:
    """Whether a request may wait for this provider's start: not once a start has
    outlived its deadline, nor once a remote provider's server was not reached (its
    first failure included: it is down, and a request would only spend a backoff and
    maybe a handshake's deadline on the next check), until one succeeds or a restart is
    asked for. Its next start then runs in the background, and the request's leg fails
    at once, saying why; so a server that is down costs a request a handshake's
    deadline at most once per check (a request that begins one does not wait for it)."""
    return not health.start_timed_out and not health.unreachable


def restarts_behind(health: Health, policy: RestartPolicy) -> bool:
    """Whether the provider is in a crash loop: it failed again (a crash, a failed start,
    a hang) after its last restart, with no query answered since (two failures in a
    row). Its next start then runs behind the request that meets it, which does not wait
    for it (not even within a ``ready_wait_ms``, a wait for starts and warm-ups): a
    provider that crashes on every query or start costs its own frames, not every
    composition its start time. A first failure's restart is
    waited for (a provider that served, then crashed once, serves the next request); so
    is a parked provider's one start after its cool-down, and a start that outlived
    its deadline keeps its own rule (``awaits_start``), as does a remote provider whose
    server was not reached (its checks are no crash loop: its server is down)."""
    return (
        health.consecutive_failures >= 2
        and not health.start_timed_out
        and not health.unreachable
        and not is_parked(health, policy)
    )


def is_parked(health: Health, policy: RestartPolicy) -> bool:
    """Whether the bounded restart attempts are spent (the provider gave up); never for
    a remote provider whose server was not reached (``unreachable``), however often."""
    return health.state is ProviderState.FAILED or (
        not health.unreachable and health.consecutive_failures >= policy.max_attempts
    )


def retry_cool_down_s(health: Health, policy: RestartPolicy) -> float | None:
    """Seconds a parked provider waits after its last failure for its next start:
    ``retry_failed_after_s``, doubled for each retry that failed in a row
    (``failed_retries``), at most ``retry_failed_max_s`` (never below the first);
    ``None``: never (the cool-down is off). Whether it is parked is not asked."""
    first = policy.retry_failed_after_s
    if first <= 0:
        return None
    grown = first * 2.0 ** min(health.failed_retries, _MAX_DOUBLINGS)
    return min(grown, max(policy.retry_failed_max_s, first))


def retry_due(health: Health, policy: RestartPolicy) -> float | None:
    """When (clock time) a parked provider gets its next start; ``None``: not parked, or
    never (the cool-down is off)."""
    if not is_parked(health, policy):
        return None
    cool_down = retry_cool_down_s(health, policy)
    if cool_down is None:
        return None
    if health.failed_at is None:  # parked by a policy change, never failed under it
        return 0.0
    return health.failed_at + cool_down


def decide_parked(health: Health, *, now: float, policy: RestartPolicy) -> StartDecision:
    """A parked provider: ``START`` once its cool-down has passed (one attempt; a failure
    parks it for another cool-down, twice as long: ``retry_cool_down_s``), else
    ``GIVE_UP`` at once, with ``delay_s`` the seconds until the retry (``inf`` when none
    will come). A leg never waits a cool-down out: it is longer than any leg's deadline."""
    due = retry_due(health, policy)
    if due is None:
        return StartDecision(StartAction.GIVE_UP, float("inf"))
    if now >= due:
        return StartDecision(StartAction.START)
    cool_down = retry_cool_down_s(health, policy) or 0.0
    return StartDecision(StartAction.GIVE_UP, min(due - now, cool_down))


def record_retry(health: Health) -> Health:
    """A parked provider's cool-down passed and its start begins."""
    return replace(health, retries=health.retries + 1)


def record_restart_requested(health: Health) -> Health:
    """``providers/restart``: failures forgotten, so the provider starts at once and gets
    its full restart attempts again, and its first cool-down; the counters are kept."""
    state = health.state
    if state in (ProviderState.FAILED, ProviderState.CRASHED):
        state = ProviderState.IDLE if health.starts == 0 else ProviderState.CRASHED
    return replace(
        health,
        state=state,
        consecutive_failures=0,
        consecutive_timeouts=0,
        failed_at=None,
        restarts_requested=health.restarts_requested + 1,
        start_timed_out=False,
        refused=False,
        unreachable=False,
        untrusted=False,
        failed_retries=0,
    )


def record_started(health: Health) -> Health:
    """A start and handshake succeeded (a parked provider's cool-down is its first again)."""
    restarted = health.starts > 0
    return replace(
        health,
        state=ProviderState.READY,
        starts=health.starts + 1,
        restarts=health.restarts + (1 if restarted else 0),
        start_timed_out=False,
        refused=False,
        unreachable=False,
        untrusted=False,
        failed_retries=0,
    )


def record_failure(
    health: Health,
    *,
    now: float,
    error: str,
    policy: RestartPolicy,
    start_timed_out: bool = False,
    cannot_run: bool = False,
    unreachable: bool = False,
    stderr_tail: str | None = None,
) -> Health:
    """The process could not start, failed its handshake, died or broke its stream.
    ``stderr_tail``: the last lines it wrote on stderr, kept beside the failure.
    ``start_timed_out``: it was a start that outlived its deadline (``awaits_start``).
    ``cannot_run``: its command could not be run at all (not found, not executable),
    or its config names what the provider does not offer (an MCP tool): no restart
    cures that until the user acts, so it is parked at once, not started again by each
    of the next requests (a cool-down, or ``providers/restart``). ``unreachable``: a
    remote provider's server was not reached (no connection, no answer in time, a
    5xx): it may come back at any moment, so however many failures are in a row it is
    ``crashed``, never parked, and checked again after ``check_delay``. One that fails
    while parked (its retry) counts a failed retry: its next cool-down doubles."""
    n = health.consecutive_failures + 1
    if cannot_run:
        n = max(n, policy.max_attempts)
    parks = n >= policy.max_attempts and not unreachable
    state = ProviderState.FAILED if parks else ProviderState.CRASHED
    error = bounded_error(error)
    return replace(
        health,
        state=state,
        consecutive_failures=n,
        failed_at=now,
        consecutive_timeouts=0,
        last_error=error,
        last_failure=error,
        last_failure_at=now,
        stderr_tail=_bounded_tail(stderr_tail),
        start_timed_out=start_timed_out,
        refused=False,
        unreachable=unreachable,
        untrusted=False,
        failed_retries=_failed_retries(health),
    )


def record_refused(health: Health, *, now: float, error: str) -> Health:
    """A remote provider refused its credential (HTTP 401/403), or none could be read.
    The server is up and nothing crashed, and a restart would send the same credential:
    so no failure is counted and no backoff earned. It is parked (``failed``) at once,
    ``error`` (what to fix) its last failure, until its credential changes
    (``decide_start``), its cool-down passes or a restart is asked for. Refused again
    while parked (its retry), its next cool-down doubles, as for a failed retry."""
    return _parked_at_once(health, now=now, error=error, untrusted=False)


def record_untrusted(health: Health, *, now: float, error: str) -> Health:
    """A remote provider's server presented a TLS certificate that failed verification
    (no CA in ``ca_file`` or the system's signed it, it expired, it names another host).
    The server was reached and nothing crashed, and a check a few seconds later would
    meet the same certificate: so no failure is counted and no backoff earned. It is
    parked (``failed``) at once, ``error`` (what to fix) its last failure, until its
    cool-down passes (``retry_failed_after_s``, the first one each time: a certificate
    renewed on the server is taken within it, however long it was wrong) or a restart
    is asked for."""
    return _parked_at_once(health, now=now, error=error, untrusted=True)


def _parked_at_once(health: Health, *, now: float, error: str, untrusted: bool) -> Health:
    """A remote provider parked (``failed``) by a failure no restart cures, with no
    failure counted: its credential refused (``refused``), or, ``untrusted``, its
    server's certificate. They differ in the flag set and in the cool-down: a refusal's
    doubles with each retry refused again (``_failed_retries``), a certificate's never
    grows (``failed_retries`` 0)."""
    error = bounded_error(error)
    return replace(
        health,
        state=ProviderState.FAILED,
        failed_at=now,
        consecutive_timeouts=0,
        last_error=error,
        last_failure=error,
        last_failure_at=now,
        stderr_tail=None,
        start_timed_out=False,
        refused=not untrusted,
        unreachable=False,
        untrusted=untrusted,
        failed_retries=0 if untrusted else _failed_retries(health),
    )


def _failed_retries(health: Health) -> int:
    """``failed_retries`` after a failure of the start ``health`` was waiting for: one more
    when it was parked (a parked provider starts only as a retry, or as its refused
    credential changed), else as it was (``record_started`` resets it)."""
    return health.failed_retries + (health.state is ProviderState.FAILED)


def is_hung(health: Health, policy: RestartPolicy, *, has_process: bool = True) -> bool:
    """Whether a running provider missed ``max_consecutive_timeouts`` deadlines in a row
    with no reply in between, not even a late one: alive by every sign the pipe gives,
    yet answering nothing, so every request would pay its full timeout again. It is
    then restarted, not waited on. In a row means one after another in time: each of
    those requests was sent after the one before it had timed out (``record_leg``),
    so a burst of requests that time out together is one miss, however many there
    were. A provider whose late replies still come is slow: a restart would only pay
    its start (a model, an index) again, so it is kept. ``has_process``: ``False`` for
    a remote provider, never hung: there is no process to replace, and a new handshake
    with the same server would only cost the next request its wait (its legs time out
    as they do, its connection is kept)."""
    return (
        has_process
        and health.state is ProviderState.READY
        and policy.max_consecutive_timeouts > 0
        and health.consecutive_timeouts >= policy.max_consecutive_timeouts
    )


def record_leg(
    health: Health,
    status: str,
    *,
    error: str | None = None,
    late: int = 0,
    lost: str | None = None,
    empty: str | None = None,
    invalid: str | None = None,
    sent_mark: int | None = None,
    refusals_later: bool = False,
    ran: bool = True,
) -> Health:
    """Count one finished leg. A leg answered by the provider (``ok``/``quarantined``)
    resets the consecutive-failure count: the process works. A ``warming`` leg (the
    provider is starting or building its index, ``is_warming_leg``) is no failure and no
    missed deadline: it never leads to a restart, a backoff or ``is_hung``. ``ran``
    False: the leg never reached the provider, failed at once (a crash loop's, while its
    restart runs behind the request; a parked provider's; one down whose next start or
    check is not waited for): counted as a leg and its ``error`` kept, yet neither an
    answer nor one more failure or missed deadline (its failures were counted as they
    came), so no number of requests meeting it parks it, or reads as a hang.
    ``late``:
    replies to given-up legs that came since the last leg was counted; any ends the run
    of missed deadlines before this leg counts (the process answers, late). ``lost``:
    what an ``ok`` leg lost of its answer (its note), kept as ``last_error``; it counts
    toward ``partial_legs``, and a whole ``ok`` leg ends that run. ``empty``: why an ``ok``
    leg held no frame (its binding's words), kept as ``found_nothing`` until an ``ok`` leg
    gives one; a leg that is no answer leaves it as it was. ``invalid``: an ``ok`` leg
    offered frames and every one was refused for what it sent (hostd's words: by reason,
    which rule, which field: ``refused_words``), kept as ``last_error``; it counts toward
    ``invalid_legs``, and any other ``ok`` leg ends that run. ``refusals_later``: that is
    decided after verification (``record_refusals``), which drops frames of its own (a
    digest, a source): ``invalid_legs`` is left as it was here. ``sent_mark``:
    ``health.timeout_mark`` when the leg was sent; a timeout counts toward
    ``consecutive_timeouts`` only when no other was counted since (it was sent after the
    last counted one timed out): legs that were out together and time out together are
    one miss, not several in a row. ``None`` (not known): every timeout counts."""
    if status != "ok":
        lost = invalid = None  # only an answer can be short of something, or refused
    elif invalid is not None:
        error = invalid
    elif lost is not None:
        error = lost
    if not ran:
        status = "not_run"  # none of the counters below: no answer, no failure
    answered = status in ("ok", "quarantined") or is_warming_leg(status)
    timeouts = 0 if late > 0 else health.consecutive_timeouts
    mark = health.timeout_mark
    if answered:
        timeouts = 0
    elif status == "timeout" and (sent_mark is None or sent_mark >= mark):
        timeouts += 1
        mark += 1
    found_nothing = health.found_nothing
    if status == "ok":  # an answer: this one's emptiness, or none
        found_nothing = None if empty is None else bounded_error(empty)
    # Built field by field (once per leg: dataclasses.replace costs about 2x as much).
    return Health(
        state=health.state,
        starts=health.starts,
        restarts=health.restarts,
        consecutive_failures=(
            0 if answered and health.state is ProviderState.READY else health.consecutive_failures
        ),
        failed_at=health.failed_at,
        legs=health.legs + 1,
        ok=health.ok + (status == "ok"),
        timeouts=health.timeouts + (status == "timeout"),
        crashes=health.crashes + (status == "crashed"),
        errors=health.errors + (status == "error"),
        quarantines=health.quarantines + (status == "quarantined"),
        no_consent=health.no_consent + (status == "no_consent"),
        consecutive_timeouts=timeouts,
        timeout_mark=mark,
        late_replies=health.late_replies + late,
        last_error=health.last_error if error is None else bounded_error(error),
        last_failure=health.last_failure,
        last_failure_at=health.last_failure_at,
        stderr_tail=health.stderr_tail,
        warming=health.warming + is_warming_leg(status),
        retries=health.retries,
        restarts_requested=health.restarts_requested,
        start_timed_out=health.start_timed_out,
        refused=health.refused,
        unreachable=health.unreachable,
        untrusted=health.untrusted,
        failing_legs=(
            0
            if status == "ok"
            else health.failing_legs + (status in ("error", "quarantined", "timeout", "crashed"))
        ),
        # A whole ok leg ends the run; a leg that is no answer neither ends nor adds.
        partial_legs=(
            0 if status == "ok" and lost is None else health.partial_legs + (lost is not None)
        ),
        found_nothing=found_nothing,
        # Any other answer ends the run; a leg that is no answer neither ends nor adds.
        invalid_legs=(
            health.invalid_legs
            if refusals_later
            else health.invalid_legs + 1
            if invalid is not None
            else 0
            if status == "ok"
            else health.invalid_legs
        ),
        failed_retries=health.failed_retries,
        down_ask=health.down_ask,
    )


def record_refusals(health: Health, invalid: str | None) -> Health:
    """An ``ok`` leg counted with ``refusals_later``, once verification has dropped what
    it drops: ``invalid`` (``refused_words``: every frame it offered refused for what it
    sent) counts toward ``invalid_legs`` and is kept as ``last_error``; ``None`` ends that
    run, as any other answer does."""
    if invalid is None:
        return replace(health, invalid_legs=0) if health.invalid_legs else health
    return replace(health, invalid_legs=health.invalid_legs + 1, last_error=bounded_error(invalid))


def is_warming_leg(status: str) -> bool:
    """Whether a leg's status says "not ready yet" rather than "failed"."""
    return status == "warming"


# -- a peer asked once per request: skipped while it cools down ----------------------------


@dataclass(slots=True, frozen=True)
class CoolDownPolicy:
    """When a peer with nothing to restart (a rerank server) is left alone: after
    ``after`` failures in a row it is not asked for ``base_s``, twice as long after each
    failed try past that, at most ``max_s``; ``after`` 0: it is asked every time."""

    after: int = 3
    base_s: float = 1.0
    max_s: float = 60.0


def cool_down_s(consecutive_failures: int, policy: CoolDownPolicy) -> float:
    """Seconds a peer that failed ``consecutive_failures`` times in a row is not asked
    (0: below ``after``, or the cool-down is off)."""
    past = consecutive_failures - policy.after
    if policy.after <= 0 or past < 0:
        return 0.0
    return min(policy.base_s * 2.0 ** min(past, _MAX_DOUBLINGS), policy.max_s)


def ask_cool_down_s(health: Health, policy: CoolDownPolicy) -> float:
    """Seconds a peer is not asked after its last failure: ``cool_down_s`` of its failures
    in a row, or, when its certificate failed verification (``record_down``'s
    ``untrusted``), ``max_s`` from the first failure on (unless the cool-down is off): no
    ask cures it until the user fixes ``ca_file`` or the server's certificate is renewed,
    so it is tried once per longest cool-down, which does not grow, as a remote
    provider's certificate is checked once per cool-down (``record_untrusted``)."""
    if health.untrusted and policy.after > 0 and health.consecutive_failures > 0:
        return policy.max_s
    return cool_down_s(health.consecutive_failures, policy)


def decide_ask(
    health: Health, *, now: float, policy: CoolDownPolicy, probing: bool = False
) -> StartDecision:
    """Whether a request asks the peer: ``USE`` (no cool-down: healthy, or fewer failures
    in a row than ``after``), ``START`` (its cool-down has passed: ask it once, a try,
    ``record_retry``) or ``GIVE_UP`` (skip it; ``delay_s`` until it may be asked again,
    0 when a try is already out, ``probing``: one at a time, so a peer that hangs
    costs one request its deadline per cool-down, not every request that came; a
    certificate that failed verification: ``ask_cool_down_s``)."""
    delay = ask_cool_down_s(health, policy)
    if delay <= 0 or health.failed_at is None:
        return StartDecision(StartAction.USE)
    due = health.failed_at + delay
    if now >= due:
        return StartDecision(StartAction.GIVE_UP if probing else StartAction.START)
    # Clamped as in decide_start: (t + d) - t can round to just over d.
    return StartDecision(StartAction.GIVE_UP, min(due - now, delay))


def record_answer(
    health: Health, status: str = "ok", *, error: str | None = None, ask: int | None = None
) -> Health:
    """The peer answered. ``ok`` (a verdict): it works, its failures are forgotten.
    ``error`` (an answer that is no verdict: a refusal, a redirect, a bad body): it is
    reachable, so it is ``ready`` whatever it was (an earlier ``crashed``, no connection,
    would have status tell of a failure this answer ended), while its failures in a row
    and cool-down stand (an answer is not what a cool-down spares). ``ask``: the ask's
    place in send order; one sent before the latest-sent ask that failed
    (``Health.down_ask``) is older news than that failure: it is counted, yet the state
    and the failures stand (a server stopped while it finished the asks it had in hand
    answers them after later asks found it gone; only an ask sent after says it is back).
    ``None``: the answer is the latest news. An answer is news of a TLS handshake that
    passed: a certificate that failed verification (``untrusted``) is trusted now."""
    if ask is not None and ask < health.down_ask:
        return record_leg(health, status, error=error)
    answered = replace(health, state=ProviderState.READY, untrusted=False)
    return record_leg(answered, status, error=error)


def record_down(
    health: Health,
    status: str,
    *,
    now: float,
    error: str,
    policy: CoolDownPolicy,
    ask: int | None = None,
    untrusted: bool = False,
) -> Health:
    """The peer gave no answer: ``timeout``, ``crashed`` (no connection, TLS refused),
    or ``error`` (it is failing: a 5xx, a 429). One more failure in a row, counted from
    ``now``; state ``failed`` while that earns a cool-down, else ``crashed``. ``ask``:
    the failed ask's place in send order (``Health.down_ask``: answers to asks sent
    before it do not clear this failure). ``untrusted``: its certificate failed
    verification, or the TLS files could not be loaded: it cools down at once, for the
    longest cool-down (``ask_cool_down_s``)."""
    counted = record_leg(health, status, error=error)
    n = counted.consecutive_failures + 1
    downed = replace(counted, consecutive_failures=n, untrusted=untrusted)
    cooling = ask_cool_down_s(downed, policy) > 0
    return replace(
        downed,
        state=ProviderState.FAILED if cooling else ProviderState.CRASHED,
        failed_at=now,
        last_failure=counted.last_error,
        last_failure_at=now,
        down_ask=health.down_ask if ask is None else max(health.down_ask, ask),
    )
