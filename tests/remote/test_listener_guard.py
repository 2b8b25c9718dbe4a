"""``ConnectionGuard``'s decisions on real socket pairs and a fake clock: the request
deadline, the cap (the connection idle longest makes room; a busy one never does),
and one exhaustion line per interval."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Iterator

import pytest

from hostd.provider._listener_guard import ConnectionGuard, install_exhaustion_handler


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for ours, theirs in made:
        ours.close()
        theirs.close()


def _pair(made: list[tuple[socket.socket, socket.socket]]) -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    made.append((ours, theirs))
    return ours, theirs


def _ended(theirs: socket.socket) -> bool:
    """Whether the server's side was shut down (the peer reads an end of file)."""
    theirs.setblocking(False)
    try:
        return theirs.recv(1) == b""
    except BlockingIOError:
        return False


def test_a_connection_without_a_request_is_ended_at_its_deadline(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    clock = Clock()
    guard = ConnectionGuard(max_connections=10, request_timeout_s=2.0, clock=clock)
    quiet, quiet_peer = _pair(pairs)
    served, served_peer = _pair(pairs)
    assert guard.admit(quiet) and guard.admit(served)
    guard.request_started(served.fileno())
    clock.now = 1.9
    assert guard.sweep() == 0
    clock.now = 2.0
    assert guard.sweep() == 1
    assert _ended(quiet_peer) and not _ended(served_peer)
    # A kept-alive connection gets the deadline again from its response.
    guard.response_done(served.fileno())
    clock.now = 3.9
    assert guard.sweep() == 0
    clock.now = 4.0
    assert guard.sweep() == 1 and _ended(served_peer)
    assert guard.expired == 2


def test_past_the_cap_the_longest_idle_makes_room_and_a_busy_one_never_does(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    clock = Clock()
    guard = ConnectionGuard(max_connections=2, request_timeout_s=60.0, clock=clock)
    first, first_peer = _pair(pairs)
    assert guard.admit(first)
    clock.now = 1.0
    second, second_peer = _pair(pairs)
    assert guard.admit(second)
    clock.now = 2.0
    third, _ = _pair(pairs)
    assert guard.admit(third)  # the first, idle longest, made room
    assert _ended(first_peer) and not _ended(second_peer) and guard.evicted == 1
    guard.request_started(second.fileno())
    guard.request_started(third.fileno())
    fourth, _ = _pair(pairs)
    assert not guard.admit(fourth)  # every one is being served: refused
    assert guard.refused == 1 and guard.open == 2


def test_running_out_of_descriptors_is_one_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    loop = asyncio.new_event_loop()
    try:
        undo = install_exhaustion_handler(loop, interval_s=60.0, clock=clock)
        failure = {"message": "socket.accept() out of system resource"}
        with caplog.at_level(logging.WARNING, logger="hostd.provider.http"):
            for second in range(120):
                clock.now = float(second)
                exc = OSError(errno.EMFILE, "Too many open files")
                loop.call_exception_handler({**failure, "exception": exc})
        undo()
        assert loop.get_exception_handler() is None
    finally:
        loop.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert all("EMFILE" in line and "Traceback" not in line for line in lines)
    assert "60 time(s)" in lines[1]
    assert not any(r.exc_info for r in caplog.records)
