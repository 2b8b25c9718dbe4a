"""A remote provider's transport failure names what to fix, against a real loopback server.

A 404 names the url's path; an ``http://`` url whose server closes every connection
unanswered (a TLS server reading a plain request) suggests ``https://``; an HTML page
where a reply was expected is said to be one (a proxy's error page), with its status;
an empty body under ``cgp`` (a JSON-RPC server's answer to what it reads as a
notification) names the binding to set. Nothing the server wrote is quoted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.engine import Host, LegReport, LegStatus
from tests.engine._helpers import query
from tests.remote._servers import (
    TOKEN,
    App,
    after_handshake,
    consented,
    fixed_reply,
    make_tls,
    provider_app,
    remote_spec,
    serving,
)

pytestmark = pytest.mark.anyio

#: In every page the server writes; never in anything hostd shows.
SECRET = "page-words-93be1f"
_HTML = (b"content-type", b"text/html; charset=utf-8")
_PAGE = f"<html><body><h1>Bad gateway</h1>{SECRET} {TOKEN}</body></html>".encode()


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


async def _leg(
    tmp_path: Path, app: App, *, scheme: str = "https", path: str = "", binding: str = "jsonrpc"
) -> LegReport:
    tls = make_tls(tmp_path)
    async with serving(app, tls) as (url, _):
        url = url.replace("https://", f"{scheme}://") + path
        spec = remote_spec(url, tls, binding=binding)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            return (await host.query_all(query(), 1000)).reports["remote"]


async def test_a_404_names_the_urls_path(tmp_path: Path) -> None:
    report = await _leg(tmp_path, fixed_reply(404, b"not found"), path="v1/cgp")
    assert report.status is LegStatus.CRASHED, report
    assert report.error_message == (
        "HTTP 404: the server has no such path: check the url's path (/v1/cgp)"
    )


async def test_an_http_url_to_a_tls_server_suggests_https(tmp_path: Path) -> None:
    """The TLS server reads the plain request as a broken handshake and closes: twice."""
    report = await _leg(tmp_path, provider_app(), scheme="http")
    message = report.error_message or ""
    assert report.status is LegStatus.CRASHED, report
    assert message.endswith(
        "the server closed the connection without answering, twice; the url is http://: "
        "if the server speaks TLS on that port, use https://"
    ), message


@pytest.mark.parametrize("status", [200, 502])
async def test_an_html_page_is_said_to_be_one(tmp_path: Path, status: int) -> None:
    app = after_handshake(fixed_reply(status, _PAGE, (_HTML,)))
    report = await _leg(tmp_path, app)
    message = report.error_message or ""
    assert message == f"the server answered an HTML page (status {status}), not JSON"
    assert report.status in (LegStatus.CRASHED, LegStatus.ERROR), report


async def test_an_empty_204_under_cgp_names_the_jsonrpc_binding(tmp_path: Path) -> None:
    report = await _leg(tmp_path, after_handshake(fixed_reply(204)), binding="cgp")
    assert (report.status, report.error_code) == (LegStatus.ERROR, "wire"), report
    assert report.error_message == (
        "empty response body where a reply was expected; an empty body is a JSON-RPC "
        'server\'s answer to what it reads as a notification: set binding = "jsonrpc" '
        "(check-provider: --binding jsonrpc)"
    )
