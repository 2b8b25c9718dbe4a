"""``hostd check-provider`` judges a provider as the daemon will, and says so plainly.

A new author's mistakes, each made by a small facts provider written as one would
write it in any language (``tests/fixtures/facts_provider.py``: stdlib ``json``, the
JSON-RPC wire by hand), run as a real child process: a ``content_digest`` that is not
its content's (the daemon's verify stage drops the frame), a goal read from the wrong
place (no frame, so nothing judged), a reply over its own budget (B1), a stderr
flood, a handshake hostd refuses; and the header saying where the command ran.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hostd.cli._checks import CHECKS, COMMON_GOAL
from hostd.protocol import PROTOCOL_VERSION
from tests.fixtures.cli import check_rows, run_hostd
from tests.fixtures.facts_provider import FACTS
from tests.fixtures.procs import ROOT

SCRIPT = "tests/fixtures/facts_provider.py"
DEFAULT_GOAL = "how is the configuration loaded"


def _table(*args: str) -> subprocess.CompletedProcess[str]:
    return run_hostd("check-provider", *args)


def _json(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    done = run_hostd("check-provider", "--json", *args)
    assert done.stdout, done.stderr[-2000:]
    return done, {r["check"]: r for r in json.loads(done.stdout)}


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- 1. an inline digest that is not the content's: the daemon drops the frame -------------


def test_a_digest_of_the_wrong_text_fails_the_query_naming_the_frame_and_the_digest() -> None:
    done, checks = _json("--", "python", SCRIPT, "title_digest")
    assert done.returncode == 1
    query = checks["query"]
    assert not query["passed"] and query["rules"] == ["D4"], query
    # The first frame the audit accepted (they are ordered by id) and what its digest
    # must be: sha256 over the content's UTF-8 bytes, in the code's "sha256:<hex>" form.
    served = sorted((fid, content) for fid, _title, content in FACTS)
    fid, content = served[0]
    declared = _digest({f: t for f, t, _c in FACTS}[fid])  # the title's digest
    assert query["detail"] == (
        f"the daemon drops frame {fid!r} (digest_mismatch, D4): its content_digest must be "
        "'sha256:' and the lowercase hex SHA-256 of its content's UTF-8 bytes: declared "
        f"{declared}, computed from the content {_digest(content)} "
        f"(and {len(served) - 1} more frame(s))"
    )
    # Nothing the provider wrote but the frame id: not its titles, not its content.
    for _fid, title, text in FACTS:
        assert title not in query["detail"] and text not in query["detail"]


def test_a_provider_that_packs_by_max_tokens_alone_fails_budget_honesty() -> None:
    """At the default budget it never reaches max_frames, so only a query for one frame
    with room for many shows it (the daemon quarantines such a reply: B4)."""
    done, checks = _json("--", "python", SCRIPT, "ignores_max_frames")
    assert done.returncode == 1
    assert checks["query"]["passed"], checks["query"]
    honesty = checks["budget honesty"]
    assert not honesty["passed"] and honesty["rules"] == ["B4"], honesty


def test_a_fractional_cost_fails_budget_honesty_and_says_how_a_cost_is_counted() -> None:
    """``content.length / 4``: the schema refuses each such frame before B3 compares its
    cost, so no cost was exact; both rows say how ``token_cost`` is computed."""
    done, checks = _json("--", "python", SCRIPT, "fraction_cost")
    assert done.returncode == 1
    rule = "token_cost must be ceil(UTF-8 bytes of content / 4), an integer (B3)"
    query = checks["query"]
    assert not query["passed"] and query["rules"] == ["schema"], query
    fraction = "schema frames[0].token_cost: a fraction; expected a number (an integer)"
    assert fraction in query["detail"], query
    assert query["detail"].endswith(f"; {rule}"), query
    honesty = checks["budget honesty"]
    assert not honesty["passed"] and honesty["rules"] == ["B3", "schema"], honesty
    assert honesty["detail"].startswith(
        "costs not exact: schema frames[0].token_cost: a fraction; expected a number"
    ), honesty
    assert honesty["detail"].endswith(f"; {rule}"), honesty


def test_the_same_provider_with_honest_digests_passes() -> None:
    done, checks = _json("--", "python", SCRIPT, "honest")
    assert done.returncode == 0, checks
    assert checks["query"]["passed"] and not checks["query"]["warning"], checks["query"]


def _composed_by_a_daemon(tmp_path: Path, command: list[str]) -> Any:
    """``DEFAULT_GOAL`` composed by a real daemon whose one provider ``facts`` runs
    ``command``: what the daemon does with the replies check-provider judged."""
    from hostd.client import Client

    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[[provider]]\nid = "facts"\ncommand = {json.dumps(command)}\ntimeout_ms = 60000\n',
        encoding="utf-8",
    )
    with Client.spawn(config, cwd=ROOT) as client:
        return client.compose(DEFAULT_GOAL, budget=400)


def test_the_frames_the_daemon_drops_fail_check_provider(tmp_path: Path) -> None:
    """What check-provider says is what the daemon does: compose through a real daemon
    excludes each such frame as ``digest_mismatch``, and check-provider fails it (D4)."""
    command = [sys.executable, str(ROOT / SCRIPT), "title_digest"]
    result = _composed_by_a_daemon(tmp_path, command)
    reasons = {e.frame.frame_id: e.reason for e in result.audit.excluded()}
    assert reasons == {fid: "digest_mismatch" for fid, _t, _c in FACTS}, reasons
    assert result.audit.included() == []
    done, checks = _json("--", *command)
    assert done.returncode == 1
    assert checks["query"]["rules"] == ["D4"], checks["query"]


# -- 2. a query answered with no frame judged nothing: a warning naming the goal -----------


def test_a_query_answered_with_no_frame_is_a_warning_naming_the_goal() -> None:
    done = _table("--", "python", SCRIPT, "goal_from_params")
    assert done.returncode == 0, done.stdout  # a warning, not a failure
    lines = done.stdout.splitlines()
    # The goal asked, shown before the table (the default is said nowhere else).
    assert f"asked the goal {DEFAULT_GOAL!r} (--goal), max_tokens 400 (--budget)" in lines
    assert re.fullmatch(
        rf"warn\s+the query returned no frame for goal '{DEFAULT_GOAL}' in \d+ ms: "
        "check-provider judged nothing; pass --goal with words your provider matches",
        check_rows(done.stdout)["query"],
    ), done.stdout
    # The summary counts it apart: never as passed.
    assert lines[-1] == "5/5 passed, 1 warning, 1 skipped", done.stdout


def test_a_warning_is_a_passed_row_flagged_in_json() -> None:
    done, checks = _json("--goal", "zebra quantum", "--", "python", SCRIPT, "honest")
    assert done.returncode == 0
    query = checks["query"]
    assert (query["passed"], query["warning"]) == (True, True), query
    assert "for goal 'zebra quantum'" in query["detail"]
    assert not any(r["warning"] for name, r in checks.items() if name != "query")


# -- 3. the query row judges its reply against its own budget -------------------------------


def test_a_reply_over_its_own_max_tokens_fails_the_query_row_too() -> None:
    done, checks = _json("--budget", "20", "--", "python", SCRIPT, "ignores_budget")
    assert done.returncode == 1
    query = checks["query"]
    assert not query["passed"] and query["rules"] == ["B1"], query
    assert query["detail"].startswith("the daemon would quarantine the whole reply: B1 "), query
    assert "over the query's max_tokens 20" in query["detail"]
    assert not checks["budget honesty"]["passed"]


def test_an_honest_reply_says_what_it_cost_of_its_budget() -> None:
    done, checks = _json("--budget", "20", "--", "python", SCRIPT, "honest")
    assert done.returncode == 0, checks
    assert re.fullmatch(
        r"1 valid frame\(s\) costing 14 of max_tokens 20 in \d+ ms; top: 'Configuration'",
        checks["query"]["detail"],
    ), checks["query"]


# -- 4. a stderr flood: one human line, never a log record ----------------------------------


def test_a_stderr_flood_is_one_note_and_no_log_record() -> None:
    done = _table("--", "python", SCRIPT, "stderr_flood")
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert not [line for line in said.splitlines() if line.lstrip().startswith("{")], said
    assert "provider.stderr" not in said
    notes = [line for line in said.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, said
    found = re.fullmatch(
        r"note: the provider wrote (\d+) lines to stderr; the daemon's log would leave out "
        r"(\d+) of them \(its rate limit\)",
        notes[0],
    )
    assert found, notes
    wrote, left_out = int(found[1]), int(found[2])
    assert 0 < left_out < wrote <= 20000, notes
    assert done.stdout.splitlines()[-1] == notes[0]  # after the table, on stdout


def test_asked_for_the_log_it_names_the_provider_by_its_command() -> None:
    done = run_hostd(
        "--log-level",
        "warning",
        "--log-format",
        "json",
        "check-provider",
        "--json",
        "--",
        "python",
        SCRIPT,
        "stderr_flood",
    )
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    suppressed = [r for r in records if r["event"] == "provider.stderr.suppressed"]
    assert suppressed, done.stderr[-2000:]
    assert {r["provider"] for r in suppressed} == {"python"}, suppressed


# -- 5. a failed handshake: the checks after it are listed, not run -------------------------


def test_a_failed_handshake_lists_every_other_check_as_not_run() -> None:
    done = _table("--", "python", SCRIPT, "bad_version")
    assert done.returncode == 1
    rows = check_rows(done.stdout)
    assert list(rows) == list(CHECKS), done.stdout
    assert rows["handshake"].startswith("FAIL    H3 protocol_version: "), rows["handshake"]
    for name in CHECKS[1:]:
        assert rows[name] == "-       not run: the handshake failed", (name, done.stdout)
    assert done.stdout.splitlines()[-1] == f"0/{len(CHECKS)} passed, {len(CHECKS) - 1} not run"


def test_a_malformed_version_is_failed_naming_the_version_to_send() -> None:
    done, checks = _json("--", "python", "-m", "tests.fixtures.adversarial_provider", "old_version")
    assert done.returncode == 1
    detail = checks["handshake"]["detail"]
    assert detail.startswith("H1 protocol_version: 'contextgraph/1' is not "), detail
    assert detail.endswith(f"send {PROTOCOL_VERSION!r}"), detail


def test_a_command_that_cannot_start_lists_the_rest_as_not_run() -> None:
    done, checks = _json("--", "./hostd-check-no-such-provider")
    assert done.returncode == 1
    assert list(checks) == ["start", *CHECKS]
    assert not checks["start"]["not_run"]
    for name in CHECKS:
        assert checks[name]["detail"] == "not run: the provider did not start", checks[name]
        assert (checks[name]["passed"], checks[name]["not_run"]) == (False, True)


# -- 6. the header says where the command ran -----------------------------------------------


def test_the_header_says_where_the_command_ran() -> None:
    done = _table("--", "python", SCRIPT, "honest")
    assert done.stdout.splitlines()[0] == (
        f"ran {sys.executable} {SCRIPT} honest "
        f"(in {ROOT}; 'python' is hostd's own interpreter, as in hostd.toml)"
    ), done.stdout


def test_a_configured_provider_runs_in_its_cwd_and_is_named_by_its_id(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / SCRIPT, work / "facts.py")
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        '[[provider]]\nid = "facts"\ncommand = ["python", "facts.py", "stderr_flood"]\n'
        f'cwd = "{work}"\n',
        encoding="utf-8",
    )
    done = run_hostd(
        "--log-level",
        "warning",
        "--log-format",
        "json",
        "--config",
        str(config),
        "check-provider",
        "--provider",
        "facts",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"provider facts of {config}"
    # A relative script path reads against the cwd shown (the config has already made
    # "python" hostd's interpreter).
    assert lines[1] == f"ran {sys.executable} facts.py stderr_flood (in {work})"
    # The log, asked for, names it by its configured id.
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert {r.get("provider") for r in records if "provider" in r} == {"facts"}, records


# -- a file citation whose digest is of the frame's text, not the file's lines -----------


def test_a_file_citation_digest_not_of_the_cited_lines_fails_the_query(tmp_path: Path) -> None:
    facts = tmp_path / "facts.md"
    facts.write_text("".join(f"- {content}\n" for _, _, content in FACTS), encoding="utf-8")
    done, checks = _json("--", "python", SCRIPT, "file_text_digest", str(facts))
    assert done.returncode == 1
    query = checks["query"]
    assert not query["passed"] and query["rules"] == ["F5"], query
    fid = sorted(fid for fid, _title, _content in FACTS)[0]
    line = 1 + [f for f, _, _ in FACTS].index(fid)
    # A command alone: which roots the daemon will give it is not known, so both outcomes.
    assert query["detail"].startswith(
        f"the daemon drops frame {fid!r} (and 2 more frame(s)) (source_mismatch, F5) under "
        'trusted_roots (with none it keeps it unchecked, fenced verified="no"): its file '
        f"provenance digest is not the sha256 of file://{facts} L{line}-{line} as the file "
        "holds it; the digest covers the cited lines' bytes in the file, each line with its "
        "final LF (F17)"
    ), query["detail"]
    # A provider in another language is pointed at the section that shows it, not at a
    # Python helper alone.
    assert "docs/providers.md#file-provenance" in query["detail"], query["detail"]
    # Cited right, the same provider passes; the file is only compared, never quoted.
    done, checks = _json("--", "python", SCRIPT, "file_cited", str(facts))
    assert checks["query"]["passed"], checks["query"]
    assert "The retry loop" not in done.stdout + done.stderr


def _facts_config(tmp_path: Path, mode: str, roots: str) -> tuple[Path, Path]:
    """A config whose ``facts`` provider cites its lines of ``facts.md`` (``mode``), with
    ``roots`` (a ``trusted_roots`` line) or none, as README's ``[[provider]]`` has none."""
    facts = tmp_path / "facts.md"
    facts.write_text("".join(f"- {content}\n" for _, _, content in FACTS), encoding="utf-8")
    config = tmp_path / "hostd.toml"
    command = ["python", str(ROOT / SCRIPT), mode, str(facts)]
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "facts"\ncommand = {json.dumps(command)}\n{roots}',
        encoding="utf-8",
    )
    return config, facts


