"""One connection's request path in process: each request in its own task, cancelled
through that task (``$/cancel``, the end of the grace period), replies written whole and
in order whether they skip the lock or wait for it, and the daemon's idle wait."""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.config import Config
from hostd.logs import get_logger
from hostd.rpc import encode_reply
from hostd.server import Daemon
from hostd.server._connection import Connection, Limits, socket_receive
from hostd.transport import RepeatedEvents

pytestmark = pytest.mark.anyio


class _Owner:
    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.repeats = RepeatedEvents(get_logger("test"))
        self.in_flight = 0
        #: What the peer had been sent each time a request ended.
        self.sent_at_end: list[bytes] = []
        self.out: list[bytes] = []

    def begin_request(self) -> None:
        self.in_flight += 1

    def end_request(self) -> None:
        self.in_flight -= 1
        self.sent_at_end.append(b"".join(self.out))

    def admit_authenticated(self) -> bool:
        return True

    def new_request_id(self) -> str:
        return "r"


def _line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def _request(id_: Any, method: str = "m") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method}


def _cancel(id_: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": id_}}


class _Peer:
    """A connection fed line by line; its writes collected. ``dispatch`` blocks each
    request named ``wait`` until the test releases it."""

    def __init__(self, send_nowait: Callable[[bytes], int] | None = None) -> None:
        self.owner = _Owner()
        self.lines_in, self._lines_out = anyio.create_memory_object_stream[bytes](100)
        self.released = anyio.Event()
        self.started: dict[Any, anyio.Event] = {}
        self.cancelled: list[Any] = []
        self.connection = Connection(
            self.owner,
            self._receive,
            self._send,
            self._dispatch,
            Limits(1 << 20, 8, 8),
            name="t",
            drain_on_eof=True,
            send_nowait=send_nowait,
        )

    async def _receive(self) -> bytes:
        try:
            return await self._lines_out.receive()
        except anyio.EndOfStream:
            self._lines_out.close()
            return b""

    async def _send(self, data: bytes) -> None:
        self.owner.out.append(bytes(data))

    async def _dispatch(self, conn: Connection, msg: Any) -> Any:
        if msg.get("method") == "$/cancel":
            conn.cancel(msg["params"]["id"])
            return None
        self.started.setdefault(msg["id"], anyio.Event()).set()
        if msg["method"] == "wait":
            try:
                await self.released.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(msg["id"])
                raise
        return {"jsonrpc": "2.0", "result": {"id": msg["id"]}, "id": msg["id"]}

    async def started_(self, id_: Any) -> None:
        await self.started.setdefault(id_, anyio.Event()).wait()

    def replies(self) -> list[Any]:
        return [json.loads(x) for x in b"".join(self.owner.out).splitlines()]


async def test_a_cancelled_request_gets_no_reply_and_the_connection_serves_on() -> None:
    peer = _Peer()
    with anyio.fail_after(30):  # a hang guard
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            await peer.lines_in.send(_line(_request(1, "wait")))
            await peer.started_(1)
            await peer.lines_in.send(_line(_cancel(1)) + _line(_request(2)))
            await peer.started_(2)
            await peer.lines_in.aclose()
    assert peer.cancelled == [1]
    assert peer.replies() == [{"jsonrpc": "2.0", "result": {"id": 2}, "id": 2}]
    assert peer.owner.in_flight == 0 and peer.connection._scopes == {}


async def test_a_cancel_of_another_id_leaves_the_request_running() -> None:
    peer = _Peer()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            await peer.lines_in.send(_line(_request("a", "wait")))
            await peer.started_("a")
            await peer.lines_in.send(_line(_cancel("b")) + _line(_cancel(["a"])))
            await peer.lines_in.send(_line(_request(2)))
            await peer.started_(2)
            peer.released.set()
            await peer.lines_in.aclose()
    assert peer.cancelled == []
    assert [r["id"] for r in peer.replies()] == [2, "a"]


def _id_in_use(reply: Any, id_: Any) -> bool:
    return reply["id"] == id_ and reply["error"]["data"]["reason"] == "id_in_use"


async def test_a_batch_element_whose_id_is_in_flight_is_refused_and_never_run() -> None:
    peer = _Peer()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            await peer.lines_in.send(_line(_request("a", "wait")))
            await peer.started_("a")
            # "a" is held by the request in flight; of the batch's two 2s, the later one.
            batch = [_request("a"), _request(2), _request(2, "wait")]
            await peer.lines_in.send(_line(batch))
            await peer.started_(2)
            peer.released.set()
            await peer.lines_in.aclose()
    (batch_reply,) = [r for r in peer.replies() if isinstance(r, list)]
    assert [r.get("result") for r in batch_reply] == [None, {"id": 2}, None]
    assert _id_in_use(batch_reply[0], "a") and _id_in_use(batch_reply[2], 2)
    assert batch_reply[0]["error"]["code"] == -32600
    (single,) = [r for r in peer.replies() if isinstance(r, dict)]
    assert single == {"jsonrpc": "2.0", "result": {"id": "a"}, "id": "a"}
    assert peer.connection._scopes == {}
    assert peer.owner.counters["requests_id_in_use"] == 2


async def test_null_ids_are_never_refused_for_each_other_and_the_grace_period_reaches_them() -> (
    None
):
    peer = _Peer()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            await peer.lines_in.send(_line(_request(None, "wait")))
            await peer.started_(None)
            # JSON-RPC allows a null id: each is held on its own, none refused for another.
            batch = [_request(None), _request(None)]
            await peer.lines_in.send(_line(_request(None)) + _line(batch))
            while len(peer.replies()) < 2:
                await anyio.lowlevel.checkpoint()
            peer.connection.abort_in_flight()
            await peer.lines_in.aclose()
    replies = peer.replies()
    results = [r for r in replies if isinstance(r, dict) and "result" in r]
    assert results == [{"jsonrpc": "2.0", "result": {"id": None}, "id": None}]
    (batch_reply,) = [r for r in replies if isinstance(r, list)]
    assert [r["result"] for r in batch_reply] == [{"id": None}, {"id": None}]
    (aborted,) = [r for r in replies if isinstance(r, dict) and "error" in r]
    assert aborted["id"] is None and aborted["error"]["data"]["reason"] == "shutting_down"
    assert peer.cancelled == [None] and peer.connection._scopes == {}
    assert peer.owner.counters["requests_id_in_use"] == 0


async def test_an_id_a_batch_element_holds_is_refused_until_a_cancel_frees_it() -> None:
    peer = _Peer()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            await peer.lines_in.send(_line([_request("b", "wait")]))
            await peer.started_("b")
            # Refused while the batch holds "b"; free as soon as it is cancelled (a
            # cancelled request is never answered, so there is no reply to wait for).
            again = _line(_request("b"))
            await peer.lines_in.send(again + _line(_cancel("b")) + again)
            await peer.lines_in.aclose()
    first, second = peer.replies()
    assert _id_in_use(first, "b") and first["error"]["code"] == -32600
    assert second == {"jsonrpc": "2.0", "result": {"id": "b"}, "id": "b"}
    assert peer.cancelled == ["b"] and peer.connection._scopes == {}


async def test_the_end_of_the_grace_period_answers_each_request_in_flight_before_it_ends() -> None:
    peer = _Peer()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            batch = [_request(2, "wait"), _request(3)]
            await peer.lines_in.send(_line(_request(1, "wait")) + _line(batch))
            await peer.started_(1)
            await peer.started_(2)
            peer.connection.abort_in_flight()
            await peer.lines_in.aclose()
    replies = peer.replies()
    single = next(r for r in replies if isinstance(r, dict))
    assert single["id"] == 1 and single["error"]["code"] == -32006
    assert single["error"]["data"]["reason"] == "shutting_down"
    batch_reply = {r["id"]: r for r in next(r for r in replies if isinstance(r, list))}
    assert batch_reply[2]["error"]["data"]["reason"] == "shutting_down"
    assert batch_reply[3]["result"] == {"id": 3}
    assert sorted(peer.cancelled) == [1, 2]
    # Each request ended only once its answer was written: the daemon's grace period
    # waits for the ends, then closes the connections.
    assert peer.owner.in_flight == 0
    for ended, written in enumerate(peer.owner.sent_at_end, 1):
        assert written.count(b"\n") >= ended


async def test_a_cancel_while_the_reply_is_being_written_cannot_cut_it_short() -> None:
    taken = anyio.Event()
    room = anyio.Event()
    out: list[bytes] = []  # what the peer reads, in the order written

    def send_nowait(data: bytes) -> int:
        out.append(bytes(data[:5]))
        taken.set()
        return 5

    peer = _Peer(send_nowait)

    async def slow_send(data: bytes) -> None:
        await room.wait()  # the socket is full until the test makes room
        out.append(bytes(data))

    peer.connection._send_bytes = slow_send
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.connection.serve)
            await peer.lines_in.send(_line(_request(1)))
            await taken.wait()  # answered; its reply is half written
            await peer.lines_in.send(_line(_cancel(1)))
            await peer.lines_in.send(_line(_request(2)))
            await peer.started_(2)
            room.set()
            await peer.lines_in.aclose()
    first = encode_reply({"jsonrpc": "2.0", "result": {"id": 1}, "id": 1})
    second = encode_reply({"jsonrpc": "2.0", "result": {"id": 2}, "id": 2})
    assert b"".join(out) == first + second  # whole, and before the one handed in after it


