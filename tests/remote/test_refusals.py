"""A remote provider's refusals say what the user must fix.

A 401/403 is a server that is up and refuses the credential: the leg is
``unauthorized`` and the provider ``failed`` (parked at once, not restarted in a
loop as a crash), both saying ``remote provider refused the credential (HTTP 401):
check the token in $VAR`` (the variable's name, never its value nor the server's
body). It is started again when its token file changes, on ``providers/restart``
(which reads the credential again) or after its cool-down. A certificate no
trusted CA signed names ``ca_file``. Against a real provider child serving HTTPS
(``python -m providers.memory --http``) and the loopback servers of ``_servers``.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog
import trustme

from hostd._hints import down_state
from hostd.config import parse_config
from hostd.engine import Host, LegStatus, RestartPolicy
from hostd.server import Daemon
from tests.engine._helpers import query
from tests.remote._servers import (
    TOKEN,
    TlsFiles,
    after_handshake,
    consented,
    fixed_reply,
    make_tls,
    provider_app,
    remote_spec,
    serving,
)
from tests.remote.test_serve import served

pytestmark = pytest.mark.anyio

VAR = "HOSTD_TEST_REFUSED_TOKEN"
WRONG = "wrong-token-value-b81e4d"
REFUSED = f"remote provider refused the credential (HTTP 401): check the token in ${VAR}"


def on_record(said: str, message: str | None) -> bool:
    """Whether ``message`` is ``said`` as a parked provider's leg gives it: the refusal
    on record, and when it will be asked again (the seconds depend on the clock)."""
    again = " (refused earlier; not asked again until the credential changes or "
    again += "providers/restart, or in "
    return re.fullmatch(re.escape(said + again) + r"\d+ s\)", message or "") is not None


@pytest.fixture(autouse=True)
def _wrong_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, WRONG)


def _config(tmp_path: Path, url: str, ca_file: Path) -> str:
    return (
        f'[host]\nstate_dir = "{tmp_path}/state"\nsocket = "{tmp_path}/s.sock"\n'
        f'[[provider]]\nid = "team"\nurl = "{url}"\nca_file = "{ca_file}"\n'
        f'token_env = "{VAR}"\ntimeout_ms = 60000\n'
    )


# -- against a real provider child -------------------------------------------------------


async def test_a_refused_token_is_named_by_its_variable_in_the_leg_and_providers_list(
    tmp_path: Path,
) -> None:
    """The server child takes TOKEN; hostd sends WRONG from $VAR: HTTP 401."""
    with structlog.testing.capture_logs() as logs:
        with served("providers.memory", tmp_path, "--db", str(tmp_path / "m.db")) as (url, ca):
            cfg = parse_config(_config(tmp_path, url, ca))
            async with Daemon(cfg).local() as session:
                composed = await session.call("context/compose", {"goal": "deploys"})
                again = await session.call("context/compose", {"goal": "deploys"})
                listed = await session.call("providers/list", {})
    legs = [c["providers"][0] for c in (composed, again)]
    assert [leg["status"] for leg in legs] == ["unauthorized", "unauthorized"]
    assert [leg["error"]["code"] for leg in legs] == ["unauthorized", "unauthorized"]
    # Refused at its start (the daemon starts it at boot), then parked: not asked
    # again, each leg saying what to fix in the same words, and that it is on record.
    assert all(on_record(REFUSED, leg["error"]["message"]) for leg in legs), legs
    row = listed["providers"][0]
    assert row["state"] == "failed"  # not "crashed": the server is up and said no
    assert row["health"]["last_failure"] == f"unauthorized: {REFUSED}"
    assert (row["health"]["crashes"], row["health"]["consecutive_failures"]) == (0, 0)
    shown = orjson.dumps([composed, again, listed]).decode() + repr(logs)
    assert WRONG not in shown and TOKEN not in shown


def _issued_by_another_ca(tmp_path: Path) -> Path:
    """A CA file holding a CA that signed nothing the server presents."""
    return make_tls(tmp_path, "other").ca_file


@pytest.mark.parametrize("told", ["no_ca_file", "another_ca"])
async def test_a_certificate_no_known_ca_signed_names_ca_file(tmp_path: Path, told: str) -> None:
    other = _issued_by_another_ca(tmp_path) if told == "another_ca" else None
    with served("providers.memory", tmp_path, "--db", str(tmp_path / "m.db")) as (url, _):
        spec = remote_spec(url, None, ca_file=other, token_env=VAR)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
    assert (report.status, report.error_code) == (LegStatus.CRASHED, "certificate")
    message = report.error_message or ""
    assert message.startswith("not trusted (")  # beside code ``certificate``: said once
    assert "CERTIFICATE_VERIFY_FAILED" in message  # as remote.md says, to search for
    if other is None:
        # Its own section named: a config may hold a reranker's and other providers' too.
        assert message.endswith("): set [[provider]] 'remote' ca_file to the CA that signed it")
    else:
        assert message.endswith(
            f"): the CA that signed it is not in [[provider]] 'remote' ca_file {other}"
        )


# -- the TLS wording, by reason ----------------------------------------------------------


def _issued(directory: Path, *hosts: str, expired: bool = False) -> TlsFiles:
    ca = trustme.CA()
    kw: dict[str, Any] = {}
    if expired:
        past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
        kw = {"not_before": past, "not_after": past + datetime.timedelta(1)}
    cert = ca.issue_cert(*hosts, **kw)
    files = TlsFiles(ca, directory / "i-ca.pem", directory / "i-cert.pem", directory / "i-key.pem")
    ca.cert_pem.write_to_path(str(files.ca_file))
    cert.private_key_and_cert_chain_pem.write_to_path(str(files.cert_file))
    cert.private_key_pem.write_to_path(str(files.key_file))
    return files


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("expired", "rejected (certificate has expired; CERTIFICATE_VERIFY_FAILED)"),
        ("other_host", "it does not name the url's host"),
    ],
)
async def test_a_certificate_ca_file_cannot_cure_does_not_point_at_it(
    tmp_path: Path, case: str, said: str
) -> None:
    served_tls = (
        _issued(tmp_path, "127.0.0.1", expired=True)
        if case == "expired"
        else _issued(tmp_path, "other.example")
    )
    async with serving(provider_app(), served_tls) as (url, rec):
        spec = remote_spec(url, served_tls, token_env=VAR)  # its own CA: trusted
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
    assert (report.status, report.error_code) == (LegStatus.CRASHED, "certificate")
    assert said in (report.error_message or "")
    assert not (report.error_message or "").startswith("certificate ")  # its code, said once
    assert "ca_file" not in (report.error_message or "")
    assert rec.seen == []


# -- the refused provider's life: parked, not crash-looped --------------------------------


async def test_a_refused_provider_is_not_handshaken_again_in_a_crash_loop(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    policy = RestartPolicy(base_delay_s=0.001, max_delay_s=0.001)  # a crash would retry now
    async with serving(provider_app(), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=VAR)
        async with Host(
            [spec], consent=consented(tmp_path, "remote"), restart_policy=policy
        ) as host:
            fans = [await host.query_all(query(), 1000) for _ in range(4)]
            health = host.health("remote")
    assert [f.reports["remote"].status for f in fans] == [LegStatus.UNAUTHORIZED] * 4
    assert rec.kinds() == ["handshake"]  # once: nothing sent since
    assert (health.state.value, health.crashes, health.consecutive_failures) == ("failed", 0, 0)


async def test_a_refused_provider_is_tried_once_more_after_its_cool_down(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    clock = [100.0]
    policy = RestartPolicy(retry_failed_after_s=60.0)
    async with serving(provider_app(), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=VAR)
        host = Host(
            [spec],
            consent=consented(tmp_path, "remote"),
            restart_policy=policy,
            health_clock=lambda: clock[0],
        )
        async with host:
            await host.query_all(query(), 1000)
            clock[0] += 59.0
            early = (await host.query_all(query(), 1000)).reports["remote"]
            kinds_early = rec.kinds()
            clock[0] += 1.0
            due = (await host.query_all(query(), 1000)).reports["remote"]
    assert early.error_message == REFUSED + (
        " (refused earlier; not asked again until the credential changes or "
        "providers/restart, or in 1 s)"
    )
    assert kinds_early == ["handshake"]
    assert due.error_message == REFUSED  # a new handshake, refused again
    assert rec.kinds() == ["handshake", "handshake"]


async def test_a_fixed_token_file_is_used_by_the_next_request(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    token = tmp_path / "team.token"
    token.write_text(WRONG + "\n")
    with structlog.testing.capture_logs() as logs:
        async with serving(provider_app(), tls) as (url, rec):
            spec = remote_spec(url, tls, token_env=None, token_file=token)
            clock = [100.0]  # the test's health clock: its cool-down never passes
            host = Host(
                [spec], consent=consented(tmp_path, "remote"), health_clock=lambda: clock[0]
            )
            async with host:
                refused = (await host.query_all(query(), 1000)).reports["remote"]
                parked = (await host.query_all(query(), 1000)).reports["remote"]
                clock[0] += 3.0
                (row,) = host.providers_list()
                fixed = tmp_path / "team.token.new"
                fixed.write_text(TOKEN + "\n")
                fixed.replace(token)
                served_now = (await host.query_all(query(), 1000)).reports["remote"]
    # What an operator alerts on, once each, where it happened: parked, then back.
    changes = [e for e in logs if e["event"] in ("provider.parked", "provider.recovered")]
    assert [(e["event"], e.get("refused"), e.get("was")) for e in changes] == [
        ("provider.parked", True, None),
        ("provider.recovered", None, "failed"),
    ]
    assert refused.error_message == (
        f"remote provider refused the credential (HTTP 401): check the token in token_file {token}"
    )
    assert parked.status is LegStatus.UNAUTHORIZED
    # What `hostd status` says meanwhile: the next request, not only the cool-down.
    assert down_state(row) == (
        f"failed 3 s ago: unauthorized: {refused.error_message}; the next request asks "
        "again once its credential changes, else next try in 57 s, or `hostd providers "
        "restart remote --connect` starts it now"
    )
    assert served_now.status is LegStatus.OK, served_now
    assert rec.kinds() == ["handshake", "handshake", "query"]


def _gated(accepted: set[str]) -> Any:
    """The provider app behind a bearer check against ``accepted``, changed by the test."""
    inner = provider_app(token=None)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if auth.removeprefix("Bearer ") not in accepted:
            await fixed_reply(401)(scope, receive, send)
            return
        await inner(scope, receive, send)

    return app


async def test_a_restart_starts_a_refused_provider_at_once_reading_the_variable_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a fixed server and ``providers/restart`` do (or a daemon restarted with the
    fixed variable: the restart reads $VAR again, from the process's environment)."""
    tls = make_tls(tmp_path)
    accepted = {"server-side-token-3e9a"}
    async with serving(_gated(accepted), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=VAR)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            await host.query_all(query(), 1000)
            accepted.add(WRONG)  # the server is fixed: nothing tells the parked provider
            parked = (await host.query_all(query(), 1000)).reports["remote"]
            row = await host.restart_provider("remote")
            monkeypatch.setenv(VAR, TOKEN)
            accepted.clear()
            accepted.add(TOKEN)
            again = await host.restart_provider("remote")
            after = (await host.query_all(query(), 1000)).reports["remote"]
    assert parked.status is LegStatus.UNAUTHORIZED
    assert (row["state"], again["state"]) == ("ready", "ready")
    assert after.status is LegStatus.OK, after
    assert rec.kinds() == ["handshake", "handshake", "handshake", "query"]
    assert [s.headers["authorization"] for s in rec.seen] == [f"Bearer {WRONG}"] * 2 + [
        f"Bearer {TOKEN}"
    ] * 2


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refusal_after_the_handshake_parks_the_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    tls = make_tls(tmp_path)
    monkeypatch.setenv(VAR, TOKEN)  # the handshake passes; the query is refused
    app = after_handshake(fixed_reply(status, b"denied: Bearer " + TOKEN.encode()))
    with structlog.testing.capture_logs() as logs:
        async with serving(app, tls) as (url, rec):
            spec = remote_spec(url, tls, token_env=VAR)
            async with Host([spec], consent=consented(tmp_path, "remote")) as host:
                refused = (await host.query_all(query(), 1000)).reports["remote"]
                parked = (await host.query_all(query(), 1000)).reports["remote"]
                rows = host.providers_list()
    said = f"remote provider refused the credential (HTTP {status}): check the token in ${VAR}"
    assert (refused.status, refused.error_message) == (LegStatus.UNAUTHORIZED, said)
    assert parked.status is LegStatus.UNAUTHORIZED and on_record(said, parked.error_message)
    assert rows[0]["state"] == "failed"
    assert rows[0]["health"]["last_failure"] == f"unauthorized: {said}"
    assert rec.kinds() == ["handshake", "query"]  # parked: the second query never left
    shown = repr([refused, parked]) + json.dumps(rows) + repr(logs)
    assert TOKEN not in shown and "denied" not in shown