def test_a_wrong_file_digest_says_what_the_daemon_does_under_the_config(tmp_path: Path) -> None:
    """With no trusted root the daemon keeps the frame unchecked (fenced): the row says
    that, and how to have it checked; with one, that the daemon drops it."""
    config, _ = _facts_config(tmp_path, "file_text_digest", "")
    done, checks = _json("--config", str(config), "--provider", "facts")
    assert done.returncode == 1
    detail = checks["query"]["detail"]
    assert detail.startswith("under this config the daemon keeps frame "), detail
    assert (
        'unchecked, fenced verified="no": [[provider]] facts has no trusted_roots, so the '
        'file is never re-read (with trusted_roots = ["."] it drops the frame, '
        "source_mismatch, F5)"
    ) in detail, detail
    config, _ = _facts_config(tmp_path, "file_text_digest", 'trusted_roots = ["."]\n')
    done, checks = _json("--config", str(config), "--provider", "facts")
    assert done.returncode == 1
    assert checks["query"]["detail"].startswith("the daemon drops frame "), checks["query"]


def test_a_right_file_digest_with_no_trusted_root_warns_it_goes_unchecked(
    tmp_path: Path,
) -> None:
    config, _ = _facts_config(tmp_path, "file_cited", "")
    done, checks = _json("--config", str(config), "--provider", "facts")
    assert done.returncode == 0, done.stdout
    query = checks["query"]
    assert query["passed"] and query["warning"], query
    assert (
        "3 frame(s) cite a file that the daemon will not re-read: [[provider]] facts has no "
        'trusted_roots, so they are fenced verified="no"'
    ) in query["detail"], query
    config, _ = _facts_config(tmp_path, "file_cited", 'trusted_roots = ["."]\n')
    done, checks = _json("--config", str(config), "--provider", "facts")
    assert done.returncode == 0 and not checks["query"]["warning"], checks["query"]


