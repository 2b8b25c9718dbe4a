"""The bounded line reader: lines out whole, over-long lines refused, memory bounded."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.errors import LineTooLong
from hostd.transport import LineReader, encode_line
from tests.transport._memory import byte_pipe

pytestmark = pytest.mark.anyio


async def read_all(chunks: list[bytes], limit: int, **kw: bool) -> list[bytes | str]:
    send, stream = byte_pipe()
    async with send:
        for c in chunks:
            await send.send(c)
    reader = LineReader(stream, limit, **kw)
    out: list[bytes | str] = []
    async with stream:
        while True:
            try:
                out.append(await reader.receive_line())
            except LineTooLong:
                out.append("TOO_LONG")
            except anyio.EndOfStream:
                return out


async def test_lines_split_across_chunks_are_reassembled() -> None:
    assert await read_all([b'{"a"', b":1}\n{", b'"b":2}\n'], 100) == [b'{"a":1}', b'{"b":2}']


async def test_an_over_long_line_is_reported_once_and_reading_resumes() -> None:
    chunks = [b"x" * 60, b"x" * 60, b"x" * 60 + b"\nok\n"]
    assert await read_all(chunks, 100) == ["TOO_LONG", b"ok"]


async def test_an_over_long_line_in_one_chunk_is_reported() -> None:
    assert await read_all([b"y" * 500 + b"\nfine\n"], 100) == ["TOO_LONG", b"fine"]


async def test_an_unterminated_final_line_is_dropped_and_marked_truncated() -> None:
    send, stream = byte_pipe()
    async with send:
        await send.send(b'{"complete":1}\n{"cut')
    reader = LineReader(stream, 100)
    async with stream:
        assert await reader.receive_line() == b'{"complete":1}'
        with pytest.raises(anyio.EndOfStream):
            await reader.receive_line()
    assert reader.truncated


async def test_an_unterminated_final_line_can_be_kept() -> None:
    assert await read_all([b"a\nb"], 100, keep_unterminated=True) == [b"a", b"b"]


async def test_the_buffer_never_holds_much_more_than_the_bound() -> None:
    send, stream = byte_pipe()
    reader = LineReader(stream, 1000)

    async def feed() -> None:
        async with send:
            for _ in range(200):
                await send.send(b"z" * 4096)  # one 800 KiB line
            await send.send(b"\nafter\n")

    async with stream, anyio.create_task_group() as tg:
        tg.start_soon(feed)
        with pytest.raises(LineTooLong):
            await reader.receive_line()
        assert await reader.receive_line() == b"after"
        assert reader.buffered <= 1000 + 65536


def test_encode_line_is_one_line_even_with_newlines_in_values() -> None:
    line = encode_line({"text": "a\nb", "ü": "✓"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"text": "a\nb", "ü": "✓"}


def json_values(scalars: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )


exact = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text()


@given(json_values(exact))
def test_encode_line_writes_what_compact_json_dumps_writes(value: object) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert encode_line(value) == expected + b"\n"


@pytest.mark.parametrize("value", [2**64, {1: "a non-string key"}, object()])
def test_a_value_json_cannot_carry_is_a_type_error_not_a_line(value: object) -> None:
    with pytest.raises(TypeError):
        encode_line({"jsonrpc": "2.0", "params": value})


@given(json_values(exact | st.floats(allow_nan=False, allow_infinity=False)))
def test_encode_line_round_trips_every_value(value: object) -> None:
    # Floats keep their value; only the exponent's spelling may differ (1e-7, 1e-07).
    line = encode_line(value)
    assert line.count(b"\n") == 1 and json.loads(line) == value


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=1, max_value=50), max_size=30),
)
def test_any_chunking_yields_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(data[pos : pos + c])
        pos += c
    chunks.append(data[pos:])
    got = anyio.run(read_all, [c for c in chunks if c], 1000)
    assert got == lines
