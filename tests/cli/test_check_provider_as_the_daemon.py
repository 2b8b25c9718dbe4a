"""``hostd check-provider`` judges a provider the way the daemon will: it runs the command
as ``hostd.toml`` would (``python`` is hostd's interpreter, the daemon's scrubbed
environment), says why a provider that exited did (its exit status and the last lines
of its stderr, scrubbed of its secrets), and holds each call to the daemon's deadline.

Every provider here is a real child process over real pipes; what times out is a
provider that never answers, so each verdict follows from an event, not a race.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd.cli._checks import CHECKS, check_provider
from tests.fixtures.cli import check_rows, run_hostd
from tests.fixtures.procs import ROOT


def _json(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    done = run_hostd("check-provider", "--json", *args)
    assert done.stdout, done.stderr[-2000:]
    return done, {r["check"]: r for r in json.loads(done.stdout)}


# -- what a provider that exits says about it ----------------------------------------------


def test_a_provider_failing_on_import_shows_its_exit_status_and_error() -> None:
    done, checks = _json("--", "python", "-c", "import hostd_check_no_such_module")
    assert done.returncode == 1
    assert list(checks) == list(CHECKS)
    assert all(r["detail"] == "not run: the handshake failed" for r in list(checks.values())[1:])
    detail = checks["handshake"]["detail"]
    # The daemon's own words for the same crash (ChildProcess.failure_report).
    # Which end of the pipes the host finds closed first (the handshake's write, or
    # the read) is the scheduler's choice; what follows it is the same either way.
    ended = r"provider closed its (output|input); exited with status 1; stderr: "
    assert re.match(ended, detail), detail
    assert "ModuleNotFoundError: No module named 'hostd_check_no_such_module'" in detail
    assert "Traceback (most recent call last)" not in detail  # the tail leaves its header out


def test_a_provider_exiting_mid_query_shows_its_status_on_that_check() -> None:
    done, checks = _json("--", "python", "-m", "tests.fixtures.adversarial_provider", "crash")
    assert done.returncode == 1
    assert checks["handshake"]["passed"]
    assert checks["query"]["detail"] == "provider closed mid-line; exited with status 3"
    assert checks["shutdown"]["detail"] == "not run: the provider had already exited"


def test_a_provider_exiting_after_its_start_quotes_its_stderr_as_its_last_lines() -> None:
    # Its ready line is all it wrote: the check it ended on quotes it as the daemon does,
    # as what its stderr ended with, not as a failed start's cause.
    done, checks = _json(
        "--", "python", "-m", "tests.fixtures.adversarial_provider", "exit_after_query"
    )
    assert done.returncode == 1
    assert checks["handshake"]["passed"] and checks["query"]["passed"], checks
    detail = checks["budget honesty"]["detail"]  # the next check: it met the exit
    assert detail.endswith("; exited with status 1; its stderr's last lines: serving on stdio")


@pytest.mark.anyio
async def test_its_stderr_is_scrubbed_of_its_secrets_as_the_daemon_scrubs_it() -> None:
    secret = "tok-3f9a27c1d84e"
    script = "import os, sys; sys.exit('auth failed with ' + os.environ['NOTES_API_TOKEN'])"
    checked = await check_provider(
        [sys.executable, "-c", script], env={"NOTES_API_TOKEN": secret}, cwd=str(ROOT)
    )
    handshake = checked.results[0]
    assert not handshake.passed
    # The provider got its own env entry (as [[provider]] env) and said it: scrubbed.
    assert handshake.detail.endswith("exited with status 1; stderr: auth failed with <redacted>")
    assert secret not in handshake.detail


#: A provider that says, and exits with, the MISTAKE it was given (``none``: not given).
SAYS_ITS_ENV = "import os, sys; sys.exit('MISTAKE=' + os.environ.get('MISTAKE', 'none'))"


def test_env_gives_the_provider_a_variable_the_scrubbed_environment_leaves_out() -> None:
    shell = {**os.environ, "MISTAKE": "from-the-shell"}
    done, checks = _json("--env", "MISTAKE=slow", "--", "python", "-c", SAYS_ITS_ENV)
    assert checks["handshake"]["detail"].endswith("stderr: MISTAKE=slow"), checks["handshake"]
    # Set in the shell alone, it does not reach the provider: the daemon's environment.
    done = run_hostd("check-provider", "--json", "--", "python", "-c", SAYS_ITS_ENV, env=shell)
    detail = {r["check"]: r for r in json.loads(done.stdout)}["handshake"]["detail"]
    assert detail.endswith("stderr: MISTAKE=none"), detail
    # The table's header names what --env gave, by name only.
    table = run_hostd("check-provider", "--env", "MISTAKE=slow", "--", "python", "-c", SAYS_ITS_ENV)
    (said,) = [x for x in table.stdout.splitlines() if x.startswith("in the daemon's environment")]
    assert said.endswith("; and --env MISTAKE"), said


def test_env_is_refused_when_it_is_not_name_equals_value() -> None:
    done = run_hostd("check-provider", "--env", "MISTAKE", "--", "python", "-c", SAYS_ITS_ENV)
    assert done.returncode == 2
    assert "--env: not NAME=VALUE" in done.stderr, done.stderr


#: A provider that answers its handshake a second after it reads it, then exits.
SLOW_ACK = (
    "import json, sys, time\n"
    "req = json.loads(sys.stdin.readline())\n"
    "time.sleep(1.0)\n"
    "ack = {'protocol_version': 'contextgraph/1.0-draft', 'capabilities': {},\n"
    "       'provider': {'name': 'slow', 'version': '1', 'data_flow': {'reads': True}}}\n"
    "print(json.dumps({'jsonrpc': '2.0', 'id': req['id'], 'result': ack}), flush=True)\n"
)


def test_the_handshake_row_says_how_long_the_reply_took() -> None:
    done, checks = _json("--", "python", "-c", SLOW_ACK)
    handshake = checks["handshake"]
    assert handshake["passed"], handshake
    said = re.fullmatch(
        r"slow 1, contextgraph/1.0-draft; answered in (\d+) ms", handshake["detail"]
    )
    assert said is not None, handshake
    # Counted from the handshake sent: at least the second the provider waited.
    assert int(said.group(1)) >= 1000, handshake


def test_a_flooding_stderr_is_drained_and_its_last_lines_are_shown() -> None:
    # 2 MB on stderr before it reads a line: undrained, it would block on a full pipe
    # and never answer the handshake.
    done, checks = _json(
        "--", "python", "-m", "tests.fixtures.adversarial_provider", "stderr_flood"
    )
    assert checks["handshake"]["passed"], checks
    assert not checks["kinds filter"]["passed"]  # it ignores the kinds filter (Q1)
    # A check failed while it ran: its stderr's last lines, on stderr beside the JSON.
    (said,) = [line for line in done.stderr.splitlines() if "stderr ended with" in line]
    # The malformed-input check ran after the failure: the tail says its last lines may be
    # about the bad requests it sent on purpose.
    assert said.startswith("the provider's stderr ended with (the malformed-input check came")
    assert said.endswith("noise line 19999 " + "n" * 100), said[-200:]


# -- the command and environment the daemon would give it ------------------------------


def test_python_is_hostd_s_interpreter_not_the_one_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    impostor = bin_dir / "python"
    impostor.write_text("#!/bin/sh\necho 'not the interpreter hostd runs on' >&2\nexit 7\n")
    impostor.chmod(0o755)
    # hostd installed in a venv that is not on PATH; PATH has another "python".
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    done = run_hostd(
        "check-provider", "--", "python", "-m", "tests.fixtures.healthy_provider", env=env
    )
    rows = check_rows(done.stdout)
    assert rows["handshake"].startswith("pass"), done.stdout + done.stderr
    query = (
        r"pass\s+3 valid frame\(s\) costing \d+ of max_tokens 400 in \d+ ms; "
        r"top: 'healthy #0', 'healthy #1', 'healthy #2'"
    )
    assert re.fullmatch(query, rows["query"]), rows["query"]
    # And it says what it ran, and where.
    assert done.stdout.splitlines()[0] == (
        f"ran {sys.executable} -m tests.fixtures.healthy_provider "
        f"(in {ROOT}; 'python' is hostd's own interpreter, as in hostd.toml)"
    ), done.stdout


def test_the_provider_gets_the_daemon_s_environment_not_the_caller_s() -> None:
    # PYTHONUNBUFFERED in a user's shell hides a provider's buffering bug the daemon hits.
    script = (
        "import os, sys; sys.exit('unbuffered=%s leak=%s path=%s' % tuple("
        "os.environ.get(k) is not None for k in ('PYTHONUNBUFFERED', 'HOSTD_CHECK_LEAK', 'PATH')))"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOSTD_CHECK_LEAK": "yes"}
    done = run_hostd("check-provider", "--json", "--", "python", "-c", script, env=env)
    handshake = json.loads(done.stdout)[0]
    assert handshake["detail"].endswith(
        "exited with status 1; stderr: unbuffered=False leak=False path=True"
    ), handshake


# -- the daemon's deadline -------------------------------------------------------------------

#: A CGP provider that answers its handshake, lock-step, and then never a query: it
#: reads on, and exits on ``shutdown``.
MUTE_CGP = """
import json, sys
ack = {
    "type": "handshake_ack",
    "protocol_version": "contextgraph/1.0-draft",
    "provider": {"name": "mute", "version": "1",
                 "data_flow": {"reads": True, "writes": False, "egress": False}},
    "capabilities": {"query": {"kinds": []}, "correlation": False, "verify": False},
}
for line in sys.stdin:
    kind = json.loads(line).get("type") if line.strip() else None
    if kind == "handshake":
        print(json.dumps(ack), flush=True)
    elif kind == "shutdown":
        break