def test_a_file_outside_the_config_s_folder_is_advised_a_root_that_holds_it(
    tmp_path: Path,
) -> None:
    """``trusted_roots = ["."]`` holds only what is under the config's directory: for a
    file cited elsewhere the row names the folder that holds it, and copied, that root
    has the frames checked (no warning left)."""
    project, data = tmp_path / "project", tmp_path / "data"
    project.mkdir()
    data.mkdir()
    config, _ = _facts_config(data, "file_cited", "")
    moved = project / "hostd.toml"
    moved.write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    done, checks = _json("--config", str(moved), "--provider", "facts")
    assert done.returncode == 0, done.stdout
    assert (
        f'(add trusted_roots = ["{data}"] to have their digests checked)'
        in (checks["query"]["detail"])
    ), checks["query"]
    with moved.open("a", encoding="utf-8") as f:
        f.write(f'trusted_roots = ["{data}"]\n')
    done, checks = _json("--config", str(moved), "--provider", "facts")
    assert done.returncode == 0 and not checks["query"]["warning"], checks["query"]
    # A wrong digest likewise: the root that would have the daemon drop it.
    config, _ = _facts_config(data, "file_text_digest", "")
    moved.write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    done, checks = _json("--config", str(moved), "--provider", "facts")
    assert done.returncode == 1
    assert (
        f'(with trusted_roots = ["{data}"] it drops the frame, ' in (checks["query"]["detail"])
    ), checks["query"]


