"""A remote provider is one more end of a leg: TLS with a CA made here, the bearer token,
the consent gate (C4), composed beside a local child provider, verify over the same
binding, a remote's sources not re-read by default, backoff after a failure."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import orjson
import pytest

from hostd.cli._daemon import _provider_line
from hostd.engine import Host, LegStatus, RestartPolicy
from hostd.protocol import (
    Capabilities,
    ContextFrame,
    DataFlow,
    FrameIdentity,
    FrameVerdict,
    ProviderInfo,
)
from hostd.provider import Provider, file_provenance, make_frame
from tests.engine._helpers import healthy, query
from tests.fixtures.healthy_provider import HealthyProvider
from tests.fixtures.log_events import events
from tests.remote._servers import (
    TOKEN,
    consented,
    make_tls,
    provider_app,
    remote_spec,
    serving,
)

pytestmark = pytest.mark.anyio

BINDINGS = ["jsonrpc", "cgp"]


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_remote_https_provider_answers_a_leg(tmp_path: Path, binding: str) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, rec):
        spec = remote_spec(url, tls, binding=binding)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            fan = await host.query_all(query(), 1000)
    report = fan.reports["remote"]
    assert report.status is LegStatus.OK, report
    assert [f.id for _, f in fan.accepted] == ["remote:0", "remote:1", "remote:2"]
    assert rec.kinds() == ["handshake", "query"]
    # C8: the credential goes as a bearer header, to the configured URL only.
    assert {s.headers["authorization"] for s in rec.seen} == {f"Bearer {TOKEN}"}
    assert {s.path for s in rec.seen} == {"/"}


async def test_a_remote_and_a_local_provider_compose_together(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, _):
        specs = [remote_spec(url, tls), healthy("local")]
        async with Host(specs, consent=consented(tmp_path, "remote")) as host:
            fan = await host.query_all(query(), 2000)
    assert {pid: r.status for pid, r in fan.reports.items()} == {
        "local": LegStatus.OK,
        "remote": LegStatus.OK,
    }
    assert sorted({pid for pid, _ in fan.accepted}) == ["local", "remote"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_no_query_leaves_before_consent_even_from_a_provider_claiming_local(
    tmp_path: Path, binding: str
) -> None:
    """C4: the provider says egress false; the transport knows better."""
    tls = make_tls(tmp_path)
    local_claim = HealthyProvider("remote")
    assert local_claim.info.data_flow.egress is False
    async with serving(provider_app(local_claim), tls) as (url, rec):
        spec = remote_spec(url, tls, binding=binding)
        store = consented(tmp_path)
        async with Host([spec], consent=store) as host:
            fan = await host.query_all(query(), 1000)
            assert fan.reports["remote"].status is LegStatus.NO_CONSENT
            assert fan.reports["remote"].missing_scopes == ("egress",)
            assert "query" not in rec.kinds()
            again = await host.query_all(query(), 1000)  # now planned from the live ack
            assert again.reports["remote"].status is LegStatus.NO_CONSENT
            assert "query" not in rec.kinds()
            store.grant("remote", "egress", "test")
            granted = await host.query_all(query(), 1000)
    assert granted.reports["remote"].status is LegStatus.OK
    assert rec.kinds().count("query") == 1


async def test_without_any_gate_a_remote_provider_is_never_queried(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, rec):
        async with Host([remote_spec(url, tls)]) as host:
            fan = await host.query_all(query(), 1000)
    assert fan.reports["remote"].status is LegStatus.NO_CONSENT
    assert "query" not in rec.kinds()


@pytest.mark.parametrize("binding", BINDINGS)
async def test_verify_goes_over_the_same_binding(tmp_path: Path, binding: str) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, rec):
        spec = remote_spec(url, tls, binding=binding)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            await host.query_all(query(), 1000, session="s1")
            fan = await host.query_all(query(), 1000, session="s1")
    assert "verify" in rec.kinds()
    assert fan.reports["remote"].status is LegStatus.OK


class _FileFrames(Provider):
    """Frames whose ``file`` provenance names a path the test also writes locally."""

    def __init__(self, path: Path, claimed: bytes) -> None:
        self.info = ProviderInfo(name="files-elsewhere", version="1", data_flow=DataFlow())
        self.path = path
        self.claimed = claimed

    async def query(self, q: object) -> list[ContextFrame]:
        text = self.claimed.decode()
        return [
            make_frame(
                id="f:1",
                kind="snippet",
                title="a.txt",
                content=text,
                citation_label="a.txt",
                uri=self.path.as_uri(),
                provenance=[file_provenance(self.path.as_uri(), self.claimed, "L1")],
            )
        ]


async def test_a_remote_providers_file_sources_are_not_re_read_under_host_roots(
    tmp_path: Path,
) -> None:
    """A remote path names the remote machine's file: the host's roots do not cover it, so
    a local file at the same path that differs never excludes the frame (nor is the
    frame's citation taken as checked)."""
    tls = make_tls(tmp_path)
    root = tmp_path / "repo"
    root.mkdir()
    local = root / "a.txt"
    local.write_text("the local file differs\n")
    app = provider_app(_FileFrames(local, b"the remote file's line\n"))
    async with serving(app, tls) as (url, _):
        spec = remote_spec(url, tls)
        host = Host([spec], consent=consented(tmp_path, "remote"), host_roots=[str(root)])
        async with host:
            fan = await host.query_all(query(), 1000)
    assert [f.id for _, f in fan.accepted] == ["f:1"], fan.excluded
    state = next(iter(fan.verification.values()))
    # Kept, its inline digest checked, but its citation not: fenced verified="no".
    assert state == {"state": "unverifiable", "reason": "no_trusted_root", "content_checked": True}


async def test_a_failed_remote_is_handshaken_again_after_its_backoff(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    inner = provider_app()
    fail = {"next": False}

    async def flaky(scope, receive, send) -> None:
        if fail["next"]:
            fail["next"] = False
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"busy"})
            return
        await inner(scope, receive, send)

    # A long-running host's: no request waits for the check of a server that failed
    # (it fails at once meanwhile); the check runs on its own after the backoff.
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with serving(flaky, tls) as (url, rec):
            policy = RestartPolicy(base_delay_s=0.001, max_delay_s=0.001)
            spec = remote_spec(url, tls)
            async with Host(
                [spec],
                consent=consented(tmp_path, "remote"),
                restart_policy=policy,
                restart_idle=True,
            ) as host:
                first = (await host.query_all(query(), 1000)).reports["remote"]
                assert first.status is LegStatus.OK
                fail["next"] = True
                broken = await host.query_all(query(), 1000)
                await seen.wait("provider.recovered", 1)
                healed = await host.query_all(query(), 1000)
                (row,) = host.providers_list()
    assert broken.reports["remote"].status is LegStatus.CRASHED
    assert broken.reports["remote"].error_code == "transport"
    assert broken.reports["remote"].error_message == "HTTP 503"
    assert healed.reports["remote"].status is LegStatus.OK
    assert rec.kinds() == ["handshake", "query", "query", "handshake", "query"]
    # `hostd status` speaks of its server: a check, a failed request, never a process's
    # restart or a query it crashed during.
    line = _provider_line(row)
    said = r"ready.*; checked again 1 time, 1 failed request, last failure \d+ s ago"
    assert re.fullmatch(said, line), line
    assert (row["health"]["restarts"], row["health"]["crashes"]) == (1, 1)


