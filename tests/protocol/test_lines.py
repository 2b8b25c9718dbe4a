"""The line splitter both ends read pipes with: the same lines as a plain split, for
any chunking, over-long lines included; memory within the bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import OVERLONG, LineSplitter, OverlongLine


def split_all(chunks: list[bytes], limit: int, *, keep_unterminated: bool = False) -> list[object]:
    splitter = LineSplitter(limit)
    out: list[object] = []
    for chunk in chunks:
        out.extend("TOO_LONG" if item is OVERLONG else item for item in splitter.feed(chunk))
    tail = splitter.end()
    if tail is not None and keep_unterminated:
        out.append(tail)
    return out


def plain_split(data: bytes, limit: int, *, keep_unterminated: bool = False) -> list[object]:
    """What a reader should make of ``data`` whole: its lines, ``TOO_LONG`` for each one
    past ``limit`` (an unterminated one too), the unterminated last line if kept."""
    *lines, tail = data.split(b"\n")
    out: list[object] = ["TOO_LONG" if len(line) > limit else line for line in lines]
    if len(tail) > limit:
        out.append("TOO_LONG")
    elif tail and keep_unterminated:
        out.append(tail)
    return out


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(data[pos : pos + c])
        pos += c
    chunks.append(data[pos:])
    return [c for c in chunks if c]


line_bodies = st.lists(
    st.one_of(
        st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
        st.integers(min_value=0, max_value=60).map(lambda n: b"x" * n),  # some past the bound
    ),
    max_size=12,
)


@given(
    lines=line_bodies,
    tail=st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")),
    cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=30),
    limit=st.integers(min_value=1, max_value=25),
    keep=st.booleans(),
)
def test_the_splitter_agrees_with_a_plain_split_on_any_chunking(
    lines: list[bytes], tail: bytes, cuts: list[int], limit: int, keep: bool
) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail
    expected = plain_split(data, limit, keep_unterminated=keep)
    assert split_all(chunked(data, cuts), limit, keep_unterminated=keep) == expected


@given(
    lines=st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=15),
    cuts=st.lists(st.integers(min_value=1, max_value=50), max_size=30),
)
def test_any_chunking_yields_the_lines_in_order(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    assert split_all(chunked(data, cuts), 1000) == lines


def test_a_whole_line_in_one_chunk_is_handed_over_as_it_came() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b'{"a":1}\n') == [b'{"a":1}']
    assert splitter.feed(b"x" * 101 + b"\n") == [OVERLONG]  # one past the bound
    assert splitter.feed(b"x" * 100 + b"\n") == [b"x" * 100]  # exactly the bound
    assert splitter.end() is None


def test_an_over_long_line_is_dropped_without_holding_it() -> None:
    splitter = LineSplitter(1000)
    found = [item for _ in range(200) for item in splitter.feed(b"z" * 4096)]
    assert found == [OVERLONG]  # reported once, as soon as it passed the bound
    assert len(splitter._buf) == 0  # noqa: SLF001 - nothing of it is kept
    assert splitter.feed(b"zz\nafter\n") == [b"after"]


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineSplitter(0)


@given(
    chunks=st.lists(
        st.lists(st.sampled_from([b"a", b"bb", b"\n", b"c" * 7]), max_size=12).map(b"".join),
        max_size=12,
    ),
    skipped=st.lists(st.booleans(), min_size=12, max_size=12),
    limit=st.integers(min_value=1, max_value=10),
)
def test_skip_counts_what_feed_returns_and_leaves_the_same_state(
    chunks: list[bytes], skipped: list[bool], limit: int
) -> None:
    fed, mixed = LineSplitter(limit), LineSplitter(limit)
    for chunk, skip in zip(chunks, skipped, strict=False):
        items = fed.feed(chunk)
        if skip:
            assert mixed.skip(chunk) == len(items)
        else:
            assert mixed.feed(chunk) == items
        assert bytes(mixed.partial) == bytes(fed.partial)
    assert mixed.end() == fed.end()


@given(
    st.binary(max_size=300),
    st.lists(st.integers(min_value=1, max_value=60), max_size=40),
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=1, max_value=20),
)
def test_an_overlong_line_carries_its_ends_at_its_newline_for_any_chunking(
    data: bytes, cuts: list[int], limit: int, keep: int
) -> None:
    # The same items as without ends, each over-long line told at its newline (an
    # unterminated one not at all) with its own first and last bytes.
    splitter = LineSplitter(limit, keep_ends=keep)
    items = [item for chunk in chunked(data, cuts) for item in splitter.feed(chunk)]
    whole = data[: data.rfind(b"\n") + 1]
    assert ["TOO_LONG" if isinstance(i, OverlongLine) else i for i in items] == plain_split(
        whole, limit
    )
    lines = [line for line in whole.split(b"\n") if len(line) > limit]
    ends = [(i.head, i.tail) for i in items if isinstance(i, OverlongLine)]
    assert ends == [(line[:keep], line[-keep:]) for line in lines]
    assert splitter.skipping == (len(data) - len(whole) > limit)
