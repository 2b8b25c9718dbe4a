"""A remote provider whose server's certificate fails verification says so, and waits.

Against a real loopback HTTPS server (``_servers``) whose certificate a CA the client
does not trust signed: the leg is ``crashed`` with code ``certificate`` (not the
``transport`` of a server that is down), saying what to fix; the provider is parked
``failed`` at once, its legs failing at once with the same words and when it is
checked again, and the log says it once. It is checked again after each cool-down
(``host.retry_failed_after_s``, which does not grow), the TLS files read again, so a
``ca_file`` fixed in place (or a certificate renewed on the server) is taken with no
restart. The health clock is the test's: no step waits on time.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hostd._hints import down_state
from hostd.cli._outcome import leg_failures
from hostd.engine import Host, LegStatus, RestartPolicy
from tests.engine._helpers import query
from tests.fixtures.log_events import events
from tests.remote._servers import TOKEN, consented, make_tls, provider_app, remote_spec, serving

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


POLICY = RestartPolicy()  # a daemon's: a minute's cool-down, 0.5 s backoff


async def test_a_certificate_no_trusted_ca_signed_parks_the_provider_saying_what_to_fix(
    tmp_path: Path,
) -> None:
    served, other = make_tls(tmp_path, "served"), make_tls(tmp_path, "other")
    clock = [100.0]
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with serving(provider_app(), served) as (url, rec):
            spec = remote_spec(url, None, ca_file=other.ca_file)
            async with Host(
                [spec],
                consent=consented(tmp_path, "remote"),
                restart_policy=POLICY,
                health_clock=lambda: clock[0],
            ) as host:
                first = (await host.query_all(query(), 1000)).reports["remote"]
                clock[0] += 2.0  # past any check a server that is down would get
                again = (await host.query_all(query(), 1000)).reports["remote"]
                row = host.providers_list()[0]
    said = f"the CA that signed it is not in [[provider]] 'remote' ca_file {other.ca_file}"
    assert (first.status, first.error_code) == (LegStatus.CRASHED, "certificate")
    message = first.error_message or ""
    # Its code said once: beside code ``certificate``, the message does not begin with it.
    assert message.startswith("not trusted (") and message.endswith(said)
    # Parked: not handshaken again; the same words, and when it is checked again.
    assert (again.status, again.error_code) == (LegStatus.CRASHED, "certificate")
    assert again.error_message == f"{message} (checked again in 58 s, or at providers/restart)"
    # The compose summary, which shows the status and not the code, says the code first.
    (line,) = leg_failures({"providers": [again.to_wire()], "prompt": ""})
    assert line == f"  remote: crashed: certificate: {again.error_message}"
    assert rec.seen == []  # the TLS handshake failed: no request reached the server
    health = row["health"]
    assert row["state"] == "failed"
    # Its code said once, as a crash's is (``crashed: provider process ended``).
    last = f"certificate: {message}"
    assert health["last_failure"] == last
    assert (health["consecutive_failures"], health["retry_in_s"]) == (0, 58.0)
    assert "next_check_in_s" not in health  # not a server that is down
    now = "`hostd providers restart remote --connect` starts it now"  # parked: said
    assert down_state(row) == f"failed 2 s ago: {last}; next try in 58 s, or {now}"
    # Said once, with its reason: one check, one warning, parked.
    failed = [e for e in seen.seen if e["event"] == "provider.start.failed"]
    assert [(e["reason"], e["log_level"]) for e in failed] == [("certificate", "warning")]
    parked = [e for e in seen.seen if e["event"] == "provider.parked"]
    assert [(e["untrusted"], e["retry_in_s"]) for e in parked] == [(True, 60.0)]


async def test_a_ca_file_fixed_in_place_is_taken_by_the_next_check_with_no_restart(
    tmp_path: Path,
) -> None:
    served, other = make_tls(tmp_path, "served"), make_tls(tmp_path, "other")
    ca_file = tmp_path / "team-ca.pem"
    ca_file.write_bytes(other.ca_file.read_bytes())  # the wrong CA
    clock = [100.0]
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with serving(provider_app(), served) as (url, rec):
            spec = remote_spec(url, None, ca_file=ca_file)
            async with Host(
                [spec],
                consent=consented(tmp_path, "remote"),
                restart_policy=POLICY,
                health_clock=lambda: clock[0],
            ) as host:
                wrong = (await host.query_all(query(), 1000)).reports["remote"]
                ca_file.write_bytes(served.ca_file.read_bytes())  # the user fixes it
                clock[0] += POLICY.retry_failed_after_s
                checked = (await host.query_all(query(), 1000)).reports["remote"]
    assert wrong.error_code == "certificate"
    assert checked.status is LegStatus.OK, checked
    assert rec.kinds() == ["handshake", "query"]
    back = [e for e in seen.seen if e["event"] == "provider.recovered"]
    assert [e["was"] for e in back] == ["failed"]


async def test_a_missing_ca_file_parks_the_provider_naming_the_file_until_it_is_fixed(
    tmp_path: Path,
) -> None:
    served = make_tls(tmp_path, "served")
    ca_file = tmp_path / "absent-ca.pem"
    clock = [100.0]
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with serving(provider_app(), served) as (url, rec):
            spec = remote_spec(url, None, ca_file=ca_file)
            async with Host(
                [spec],
                consent=consented(tmp_path, "remote"),
                restart_policy=POLICY,
                health_clock=lambda: clock[0],
            ) as host:
                first = (await host.query_all(query(), 1000)).reports["remote"]
                clock[0] += 2.0  # past any check a server that is down would get
                again = (await host.query_all(query(), 1000)).reports["remote"]
                row = host.providers_list()[0]
                ca_file.write_bytes(served.ca_file.read_bytes())  # the user fixes it
                clock[0] += POLICY.retry_failed_after_s
                fixed = (await host.query_all(query(), 1000)).reports["remote"]
    said = f"cannot load [[provider]] 'remote' ca_file {ca_file}: No such file or directory"
    # A config error, not a server not reached: parked, not checked every 2 s.
    assert (first.status, first.error_code, first.error_message) == (
        LegStatus.CRASHED,
        "certificate",
        said,
    )
    assert again.error_message == f"{said} (checked again in 58 s, or at providers/restart)"
    assert row["state"] == "failed"
    assert row["health"]["last_failure"] == f"certificate: {said}"
    assert "next_check_in_s" not in row["health"]
    failed = [e for e in seen.seen if e["event"] == "provider.start.failed"]
    assert [(e["reason"], e["log_level"]) for e in failed] == [("certificate", "warning")]
    # The file read again at the next check after the cool-down: no restart.
    assert fixed.status is LegStatus.OK, fixed
    assert rec.kinds() == ["handshake", "query"]