# -- the wire as a hand-written provider gets it wrong ---------------------------------------


def test_frames_under_another_name_fail_the_query_naming_what_is_missing() -> None:
    """The schema requires ``frames``: a result without it is malformed, never an answer
    with no frame. The row names the member missing and the names the result carried,
    never their values."""
    done, checks = _json("--", "python", SCRIPT, "results_key")
    assert done.returncode == 1
    query = checks["query"]
    assert not query["passed"] and not query["warning"], query
    assert query["detail"] == (
        "malformed reply: result.frames is missing (members sent: results, truncated); a "
        'query\'s result is {"frames": [...], "truncated": false} (docs/providers.md, "2. Query")'
    )
    for _fid, title, content in FACTS:
        assert title not in done.stdout and content not in done.stdout


def test_frames_under_another_name_leave_the_malformed_input_row_to_what_it_tests() -> None:
    """The malformed-input row judges the answer to bad input (an error, or none) and that
    the provider still serves after it: a valid query answered with a result, even one
    the query row already failed, shows it still serves."""
    _done, checks = _json("--", "python", SCRIPT, "results_key")
    row = checks["malformed input"]
    assert row["passed"] and not row["warning"], row
    assert row["detail"] == (
        "bad lines answered or ignored; still serving: the valid query after them was "
        "answered with a result whose shape the query row judges"
    )


