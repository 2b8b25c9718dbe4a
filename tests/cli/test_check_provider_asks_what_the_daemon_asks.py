"""``hostd check-provider`` asks what the daemon asks and fails a provider only on a MUST.

Every provider here is a real child process built on the published CGP SDK
(``contextgraph_sdk``), as an author following its examples builds one:

- run under the default binding (``jsonrpc``), it meets the JSON-RPC handshake with
  silence (the envelope wire ignores a line it does not understand): the handshake
  row says to check it with ``--binding cgp`` (a configured one: to set
  ``binding = "cgp"``), and how to shorten the wait (``--start-timeout-s``), while
  a JSON-RPC provider that hangs is told neither;
- its queries are the daemon's for a plain ``compose GOAL``: no ``query_text``
  unless ``--query-text`` asks for one;
- a malformed query answered with a result (R1's SHOULD broken, its MUST kept) is a
  ``warn`` row, not a failure.

What times out is a provider that never answers the JSON-RPC handshake, so the
verdict follows from that event whatever the bound: a short one keeps the test short.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hostd._hints import NO_HANDSHAKE
from hostd.cli._checks import COMMON_GOAL, OTHER_GOAL, Deadlines
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT

SDK = ["python", "-m", "tests.fixtures.sdk_provider"]
HUNG = ["python", "-m", "tests.fixtures.adversarial_provider", "slow_handshake"]
GOAL = "how is the configuration loaded"

#: The handshake row's words for a provider that answered the envelope handshake.
ANSWERS_CGP = (
    "it answers the CGP envelope handshake instead: a provider built with a CGP SDK "
    "(contextgraph-sdk) speaks the envelope wire; "
)

#: A provider on the SDK that writes every query it gets to the file named by its first
#: argument, one JSON line each, and answers like the SDK's own examples: a result for
#: whatever it is asked, a malformed query included (``--strict``: ``bad_request``);
#: its one doc when the goal (or the query_text) shares a word with it, common words
#: ("the", "is") left out.
_REPORTING = """\
import hashlib
import json
import sys

from contextgraph_sdk import ProviderError, budget_tokens, run_stdio_provider

TEXT = "The configuration is loaded from hostd.toml at start."


class Reporting:
    def info(self):
        flow = {"reads": True, "writes": False, "egress": False, "egress_scopes": ["local-only"]}
        return {"name": "reporting", "version": "1.0", "data_flow": flow}

    def capabilities(self):
        return {"query": {"kinds": ["doc"]}, "correlation": True, "verify": False}

    def query(self, query):
        with open(sys.argv[1], "a", encoding="utf-8") as out:
            out.write(json.dumps(query) + "\\n")
        if not isinstance(query.get("goal"), str):
            if "--strict" in sys.argv:
                raise ProviderError("a query needs a goal", code="bad_request")
            return {"frames": [], "truncated": False}
        words = set(str(query.get("query_text") or query["goal"]).lower().split())
        words -= {"the", "is", "how", "what", "where", "when", "was", "that", "from", "and"}
        if not words & set(TEXT.lower().rstrip(".").split()):
            return {"frames": [], "truncated": False}
        cost = budget_tokens(TEXT)
        kinds = query.get("kinds") or ["doc"]
        if "doc" not in kinds or cost > query.get("max_tokens", 0):
            return {"frames": [], "truncated": "doc" in kinds}
        frame = {
            "id": "config",
            "kind": "doc",
            "title": "configuration",
            "content": TEXT,
            "content_digest": "sha256:" + hashlib.sha256(TEXT.encode()).hexdigest(),
            "score": 0.9,
            "token_cost": cost,
            "provenance": [],
            "citation_label": "configuration doc",
        }
        return {"frames": [frame], "truncated": False}


run_stdio_provider(Reporting())
"""


def _json(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    done = run_hostd("check-provider", "--json", *args)
    assert done.stdout, done.stderr[-2000:]
    return done, {r["check"]: r for r in json.loads(done.stdout)}


def _reporting(tmp_path: Path) -> tuple[Path, Path]:
    """The reporting provider's script, and the file it writes its queries to."""
    script = tmp_path / "reporting.py"
    script.write_text(_REPORTING, encoding="utf-8")
    return script, tmp_path / "queries.jsonl"


def _queries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- 1. the wrong binding: a handshake that meets silence ----------------------------------


