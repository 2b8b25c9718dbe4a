"""``check_frames`` and ``SourceReader.check_frame`` decide as the plain per-entry
algorithm does (F5, F17): every ``file`` entry parsed, its digest tested, its file read
under the roots, the range addressed and compared, the first mismatch else the first
unverifiable reason winning, and the bytes of a verified frame's sources kept, on
generated frames over real files (honest, edited, outside the roots, malformed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostd.engine.verify import (
    SourceCheck,
    SourceOutcome,
    SourceReader,
    Unverifiable,
    file_uri_path,
)
from hostd.engine.verify._checks import check_frames
from hostd.engine.verify._rules import quick_inline_check
from hostd.engine.verify._source import _within, parse_file_uri
from hostd.protocol import (
    ContextFrame,
    Provenance,
    UnverifiableRange,
    address_line_range,
    is_sha256_digest,
    sha256_digest,
)

from ._helpers import source_frame

_FILES = {"a.py": b"one\ntwo\nthree\n", "b.txt": b"alpha\r\nbeta\n", "e.md": b""}
_RANGES = [None, "L1", "L2-3", "L3-2", "L1-1", "L9", "L0", "lines 1", ""]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str | None]]]:
    base = tmp_path_factory.mktemp("checks")
    root, out = base / "root", base / "out"
    (root / "sub").mkdir(parents=True)
    out.mkdir()
    for name, data in _FILES.items():
        (root / "sub" / name).write_bytes(data)
    (out / "c.py").write_bytes(b"secret\n")
    os.symlink(root / "sub" / "a.py", root / "alias.py")
    os.symlink(out / "c.py", root / "leak.py")
    os.symlink(root / "sub", root / "inner", target_is_directory=True)
    os.symlink(out, root / "outer", target_is_directory=True)
    sub = (root / "sub").as_posix()
    uris: list[str | None] = [
        *(f"file://{sub}/{n}" for n in _FILES),
        f"file://localhost{sub}/a.py",
        f"file:{sub}/b.txt",
        f"file://{sub}/a%2Epy",
        f"file://{sub}/../sub/a.py",
        f"file://{root.as_posix()}/alias.py",
        f"file://{root.as_posix()}/leak.py",
        f"file://{root.as_posix()}/inner/b.txt",
        f"file://{root.as_posix()}/outer/c.py",
        f"file://{root.as_posix()}/sub/./a.py",
        f"file://{root.as_posix()}//sub/a.py",
        f"file://{root.as_posix()}/nowhere/a.py",
        f"file://{sub}/missing.py",
        f"file://{sub}",
        f"file://{root.as_posix()}",
        f"file://{out.as_posix()}/c.py",
        f"file://{sub}/a.py?x=1",
        "file://elsewhere/a.py",
        "https://example.com/a.py",
        "file:relative.py",
        "",
        None,
    ]
    yield root, uris


def _right(uri: str | None, range_: str | None) -> str | None:
    path, _ = file_uri_path(uri)
    if path is None or not os.path.isfile(path):
        return None
    try:
        return sha256_digest(address_line_range(Path(path).read_bytes(), range_))
    except UnverifiableRange:
        return None


@st.composite
def frames(draw: st.DrawFn, uris: list[str | None]) -> ContextFrame:
    provs = []
    for _ in range(draw(st.integers(0, 3))):
        # Mostly the files under the root, so entries meet files read before them.
        uri = draw(st.sampled_from(uris[:4]) | st.sampled_from(uris))
        range_ = draw(st.sampled_from(_RANGES))
        how = draw(st.sampled_from(["right", "right", "wrong", "malformed", "none"]))
        digest = {
            "right": _right(uri, range_) or sha256_digest(b"?"),
            "wrong": sha256_digest(b"not it"),
            "malformed": "sha256:XYZ",
            "none": None,
        }[how]
        kind = draw(st.sampled_from(["file", "file", "derivation"]))
        provs.append(Provenance(type=kind, uri=uri, range=range_, digest=digest))
    return source_frame(provs, draw(st.sampled_from(uris)))


def _entry(reader: SourceReader, prov: Provenance, frame_uri: str | None) -> SourceCheck:
    """One entry, step by step, as the rules say."""
    uri = prov.uri or frame_uri
    base: dict[str, Any] = {"uri": uri, "range": prov.range}
    path, problem = file_uri_path(uri)
    if path is None:
        assert problem is not None
        return SourceCheck(SourceOutcome.UNVERIFIABLE, problem.value, base)
    if not is_sha256_digest(prov.digest):
        return SourceCheck(SourceOutcome.UNVERIFIABLE, Unverifiable.NO_CONTENT_DIGEST.value, base)
    source, problem, _ = reader.read(path)
    if source is None:
        assert problem is not None
        return SourceCheck(SourceOutcome.UNVERIFIABLE, problem.value, base)
    try:
        computed = sha256_digest(address_line_range(source.data, prov.range))
    except UnverifiableRange as exc:
        detail = {**base, "detail": exc.detail}
        return SourceCheck(SourceOutcome.UNVERIFIABLE, exc.reason.value, detail)
    if computed != prov.digest:
        detail = {**base, "expected": computed, "actual": prov.digest}
        return SourceCheck(SourceOutcome.MISMATCH, None, detail)
    return SourceCheck(SourceOutcome.VERIFIED, None, base)


def _plain(reader: SourceReader, frame: ContextFrame, keep: dict[str, bytes]) -> Any:
    files = [p for p in frame.provenance if p.type == "file"]
    if not files:
        return None
    checks = [_entry(reader, p, frame.uri) for p in files]
    for outcome in (SourceOutcome.MISMATCH, SourceOutcome.UNVERIFIABLE):
        for i, c in enumerate(checks):
            if c.outcome == outcome:
                return (c.outcome, c.reason, {**c.detail, "provenance": i})
    for p in files:
        uri = p.uri or frame.uri
        path, _ = file_uri_path(uri)
        assert uri is not None and path is not None
        source, _, _ = reader.read(path)
        assert source is not None
        keep.setdefault(uri, source.data)
    return (SourceOutcome.VERIFIED, None, {"provenance_checked": len(checks)})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
@given(st.data())
def test_check_frames_decides_as_the_plain_rules(
    tree: tuple[Path, list[str | None]], data: st.DataObject
) -> None:
    root, uris = tree
    batch = data.draw(st.lists(frames(uris), max_size=12))
    items = [(data.draw(st.sampled_from(["p", "q"])), f) for f in batch]
    roots = {"p": (str(root),), "q": ()}
    checks, reads, sources = check_frames(items, roots.__getitem__, 1 << 20)
    plain = SourceReader([root])
    keep: dict[str, bytes] = {}
    want = [_plain(plain, f, keep) if pid == "p" else None for pid, f in items]
    got = [None if s is None else (s.outcome, s.reason, dict(s.detail)) for _, s in checks]
    assert got == want
    assert [inline for inline, _ in checks] == [quick_inline_check(f) for _, f in items]
    assert {u: lines.data for u, lines in sources.items()} == keep
    assert list(sources) == list(keep)  # the same order: spans are merged in it
    assert reads == plain.reads


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_check_provenance_is_the_plain_entry_check(
    tree: tuple[Path, list[str | None]], data: st.DataObject
) -> None:
    root, uris = tree
    fast, plain = SourceReader([root]), SourceReader([root])
    for frame in data.draw(st.lists(frames(uris), max_size=8)):
        for p in frame.provenance:
            assert fast.check_provenance(p, frame.uri) == _entry(plain, p, frame.uri)
    assert fast.reads == plain.reads


_NAMES = ["sub", "inner", "outer", "a.py", "c.py", "alias.py", "leak.py", ".", "..", "", "nowhere"]


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.lists(st.sampled_from(_NAMES), min_size=1, max_size=5))
def test_a_path_resolves_as_realpath_says(
    tree: tuple[Path, list[str | None]], above: bool, names: list[str]
) -> None:
    """The reader resolves below a root by ``lstat`` alone, ``realpath`` elsewhere: the
    same path either way, through symlinks in and out, ``.``, ``..`` and doubled slashes."""
    root, _ = tree
    start = root.parent if above else root
    paths = [start.as_posix() + "/" + "/".join(names), start.as_posix() + "/" + names[0]]
    reader = SourceReader([root])
    for path in paths:
        assert reader._resolve(path)[0] == os.path.realpath(path)


_SEGMENTS = st.sampled_from(["", "a", "ab", "a.py", "b", ".", "..", "a b", "é"])


@given(
    st.lists(st.lists(_SEGMENTS, max_size=3).map("/".join), min_size=1, max_size=3),
    st.lists(_SEGMENTS, max_size=4).map("/".join),
)
def test_inside_is_within_some_root(roots: list[str], rest: str) -> None:
    reader = SourceReader([])
    reader.roots = tuple(dict.fromkeys("/" + r.strip("/") if r.strip("/") else "/" for r in roots))
    reader._prefixes = tuple("/" if r == "/" else r + "/" for r in reader.roots)
    for real in ("/" + rest, "/" + rest.strip("/"), reader.roots[0] + rest, reader.roots[0]):
        assert reader._inside(real) == any(_within(real, r) for r in reader.roots)


_URI_CHARS = st.sampled_from(["/", "a", ".", "%", "%2F", "%00", "?", "#", "\x00", " ", "é", ":"])


@given(
    st.sampled_from(["file:///", "file://", "file:/", "file://localhost/", "FILE:///", "http://"]),
    st.lists(_URI_CHARS, max_size=8).map("".join),
)
def test_file_uri_path_is_its_general_parse(head: str, tail: str) -> None:
    """The common spelling's shortcut gives what the general parse gives."""
    uri = head + tail

    assert file_uri_path(uri) == (parse_file_uri(uri) if uri else (None, Unverifiable.NO_URI))
