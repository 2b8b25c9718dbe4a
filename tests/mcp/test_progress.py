"""The words and numbers of ``compose_context``'s results, as pure functions: progress
values that only increase, why a composition holds no evidence, consent hints."""

from __future__ import annotations

import math
from typing import Any

import anyio
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from hostd.engine import LegReport, LegStatus
from hostd.mcp._schema import (
    COMPOSE_OUTPUT_SCHEMA,
    ProgressTrack,
    consent_hints,
    failed_hints,
    no_evidence,
    warming_hints,
)
from hostd.mcp._server import _pusher
from hostd.protocol import Violation

_WARMING = st.builds(
    lambda p, d, t: {"provider": p, "status": "warming", "warming": {"done": d, "total": t}},
    st.sampled_from(["semantic", "files"]),
    st.integers(0, 10),
    st.one_of(st.none(), st.integers(1, 10), st.just("ten")),
)


@given(st.lists(st.one_of(st.just("leg"), _WARMING), max_size=120), st.integers(1, 8))
def test_progress_values_strictly_increase_whatever_arrives(events: list[Any], legs: int) -> None:
    track = ProgressTrack()
    sent = [track.start()]
    done = 0
    for event in events:
        if event == "leg":
            done += 1
            event = {"provider": "p", "status": "ok", "done": done, "total": max(legs, done)}
        update = track.update(event)
        if update is not None:
            sent.append(update)
    values = [v for v, _, _ in sent]
    assert all(a < b for a, b in zip(values, values[1:], strict=False)), values
    # Each finished leg is reported at its count; warming notes stay short of the next.
    assert [v for v, _, m in sent if m.startswith("p:")] == [float(i) for i in range(1, done + 1)]
    assert all(v % 1 < 0.5 for v, _, m in sent if "warming" in m)


def test_warming_notes_past_the_limit_are_dropped_until_the_next_leg() -> None:
    track = ProgressTrack(max_notes=2)
    track.start()
    note = {"provider": "s", "status": "warming", "warming": {"done": 1, "total": 3}}
    first, second, third = (track.update(note) for _ in range(3))
    assert first is not None and first[2] == "s: warming, building its index 1/3"
    assert second is not None and third is None
    leg = track.update({"provider": "s", "status": "ok", "done": 1, "total": 1})
    assert leg == (1.0, 1.0, "s: ok, 0 frames")
    assert track.update(note) is not None


def test_a_warming_note_names_a_known_state_only() -> None:
    track = ProgressTrack()
    track.start()
    notes = [
        {"provider": "s", "status": "warming", "warming": {"state": "ready"}},
        {"provider": "s", "status": "warming", "warming": {"state": "\x1b[2J pwned"}},
    ]
    updates = [track.update(n) for n in notes]
    assert [u[2] if u else None for u in updates] == ["s: ready", "s: warming, building its index"]


def test_a_warming_note_says_what_the_provider_is_doing_by_its_phase() -> None:
    track = ProgressTrack()
    track.start()
    said = [
        track.update({"provider": "f", "status": "warming", "warming": figures})
        for figures in (
            {"state": "warming", "phase": "load", "done": 40, "total": 90},
            {"state": "warming", "phase": "read files", "done": 90, "total": 90},
            {"state": "warming", "phase": "index", "done": 0, "total": 13430},
        )
    ]
    # Files read, then chunks indexed: the count of the next step, not a restart.
    assert [u[2] if u else None for u in said] == [
        "f: warming, loading its saved index 40/90",
        "f: warming, building its index: reading files 90/90",
        "f: warming, building its index: indexing chunks 0/13430",
    ]
    # A phase of the provider's own naming is not quoted.
    other = track.update({"provider": "f", "warming": {"phase": "\x1b[2J", "done": 1, "total": 2}})
    assert other is not None and other[2] == "f: warming, building its index 1/2"


def test_a_leg_that_ended_warming_says_what_its_last_warm_up_note_said() -> None:
    track = ProgressTrack()
    track.start()
    step = track.update(
        {"provider": "s", "status": "warming", "warming": {"phase": "load model", "done": 0}}
    )
    leg = track.update(
        {"provider": "s", "status": "warming", "phase": "load model", "done": 1, "total": 1}
    )
    assert step is not None and step[2] == "s: warming, loading its model"
    assert leg == (1.0, 1.0, "s: warming, loading its model, 0 frames")