@settings(max_examples=60, deadline=None)
@given(
    takes=st.lists(st.integers(min_value=0, max_value=80), min_size=1, max_size=12),
    blocked=st.lists(st.booleans(), min_size=1, max_size=12),
    sizes=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=6),
)
def test_lines_are_written_whole_and_in_the_order_they_were_handed_in(
    takes: list[int], blocked: list[bool], sizes: list[int]
) -> None:
    """Replies handed to ``send_line`` by concurrent tasks, whatever the socket takes at
    once and whichever awaited writes must wait: the peer reads each line whole, in the
    order the tasks handed them in (the lock-free path and the locked one agree)."""

    async def run() -> tuple[bytes, list[bytes]]:
        calls = iter(takes * 20)
        gates = iter(blocked * 20)
        out: list[bytes] = []
        release = anyio.Event()

        def send_nowait(data: bytes) -> int:
            n = min(next(calls), len(data))
            out.append(bytes(data[:n]))
            return n

        async def send(data: bytes) -> None:
            if next(gates):
                await release.wait()
            out.append(bytes(data))

        conn = Connection(
            _Owner(),
            _never,
            send,
            _no_dispatch,
            Limits(1 << 20, 8, 8),
            name="t",
            send_nowait=send_nowait,
        )
        lines = [b"x" * size + b"%d\n" % i for i, size in enumerate(sizes)]
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for line in lines:
                    tg.start_soon(conn.send_line, line)
                    await anyio.lowlevel.checkpoint()  # each task hands its line in
                release.set()
        return b"".join(out), lines

    out, lines = anyio.run(run)
    assert out == b"".join(lines)