def test_an_sdk_provider_under_jsonrpc_is_told_to_use_binding_cgp_and_a_hung_one_is_not() -> None:
    done = run_hostd("check-provider", "--start-timeout-s", "0.5", "--", *SDK)
    assert done.returncode == 1, done.stdout + done.stderr
    waited = "no answer within 500 ms (the start_timeout_s asked for; the daemon's default is 30 s)"
    handshake = next(line for line in done.stdout.splitlines() if line.startswith("handshake"))
    assert handshake.split(None, 2)[2] == f"{waited}; {ANSWERS_CGP}check it with --binding cgp"
    # A command after -- has no [[provider]] to set anything in.
    assert "[[provider]]" not in done.stdout
    # A JSON-RPC provider that never answers its handshake answers no envelope either.
    done, checks = _json("--start-timeout-s", "0.5", "--", *HUNG)
    assert done.returncode == 1
    assert checks["handshake"]["detail"] == f"{waited}; {NO_HANDSHAKE}", checks["handshake"]


#: A provider in the shape most languages give by default: its replies written to a
#: buffered stdout that is never flushed (Java's PrintStream without autoflush), while
#: it logs to stderr that it started.
_UNFLUSHED = """\
import io, json, os, sys
out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16))
print("unflushed provider: started", file=sys.stderr, flush=True)
for line in sys.stdin:
    msg = json.loads(line) if line.strip().startswith("{") else {}
    if msg.get("method") == "context/handshake":
        ack = {"protocol_version": "contextgraph/1.0-draft",
               "provider": {"name": "unflushed", "version": "1"}}
        out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": ack}) + "\\n")
"""


def test_a_handshake_left_in_an_unflushed_stdout_is_told_to_flush_each_line(
    tmp_path: Path,
) -> None:
    script = tmp_path / "unflushed.py"
    script.write_text(_UNFLUSHED, encoding="utf-8")
    done, checks = _json("--start-timeout-s", "0.5", "--", "python", str(script))
    assert done.returncode == 1
    detail = checks["handshake"]["detail"]
    assert detail.startswith("no answer within 500 ms"), detail
    assert "end each reply line with a newline and flush it" in detail, detail
    assert "flush() a Java PrintStream or BufferedWriter" in detail, detail
    assert "answer the handshake first and set up after it" in detail, detail
    assert "warm()" not in detail, detail
    # What it logged is the tail after the table, blaming no check that never ran.
    assert "the provider's stderr ended with: unflushed provider: started" in done.stderr


def test_a_configured_sdk_provider_is_told_to_set_binding_cgp_in_its_provider(
    tmp_path: Path,
) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "pydocs"\ncommand = {json.dumps(SDK)}\ncwd = "{ROOT}"\n'
        "start_timeout_s = 0.5\n",
        encoding="utf-8",
    )
    done, checks = _json("--config", str(config), "--provider", "pydocs")
    assert done.returncode == 1
    assert checks["handshake"]["detail"] == (
        "no answer within 500 ms (start_timeout_s of [[provider]] pydocs); "
        f'{ANSWERS_CGP}set binding = "cgp" in its [[provider]]'
    ), checks["handshake"]


def test_the_start_deadline_names_the_flag_that_changes_it_not_a_config() -> None:
    default = Deadlines.of().start
    assert default.missed() == (
        "no answer within 30000 ms "
        "(the daemon's default start_timeout_s; --start-timeout-s S sets it here)"
    )
    # Asked for, it stands, even below a call's deadline (which stands for a shorter
    # configured start_timeout_s).
    asked = Deadlines.of(5.0, start_asked=0.5).start
    assert asked.seconds == 0.5
    assert asked.why == "the start_timeout_s asked for; the daemon's default is 30 s"
    over = Deadlines.of(start_s=5.0, start_why="start_timeout_s of [[provider]] x", start_asked=1)
    assert over.start.seconds == 1
    assert (
        over.start.why == "the start_timeout_s asked for; start_timeout_s of [[provider]] x is 5 s"
    )