def test_no_evidence_names_the_block_another_providers_frames_went_into() -> None:
    kept = {"provider_id": "files", "frame_id": "package.json#L23-34"}
    entry = {"frame": {"provider_id": "scripts"}, "disposition": "excluded"}
    result = {
        "prompt": "",
        "citations": [],
        "audit": {
            "entries": [
                {**entry, "reason": "contained_in", "detail": {"kept": kept}},
                {**entry, "reason": "contained_in", "detail": {"kept": kept}},
                {"frame": kept, "disposition": "excluded", "reason": "over_budget"},
            ]
        },
        "providers": [{"provider_id": "scripts", "status": "ok", "frames_offered": 2}],
    }
    text = no_evidence(result)
    assert text is not None
    assert (
        "- scripts: ok, 2 frames offered, none included (contained_in x2 in files "
        "package.json#L23-34)"
    ) in text.splitlines(), text


def test_no_evidence_names_each_provider_and_why() -> None:
    result = {
        "prompt": "",
        "citations": [],
        "audit": {
            "entries": [
                {"frame": {"provider_id": "files"}, "disposition": "excluded", "reason": "r"},
                {"frame": {"provider_id": "files"}, "disposition": "excluded", "reason": "r"},
            ]
        },
        "providers": [
            {"provider_id": "broken", "status": "crashed", "error": {"message": "exit 1"}},
            {"provider_id": "files", "status": "ok", "frames_offered": 2},
            {"provider_id": "notes", "status": "ok", "frames_offered": 0},
            {"provider_id": "web", "status": "no_consent", "missing_scopes": ["api.x"]},
        ],
    }
    text = no_evidence(result)
    assert text is not None
    assert text.splitlines() == [
        "hostd: no evidence for this goal [no_evidence]:",
        "- broken: crashed: exit 1",
        "- files: ok, 2 frames offered, none included (r x2)",
        "- notes: ok, no frames matched",
        "- web: no_consent: needs consent for api.x",
    ]
    assert no_evidence({**result, "citations": [{"label": "x"}]}) is None


def test_consent_hints_name_each_scope_the_config_and_the_socket() -> None:
    structured = {"consent_required": [{"provider": "web", "scopes": ["a.x", "b.x"]}]}
    (hint,) = consent_hints(structured, "/etc/hostd.toml", "/run/hostd.sock")
    assert "needs consent for a.x, b.x" in hint
    for scope in ("a.x", "b.x"):
        grant = f"consent grant web {scope} --connect /run/hostd.sock"
        assert f"hostd --config /etc/hostd.toml {grant}" in hint
    (bare,) = consent_hints(structured, None)
    assert "hostd consent grant web a.x;" in bare


def test_failed_hints_name_a_command_that_answers_where_the_providers_run() -> None:
    result = {
        "providers": [
            {"provider_id": "crash", "status": "error"},
            {"provider_id": "ok", "status": "ok"},
            {"provider_id": "slow", "status": "timeout"},
        ]
    }
    # A daemon runs them: its status says why.
    (daemon,) = failed_hints(result, "/etc/hostd.toml", "/run/hostd.sock")
    assert daemon.endswith("lacks what they hold; `hostd --config /etc/hostd.toml status` says why")
    # In process, no daemon serves that config: each is checked alone instead.
    (alone,) = failed_hints(result, "/etc/hostd.toml", None)
    assert alone.startswith("hostd: no evidence from crash (error), slow (timeout) this time")
    assert "status" not in alone
    assert alone.endswith(
        "`hostd --config /etc/hostd.toml check-provider --provider crash`, "
        "`hostd --config /etc/hostd.toml check-provider --provider slow` run each alone and "
        "say why"
    )