async def _never() -> bytes:
    await anyio.sleep_forever()
    return b""


async def _no_dispatch(_conn: Connection, _msg: Any) -> Any:
    raise AssertionError("nothing is dispatched")


async def test_the_daemon_waits_for_idle_only_while_a_request_is_in_flight() -> None:
    daemon = Daemon(Config())
    with anyio.fail_after(30):
        await daemon._wait_idle()  # none in flight: at once
        for _ in range(3):  # each time it is busy again, the wait waits again
            daemon.begin_request()
            daemon.begin_request()
            done: list[bool] = []

            async def wait(done: list[bool] = done) -> None:
                await daemon._wait_idle()
                done.append(True)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                daemon.end_request()
                await anyio.wait_all_tasks_blocked()
                assert done == []
                daemon.end_request()
            assert done == [True]
        await daemon._wait_idle()


async def _unix_pair() -> tuple[Any, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return await anyio.abc.UNIXSocketStream.from_socket(ours), theirs


async def _read_while_empty(receive: Any, peer: socket.socket, data: bytes) -> bytes:
    """A read started on an empty socket: it waits (nothing read yet), then gets what
    the peer sends."""
    got: list[bytes] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            got.append(await receive())

        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        assert got == []  # empty: it waits
        peer.sendall(data)
    return got[0]


async def test_a_unix_socket_is_read_at_once_waits_only_when_empty_and_ends_at_eof() -> None:
    stream, peer = await _unix_pair()
    receive = socket_receive(stream)
    assert receive is not None
    assert socket_receive(object()) is None  # not a Unix socket stream: the stream's own
    try:
        with anyio.fail_after(30):
            peer.sendall(b"one\n")
            assert await receive() == b"one\n"
            assert await _read_while_empty(receive, peer, b"two\n") == b"two\n"
            peer.close()
            assert await receive() == b""
    finally:
        await stream.aclose()


async def test_reading_a_socket_kept_full_yields_to_the_loop_between_reads() -> None:
    stream, peer = await _unix_pair()
    receive = socket_receive(stream, max_bytes=4)
    assert receive is not None
    ran: list[bool] = []
    try:
        with anyio.fail_after(30):
            peer.sendall(b"x" * 12)
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: _append(ran))
                assert await receive() == b"xxxx"  # after a wait (none yet): no turn
                assert ran == []
                assert await receive() == b"xxxx"  # read again without waiting: a turn
                assert ran == [True]
    finally:
        peer.close()
        await stream.aclose()


