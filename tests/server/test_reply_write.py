"""A reply is written with no event-loop turn when the socket takes it whole; whatever it
does not take goes through the stream's own (awaited) send, in order, nothing lost."""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

import anyio
import anyio.abc
import pytest

from hostd.logs import get_logger
from hostd.rpc import encode_reply
from hostd.server._connection import Connection, Limits, socket_send_nowait
from hostd.transport import RepeatedEvents

pytestmark = pytest.mark.anyio

REQUEST = b'{"jsonrpc":"2.0","method":"m","id":1}\n'
REPLY = {"jsonrpc": "2.0", "result": {"text": "x" * 300}, "id": 1}


class _Owner:
    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.repeats = RepeatedEvents(get_logger("test"))

    def begin_request(self) -> None:
        pass

    def end_request(self) -> None:
        pass

    def admit_authenticated(self) -> bool:
        return True

    def new_request_id(self) -> str:
        return "r"


async def _serve(take: int | None) -> tuple[list[bytes], list[bytes]]:
    """Serve one request; the socket takes ``take`` bytes at once (None: no such write).
    Returns what went out at once and what went through the awaited send."""
    lines = [REQUEST]
    now: list[bytes] = []
    awaited: list[bytes] = []

    async def receive() -> bytes:
        return lines.pop() if lines else b""

    async def send(data: bytes) -> None:
        awaited.append(bytes(data))

    def send_nowait(data: bytes) -> int:
        assert take is not None
        now.append(bytes(data[:take]))
        return min(take, len(data))

    async def dispatch(_conn: Connection, _msg: Any) -> Any:
        return REPLY

    conn = Connection(
        _Owner(),
        receive,
        send,
        dispatch,
        Limits(1 << 20, 8, 8),
        name="t",
        drain_on_eof=True,
        send_nowait=None if take is None else send_nowait,
    )
    with anyio.fail_after(30):  # a hang guard
        await conn.serve()
    return now, awaited


@pytest.mark.parametrize("take", [None, 0, 1, 57, 10_000])
async def test_the_reply_goes_out_whole_and_in_order_whatever_the_socket_takes(
    take: int | None,
) -> None:
    line = encode_reply(REPLY)
    now, awaited = await _serve(take)
    assert b"".join(now + awaited) == line
    if take is not None and take >= len(line):
        assert awaited == []  # taken whole: the awaited send never ran
    elif take:
        assert now == [line[:take]] and awaited == [line[take:]]
    else:
        assert awaited == [line]


async def test_a_socket_streams_write_takes_what_the_socket_takes_and_a_full_one_none(
    tmp_path: Any,
) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, await anyio.connect_tcp("127.0.0.1", port) as tcp:
        assert socket_send_nowait(tcp) is None  # an asyncio transport's: its own buffer

    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    stream = await anyio.connect_unix(path)
    peer, _ = server.accept()
    try:
        write = socket_send_nowait(stream)
        assert write is not None
        assert write(b"hello\n") == 6
        assert peer.recv(100) == b"hello\n"
        big = b"x" * (1 << 16)
        while write(big) == len(big):  # fill the socket's buffer: nobody reads
            pass
        assert write(big) == 0  # full: nothing taken, the awaited send waits for room
        assert socket_send_nowait(object()) is None  # not a Unix socket stream (stdio)
    finally:
        await stream.aclose()
        peer.close()
        server.close()
