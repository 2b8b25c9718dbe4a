"""A remote provider whose handshake gets no reply at all is told what to check.

A child's handshake that times out is told its usual causes (a reply never flushed,
set-up before the handshake); a remote provider has no pipe, so its timeout names what
to check instead (the url answers, TLS, the token, a proxy): in the leg, the status, the
log event and the compose summary, never a credential nor anything the peer sent. Against
a real loopback HTTPS server that reads the handshake and never answers it: the start
deadline always runs out, however fast the machine is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from hostd._hints import NO_HANDSHAKE, no_remote_handshake, says_remote_handshake
from hostd.cli._outcome import leg_failures
from hostd.engine import (
    MAX_ERROR_CHARS,
    Health,
    Host,
    LegReport,
    LegStatus,
    bounded_error,
    failure_text,
)
from hostd.transport.remote._http import handshake_missed
from hostd.transport.remote._stage import STAGES
from tests.engine._helpers import query
from tests.remote._servers import TOKEN, consented, make_tls, remote_spec, serving, silent

pytestmark = pytest.mark.anyio

_SECTION = "[[provider]] 'remote' "
#: The server read the request: the handshake stalled waiting for its response head.
_STALLED = "stalled waiting for the response head, the request sent (ReadTimeout)"
_MISSED = f"no handshake reply within 500 ms: {_STALLED}; {no_remote_handshake(_SECTION)}"


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


async def test_a_remote_handshake_never_answered_says_what_to_check(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(silent, tls) as (url, rec):
        spec = remote_spec(url, tls, start_timeout_s=0.5)
        with structlog.testing.capture_logs() as logs:
            async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
                fan = await host.query_all(query(), 1000)
                (row,) = host.providers_list()
    report = fan.reports[spec.id]
    assert rec.kinds() == ["handshake"]  # it reached the server, which never answered
    assert (report.status, report.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert report.error_message == _MISSED
    # Named by the provider's own keys: a config may hold several remote providers.
    assert _MISSED.startswith(
        f"no handshake reply within 500 ms: {_STALLED}; check that [[provider]] 'remote' url"
    )
    # The section said once, on the url: the keys after it are its own.
    assert "its TLS (ca_file; client_cert and client_key for mutual TLS) and the token" in _MISSED
    assert "; if it is only slow, raise its start_timeout_s; it must answer without" in _MISSED
    assert row["health"]["last_failure"] == f"timeout: {_MISSED}"  # what status shows
    (failed,) = [e for e in logs if e["event"] == "provider.start.failed"]
    assert failed["error"] == _MISSED
    # The compose summary gives it as it is: a pipe's causes would send the reader after
    # a stdout buffer the provider does not have.
    (line,) = leg_failures({"providers": [report.to_wire()], "prompt": ""})
    assert NO_HANDSHAKE not in line
    assert line == f"  {spec.id}: timeout: {_MISSED}"  # its own deadline named once, in it
    shown = f"{report.error_message} {row} {logs}"
    assert TOKEN not in shown and "Bearer" not in shown


#: The longest provider id a health holds a handshake timeout's advice whole for.
_ID_64 = "team-search-" + "x" * 52


async def test_a_64_character_ids_handshake_timeout_is_kept_whole_in_its_health(
    tmp_path: Path,
) -> None:
    """The stage that stalled and what to check, named after a section of a 64-character
    id, fit in the ``MAX_ERROR_CHARS`` a health keeps of an error: what ``hostd status``
    shows is the message whole, its advice included."""
    tls = make_tls(tmp_path)
    async with serving(silent, tls) as (url, _):
        spec = remote_spec(url, tls, _ID_64, start_timeout_s=0.5)
        async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
            report = (await host.query_all(query(), 1000)).reports[spec.id]
            (row,) = host.providers_list()
    assert len(spec.id) == 64
    assert report.error_message == (
        f"no handshake reply within 500 ms: {_STALLED}; check that [[provider]] '{_ID_64}' "
        "url answers from here (curl's POST gets a reply at once, even a 401), its TLS "
        "(ca_file; client_cert and client_key for mutual TLS) and the token; if it is only "
        "slow, raise its start_timeout_s; it must answer without a proxy (hostd ignores "
        "HTTPS_PROXY and the other proxy variables)"
    )
    assert row["health"]["last_failure"] == f"timeout: {report.error_message}"


@pytest.mark.parametrize("stage", sorted(STAGES))
async def test_a_handshake_timeout_fits_a_health_whatever_stalled_and_its_deadline(
    stage: str,
) -> None:
    """Whole for a 64-character id at the longest ``start_timeout_s`` (3600 s); for a
    longer id, a health's cut falls in the proxy's explanation, after every key to set."""
    section = f"[[provider]] '{_ID_64}' "
    kept = failure_text("timeout", handshake_missed(3600.0, stage, section))
    assert len(kept) <= MAX_ERROR_CHARS
    longest = f"[[provider]] '{'x' * 128}' "  # the longest id a config takes
    cut = bounded_error(failure_text("timeout", handshake_missed(3600.0, stage, longest)))
    assert cut.endswith("…") and "raise its start_timeout_s; it must answer without a" in cut
    # Still read as a remote handshake's advice (the compose summary adds no pipe's causes).
    assert says_remote_handshake(cut)


@dataclass(frozen=True)
class _Down:
    """A remote provider's first leg, whose handshake timed out, and the legs after it
    that met it down, with its health between them and after, and the request kinds
    its server saw."""

    first: LegReport
    legs: list[LegReport]
    before: Health
    after: Health
    kinds: list[str]


async def _legs_after_a_handshake_timeout(tmp_path: Path, n: int) -> _Down:
    """A first leg whose handshake the server never answers, then ``n`` more. The health
    clock is the test's: the next check is never due."""
    tls = make_tls(tmp_path)
    clock = [100.0]
    async with serving(silent, tls) as (url, rec):
        spec = remote_spec(url, tls, start_timeout_s=0.5)
        async with Host(
            [spec], consent=consented(tmp_path, spec.id), health_clock=lambda: clock[0]
        ) as host:
            first = (await host.query_all(query(), 1000)).reports[spec.id]
            before = host.health(spec.id)
            legs = [(await host.query_all(query(), 1000)).reports[spec.id] for _ in range(n)]
            after = host.health(spec.id)
    return _Down(first, legs, before, after, rec.kinds())


