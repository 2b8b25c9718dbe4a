"""Framing on the production path: a child's stdout fed to its sink (``StdoutFeed``, the
pipe's protocol, over ``LineSplitter``), the provider runtime's stdin reader
(``LinePipeProtocol``), and the one line encoder."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.errors import LineTooLong, ProviderCrashed
from hostd.protocol import EOF, OVERLONG, TRUNCATED, LineItem, LineSplitter
from hostd.rpc import LinePipeProtocol
from hostd.transport import encode_line
from hostd.transport.process._stdout import StdoutFeed
from tests.fixtures.lines import Lines
from tests.protocol.test_lines import chunked, line_bodies, plain_split

tails = st.binary(max_size=30).map(lambda b: b.replace(b"\n", b""))
cut_lists = st.lists(st.integers(min_value=1, max_value=40), max_size=30)
limits = st.integers(min_value=1, max_value=25)


def _pipe_end(protocol: asyncio.Protocol, chunks: list[bytes]) -> None:
    """What a pipe does: its chunks, then end of file, then the pipe closing."""
    for chunk in chunks:
        protocol.data_received(chunk)
    protocol.eof_received()
    protocol.connection_lost(None)


@given(lines=line_bodies, tail=tails, cuts=cut_lists, limit=limits)
def test_the_feed_hands_over_whole_lines_then_tells_the_end_once(
    lines: list[bytes], tail: bytes, cuts: list[int], limit: int
) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail
    sink = Lines()
    _pipe_end(StdoutFeed("p", sink, limit), chunked(data, cuts))
    expected = plain_split(data, limit)
    over = expected.index("TOO_LONG") if "TOO_LONG" in expected else None
    assert sink.seen == expected[:over]  # nothing after an over-long line is read
    [end] = sink.ends
    if over is not None:
        assert isinstance(end, LineTooLong) and end.data["max_line_bytes"] == limit
    else:
        assert isinstance(end, ProviderCrashed)
        assert end.message == f"provider closed {'mid-line' if tail else 'its output'}"


@given(lines=line_bodies, tail=tails, cuts=cut_lists, limit=limits, keep=st.booleans())
def test_the_pipe_protocol_delivers_lines_then_the_tail_then_the_end(
    lines: list[bytes], tail: bytes, cuts: list[int], limit: int, keep: bool
) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail
    got: list[LineItem] = []
    _pipe_end(
        LinePipeProtocol(LineSplitter(limit), got.append, keep_unterminated=keep),
        chunked(data, cuts),
    )
    cut = [TRUNCATED] if tail and len(tail) <= limit and not keep else []
    expected = plain_split(data, limit, keep_unterminated=keep)
    assert ["TOO_LONG" if i is OVERLONG else i for i in got] == [*expected, *cut, EOF, EOF]


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