class _CountingSocket(socket.socket):
    """A Unix socket that counts its reads that found nothing (EAGAIN)."""

    empty_reads = 0

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        try:
            return super().recv(bufsize, flags)
        except BlockingIOError:
            self.empty_reads += 1
            raise


async def test_after_a_read_that_emptied_the_socket_the_next_read_waits_first() -> None:
    """A short read found the socket empty: the next read waits for readability rather
    than trying a read that would fail (EAGAIN); bytes that come before or during the
    wait are read whole, and a full read is followed by a read at once."""
    ours, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sock = _CountingSocket(ours.family, ours.type, ours.proto, ours.detach())
    stream = await anyio.abc.UNIXSocketStream.from_socket(sock)
    receive = socket_receive(stream, max_bytes=64)
    assert receive is not None
    try:
        with anyio.fail_after(30):
            peer.sendall(b"one\n")
            assert await receive() == b"one\n"  # short: the socket was emptied
            assert await _read_while_empty(receive, peer, b"two\n") == b"two\n"
            peer.sendall(b"three\n")  # there before the read starts
            assert await receive() == b"three\n"
            assert sock.empty_reads == 0  # each wait came first, no read failed
            peer.sendall(b"x" * 64)
            assert await receive() == b"x" * 64  # full: the next read tries at once
            peer.sendall(b"y\n")
            assert await receive() == b"y\n"
            assert sock.empty_reads == 0
    finally:
        peer.close()
        await stream.aclose()


async def _append(ran: list[bool]) -> None:
    ran.append(True)


@settings(max_examples=40, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=8),
    max_bytes=st.integers(min_value=1, max_value=512),
)
def test_the_plain_read_gets_the_bytes_the_streams_read_gets(
    chunks: list[bytes], max_bytes: int
) -> None:
    """Whatever the peer writes, in whatever pieces: read to EOF by ``socket_receive``
    and by the stream's own ``receive``, the same bytes."""

    async def read_all(plain: bool) -> bytes:
        stream, peer = await _unix_pair()
        out: list[bytes] = []
        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:

                    async def write() -> None:
                        for chunk in chunks:
                            peer.sendall(chunk)
                            await anyio.lowlevel.checkpoint()
                        peer.close()

                    tg.start_soon(write)
                    receive = socket_receive(stream, max_bytes) if plain else None
                    while True:
                        if receive is not None:
                            data = await receive()
                        else:
                            try:
                                data = await stream.receive(max_bytes)
                            except anyio.EndOfStream:
                                data = b""
                        if not data:
                            break
                        out.append(data)
        finally:
            await stream.aclose()
        return b"".join(out)

    assert anyio.run(read_all, True) == anyio.run(read_all, False) == b"".join(chunks)


def test_request_ids_keep_every_runs_shadow_rows_apart() -> None:
    # An id keys shadow and feedback rows that outlive its process; every one-shot
    # compose's first id ends in "-1", so its random part alone keeps two runs apart:
    # 48 bits (at 24, two of about 5,000 runs shared an id as often as not).
    ids = [Daemon(Config()).new_request_id() for _ in range(2)]
    prefixes = [i.rpartition("-")[0] for i in ids]
    assert all(i.endswith("-1") for i in ids)
    assert all(len(bytes.fromhex(p)) * 8 >= 48 for p in prefixes), ids
    assert prefixes[0] != prefixes[1]
