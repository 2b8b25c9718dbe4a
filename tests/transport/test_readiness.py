"""What the host keeps of a provider's ``context/progress`` (a peer's text, bounded)."""

from __future__ import annotations

import pytest

from hostd.transport import PROGRESS_METHOD, Readiness


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