def test_the_daemon_fails_the_leg_of_a_result_without_frames(tmp_path: Path) -> None:
    """What the query row says is what the daemon does: the leg is an error naming what
    is missing, not an answer with no frame."""
    command = [sys.executable, str(ROOT / SCRIPT), "results_key"]
    result = _composed_by_a_daemon(tmp_path, command)
    [leg] = result.providers
    assert (leg.provider_id, leg.status) == ("facts", "error"), leg
    assert leg.error is not None and leg.error.code == "protocol_fault", leg
    assert leg.error.message == (
        "malformed query result: result.frames is missing (members sent: results, truncated)"
    )


def test_a_result_without_truncated_is_a_warning_naming_the_rule() -> None:
    """The schema requires ``truncated`` too; the daemon reads an absent one as false,
    so the frames pass and the row warns: exit 0."""
    done, checks = _json("--", "python", SCRIPT, "no_truncated")
    assert done.returncode == 0, checks
    query = checks["query"]
    assert (query["passed"], query["warning"]) == (True, True), query
    assert re.fullmatch(
        r"3 valid frame\(s\) costing \d+ of max_tokens 400 in \d+ ms; "
        r"top: 'Cache', 'Configuration', 'Retries'; its result has no "
        r'"truncated": the CGP schema requires it \(ContextQueryResult: "frames" and '
        r'"truncated"\); the daemon reads it as false\. Send "truncated": false, or true when '
        r"frames that matched were left out to keep within the budget "
        r'\(docs/providers.md, "2. Query"\)',
        query["detail"],
    ), query["detail"]
    assert not any(r["warning"] for name, r in checks.items() if name != "query"), checks


def test_a_reply_with_a_string_id_fails_the_handshake_with_the_daemons_words() -> None:
    """The daemon's pipe client finds the reply answers no request (H4) as it reads it;
    check-provider reads it the same way instead of waiting for its start deadline."""
    done = _table("--", "python", SCRIPT, "string_id")
    assert done.returncode == 1
    rows = check_rows(done.stdout)
    assert rows["handshake"].startswith(
        "FAIL    reply with unknown id a string id (1 chars, not quoted) (H4); a reply "
        "carries the id of the request it answers exactly as sent, of the same JSON type "
        "(hostd sends JSON-RPC ids as integers)"
    ), done.stdout
    assert rows["query"] == "-       not run: the handshake failed", done.stdout