def test_flags_are_refused_where_they_would_change_nothing() -> None:
    for args, said in [
        (["--start-timeout-s", "0", "--", *SDK], "--start-timeout-s must be positive"),
        (
            ["--binding", "mcp", "--query-text", "x", "--", *SDK],
            "--query-text: --binding mcp asks its tools with --goal",
        ),
    ]:
        done = run_hostd("check-provider", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr == f"hostd check-provider: {said}\n", done.stderr


# -- 2. the queries are the daemon's --------------------------------------------------------


def test_its_queries_carry_no_query_text_as_the_daemon_s_for_a_plain_compose(
    tmp_path: Path,
) -> None:
    script, out = _reporting(tmp_path)
    done, _checks = _json("--binding", "cgp", "--", sys.executable, str(script), str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    asked = [q for q in _queries(out) if isinstance(q.get("goal"), str)]
    # The last two ask a goal unlike it, to tell whether the answer depends on the goal,
    # then (that one answered nothing) the same with common words, whether it matches them.
    *asked, probe, common = asked
    assert asked and all(q["goal"] == GOAL for q in asked), asked
    assert (probe["goal"], common["goal"]) == (OTHER_GOAL, COMMON_GOAL), (probe, common)
    assert all("query_text" not in q for q in [*asked, probe, common]), asked
    # The daemon's query for `hostd compose GOAL`, to the same provider: the same members.
    daemon_out = tmp_path / "daemon.jsonl"
    config = tmp_path / "hostd.toml"
    command = [sys.executable, str(script), str(daemon_out)]
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "reporting"\nbinding = "cgp"\ncommand = {json.dumps(command)}\n'
        "timeout_ms = 60000\n",  # generous: child start-up is slow on a loaded machine
        encoding="utf-8",
    )
    composed = run_hostd("--config", str(config), "compose", GOAL)
    assert composed.returncode == 0, composed.stderr
    (daemon_query,) = _queries(daemon_out)
    assert set(asked[0]) == set(daemon_query), (asked[0], daemon_query)


def test_query_text_asked_for_is_what_every_query_carries(tmp_path: Path) -> None:
    script, out = _reporting(tmp_path)
    args = ["--binding", "cgp", "--query-text", "configuration loading"]
    done = run_hostd("check-provider", *args, "--", sys.executable, str(script), str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    *asked, probe, common = [q for q in _queries(out) if isinstance(q.get("goal"), str)]
    assert len(asked) >= 4 and all(q["query_text"] == "configuration loading" for q in asked)
    # The goal probes change what they ask: its query_text too.
    assert probe["goal"] == probe["query_text"] == OTHER_GOAL, probe
    assert common["goal"] == common["query_text"] == COMMON_GOAL, common
    assert (
        f"asked the goal {GOAL!r} (--goal), query_text 'configuration loading' (--query-text), "
        "max_tokens 400 (--budget)\n"
    ) in done.stdout


# -- 3. malformed input: R1's MUST fails, its SHOULD warns ----------------------------------


def test_a_malformed_query_answered_with_a_result_is_a_warning_naming_r1_s_should(
    tmp_path: Path,
) -> None:
    script, out = _reporting(tmp_path)
    done, checks = _json("--binding", "cgp", "--", sys.executable, str(script), str(out))
    assert done.returncode == 0, checks  # a warning alone keeps exit 0
    row = checks["malformed input"]
    assert row["passed"] and row["warning"] and not row["skipped"], row
    assert row["detail"] == (
        "still serving, but a malformed query (goal: 5) was answered with a result, not an "
        "error: R1 says a provider SHOULD reply error bad_request (it MUST NOT crash: it did not)"
    )
    assert any(q.get("goal") == 5 for q in _queries(out))  # it was asked, and answered
    table = run_hostd(
        "check-provider", "--binding", "cgp", "--", sys.executable, str(script), str(out)
    )
    assert table.returncode == 0
    assert table.stdout.splitlines()[-1] == "5/5 passed, 1 warning, 1 skipped", table.stdout
    # Only a result warns: the same provider answering bad_request passes outright, and
    # the SDK's own example provider, which dies on a query without max_frames, fails
    # (R1's MUST).
    done, checks = _json(
        "--binding", "cgp", "--", sys.executable, str(script), str(out), "--strict"
    )
    assert done.returncode == 0, checks
    assert checks["malformed input"]["passed"] and not checks["malformed input"]["warning"]
    done, checks = _json("--binding", "cgp", "--", *SDK)
    assert done.returncode == 1
    row = checks["malformed input"]
    assert not row["passed"] and not row["warning"], row