def test_failed_hints_name_legs_that_lost_part_of_their_answer_with_their_note() -> None:
    lost = "1 of 2 tools gave no results: hang (timeout)"
    result = {
        "providers": [
            {"provider_id": "slow", "status": "timeout"},
            {"provider_id": "tickets", "status": "ok", "note": lost},
            # A note that is no loss (nothing fit its share): not named.
            {"provider_id": "files", "status": "ok", "note": "nothing fit: …"},
        ],
        "degraded_reasons": [
            {"reason": "provider_failed", "provider": "slow", "detail": "timeout"},
            {"reason": "provider_partial", "provider": "tickets", "detail": "timeout"},
        ],
    }
    (both,) = failed_hints(result, None, "/run/hostd.sock")
    assert both == (
        f"hostd: no evidence from slow (timeout), and only part of the evidence from tickets "
        f"({lost}) this time: the evidence above lacks what they hold; `hostd status` says why"
    )
    result["providers"] = result["providers"][1:]
    (alone,) = failed_hints(result, None, None)
    assert alone.startswith(f"hostd: only part of the evidence from tickets ({lost}) this time")
    assert alone.endswith("`hostd check-provider --provider tickets` runs it alone and says why")
    # A note as long as a config naming many tools makes it is cut, not quoted whole.
    result["providers"][0]["note"] = "x" * 1000
    (cut,) = failed_hints(result, None, None)
    assert f"tickets ({'x' * 299}…) this time" in cut


def _entries(pid: str, *reasons: str) -> list[dict[str, Any]]:
    return [
        {"frame": {"provider_id": pid}, "disposition": "excluded", "reason": r} for r in reasons
    ]


def test_failed_hints_name_a_leg_whose_every_frame_was_dropped_with_counts_and_rules() -> None:
    # Every frame adr offered was invalid: ok, yet the prompt holds nothing of it.
    secret = {"rule": "schema", "field": "frames[0].Secret plan", "message": "missing"}
    violations = [
        secret,
        {"rule": "F2", "field": "frames[1].title", "message": "title is empty"},
        {"rule": "R3", "field": "frames[1].content", "message": "…", "severity": "notice"},
    ]
    adr = {"provider_id": "adr", "status": "ok", "frames_offered": 2, "violations": violations}
    # files offered two, one dropped for its digest and one kept: named apart, below.
    files = {"provider_id": "files", "status": "ok", "frames_offered": 2}
    result: dict[str, Any] = {
        "providers": [adr, files, {"provider_id": "slow", "status": "timeout"}],
        "audit": {
            "entries": [
                *_entries("adr", "invalid_frame", "invalid_frame"),
                *_entries("files", "digest_mismatch"),
                {"frame": {"provider_id": "files"}, "disposition": "included"},
            ]
        },
    }
    (hint,) = failed_hints(result, None, None)
    assert hint == (
        "hostd: no evidence from slow (timeout), adr (ok, but 2 frame(s) dropped: "
        "invalid_frame 2 (F2, schema)), and only part of the evidence from files (ok, but "
        "1 frame(s) dropped: digest_mismatch 1) this time: the evidence above lacks what "
        "they hold; `hostd check-provider --provider slow`, `hostd check-provider "
        "--provider adr`, `hostd check-provider --provider files` run each alone and say why"
    )
    assert "Secret" not in hint and "R3" not in hint  # no field it sent; a notice keeps
    # A digest its frames got wrong, every one: named by the audit's reason.
    files["frames_offered"] = 1
    result["audit"]["entries"] = _entries("files", "digest_mismatch")
    result["providers"] = [files]
    (hint,) = failed_hints(result, None, "/run/hostd.sock")
    assert hint.startswith(
        "hostd: no evidence from files (ok, but 1 frame(s) dropped: digest_mismatch 1) this time"
    )


def test_failed_hints_name_a_leg_that_lost_some_of_its_frames_with_counts_and_rules() -> None:
    # adr offered three: one invalid (schema, with a field it named), one outside the
    # trusted roots, one kept; tickets also lost a tool: both said, in one parenthesis.
    violations = [{"rule": "schema", "field": "frames[0].Secret plan", "message": "missing"}]
    adr = {"provider_id": "adr", "status": "ok", "frames_offered": 3, "violations": violations}
    tickets = {"provider_id": "tickets", "status": "ok", "frames_offered": 2, "note": "lost"}
    result: dict[str, Any] = {
        "providers": [adr, tickets],
        "audit": {
            "entries": [
                *_entries("adr", "invalid_frame", "untrusted_source", "budget"),
                *_entries("tickets", "digest_mismatch", "budget"),
            ]
        },
        "degraded_reasons": [{"reason": "provider_partial", "provider": "tickets"}],
    }
    (hint,) = failed_hints(result, None, "/run/hostd.sock")
    assert hint == (
        "hostd: only part of the evidence from tickets (lost; 1 frame(s) dropped: "
        "digest_mismatch 1), adr (ok, but 2 frame(s) dropped: invalid_frame 1 (schema); "
        "untrusted_source 1) this time: the evidence above lacks what they hold; "
        "`hostd status` says why"
    )
    assert "Secret" not in hint  # a field it named is never quoted
    # Dropped for how they ranked (the budget), not for what it sent: nothing to say.
    result["audit"]["entries"] = _entries("adr", "budget", "budget")
    result["degraded_reasons"] = []
    assert failed_hints(result, None, None) == []


