"""The log's rate limit on repeated events: a bucket per event, the rest counted and
summarised, nothing lost from the count (a fake clock: no waiting)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hostd.transport import RepeatedEvents


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [f for e, f in self.events if e == event]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_past_the_burst_an_event_is_counted_and_summarised_when_due() -> None:
    log, clock = _Log(), _Clock()
    repeats = RepeatedEvents(log, burst=3, rate=0.0, summary_s=10.0, clock=clock)
    logged = [repeats.warning("host.connection_refused", limit=4, connection="unix#9")]
    for _ in range(9):
        logged.append(repeats.warning("host.connection_refused", limit=4, connection="unix#9"))
    assert logged == [True] * 3 + [False] * 7
    assert repeats.suppressed("host.connection_refused") == 7
    assert log.named("host.connection_refused.suppressed") == []  # not due yet
    repeats.warning("client.unauthorized", connection="tcp#2")  # another event, own bucket
    assert len(log.named("client.unauthorized")) == 1
    clock.now = 10.0
    repeats.summarise()
    assert log.named("host.connection_refused.suppressed") == [
        {"suppressed": 7, "since_last": 7, "limit": 4}  # the connection is not named
    ]
    repeats.warning("host.connection_refused", limit=4, connection="unix#9")
    repeats.summarise(final=True)
    summaries = log.named("host.connection_refused.suppressed")
    assert summaries[-1] == {"suppressed": 8, "since_last": 1, "limit": 4}
    assert log.named("client.unauthorized.suppressed") == []  # nothing left out there


@given(
    burst=st.integers(0, 30),
    rate=st.floats(0, 50),
    steps=st.lists(st.tuples(st.floats(0, 3), st.sampled_from("ab")), max_size=200),
)
def test_logged_and_summarised_add_up_to_every_occurrence_within_the_bucket(
    burst: int, rate: float, steps: list[tuple[float, str]]
) -> None:
    log, clock = _Log(), _Clock()
    repeats = RepeatedEvents(log, burst=burst, rate=rate, summary_s=5.0, clock=clock)
    for wait, event in steps:
        clock.now += wait
        repeats.warning(event)
    repeats.summarise(final=True)
    for event in "ab":
        total = sum(1 for _, e in steps if e == event)
        logged = len(log.named(event))
        assert logged <= burst + rate * clock.now + 1e-6
        assert logged + sum(s["since_last"] for s in log.named(f"{event}.suppressed")) == total