async def test_providers_list_shows_the_url_and_a_redacted_credential(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, _):
        async with Host([remote_spec(url, tls)], consent=consented(tmp_path, "remote")) as host:
            before = host.providers_list()
            await host.query_all(query(), 1000)
            after = host.providers_list()
    for rows in (before, after):
        text = orjson.dumps(rows).decode()
        assert TOKEN not in text
        assert rows[0]["remote"]["url"] == url
        assert rows[0]["remote"]["credential"] == "<redacted>"
    assert after[0]["info"]["data_flow"]["egress"] is True  # C4, as the gate saw it


class _Overflowing(HealthyProvider):
    """Answers more frames than asked (B4): the leg audit quarantines the reply."""

    async def query(self, query):
        wide = query.model_copy(update={"max_frames": 50})
        return await super().query(wide)


async def test_a_remote_reply_goes_through_the_same_leg_audit(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(provider_app(_Overflowing("remote", frames=6)), tls) as (url, _):
        async with Host([remote_spec(url, tls)], consent=consented(tmp_path, "remote")) as host:
            fan = await host.query_all(query(max_frames=2), 1000)
    report = fan.reports["remote"]
    assert report.status is LegStatus.QUARANTINED
    assert "B4" in {v.rule for v in report.violations}
    assert fan.accepted == []


class _Named(Provider):
    """Serves three frames and vouches in ``verify`` only for identities under its own
    handshake name (the one ``provider_id`` the envelope wire lets it know)."""

    def __init__(self) -> None:
        self.info = ProviderInfo(name="named-remote", version="1", data_flow=DataFlow())
        self.capabilities = Capabilities(verify=True)
        self.frames = [
            make_frame(
                id=f"n:{i}", kind="doc", title=f"t{i}", content=f"c{i}", citation_label=f"n{i}"
            )
            for i in range(3)
        ]

    async def query(self, q: object) -> list[ContextFrame]:
        return self.frames

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        served = {f.id: f.content_digest for f in self.frames}
        return [
            FrameVerdict(
                frame=f,
                status="valid"
                if f.provider_id == self.info.name and served.get(f.frame_id) == f.content_digest
                else "unknown",
            )
            for f in frames
        ]


async def test_cgp_verify_over_https_goes_under_the_handshake_name(tmp_path: Path) -> None:
    # Config id "remote", handshake name "named-remote": as over a pipe, verify reaches
    # the provider under the name it knows itself by, and the frames stay "remote"'s.
    tls = make_tls(tmp_path)
    async with serving(provider_app(_Named()), tls) as (url, rec):
        spec = remote_spec(url, tls, binding="cgp")
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            first = await host.query_all(query(), 1000, session="s")
            second = await host.query_all(query(), 1000, session="s")
    assert len(first.accepted) == 3
    sent = [orjson.loads(s.body) for s in rec.seen if s.kind == "verify"]
    assert {f["provider_id"] for m in sent for f in m["request"]["frames"]} == {"named-remote"}
    assert second.figures["reused"] == 3 and second.figures["unknown"] == 0
    assert {v["state"] for v in second.verification.values()} == {"provider_verified"}
    assert {fid.provider_id for fid in second.verification} == {"remote"}
