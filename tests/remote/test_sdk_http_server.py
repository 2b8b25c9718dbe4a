"""A provider built with the published ``contextgraph-sdk``, served over HTTP, reached by a
real daemon: its error reply behind an error status is an ``error`` leg, not a crash,
and its envelope wire is named when the config asks for JSON-RPC.

The server is a real child process on loopback (``tests.fixtures.sdk_http_provider``:
the SDK's own WSGI app, or the TypeScript SDK's statuses on the SDK's state machine,
or a JSON-RPC endpoint answering errors with ``500``); the daemon is ``hostd serve
--stdio`` (``Client.spawn``), its consent granted by ``hostd consent grant``, and
check-provider is ``python -m hostd``. Deadlines are hang guards, never what is tested.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hostd.client import Client, ComposeResult
from hostd.engine import Host, LegStatus, ProviderSpec
from tests.engine._helpers import query
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT, marked_env, python
from tests.fixtures.sdk_http_provider import SECRET_TEXT
from tests.remote._servers import consented

#: A hang guard for every call, not the thing tested.
_GUARD_MS = 60_000
#: One more than the failures in a row that park a provider (``RestartPolicy``).
_TIMES = 6
_CGP_HINT = (
    "a provider built with a CGP SDK (contextgraph-sdk) speaks the envelope wire: "
    'set binding = "cgp" (check-provider: --binding cgp)'
)


@contextmanager
def sdk_server(mode: str) -> Iterator[str]:
    """``python -m tests.fixtures.sdk_http_provider MODE``; yields the URL it announces."""
    proc = subprocess.Popen(
        python("tests.fixtures.sdk_http_provider", mode),
        cwd=ROOT,
        env=marked_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # wsgiref's traceback of a query that raised
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # EOF ends it should the child fail to start
        assert line.startswith("serving http://127.0.0.1:"), line
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


def _config(tmp_path: Path, url: str, binding: str) -> Path:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "sdk"\nurl = "{url}"\nbinding = "{binding}"\n'
        f"timeout_ms = {_GUARD_MS}\n"
    )
    granted = run_hostd("--config", str(config), "consent", "grant", "sdk", "egress")
    assert granted.returncode == 0, granted.stderr
    return config


def _leg(result: ComposeResult) -> Any:
    (leg,) = result.providers
    return leg


def _row(client: Client) -> dict[str, Any]:
    (row,) = client.providers()
    return row


@pytest.mark.parametrize(("mode", "binding"), [("ts", "cgp"), ("jsonrpc", "jsonrpc")])
def test_a_query_that_raises_is_an_error_leg_every_time_and_the_provider_stays_ready(
    tmp_path: Path, mode: str, binding: str
) -> None:
    """The server answers HTTP 500 with its binding's error reply (code ``internal``):
    six times an ``error`` leg with that code, no crash counted, never parked, and the
    next good query is served by the same connection (one handshake)."""
    with sdk_server(mode) as url:
        config = _config(tmp_path, url, binding)
        env = marked_env({"PATH": "/usr/bin:/bin"})
        with Client.spawn(config, env=env, cwd=ROOT) as client:
            booms = [_leg(client.compose(f"boom {i}", budget=500)) for i in range(_TIMES)]
            after_booms = _row(client)
            good = _leg(client.compose("retry backoff", budget=500))
            after_good = _row(client)
    for leg in booms:
        assert (leg.status, leg.error and leg.error.code) == ("error", "internal"), leg
        assert leg.error is not None and "provider answered internal" in leg.error.message
        assert SECRET_TEXT not in leg.error.message  # the peer's text is never quoted
    health = after_booms["health"]
    assert after_booms["state"] == "ready", after_booms
    assert (health["crashes"], health["consecutive_failures"]) == (0, 0), health
    assert (health["errors"], health["starts"]) == (_TIMES, 1), health
    assert good.status == "ok", good
    assert good.frames_accepted > 0
    assert after_good["state"] == "ready"
    assert after_good["health"]["starts"] == 1  # no handshake again: nothing broke


def test_the_sdks_own_server_under_jsonrpc_names_the_cgp_binding_in_check_provider(
    tmp_path: Path,
) -> None:
    """The SDK answers a JSON-RPC handshake 204 with no body: check-provider's handshake
    row says to use ``--binding cgp``, in one line; with it, the handshake passes."""
    with sdk_server("sdk") as url:
        told = run_hostd("check-provider", "--json", "--timeout-ms", str(_GUARD_MS), "--url", url)
        fixed = run_hostd(
            "check-provider",
            "--json",
            "--timeout-ms",
            str(_GUARD_MS),
            "--url",
            url,
            "--binding",
            "cgp",
        )
    assert told.returncode != 0, told.stdout
    rows = {r["check"]: r for r in json.loads(told.stdout)}
    detail = rows["handshake"]["detail"]
    assert rows["handshake"]["passed"] is False, rows["handshake"]
    assert "empty response body where a reply was expected" in detail, detail
    assert _CGP_HINT in detail and "\n" not in detail, detail
    assert "Traceback" not in told.stderr
    fixed_rows = {r["check"]: r for r in json.loads(fixed.stdout)}
    assert fixed_rows["handshake"]["passed"] is True, fixed_rows["handshake"]


@pytest.mark.anyio
async def test_a_daemon_leg_to_the_sdks_server_under_jsonrpc_names_the_cgp_binding(
    tmp_path: Path,
) -> None:
    with sdk_server("sdk") as url:
        spec = ProviderSpec("sdk", url=url, timeout_ms=_GUARD_MS)  # binding: jsonrpc
        async with Host([spec], consent=consented(tmp_path, "sdk")) as host:
            fan = await host.query_all(query(), 1000)
    report = fan.reports["sdk"]
    assert report.status is LegStatus.ERROR, report
    assert report.error_code == "wire", report
    assert report.error_message is not None and _CGP_HINT in report.error_message


@pytest.mark.anyio
async def test_the_sdks_own_server_a_coded_refusal_is_its_code_and_a_text_500_stays_transport(
    tmp_path: Path,
) -> None:
    """The SDK's WSGI app sends a ``ProviderError`` as a ``200`` envelope (its code), and
    leaves a query that raised to ``wsgiref``, whose ``500`` is a text page: no error
    reply to read, so a transport failure, as before."""
    with sdk_server("sdk") as url:
        spec = ProviderSpec("sdk", url=url, binding="cgp", timeout_ms=_GUARD_MS)
        async with Host([spec], consent=consented(tmp_path, "sdk")) as host:
            refused = await host.query_all(query(goal="refuse:budget_unsatisfiable"), 1000)
            boom = await host.query_all(query(goal="boom"), 1000)
    report = refused.reports["sdk"]
    assert (report.status, report.error_code) == (LegStatus.ERROR, "budget_unsatisfiable")
    report = boom.reports["sdk"]
    assert report.status is LegStatus.CRASHED, report
    assert (report.error_code, report.error_message) == ("transport", "HTTP 500")