WARMING_LEG = {
    "provider_id": "semantic",
    "status": "warming",
    "frames_offered": 0,
    "frames_accepted": 0,
    "error": {"code": "warming", "message": "provider warming, answered not ready: embed 64/449"},
}


def test_no_evidence_says_a_warming_provider_builds_its_index_and_what_to_do() -> None:
    result = {"prompt": "", "citations": [], "audit": {"entries": []}, "providers": [WARMING_LEG]}
    text = no_evidence(result, "/p/hostd.toml")
    assert text is not None
    head, leg, advice = text.splitlines()
    assert leg == (
        "- semantic: warming: still building its index "
        "(provider warming, answered not ready: embed 64/449)"
    )
    assert advice.startswith("hostd: still warming: semantic. ")
    assert "call compose_context again shortly" in advice
    assert "`hostd warm --config /p/hostd.toml`" in advice
    assert "`hostd warm`" in (no_evidence(result) or "")


def test_a_warming_provider_beside_evidence_is_named_with_what_to_do() -> None:
    files = {"provider_id": "files", "status": "ok", "frames_offered": 1, "frames_accepted": 1}
    result = {"citations": [{"label": "x"}], "providers": [files, WARMING_LEG]}
    (hint,) = warming_hints(result, None)
    assert hint.startswith("hostd: still warming: semantic. ")
    assert warming_hints({"providers": [files]}, None) == []


def test_in_process_the_warming_hint_says_a_daemon_keeps_the_models_loaded() -> None:
    # hostd warm builds the index but loads no model into this process: each in-process
    # hostd mcp loads them again, and only hostd serve behind --connect keeps them.
    result = {"citations": [{"label": "x"}], "providers": [WARMING_LEG]}
    (alone,) = warming_hints(result, "/p/hostd.toml")
    assert "Each `hostd mcp` process (a client's session) starts its providers anew" in alone
    assert "(`hostd warm --config /p/hostd.toml` builds an index ahead of time" in alone
    assert "but keeps no model loaded)" in alone
    assert alone.endswith(
        "keep `hostd serve --config /p/hostd.toml` running and give the client "
        "`hostd mcp --config /p/hostd.toml --connect` to keep them loaded across sessions"
    )
    # Under --connect the daemon's providers go on warming: nothing to set up.
    (connected,) = warming_hints(result, "/p/hostd.toml", "/run/hostd.sock")
    assert connected == (
        "hostd: still warming: semantic. The daemon's providers go on warming up in the "
        "background: call compose_context again shortly"
    )
    text = no_evidence({**result, "citations": []}, "/p/hostd.toml", "/run/hostd.sock")
    assert text is not None and text.endswith(connected)


def test_a_warming_hint_says_each_providers_step_and_speaks_of_models_only_for_one() -> None:
    # A config with no model (files and memory): the hint says what files is doing and
    # how to build its index ahead of time, nothing about loading models.
    files = {
        "provider_id": "files",
        "status": "warming",
        "error": {"code": "warming", "message": "provider warming", "phase": "index"},
    }
    (alone,) = warming_hints({"citations": [], "providers": [files]}, "/p/hostd.toml")
    assert alone == (
        "hostd: still warming: files (building its index: indexing chunks). hostd goes on "
        "warming up in the background: call compose_context again shortly. `hostd warm "
        "--config /p/hostd.toml` builds an index ahead of time, and the bundled providers "
        "keep it on disk for the next sessions"
    )
    # Beside one embedding with its model, the models are spoken of again.
    embedding = {**WARMING_LEG, "error": {"code": "warming", "phase": "embed"}}
    (both,) = warming_hints({"providers": [files, embedding]}, None)
    assert both.startswith(
        "hostd: still warming: files (building its index: indexing chunks), semantic "
        "(building its index: embedding chunks). "
    )
    assert "loads their models once" in both


