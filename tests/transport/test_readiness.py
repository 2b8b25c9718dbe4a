"""What the host keeps of a provider's ``context/progress`` (a peer's text, bounded)."""

from __future__ import annotations

import pytest

from hostd.transport import PROGRESS_METHOD, RATE_SPAN_S, Readiness


@pytest.mark.parametrize(("state", "kept"), [("ready", 1000), ("failed", 200), ("warming", 200)])
def test_a_ready_message_is_kept_long_enough_to_name_files_and_any_other_is_short(
    state: str, kept: int
) -> None:
    # A ready message says what an index holds and names files it left out (the bundled
    # providers); a failure or a phase is one short line.
    readiness = Readiness("files")
    message = "x" * 1500
    readiness.on_notification(PROGRESS_METHOD, {"state": state, "message": message})
    assert readiness.progress["message"] == message[:kept]


@pytest.mark.parametrize("notified_first", [True, False])
def test_a_ready_message_is_kept_whether_it_comes_before_or_after_the_handshake(
    notified_first: bool,
) -> None:
    # A warm-up that ends at once (an empty root) sends its ready notification from its
    # thread while the handshake is answered: either may reach the host first, and
    # `hostd status` / `hostd warm` show what the provider holds either way.
    readiness = Readiness("files")
    said = {"state": "ready", "phase": "ready", "message": "0 chunks from 0 files under /p"}
    steps = [
        lambda: readiness.on_notification(PROGRESS_METHOD, said),
        lambda: readiness.handshake({"protocol_version": "1.0"}),
    ]
    for step in steps if notified_first else reversed(steps):
        step()
    assert readiness.state == "ready"
    assert readiness.settled.is_set()
    assert readiness.progress["message"] == said["message"]


def test_a_ready_provider_that_says_ready_again_is_shown_with_what_it_holds_now() -> None:
    # An index rebuilt for a changed tree (a new .hostdignore) says what it holds now:
    # `hostd status` shows that, not what it held at its start.
    readiness = Readiness("files")
    readiness.handshake({"protocol_version": "1.0"})
    readiness.on_notification(PROGRESS_METHOD, {"state": "ready", "message": "10 chunks"})
    readiness.on_notification(PROGRESS_METHOD, {"state": "ready", "message": "5 chunks"})
    assert (readiness.state, readiness.progress["message"]) == ("ready", "5 chunks")


def test_a_long_steps_seconds_are_kept_when_they_are_a_count() -> None:
    # A step said again carries how long its phase has run (elapsed_s): a client's
    # progress shows it; anything but a whole count of seconds is a peer's noise.
    readiness = Readiness("semantic")
    for elapsed, kept in ((6, 6), (-1, None), ("6", None), (True, None), (2.5, None)):
        note = {"state": "warming", "phase": "load model", "done": 0, "elapsed_s": elapsed}
        readiness.on_notification(PROGRESS_METHOD, note)
        assert readiness.progress.get("elapsed_s") == kept


def test_a_warming_phases_time_left_is_measured_from_its_first_note_to_its_latest() -> None:
    # `hostd status` reads it from a daemon that heard the whole build, as `hostd warm`'s
    # own lines measure it: from where the phase began (a resumed build's cached part is
    # not counted as work done), over RATE_SPAN_S at least.
    now = [100.0]
    readiness = Readiness("semantic", clock=lambda: now[0])

    def note(at: float, done: int, total: int = 1000, phase: str = "embed") -> float | None:
        now[0] = at
        body = {"state": "warming", "phase": phase, "done": done, "total": total}
        readiness.on_notification(PROGRESS_METHOD, body)
        return readiness.left_s()

    assert note(100.0, 400) is None  # resumed at 400: no rate yet
    assert note(100.0 + RATE_SPAN_S / 2, 450) is None  # too short a span to say
    assert note(120.0, 500) == 100.0  # 100 done in 20 s: the 500 left take 100 s
    assert note(121.0, 300, total=900) is None  # a new total: its rate starts over
    assert note(130.0, 300, phase="index") is None  # so does a new phase
    readiness.on_notification(PROGRESS_METHOD, {"state": "ready", "message": "1000 chunks"})
    assert readiness.left_s() is None