"""


def test_by_default_a_call_is_held_to_the_daemon_s_timeout_ms() -> None:
    done, checks = _json("--binding", "cgp", "--", "python", "-c", MUTE_CGP)
    assert done.returncode == 1
    assert checks["handshake"]["passed"], checks
    assert checks["query"]["detail"].startswith(
        "no answer within 2000 ms "
        "(the daemon's default timeout_ms; set timeout_ms in [[provider]] to allow more), "
        "nor in the 2000 ms after it: "
    ), checks["query"]
    # Lock-step: its late answer would answer the next query, so nothing more is asked.
    stalled = (
        "not run: the query check missed its deadline, and its call was still unanswered "
        "2000 ms after it"
    )
    for name in CHECKS[2:]:
        assert checks[name]["detail"] == stalled, checks[name]


#: A provider built on ``hostd.provider`` whose ``async def query`` calls ``time.sleep``:
#: its event loop is blocked far longer than any check waits, so it never answers here.
BLOCKED = ["python", "-m", "tests.fixtures.healthy_provider", "--block-ms", "600000"]


def test_a_provider_that_blocks_its_loop_fails_the_query_alone_naming_the_likely_causes() -> None:
    done = run_hostd("check-provider", "--timeout-ms", "300", "--", *BLOCKED)
    assert done.returncode == 1
    assert "each call must answer within 300 ms (the timeout asked for)" in done.stdout
    rows = check_rows(done.stdout)
    assert rows["handshake"].startswith("pass"), done.stdout
    # One failure, with its likely causes in one sentence and where to allow more time.
    assert rows["query"] == (
        "FAIL    no answer within 300 ms (the timeout asked for; the daemon's default is "
        "2000 ms), nor in the 300 ms after it: either its query takes longer than that "
        "(--timeout-ms MS allows more here, timeout_ms in its [[provider]] of hostd.toml), "
        "or synchronous work blocks the provider's event loop (time.sleep or a blocking "
        "HTTP call inside async def query: await asyncio.sleep instead, or run it in a "
        "thread with anyio.to_thread.run_sync)"
    ), done.stdout
    # The checks after it would only have queued behind the same stall: not run, saying why.
    for name in CHECKS[2:]:
        assert rows[name] == (
            "-       not run: the query check missed its deadline, and its call was still "
            "unanswered 300 ms after it"
        ), done.stdout
    assert done.stdout.splitlines()[-1] == f"1/{len(CHECKS)} passed, {len(CHECKS) - 2} not run"


# -- an error answer to a valid query ------------------------------------------------------

_FAILS_AFTER = """\
import sys
from hostd.errors import ProviderError
from hostd.protocol import Capabilities, CgpErrorCode, ProviderInfo, QueryCapability
from hostd.provider import Provider, make_frame, run_stdio

