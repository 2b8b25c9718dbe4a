"""The words for a name hostd does not know (``hostd._hints``): the closest known one
when one is close, and for an unknown provider id the ids configured."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hostd._hints import (
    NO_HANDSHAKE,
    REFUSED_CODES,
    absorbed_words,
    down_state,
    failure_tail_lines,
    not_run_again,
    one_shot_words,
    restarting_failures,
    said_once,
    shown_stderr_tail,
    stderr_said,
    stderr_tail_lines,
    warming_ids,
    warming_state,
)
from hostd.errors import (
    IDS_NAMED,
    CredentialUnavailable,
    ProviderUnauthorized,
    did_you_mean,
    unknown_provider,
)


def test_a_close_name_is_offered_and_a_far_one_is_not() -> None:
    assert did_you_mean("fact", ["notes", "facts"]) == "facts"
    assert did_you_mean("defualt_budget", ["socket", "default_budget"]) == "default_budget"
    assert did_you_mean("zzz", ["notes", "facts"]) is None
    assert did_you_mean("x", []) is None


def test_an_unknown_provider_close_to_one_names_the_configured_ids_and_the_close_one() -> None:
    said = unknown_provider("fact", {"notes", "facts"})
    assert said == "unknown provider 'fact' (configured: facts, notes); did you mean 'facts'?"


def test_an_unknown_provider_close_to_none_names_the_configured_ids_only() -> None:
    said = unknown_provider("zzz", ["notes", "facts"])
    assert said == "unknown provider 'zzz' (configured: facts, notes)"


def test_an_unknown_provider_with_none_configured_says_so() -> None:
    assert unknown_provider("facts", []) == "unknown provider 'facts' (no provider is configured)"


def test_many_configured_ids_are_named_up_to_a_bound_and_the_rest_counted() -> None:
    ids = [f"source{i:03d}" for i in range(IDS_NAMED + 5)]
    said = unknown_provider("zzz", ids)
    assert ", ".join(ids[:IDS_NAMED]) + " and 5 more)" in said
    assert ids[IDS_NAMED] not in said


_ID = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)


@given(st.sets(_ID, max_size=IDS_NAMED), _ID)
def test_the_message_quotes_the_ids_alone_and_any_guess_is_a_configured_id(
    configured: set[str], asked: str
) -> None:
    said = unknown_provider(asked, configured)
    assert said.startswith(f"unknown provider {asked!r} (")
    for pid in configured:
        assert pid in said
    guess = did_you_mean(asked, configured)
    assert (guess is None) == ("did you mean" not in said)
    if guess is not None:
        assert guess in configured and said.endswith(f"; did you mean {guess!r}?")


def test_a_warming_providers_words_follow_its_phase() -> None:
    def leg(phase: str | None, code: str = "warming") -> dict[str, object]:
        error: dict[str, object] = {"code": code, "message": "provider warming"}
        if phase is not None:
            error["phase"] = phase
        return {"status": "warming", "error": error}

    assert warming_state(leg("load")) == "still loading its saved index (provider warming)"
    assert warming_state(leg("load model")) == "still loading its model (provider warming)"
    for building in ("index", "read files", "embed", "loader", None):
        assert warming_state(leg(building)) == "still building its index (provider warming)"
    assert warming_state(leg("load", code="starting")) == "still starting (provider warming)"
    assert warming_state({"status": "ok"}) is None


#: A crash loop's leg, as the engine reports it (``_run``'s ``restarting_message``).
LOOPING: dict[str, Any] = {
    "provider_id": "notes",
    "status": "crashed",
    "error": {
        "code": "restarting",
        "message": "provider restarting after 3 failures in a row, not waited for; its "
        "last failure: crashed: provider process "
        "ended; exit status 3",
    },
}
WARMING = {"provider_id": "files", "status": "warming", "error": {"code": "warming"}}


def test_a_crash_loops_leg_says_it_keeps_failing_not_to_ask_again_shortly() -> None:
    from hostd.cli._outcome import leg_failures, warming_lines
    from hostd.mcp._schema import failed_hints, warming_hints

    assert warming_state(LOOPING) is None  # a failure, not a warm-up
    # As a daemon of an older version gave it: warming, code restarting.
    older = {**LOOPING, "status": "warming"}
    assert warming_state(older) == f"keeps failing, restarting ({LOOPING['error']['message']})"
    assert restarting_failures({"providers": [older]}) == restarting_failures(
        {"providers": [LOOPING]}
    )
    assert warming_ids({"providers": [older, LOOPING, WARMING]}) == ["files"]
    result = {"providers": [LOOPING, WARMING]}
    # Its line in the compose summary is a failure's, in the engine's words.
    assert leg_failures(result) == [
        f"  notes: crashed: {LOOPING['error']['message']}",
        "  files: warming: still building its index",
    ]
    # hostd mcp names it once, as one that keeps failing (``warming_hints``).
    assert failed_hints(result, None) == []
    said = [
        *warming_lines(result, connected=False),
        *warming_lines(result, connected=True, config=" --config /p/hostd.toml"),
        *warming_hints(result, None),
        *warming_hints(result, "/p/hostd.toml", connect="/run/hostd.sock"),
    ]
    warming = [line for line in said if "still warming: files." in line]
    looping = [line for line in said if "keeps failing: notes" in line]
    assert len(warming) == 4 and len(looping) == 4  # each surface says both, apart
    assert not any("notes" in line for line in warming)  # not told to ask again shortly
    for line in looping:
        assert "(last failure: crashed: provider process ended; exit status 3)" in line
        assert "shortly" not in line and "provider.stderr" in line
    assert "`hostd providers --config /p/hostd.toml --connect`" in looping[1]
    assert "`hostd providers`" in looping[0]


def test_an_adapters_shortfall_says_a_crash_loop_keeps_failing_without_quoting_it() -> None:
    from hostd.client import ComposeResult
    from hostd.integrations._evidence import shortfall

    reasons = [
        {"reason": "provider_failed", "provider": "notes", "detail": "restarting"},
        {"reason": "provider_warming", "provider": "files", "detail": "warming"},
    ]
    result = ComposeResult.model_validate(
        {
            "prompt": "",
            "citations": [],
            "evidence": [],
            "audit": {"entries": [], "global_budget": 100, "tokens_used": 0, "policy": {}},
            "providers": [LOOPING, WARMING],
            "request_id": "r1",
            "degraded": True,
            "degraded_reasons": reasons,
        }
    )
    said = shortfall(result)
    assert said is not None
    assert "still warming: files. " in said and "keeps failing: notes. " in said
    assert "exit status 3" not in said  # a provider's own words stay out of this line
    assert "`hostd providers --connect`" in said
    assert "provider_failed (notes: restarting)" in said
    # A daemon of an older version said provider_warming: read as the same crash loop.
    reasons[0] = {"reason": "provider_warming", "provider": "notes", "detail": "restarting"}
    older = ComposeResult.model_validate({**result.model_dump(), "degraded_reasons": reasons})
    said = shortfall(older)
    assert said is not None and "keeps failing: notes. " in said
    assert "still warming: files. " in said  # files alone: notes is not warming up


def test_a_stderr_tail_is_shown_a_line_each_under_its_provider_and_bounded() -> None:
    assert stderr_tail_lines("notes", "loading | IndexLocked: locked") == [
        "notes: its stderr ended with:",
        "    loading",
        "    IndexLocked: locked",
    ]
    assert stderr_tail_lines("notes", None) == stderr_tail_lines("notes", " ") == []
    # More than a failure keeps (a daemon of another version): its last lines, marked.
    many = stderr_tail_lines("notes", " | ".join(f"line {i}" for i in range(50)))
    assert many[1:3] == ["    …", "    line 31"] and many[-1] == "    line 49"
    assert len(many) == 21
    long = stderr_tail_lines("notes", "x" * 5000 + " | the end")
    assert long[-1] == "    the end" and len("".join(long)) < 1100
    assert long[1].startswith("    …x")


def test_a_stderr_tail_is_shown_only_under_a_last_failure_that_is_said() -> None:
    health = {"last_failure": "crashed: exited with status 1", "stderr_tail": "boom"}
    down = {"id": "notes", "state": "crashed", "health": health}
    assert failure_tail_lines(down) == ["notes: its stderr ended with:", "    boom"]
    assert failure_tail_lines({**down, "state": "ready"}) == []
    assert failure_tail_lines({**down, "health": {"stderr_tail": "boom"}}) == []
    warm_up = {**health, "readiness": "failed", "progress": {"message": "no index"}}
    assert failure_tail_lines({**down, "state": "failed", "health": warm_up}) == []


def test_a_failures_stderr_excerpt_names_only_the_lines_not_shown_under_it() -> None:
    shown = shown_stderr_tail("… | loading part 7 | IndexLocked: the index is locked")
    assert shown == ["…", "loading part 7", "IndexLocked: the index is locked"]
    quoted = "crashed; exited with status 1; stderr: … | loading part 7 | IndexLocked: the"
    assert said_once(quoted + " index is locked", shown) == "crashed; exited with status 1"
    # A line cut at its end (``…``) is the one shown whole; an earlier error line stays.
    early = "x; stderr: ValueError: early | … | IndexLocked: the ind…"
    assert said_once(early, shown) == "x; stderr: ValueError: early"
    assert said_once(quoted, []) == quoted  # nothing shown under it: the excerpt stays
    # A crash after a good start quotes its stderr's last lines (its ready line, maybe):
    # shown under it, they are not said twice either.
    head = "provider process ended; killed by SIGKILL"
    later = f"{head}; its stderr's last lines: "
    assert said_once(later + "loading part 7 | IndexLocked: the index is locked", shown) == head
    assert said_once(later + "ready | loading part 7", shown) == later + "ready"
    assert said_once("crashed: exited with status 1", shown) == "crashed: exited with status 1"


def test_a_stderr_excerpt_is_worded_as_the_cause_only_of_a_start_that_failed() -> None:
    # A failed start's stderr is most often why (an ImportError); after a good start its
    # last lines may be its ready line: quoted as what they are.
    assert stderr_said("ImportError: no x", started=False) == "stderr: ImportError: no x"
    assert stderr_said("index loaded", started=True) == "its stderr's last lines: index loaded"
    assert stderr_said("", started=True) == stderr_said("", started=False) == ""


def test_a_stderr_tail_is_shown_without_control_characters() -> None:
    assert shown_stderr_tail("\x1b[31mboom\x1b[0m") == ["?[31mboom?[0m"]
    assert shown_stderr_tail(None) == shown_stderr_tail("  ") == []


def test_a_down_provider_is_said_as_hostd_status_says_it() -> None:
    health = {
        "last_failure": "failed: provider closed its output; exited with status 1; stderr: boom",
        "last_failure_s_ago": 4.2,
        "stderr_tail": "loading | boom",
    }
    row = {"id": "notes", "state": "failed", "health": health}
    assert down_state(row) == (
        "failed 4 s ago: provider closed its output; exited with status 1; "
        "`hostd providers restart notes --connect` starts it now"
    )
    # No daemon's provider to restart: no command, and a retry due is said either way.
    assert down_state(row, restart=False) == (
        "failed 4 s ago: provider closed its output; exited with status 1"
    )
    # Parked with a retry due (a cool-down, maybe minutes): the command beside it, as a
    # fixed provider is not tried again sooner.
    cooling = {**row, "health": {**health, "retry_in_s": 26}}
    assert down_state(cooling) == (
        "failed 4 s ago: provider closed its output; exited with status 1; next try in 26 s, "
        "or `hostd providers restart notes --connect` starts it now"
    )
    assert down_state(cooling, restart=False) == (
        "failed 4 s ago: provider closed its output; exited with status 1; next try in 26 s"
    )
    due = {**row, "state": "crashed", "health": {**health, "retry_in_s": 2}}
    assert down_state(due, restart=False) == (
        "crashed 4 s ago: failed: provider closed its output; exited with status 1; next try in 2 s"
    )
    warm_up = {"readiness": "failed", "progress": {"message": "no  index"}, **health}
    assert down_state({**row, "health": warm_up}, restart=False) == (
        "failed: its warm-up failed: no index; it refuses every query until it is restarted"
    )
    assert down_state({**row, "state": "ready"}) is None
    assert down_state({**row, "health": {}}) is None


def test_a_remote_provider_waiting_for_its_server_says_when_it_is_checked_again() -> None:
    failure = "transport: ConnectError: connection refused at 10.0.0.7:8443"
    health = {"last_failure": failure, "last_failure_s_ago": 3.0, "next_check_in_s": 2.0}
    row = {"id": "team", "state": "crashed", "health": health}
    assert down_state(row) == f"crashed 3 s ago: {failure}; next check in 2 s"
    soon = {**row, "health": {**health, "next_check_in_s": 0.5}}
    assert down_state(soon) == f"crashed 3 s ago: {failure}; next check in under 1 s"


def test_a_refused_remote_provider_says_the_next_request_asks_once_its_credential_changes() -> None:
    """Parked for its credential, it is asked again by the next request as soon as the
    token changes (``credential_changed``), not only after its cool-down."""
    failure = "unauthorized: remote provider refused the credential (HTTP 401): check the token"
    health = {"last_failure": failure, "last_failure_s_ago": 3.0, "retry_in_s": 57.0}
    row = {"id": "team", "state": "failed", "health": health, "remote": {"url": "https://x/"}}
    asks = "the next request asks again once its credential changes"
    assert down_state(row) == (
        f"failed 3 s ago: {failure}; {asks}, else next try in 57 s, or "
        "`hostd providers restart team --connect` starts it now"
    )
    assert down_state(row, restart=False) == (
        f"failed 3 s ago: {failure}; {asks}, else next try in 57 s"
    )
    unread = {**health, "last_failure": "credential: token file /t is missing", "retry_in_s": None}
    assert down_state({**row, "health": unread}, restart=False) == (
        f"failed 3 s ago: credential: token file /t is missing; {asks}"
    )
    # A local provider's failure in the same words is no refused credential.
    local = {k: v for k, v in row.items() if k != "remote"}
    assert down_state(local, restart=False) == f"failed 3 s ago: {failure}; next try in 57 s"
    # The codes are the errors' own.
    assert set(REFUSED_CODES) == {ProviderUnauthorized.reason, CredentialUnavailable.reason}


def test_the_handshake_timeout_advice_names_a_rust_authors_flush() -> None:
    # A Rust provider whose stdout is wrapped in a BufWriter never flushed gets this
    # advice: in its own terms, beside Java's, C's and Python's.
    assert ".flush() a Rust BufWriter per line" in NO_HANDSHAKE


def _absorbed(pid: str, kept: str, frame_id: str, reason: str = "contained_in") -> dict[str, Any]:
    detail = {"kept": {"provider_id": kept, "frame_id": frame_id}}
    return {
        "frame": {"provider_id": pid, "frame_id": f"{pid}:{frame_id}"},
        "disposition": "excluded",
        "reason": reason,
        "detail": detail,
    }


def test_absorbed_frames_name_whose_and_the_block_by_its_cited_label() -> None:
    result = {
        "citations": [
            {
                "label": "package.json L23-34",
                "frame": {"provider_id": "files", "frame_id": "p#L23-34"},
            }
        ],
        "audit": {
            "entries": [
                _absorbed("scripts", "files", "p#L23-34"),
                _absorbed("scripts", "files", "p#L23-34"),
                # A provider's own chunks merged together: routine, not named.
                _absorbed("files", "files", "p#L23-34", "merged_into"),
            ]
        },
    }
    assert absorbed_words(result) == {"contained_in": "scripts 2 in files package.json L23-34"}
    assert absorbed_words(result, "scripts") == {"contained_in": "in files package.json L23-34"}
    assert absorbed_words(result, "files") == {}


def test_many_absorbed_frames_stay_one_bounded_line() -> None:
    entries = [_absorbed(f"p{i}", "files", f"f{i}#" + "x" * 200) for i in range(50)]
    entries += [_absorbed("p0", "files", "f0#" + "x" * 200)]
    said = absorbed_words({"audit": {"entries": entries}})["contained_in"]
    # The largest group first, at most two named (labels cut), then how many more frames.
    assert said.startswith("p0 2 in files f0#xxx") and said.endswith(", 48 more"), said
    assert len(said) < 160 and "\n" not in said, said


def test_a_one_shot_command_says_what_to_do_not_when_a_daemon_runs_it_again() -> None:
    why = "provider 'notes' cannot start nodee notes.js: nodee was not found"
    for when in (", or in 60 s", ""):
        said = one_shot_words(why + not_run_again(when))
        again = " (fix that, then run the command again: each run starts its providers anew)"
        assert said == why + again, said
    assert one_shot_words(why) == why  # nothing of a daemon's to replace