async def test_a_leg_not_waiting_for_the_next_check_says_the_timeout_that_put_it_down(
    tmp_path: Path,
) -> None:
    """The handshake timed out, so the server is checked again behind the requests and
    none waits for it: the next leg fails at once with the code of what the check found
    (``handshake_timeout``), not a ``crashed`` of a process that does not exist, and says
    when the next check comes."""
    down = await _legs_after_a_handshake_timeout(tmp_path, 1)
    first, (again,) = down.first, down.legs
    assert down.kinds == ["handshake"]  # the second leg did not wait for a check
    assert (first.status, first.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert (again.status, again.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert again.error_message == (
        f"not waited for: its last check timed out waiting for the reply (timeout: {_MISSED}); "
        "the next check in 500 ms"
    )


async def test_legs_not_waiting_for_the_next_check_are_no_missed_deadlines_of_its_own(
    tmp_path: Path,
) -> None:
    """A server whose handshake timed out is down until its next check: the legs that
    meet it meanwhile fail at once, never sent, so none is one more missed deadline
    (``timeouts``, ``consecutive_timeouts``: what ``is_hung`` reads) nor one more failing
    leg; each is counted as a leg, its message kept."""
    down = await _legs_after_a_handshake_timeout(tmp_path, 4)
    first, legs, before, after = down.first, down.legs, down.before, down.after
    assert down.kinds == ["handshake"]  # none of those legs reached the server
    assert first.sent and (first.status, first.error_code) == (
        LegStatus.TIMEOUT,
        "handshake_timeout",
    )
    for report in legs:
        assert (report.status, report.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
        assert not report.sent, report
    # Kept as a health keeps any error: bounded (it quotes the whole handshake timeout).
    assert after.legs == before.legs + 4
    assert after.last_error == bounded_error(legs[-1].error_message or "")
    figures = ("timeouts", "consecutive_timeouts", "failing_legs", "crashes")
    assert {f: getattr(after, f) for f in figures} == {f: getattr(before, f) for f in figures}
    assert after.consecutive_failures == before.consecutive_failures == 1