async def test_a_server_that_wants_a_credential_none_is_configured_for_says_which_keys(
    tmp_path: Path,
) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, _):
        spec = remote_spec(url, tls, token_env=None)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            report = (await host.query_all(query(), 1000)).reports["remote"]
    assert report.status is LegStatus.UNAUTHORIZED
    assert report.error_message == (
        "remote provider refused the request (HTTP 401): it wants a credential; "
        "set [[provider]] 'remote' token_env or [[provider]] 'remote' token_file"
    )


async def test_an_unset_variable_parks_the_provider_naming_it_before_any_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(VAR)
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=VAR)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            fans = [await host.query_all(query(), 1000) for _ in range(2)]
            rows = host.providers_list()
    said = f"token_env {VAR}: the variable is not set or empty"
    first, parked = (fan.reports["remote"] for fan in fans)
    assert (first.status, first.error_code, first.error_message) == (
        LegStatus.UNAUTHORIZED,
        "credential",
        said,
    )
    assert (parked.status, parked.error_code) == (LegStatus.UNAUTHORIZED, "credential")
    assert on_record(said, parked.error_message), parked.error_message
    assert (rows[0]["state"], rows[0]["health"]["last_failure"]) == (
        "failed",
        f"credential: {said}",
    )
    assert rec.seen == []
