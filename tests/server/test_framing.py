"""``read_lines``: the same lines whatever the chunking; over-long lines become one
``LineFault`` each and the lines after them still arrive."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.server import LineFault, read_lines

MAX = 64

lines_st = st.lists(st.binary(max_size=MAX * 2).map(lambda b: b.replace(b"\n", b"")), max_size=20)


def _chunked(data: bytes, cuts: list[int]):
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]
    it = iter([*chunks, b""])

    async def receive() -> bytes:
        return next(it, b"")

    return receive


async def _collect(receive) -> list[bytes | LineFault]:
    return [item async for item in read_lines(receive, MAX)]


@settings(max_examples=200, deadline=None)
@given(lines=lines_st, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_gives_the_same_lines_and_faults(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    got = anyio.run(_collect, _chunked(data, cuts))
    expected = [line if len(line) <= MAX else LineFault(len(line)) for line in lines]
    assert [type(g) for g in got] == [type(e) for e in expected]
    assert [g for g in got if isinstance(g, bytes)] == [e for e in expected if isinstance(e, bytes)]
    # A fault reports at least the limit's worth of discarded bytes.
    assert all(g.size > MAX for g in got if isinstance(g, LineFault))


def test_a_half_line_at_eof_is_dropped() -> None:
    got = anyio.run(_collect, _chunked(b'{"a": 1}\n{"jsonrpc": "2.0", "me', []))
    assert got == [b'{"a": 1}']