def test_bad_request_to_the_well_formed_query_says_where_the_query_is() -> None:
    """A provider that reads ``params.goal`` refuses every query: the first row that says
    so tells where the query's members are (its message stays unquoted), once."""
    done, checks = _json("--", "python", SCRIPT, "flat_params")
    assert done.returncode == 1
    detail = checks["query"]["detail"]
    assert detail == (
        "query answered an error: provider answered bad_request (message: 14 chars, not "
        "quoted); bad_request to a well-formed query: hostd sends the query nested, as "
        "params.query: params.query.goal, params.query.max_frames, params.query.max_tokens, "
        'params.query.kinds … (docs/providers.md, "2. Query"); its stderr (shown after the '
        "table when it wrote any) may say what it found wrong"
    ), detail
    assert "invalid params" not in done.stdout
    # Said once: the later rows keep their own words.
    assert checks["budget honesty"]["detail"] == (
        "max_tokens=8 answered an error: provider answered bad_request (message: 14 chars, "
        "not quoted) (the daemon reports such a leg error, with none of its frames)"
    )


# -- 7. a query that always fails is one failure, told once ---------------------------------

#: What a check that judges a query's answer says when every query is answered internal.
QUERY_FAILED = (
    "not run: the query check's well-formed query was answered internal, "
    "as each of this check's would be"
)


def test_a_query_handler_that_raises_is_one_failure_and_the_checks_after_it_say_so() -> None:
    """A bug in ``query`` answers every query ``internal``: the query row fails, the rows
    that judge a query's answer are not run naming it, and malformed input (R1) passes,
    as the provider answers the valid query after the bad lines with an error to its id."""
    done, checks = _json("--", "python", "-m", "tests.fixtures.raising_provider")
    assert done.returncode == 1
    assert list(checks) == list(CHECKS), checks
    query = checks["query"]
    assert not query["passed"] and not query["not_run"], query
    assert query["detail"].startswith("query answered an error: provider answered internal")
    for name in ("budget honesty", "kinds filter", "verify honesty"):
        assert (checks[name]["not_run"], checks[name]["detail"]) == (True, QUERY_FAILED), name
    malformed = checks["malformed input"]
    assert malformed["passed"] and not malformed["warning"], malformed
    assert malformed["detail"] == (
        "bad lines answered or ignored; still serving: the valid query after them was "
        "answered internal, as the query row's was"
    )
    assert checks["shutdown"]["passed"], checks["shutdown"]


def test_a_lock_step_provider_whose_queries_fail_is_not_sent_malformed_input() -> None:
    """Its error to the valid query could not be told from its errors to the bad lines."""
    sdk = ["python", "-m", "tests.fixtures.sdk_provider", "--no-correlation"]
    done, checks = _json("--binding", "cgp", "--goal", "boom", "--", *sdk)
    assert done.returncode == 1
    assert not checks["query"]["passed"] and not checks["query"]["not_run"], checks["query"]
    for name in ("budget honesty", "kinds filter", "malformed input", "verify honesty"):
        assert (checks[name]["not_run"], checks[name]["detail"]) == (True, QUERY_FAILED), name
    assert checks["shutdown"]["passed"], checks["shutdown"]


def test_a_query_refused_for_its_budget_still_lets_the_budget_check_ask_its_own() -> None:
    """``budget_unsatisfiable`` refuses what the query asked, not the provider failing:
    the budget check asks its own queries, and accepts that answer to them."""
    sdk = ["python", "-m", "tests.fixtures.sdk_provider"]
    _done, checks = _json("--binding", "cgp", "--goal", "refuse", "--", *sdk)
    assert not checks["query"]["passed"], checks["query"]
    assert checks["budget honesty"]["passed"], checks["budget honesty"]


# -- an answer that does not depend on the goal, and what the query row shows of it -------


def test_a_provider_reading_the_goal_from_the_wrong_field_is_warned() -> None:
    """It reads ``params.goal`` (``undefined`` in JavaScript) and finds the facts that
    say "undefined" whatever is asked, as many as ``max_frames`` lets it: the row shows
    their titles, and a second goal unlike the first got the same frames, cut to the
    query's limits, which it names with where the goal is."""
    done = _table("--goal", "share ShareConfig", "--", "python", SCRIPT, "goal_undefined")
    assert done.returncode == 0, done.stdout  # a warning, not a failure
    row = check_rows(done.stdout)["query"]
    assert row.startswith("warn"), row
    assert (
        "top: 'Unset keys', 'Unset key 0', 'Unset key 1' (+5 more); "
        "the goal 'zqx vexillology of basalt lighthouses' got the same 8 frame(s): "
    ) in row, row
    assert "its answer does not depend on the goal" in row, row
    assert "the goal is params.query.goal, not params.goal" in row, row
    assert done.stdout.splitlines()[-1] == "5/5 passed, 1 warning, 1 skipped", done.stdout


