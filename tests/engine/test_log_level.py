"""A leg's, a verify pass's and a verdict's log events are not built below the level the
log is configured at (``hostd._log.level``, set by ``configure_logging``), and are
written, as before, at or above it."""

from __future__ import annotations

import io
from typing import Any

import pytest

from hostd import _log
from hostd.engine import LegReport, LegStatus, _host, _rerank
from hostd.logs import configure_logging
from tests.fixtures.logging_state import restored_logging


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def info(self, event: str, **_: Any) -> None:
        self.events.append(("info", event))

    def warning(self, event: str, **_: Any) -> None:
        self.events.append(("warning", event))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    rec = _Recorder()
    monkeypatch.setattr(_host, "log", rec)
    monkeypatch.setattr(_rerank, "log", rec)
    monkeypatch.setattr(_log.level, "at", _log.level.at)  # restored after the test
    return rec


def _legs() -> None:
    for status in (LegStatus.OK, LegStatus.TIMEOUT, LegStatus.QUARANTINED):
        _host._log_leg(LegReport("p", status))
    _rerank.RerankOutcome(model="m").timed(3, 0.0)
    _rerank.RerankOutcome(reason="timeout").timed(3, 0.0)


def test_configure_logging_sets_the_level_the_engine_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with restored_logging(monkeypatch):
        configure_logging("error", stream=io.StringIO())
        assert _log.level.at == 40
        configure_logging("debug", stream=io.StringIO())
        assert _log.level.at == 10


@pytest.mark.parametrize(
    ("at", "want"),
    [
        (
            20,
            [
                ("info", "provider.leg"),
                ("warning", "provider.leg.failed"),
                ("warning", "provider.leg.quarantined"),
                ("info", "rerank.done"),
                ("warning", "rerank.failed"),
            ],
        ),
        (
            30,
            [
                ("warning", "provider.leg.failed"),
                ("warning", "provider.leg.quarantined"),
                ("warning", "rerank.failed"),
            ],
        ),
        (40, []),
    ],
)
def test_events_below_the_level_are_not_built(
    recorded: _Recorder, at: int, want: list[tuple[str, str]]
) -> None:
    _log.level.at = at
    _legs()
    assert recorded.events == want


@pytest.mark.parametrize("status", [LegStatus.TIMEOUT, LegStatus.CRASHED, LegStatus.ERROR])
def test_a_failed_leg_warns_only_when_it_was_sent(recorded: _Recorder, status: LegStatus) -> None:
    # Whatever its code: a leg told at once, never sent, is no news (its provider's
    # failure was told as it came); one that was sent and failed warns, every time.
    _log.level.at = 20
    for _ in range(2):
        _host._log_leg(LegReport("p", status, error_code="transport", sent=True))
        _host._log_leg(LegReport("p", status, error_code="transport", sent=False))
    assert recorded.events == [("warning", "provider.leg.failed"), ("info", "provider.leg")] * 2
