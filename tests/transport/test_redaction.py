"""A provider's secret never leaves the host, even when the provider echoes it (C8), and a
provider that fails says why: its exit status and the last lines of its stderr.

Real child processes on both pipe bindings, given a secret in a secret-named ``env``
entry, echo it on stderr, in an error reply, in a broken line, as a reply id and in the
traceback they die with. Nothing of it may reach the log, a leg's report,
``providers/list`` or the CLI's output; the failure still names the exit status and the
provider's last stderr line, with the secret shown as ``<redacted>``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import structlog

from hostd.engine import Host, LegStatus, ProviderSpec, RestartPolicy
from hostd.transport import Redactor, StderrPolicy, printable, secret_env_values
from hostd.transport.process._stderr import TAIL_SHOWN_BYTES, StderrPump
from tests.engine._helpers import healthy, query
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio

SECRET = "tok-9f2c71d0e4b8a5"


def echoing(mode: str, binding: str, pid: str = "echo") -> ProviderSpec:
    return ProviderSpec(
        pid,
        python("tests.fixtures.echoing_provider", mode, "--binding", binding),
        binding=binding,
        env=marked_env({"API_TOKEN": SECRET}),
        cwd=str(ROOT),
        timeout_ms=30_000,  # a hang guard: every mode answers or dies at once
    )


async def _fan_out(spec: ProviderSpec) -> tuple[Any, list[dict[str, Any]], list[Any]]:
    with structlog.testing.capture_logs() as logs:
        async with Host(
            [spec, healthy("healthy")],
            start="boot",
            grace_period_s=2.0,
            restart_policy=RestartPolicy(base_delay_s=0.01),
        ) as host:
            with anyio.fail_after(120):  # a hang guard
                fan = await host.query_all(query(), 1000)
            rows = host.providers_list()
    return fan, rows, logs


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
@pytest.mark.parametrize("mode", ["error", "garbage", "reply_id", "crash", "start_crash"])
async def test_a_secret_the_provider_echoes_appears_nowhere(binding: str, mode: str) -> None:
    fan, rows, logs = await _fan_out(echoing(mode, binding))
    report = fan.reports["echo"]
    assert report.status in (LegStatus.ERROR, LegStatus.CRASHED), report
    assert fan.reports["healthy"].status is LegStatus.OK  # it costs its own leg only
    shown = orjson.dumps([r.to_wire() for r in fan.reports.values()]).decode()
    shown += orjson.dumps(rows).decode() + repr(logs)
    assert SECRET not in shown
    # Its own log still reaches ours, scrubbed: the line is there, the secret is not.
    lines = [e["line"] for e in logs if e["event"] == "provider.stderr"]
    assert "starting with API_TOKEN=<redacted>" in lines, lines


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
@pytest.mark.parametrize("mode", ["crash", "start_crash"])
async def test_a_provider_that_dies_says_its_exit_status_and_last_words(
    binding: str, mode: str
) -> None:
    fan, rows, _ = await _fan_out(echoing(mode, binding))
    report = fan.reports["echo"]
    assert report.status is LegStatus.CRASHED
    message = report.error_message or ""
    assert "exited with status 3" in message, message
    assert "RuntimeError: the token <redacted> was refused" in message, message
    assert "\n" not in message and len(message) < 600, message
    assert "Traceback" not in message  # its header says nothing: its frame and error do
    (row,) = [r for r in rows if r["id"] == "echo"]
    assert "RuntimeError: the token <redacted> was refused" in row["health"]["last_failure"]
    # Its last lines as they came, as a field of their own, scrubbed too.
    tail = report.stderr_tail or ""
    assert tail.startswith("starting with API_TOKEN=<redacted> | "), tail
    assert tail.endswith(
        ' |   File "echoing_provider.py", line 1, in <module> | '
        "RuntimeError: the token <redacted> was refused"
    ), tail
    assert row["health"]["stderr_tail"] == tail


def test_the_cli_shows_why_a_provider_died_and_never_its_secret(tmp_path: Path) -> None:
    words = [sys.executable, "-m", "tests.fixtures.echoing_provider", "start_crash"]
    env = marked_env({"API_TOKEN": SECRET})
    table = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "echo"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        f"env = {table}\ntimeout_ms = 60000\n"
    )
    compose = run_hostd("--config", str(config), "compose", "the retry policy")
    providers = run_hostd("--config", str(config), "providers")
    for done in (compose, providers):
        assert SECRET not in done.stdout + done.stderr
    assert "echo: crashed" in compose.stderr, compose.stderr
    for done in (compose, providers):
        assert "exited with status 3" in done.stderr, done.stderr
        assert "RuntimeError: the token <redacted> was refused" in done.stderr, done.stderr
    # Under the failure, its stderr's last lines, one a line.
    lines = providers.stderr.splitlines()
    at = lines.index("hostd: echo: its stderr ended with:")
    assert lines[at + 1 : at + 4] == [
        "hostd:     starting with API_TOKEN=<redacted>",
        'hostd:       File "echoing_provider.py", line 1, in <module>',
        "hostd:     RuntimeError: the token <redacted> was refused",
    ], providers.stderr


def test_the_redactor_scrubs_every_secret_and_only_secrets() -> None:
    env = {"GITHUB_TOKEN": "ghp_abcdef123", "API_KEY": "key-123456", "ROOT_DIR": "/srv/data"}
    env |= {"KEYBOARD": "us-intl-layout", "DB_PASSWORD": "hunter22", "SHORT_TOKEN": "abc"}
    values = secret_env_values(env)
    assert sorted(values) == sorted(["ghp_abcdef123", "key-123456", "hunter22", "abc"])
    redactor = Redactor(values)
    text = "ghp_abcdef123 key-123456 hunter22 /srv/data us-intl-layout abc"
    # Too short a secret is not scrubbed: it would mangle words and hide nothing.
    assert redactor.text(text) == "<redacted> <redacted> <redacted> /srv/data us-intl-layout abc"
    redactor.add("ghp_abcdef123-and-more")  # the longer one is replaced whole
    assert redactor.text("x ghp_abcdef123-and-more y") == "x <redacted> y"


def test_printable_neutralises_control_characters_and_joins_lines() -> None:
    assert printable("a\x1b[31mred\x07\r\nnext\u2028line\x00") == "a?[31mred? | next?line?"


async def test_the_stderr_tail_is_bounded_one_line_and_never_half_a_secret() -> None:
    secret = "s" * 40 + "-secret-tail"
    pump = StderrPump("p", StderrPolicy(), redactor=Redactor([secret]))
    # A long stream: the kept tail starts mid-line, inside the secret.
    pump.feed(("x" * 5000 + f" {secret}\n").encode())
    pump.feed(b"\x1b[2Jcleared\r\n" + "é".encode() * 400 + b"\nImportError: no module\n")
    tail = pump.tail()
    assert "secret-tail" not in tail and "\x1b" not in tail and "\n" not in tail
    assert tail.endswith("ImportError: no module")
    assert len(tail.encode()) <= TAIL_SHOWN_BYTES
    short = StderrPump("q", StderrPolicy(), redactor=Redactor([secret]))
    short.feed(f"token {secret} refused\n".encode())
    assert short.tail() == "token <redacted> refused"