def test_a_provider_still_starting_is_said_to_start_never_to_load_a_model_or_build_an_index() -> (
    None
):
    # An MCP server not handshaken yet (the walkthrough's mcp-server-git): no model, no
    # index, and `hostd warm` cannot help it; a daemon keeps it running, though.
    git = {
        "provider_id": "git",
        "status": "warming",
        "error": {"code": "starting", "message": "provider starting, not ready within 3000 ms"},
    }
    (alone,) = warming_hints({"citations": [], "providers": [git]}, "/p/hostd.toml")
    assert alone == (
        "hostd: still warming: git (starting its process and handshake). hostd goes on "
        "starting it in the background: call compose_context again shortly. Each `hostd "
        "mcp` process (a client's session) starts its providers anew; keep `hostd serve "
        "--config /p/hostd.toml` running and give the client `hostd mcp --config "
        "/p/hostd.toml --connect` to keep them running across sessions"
    )
    # Beside one building its index, `hostd warm` helps that one, and no model is named.
    files = {
        "provider_id": "files",
        "status": "warming",
        "error": {"code": "warming", "message": "provider warming", "phase": "index"},
    }
    (both,) = warming_hints({"providers": [git, files]}, None)
    assert both.startswith(
        "hostd: still warming: git (starting its process and handshake), files (building "
        "its index: indexing chunks). "
    )
    assert "`hostd warm` builds an index" in both and "model" not in both


def test_no_evidence_tells_why_an_ok_leg_gave_nothing_from_its_note() -> None:
    note = "nothing fit: no frame within its share of 1200 tokens (it left out 3 frame(s))"
    files = {"provider_id": "files", "status": "ok", "frames_offered": 0, "note": note}
    text = no_evidence({"citations": [], "audit": {"entries": []}, "providers": [files]})
    assert text is not None
    assert text.splitlines()[1] == f"- files: ok: {note}"


def test_the_output_schema_declares_every_member_of_a_provider_report() -> None:
    report = LegReport(
        "files",
        LegStatus.OK,
        error_code="warming",
        error_message="provider warming",
        violations=(Violation("B1", "max_tokens", "over what it was asked"),),
        max_tokens=1200,
        share=600,
        missing_scopes=("api.example.com",),
        note="nothing fit: no frame within its share of 1200 tokens",
        share_apart="warming",
    )
    wire = report.to_wire()
    item = COMPOSE_OUTPUT_SCHEMA["properties"]["providers"]["items"]
    assert set(wire) == set(item["properties"])
    Draft202012Validator({**item, "additionalProperties": False}).validate(wire)
    assert item["properties"]["note"]["type"] == "string"


def test_a_leg_that_ends_warming_moves_the_count_and_every_note_has_the_total() -> None:
    # The user saw "semantic: warming…" at 1.25, then "files: ok" at 3: the leg that
    # ended warming never moved the count, and the early notes had no total.
    track = ProgressTrack()
    track.start()
    step = {"provider": "s", "status": "warming", "warming": {"done": 1, "total": 9}, "total": 2}
    ended = {"provider": "s", "status": "warming", "frames_accepted": 0, "done": 1, "total": 2}
    said = [track.update(n) for n in (step, ended)]
    assert said[0] is not None and said[0][1:] == (2.0, "s: warming, building its index 1/9")
    assert said[1] == (1.0, 2.0, "s: warming, 0 frames")


def test_a_leg_that_finishes_after_its_call_was_cancelled_is_dropped_quietly() -> None:
    # A cancel ends the call's forwarder (the receiving end) while its legs still finish:
    # their reports go nowhere, and raise nothing into the engine (whose log would call
    # every cancelled call's late leg a failed progress callback).
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
    push = _pusher(send)
    leg = {"provider": "p", "status": "ok", "done": 1, "total": 2}
    receive.close()
    push(leg)
    send.close()  # and the call returned
    push(leg)


def test_a_long_step_said_again_says_how_long_it_has_run() -> None:
    track = ProgressTrack()
    track.start()
    said = [
        track.update({"provider": "s", "status": "warming", "warming": figures})
        for figures in (
            {"state": "warming", "phase": "load model", "done": 0, "elapsed_s": 6},
            {"state": "warming", "phase": "embed", "done": 64, "total": 449, "elapsed_s": 2},
            {"state": "warming", "phase": "load model", "elapsed_s": "6 s; rm -rf"},
        )
    ]
    assert [u[2] if u else None for u in said] == [
        "s: warming, loading its model (6 s)",
        "s: warming, building its index: embedding chunks 64/449 (2 s)",
        "s: warming, loading its model",  # not a count: not quoted
    ]