FAIL_FROM = int(sys.argv[1])
CODE = CgpErrorCode(sys.argv[2])


class Flaky(Provider):
    info = ProviderInfo(name="flaky", version="1.0")
    capabilities = Capabilities(query=QueryCapability(kinds=["fact"]))
    calls = 0

    async def query(self, query):
        Flaky.calls += 1
        if Flaky.calls == FAIL_FROM:
            if CODE is CgpErrorCode.INTERNAL:
                raise IndexError("list index out of range")  # a bug: answered internal
            raise ProviderError("cannot", cgp_code=CODE)
        frame = make_frame(
            id="f1", kind="fact", title="t", citation_label="fact 1", content="a fact", score=0.5
        )
        return [frame] if "fact" in (query.kinds or ["fact"]) else []


run_stdio(Flaky())
"""


@pytest.mark.parametrize(
    ("fail_from", "code", "failed"),
    [
        (2, "internal", "budget honesty"),  # the second query (only) raises
        (3, "internal", "budget honesty"),  # the third: one frame asked, room for many
        (4, "internal", "kinds filter"),
        (2, "budget_unsatisfiable", None),  # its honest answer to max_tokens=8
        (4, "unsupported_kind", None),  # Q1 allows it for kinds it does not serve
    ],
)
def test_an_error_answer_to_a_valid_query_fails_its_check_unless_the_spec_allows_it(
    tmp_path: Path, fail_from: int, code: str, failed: str | None
) -> None:
    script = tmp_path / "flaky.py"
    script.write_text(_FAILS_AFTER, encoding="utf-8")
    done, checks = _json("--", "python", str(script), str(fail_from), code)
    if failed is None:
        assert done.returncode == 0, checks
        return
    assert done.returncode == 1, checks
    row = checks[failed]
    assert not row["passed"] and "answered an error" in row["detail"], row
    assert "provider answered internal" in row["detail"], row
    assert "index out of range" not in row["detail"]  # its words are not quoted


def test_a_tail_read_after_the_malformed_probe_says_so_and_one_before_does_not() -> None:
    from hostd.cli._checks import CheckResult, render_stderr

    ok, bad = CheckResult("query", True), CheckResult("budget honesty", False, "B3")
    probe = CheckResult("malformed input", True)
    noted = render_stderr("ValidationError", [ok, bad, probe])
    assert "the malformed-input check came after the failure" in noted
    # The probe skipped (a remote provider), or the failure after it: no note.
    skipped = CheckResult("malformed input", True, skipped=True)
    for results in ([ok, bad, skipped], [ok, probe, bad]):
        assert render_stderr("boom", results) == "the provider's stderr ended with: boom\n"
    assert render_stderr("", [ok, bad, probe]) == ""


def test_a_tail_after_a_failed_handshake_blames_no_check_that_never_ran() -> None:
    from hostd.cli._checks import CheckResult, render_stderr

    failed = CheckResult("handshake", False, "no answer within 30000 ms")
    not_run = CheckResult("malformed input", False, "not run: the handshake failed", not_run=True)
    said = render_stderr("adr provider: 3 ADRs", [failed, not_run])
    assert said == "the provider's stderr ended with: adr provider: 3 ADRs\n"