def test_a_corpus_served_whole_for_any_goal_is_said_not_warned() -> None:
    """Its three facts, whatever the goal: the unrelated goal gets them too, but neither
    answer was cut (fewer than max_frames, under max_tokens, not truncated), so the row
    says it served them whole and passes."""
    done, checks = _json("--goal", "configuration", "--", "python", SCRIPT, "whole")
    assert done.returncode == 0, done.stdout
    query = checks["query"]
    assert query["passed"] and not query["warning"], query
    assert query["detail"].endswith(
        "; top: 'Cache', 'Configuration', 'Retries'; served whole: the goal 'zqx vexillology "
        "of basalt lighthouses' got the same 3 frame(s), neither answer cut (fewer than "
        "max_frames 8, under max_tokens 400, not truncated): a corpus that small is served "
        "whatever the goal"
    ), query


def test_a_provider_that_reads_the_goal_shows_its_titles_and_no_warning() -> None:
    done, checks = _json("--goal", "configuration", "--", "python", SCRIPT, "honest")
    query = checks["query"]
    assert query["passed"] and not query["warning"], query
    assert query["detail"].endswith("; top: 'Cache', 'Configuration'"), query
    for _fid, _title, text in FACTS:
        assert text not in query["detail"]


def test_a_provider_matching_common_words_is_warned() -> None:
    """It matches any word of 3 letters or more, "the" too: the unlike goal gets
    nothing, but the same goal with common words mixed in gets its facts, so every
    question would get them. Its answer to the goal asked differs, so only this probe
    shows it."""
    done, checks = _json("--goal", "configuration", "--", "python", SCRIPT, "any_word")
    assert done.returncode == 0, done.stdout  # a warning, not a failure
    query = checks["query"]
    assert query["passed"] and query["warning"], query
    assert (
        f"the goal {COMMON_GOAL!r} got 3 frame(s) where 'zqx vexillology of basalt "
        "lighthouses', the same words without the common ones, got none: it matches common "
        "words (what, the, where, that…)"
    ) in query["detail"], query


def test_a_provider_leaving_common_words_out_is_not_warned_of_them() -> None:
    done, checks = _json("--", "python", SCRIPT, "honest")
    assert done.returncode == 0, done.stdout
    assert not checks["query"]["warning"], checks["query"]
    assert "common words" not in checks["query"]["detail"]


def test_a_quarantined_reply_is_why_verify_asked_nothing() -> None:
    """Its frames carry digests, but the reply broke B3: nothing was served to verify."""
    done, checks = _json("--", "python", SCRIPT, "char_cost")
    assert done.returncode == 1
    assert checks["query"]["rules"] == ["B3"], checks["query"]
    verify = checks["verify honesty"]
    assert verify["skipped"], verify
    assert verify["detail"].startswith("not asked: the query's reply was quarantined (B3; "), verify


def test_a_wrong_cost_is_told_beside_the_schema_faults_of_the_same_frames() -> None:
    """Each frame has no title, a string score and a cost 5 too high: one run names all
    three, so the author does not fix the schema to meet B3 next (the daemon judges B3
    on a frame the schema refused, and quarantines the reply)."""
    done, checks = _json("--", "python", SCRIPT, "careless")
    assert done.returncode == 1
    cost = (len(FACTS[0][2].encode("utf-8")) + 3) // 4
    b3 = f"B3 frames[0].token_cost: declared token_cost {cost + 5} but ceil(utf8 bytes/4) is {cost}"
    query = checks["query"]
    assert not query["passed"] and query["rules"] == ["B3", "schema"], query
    assert "schema frames[0].title: missing" in query["detail"], query
    assert f"the daemon would quarantine the whole reply: {b3}" in query["detail"], query
    honesty = checks["budget honesty"]
    assert not honesty["passed"] and honesty["rules"] == ["B3"], honesty
    assert honesty["detail"].startswith(f"the daemon would quarantine it: {b3}"), honesty


def test_costs_are_not_called_exact_when_none_could_be_compared() -> None:
    done, checks = _json("--", "python", SCRIPT, "object_content")
    assert done.returncode == 1  # the query row fails: the schema refuses every frame
    honesty = checks["budget honesty"]
    assert honesty["passed"] and honesty["warning"], honesty
    assert honesty["detail"].startswith(
        "costs not judged: no frame it answered (4 in all) had a string content and an "
        "integer token_cost; max_tokens=8 answered with"
    ), honesty
