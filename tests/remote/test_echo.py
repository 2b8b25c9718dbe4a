"""A remote server (or a proxy before it) that echoes the bearer token back: in a 200
body that is not JSON, as a reply id, in a broken response header. The token must
appear in no log, error, ``providers/list`` row, composition reply or CLI output (C8);
the failure is still named (``wire``/``transport``, sizes and positions)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import structlog

from hostd.engine import Host, LegStatus, ProviderSpec
from hostd.provider import ProviderServer
from tests.engine._helpers import query
from tests.fixtures.healthy_provider import HealthyProvider
from tests.fixtures.procs import ROOT, marked_env
from tests.remote._servers import (
    TOKEN,
    after_handshake,
    consented,
    make_tls,
    provider_app,
    remote_spec,
    serving,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


def echo(kind: str) -> Any:
    """An app answering 200 with what the request's ``Authorization`` header said."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        auth = dict(scope["headers"]).get(b"authorization", b"")
        body = json.loads((await receive()).get("body") or b"{}")
        if kind == "page":  # a proxy's page quoting the request
            reply = b"<html><pre>Authorization: " + auth + b"</pre></html>"
        elif kind == "jsonrpc_id":
            result = {"frames": [], "truncated": False}
            reply = orjson.dumps({"jsonrpc": "2.0", "id": auth.decode(), "result": result})
        else:  # cgp frames for another id
            result = {"frames": [], "truncated": False}
            reply = orjson.dumps({"type": "frames", "id": auth.decode(), "result": result})
        assert body  # it was a request
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": reply})

    return app


async def _leg(tmp_path: Path, spec: ProviderSpec) -> tuple[Any, list[dict[str, Any]], Any]:
    with structlog.testing.capture_logs() as logs:
        async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
            fan = await host.query_all(query(), 1000)
            rows = host.providers_list()
    return fan.reports[spec.id], rows, logs


@pytest.mark.parametrize(
    ("kind", "binding"),
    [("page", "jsonrpc"), ("page", "cgp"), ("jsonrpc_id", "jsonrpc"), ("cgp_id", "cgp")],
)
async def test_a_token_echoed_in_a_reply_is_never_shown(
    tmp_path: Path, kind: str, binding: str
) -> None:
    tls = make_tls(tmp_path)
    async with serving(after_handshake(echo(kind)), tls) as (url, rec):
        report, rows, logs = await _leg(tmp_path, remote_spec(url, tls, binding=binding))
    assert rec.seen[-1].headers["authorization"] == f"Bearer {TOKEN}"  # it was echoed
    assert (report.status, report.error_code) == (LegStatus.ERROR, "wire"), report
    shown = orjson.dumps(report.to_wire()).decode() + orjson.dumps(rows).decode() + repr(logs)
    assert TOKEN not in shown
    if kind == "page":  # what is wrong, where: sizes and positions only
        assert "not quoted" in (report.error_message or ""), report


async def _raw_server(task_status: anyio.abc.TaskStatus[int]) -> None:
    """Plaintext HTTP on loopback: the handshake answered, then a response whose broken
    header line holds the token the request carried (h11 quotes such a line)."""
    server = ProviderServer(HealthyProvider("remote"))
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    data += await stream.receive()
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(rest) < length:
                    rest += await stream.receive()
                body, data = rest[:length], rest[length:]
                auth = next(
                    line.split(b":", 1)[1].strip()
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"authorization:")
                )
                if b"handshake" in body:
                    reply = await server.handle_line(body) or b""
                    await stream.send(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(reply)}\r\n\r\n".encode()
                        + reply
                    )
                else:
                    await stream.send(b"HTTP/1.1 200 OK\r\n" + auth + b"\r\n\r\n")
                    return

    async with listener:
        await listener.serve(handle)


async def test_a_token_echoed_in_a_broken_header_is_never_shown(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        port = await tg.start(_raw_server)
        spec = remote_spec(f"http://127.0.0.1:{port}/", None)
        report, rows, logs = await _leg(tmp_path, spec)
        tg.cancel_scope.cancel()
    assert (report.status, report.error_code) == (LegStatus.CRASHED, "transport"), report
    assert "RemoteProtocolError" in (report.error_message or "")
    shown = orjson.dumps(report.to_wire()).decode() + orjson.dumps(rows).decode() + repr(logs)
    assert TOKEN not in shown


async def test_the_cli_never_shows_an_echoed_token(tmp_path: Path) -> None:
    """``hostd compose`` (its reply and its summary) and ``hostd providers``, run as a
    user would, against a server echoing the token in every reply."""
    tls = make_tls(tmp_path)
    token_file = tmp_path / "team.token"
    token_file.write_text(TOKEN + "\n")
    (tmp_path / "state").mkdir()
    async with serving(after_handshake(echo("page")), tls) as (url, rec):
        config = tmp_path / "hostd.toml"
        config.write_text(
            f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
            f'[[provider]]\nid = "team"\nurl = "{url}"\nca_file = "{tls.ca_file}"\n'
            f'token_file = "{token_file}"\ntimeout_ms = 60000\n'
        )
        consented(tmp_path / "state", "team", url=url).close()
        base = [sys.executable, "-m", "hostd", "--config", str(config)]
        env = {**marked_env(), "PATH": "/usr/bin:/bin"}
        outputs = []
        for args in (["compose", "the retry policy", "--json"], ["compose", "x"], ["providers"]):
            with anyio.fail_after(120):  # a hang guard
                done = await anyio.run_process([*base, *args], cwd=ROOT, env=env, check=False)
            outputs.append(done.stdout.decode() + done.stderr.decode())
    assert len(rec.seen) >= 2 and rec.seen[-1].headers["authorization"] == f"Bearer {TOKEN}"
    assert "team: error: response body (" in outputs[1], outputs[1]
    for shown in outputs:
        assert TOKEN not in shown


async def test_a_key_in_the_urls_query_is_sent_but_never_shown(tmp_path: Path) -> None:
    """Some servers take their key in the query: it goes to the server, and nowhere else
    (``providers/list``, the endpoint's repr, the log)."""
    tls = make_tls(tmp_path)
    async with serving(provider_app(), tls) as (url, rec):
        spec = remote_spec(f"{url.rstrip('/')}/?api_key=q-{TOKEN}", tls)
        with structlog.testing.capture_logs() as logs:
            async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
                fan = await host.query_all(query(), 1000)
                rows = host.providers_list()
                shown = repr(host.pool.launcher._remotes[spec.id])
    assert fan.reports[spec.id].status is LegStatus.OK
    assert rec.seen and all(s.kind in ("handshake", "query") for s in rec.seen)
    (row,) = rows
    assert row["remote"]["url"] == url.rstrip("/") + "/"
    for text in (json.dumps(rows), shown, repr(logs)):
        assert f"q-{TOKEN}" not in text and "api_key" not in text
