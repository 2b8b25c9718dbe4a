"""Source re-reads of ``file`` provenance under trusted roots, on real files (F5, F17)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostd.engine.verify import SETTLE_NS, SourceCache, SourceOutcome, SourceReader
from hostd.protocol import ContextFrame, Provenance, address_line_range, sha256_digest

from ._helpers import source_frame

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "range" / "range-vectors.json"


def _prov(path: Path | str, data: bytes | None, range_: str | None = None, **kw: Any) -> Provenance:
    uri = path if isinstance(path, str) else path.as_uri()
    digest = kw.pop("digest", None)
    if digest is None and data is not None:
        digest = sha256_digest(address_line_range(data, range_))
    return Provenance(type="file", uri=uri, range=range_, digest=digest, **kw)


def _frame(*provs: Provenance, uri: str | None = None) -> ContextFrame:
    return source_frame(list(provs), uri)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / "src").mkdir(parents=True)
    (r / "src" / "a.py").write_bytes(b"one\r\ntwo\nthree\n")
    return r


def test_honest_range_is_source_verified(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    reader = SourceReader([root])
    got = reader.check_frame(_frame(_prov(root / "src" / "a.py", data, "L2-3")))
    assert got is not None and got.outcome == SourceOutcome.VERIFIED


def test_whole_file_without_range_is_source_verified(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    got = SourceReader([root]).check_frame(_frame(_prov(root / "src" / "a.py", data)))
    assert got is not None and got.outcome == SourceOutcome.VERIFIED


def test_edited_source_is_a_mismatch(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    prov = _prov(root / "src" / "a.py", data, "L1")
    (root / "src" / "a.py").write_bytes(b"ONE\r\ntwo\nthree\n")
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None and got.outcome == SourceOutcome.MISMATCH
    # What the provenance must carry (the file's bytes now), then what it carries.
    assert got.detail["expected"] == sha256_digest(b"ONE\r\n")
    assert got.detail["actual"] == prov.digest


def test_cr_is_content_not_a_line_break(root: Path) -> None:
    # F17: a digest over "one\n" (CR stripped) must not verify.
    prov = _prov(root / "src" / "a.py", None, "L1", digest=sha256_digest(b"one\n"))
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None and got.outcome == SourceOutcome.MISMATCH


def test_symlink_out_of_root_is_refused_unread(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"secret\n")
    (root / "src" / "link.txt").symlink_to(secret)
    reader = SourceReader([root])
    got = reader.check_frame(_frame(_prov(root / "src" / "link.txt", b"secret\n")))
    assert got is not None and got.outcome == SourceOutcome.UNVERIFIABLE
    assert got.reason == "untrusted_path"
    assert reader.reads == 0


def test_dotdot_out_of_root_is_refused_unread(root: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_bytes(b"x\n")
    reader = SourceReader([root])
    uri = "file://" + str(root) + "/src/../../outside.txt"
    got = reader.check_frame(_frame(_prov(uri, b"x\n")))
    assert got is not None and got.reason == "untrusted_path"
    assert reader.reads == 0


def test_dotdot_staying_inside_root_is_read(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    uri = "file://" + str(root) + "/src/../src/a.py"
    got = SourceReader([root]).check_frame(_frame(_prov(uri, data)))
    assert got is not None and got.outcome == SourceOutcome.VERIFIED


def test_symlink_inside_root_is_followed(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    (root / "alias.py").symlink_to(root / "src" / "a.py")
    got = SourceReader([root]).check_frame(_frame(_prov(root / "alias.py", data)))
    assert got is not None and got.outcome == SourceOutcome.VERIFIED


def test_root_reached_through_a_symlink_is_trusted(root: Path, tmp_path: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    alias = tmp_path / "alias-root"
    alias.symlink_to(root)
    got = SourceReader([alias]).check_frame(_frame(_prov(root / "src" / "a.py", data)))
    assert got is not None and got.outcome == SourceOutcome.VERIFIED


def test_sibling_with_root_as_prefix_is_outside(root: Path, tmp_path: Path) -> None:
    evil = tmp_path / "root-evil"
    evil.mkdir()
    (evil / "a.py").write_bytes(b"x\n")
    got = SourceReader([root]).check_frame(_frame(_prov(evil / "a.py", b"x\n")))
    assert got is not None and got.reason == "untrusted_path"


def test_missing_file_is_unreadable(root: Path) -> None:
    prov = _prov(root / "src" / "gone.py", None, digest=sha256_digest(b""))
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None and (got.outcome, got.reason) == (
        SourceOutcome.UNVERIFIABLE,
        "unreadable",
    )


def test_directory_is_not_a_file(root: Path) -> None:
    prov = _prov(root / "src", None, digest=sha256_digest(b""))
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None and got.reason in ("not_a_file", "unreadable")


def test_a_root_itself_is_inside_and_not_a_file(root: Path) -> None:
    # A root is within itself (``_within``): refused as a directory, not as untrusted.
    got = SourceReader([root / "src"]).check_frame(_frame(_prov(root / "src", b"")))
    assert got is not None and got.reason in ("not_a_file", "unreadable")


def test_fifo_does_not_hang(root: Path) -> None:
    os.mkfifo(root / "pipe")
    prov = _prov(root / "pipe", None, digest=sha256_digest(b""))
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None and got.reason == "not_a_file"


def test_oversized_source_is_too_large(root: Path) -> None:
    (root / "big.txt").write_bytes(b"y" * 2048)
    prov = _prov(root / "big.txt", b"y" * 2048)
    got = SourceReader([root], max_bytes=1024).check_frame(_frame(prov))
    assert got is not None and got.reason == "too_large"


def test_frame_uri_stands_in_for_a_missing_provenance_uri(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    prov = Provenance(type="file", range="L1", digest=sha256_digest(b"one\r\n"))
    got = SourceReader([root]).check_frame(_frame(prov, uri=(root / "src" / "a.py").as_uri()))
    assert got is not None and got.outcome == SourceOutcome.VERIFIED
    assert data  # the file is real


def test_non_file_uri_is_unverifiable(root: Path) -> None:
    prov = Provenance(type="file", uri="https://example.org/a.py", digest=sha256_digest(b""))
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None and got.reason == "unsupported_uri"


def test_no_roots_or_no_file_provenance_checks_nothing(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    assert SourceReader([]).check_frame(_frame(_prov(root / "src" / "a.py", data))) is None
    derivation = Provenance(type="derivation", uri="urn:x")
    assert SourceReader([root]).check_frame(_frame(derivation)) is None


def test_any_mismatch_wins_over_verified_and_unverifiable(root: Path) -> None:
    data = (root / "src" / "a.py").read_bytes()
    good = _prov(root / "src" / "a.py", data, "L1")
    odd = _prov(root / "src" / "a.py", None, "L9", digest=sha256_digest(b""))
    bad = _prov(root / "src" / "a.py", None, "L2", digest=sha256_digest(b"nope"))
    reader = SourceReader([root])
    got = reader.check_frame(_frame(good, odd, bad))
    assert got is not None and got.outcome == SourceOutcome.MISMATCH
    assert got.detail["provenance"] == 2
    mixed = reader.check_frame(_frame(good, odd))
    assert mixed is not None and mixed.outcome == SourceOutcome.UNVERIFIABLE
    assert mixed.reason == "start_past_end"
    assert reader.reads == 1  # one file, read once


@pytest.mark.parametrize(
    ("range_", "reason"),
    [
        ("L0", "unrecognised"),
        ("l2", "unrecognised"),
        ("L02", "unrecognised"),
        ("L1-", "unrecognised"),
        ("L 1", "unrecognised"),
        ("", "unrecognised"),
        ("L3-2", "inverted"),
        ("L4", "start_past_end"),
    ],
)
def test_f17_unverifiable_ranges_are_reported_unverifiable(
    root: Path, range_: str, reason: str
) -> None:
    prov = _prov(root / "src" / "a.py", None, range_, digest=sha256_digest(b""))
    got = SourceReader([root]).check_frame(_frame(prov))
    assert got is not None
    assert (got.outcome, got.reason) == (SourceOutcome.UNVERIFIABLE, reason)


def _vector_cases() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text())["cases"]


@pytest.mark.parametrize("case", _vector_cases(), ids=lambda c: f"{c['resource']}:{c.get('range')}")
def test_published_range_vectors_agree(tmp_path: Path, case: dict[str, Any]) -> None:
    resources = json.loads(VECTORS.read_text())["resources"]
    path = tmp_path / "resource.txt"
    path.write_bytes(resources[case["resource"]].encode("utf-8"))
    reader = SourceReader([tmp_path])
    if "digest" in case:
        honest = reader.check_frame(
            _frame(_prov(path, None, case.get("range"), digest=case["digest"]))
        )
        assert honest is not None and honest.outcome == SourceOutcome.VERIFIED
        liar = _prov(path, None, case.get("range"), digest=sha256_digest(b"other"))
        lying = reader.check_frame(_frame(liar))
        assert lying is not None and lying.outcome == SourceOutcome.MISMATCH
    else:
        got = reader.check_frame(
            _frame(_prov(path, None, case["range"], digest=sha256_digest(b"")))
        )
        assert got is not None
        assert (got.outcome, got.reason) == (SourceOutcome.UNVERIFIABLE, case["unverifiable"])


# -- sources kept across passes (SourceCache) ---------------------------------------------


class _Later:
    """A clock far past every file's timestamps: what it read has settled."""

    def __call__(self) -> int:
        return 2**62


def _check(cache: SourceCache, root: Path, frame: ContextFrame) -> tuple[SourceOutcome, int]:
    reader = SourceReader([root], cache=cache)
    got = reader.check_frame(frame)
    assert got is not None
    return got.outcome, reader.reads


def test_an_unchanged_source_is_not_read_again_on_the_next_pass(root: Path) -> None:
    path = root / "src" / "a.py"
    frame = _frame(_prov(path, path.read_bytes(), "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 1)
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 0)
    assert (cache.reads, cache.hits) == (1, 1)


def test_a_same_size_rewrite_with_its_mtime_put_back_is_read_again(root: Path) -> None:
    """ctime cannot be put back: the identity changes though size and mtime do not."""
    path = root / "src" / "a.py"
    frame = _frame(_prov(path, path.read_bytes(), "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame)[0] is SourceOutcome.VERIFIED
    before = path.stat()
    path.write_bytes(b"one\r\ntwo\nthreE\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert _check(cache, root, frame) == (SourceOutcome.MISMATCH, 1)


def test_a_source_replaced_by_another_file_is_read_again(root: Path) -> None:
    path = root / "src" / "a.py"
    frame = _frame(_prov(path, path.read_bytes(), "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame)[0] is SourceOutcome.VERIFIED
    other = root / "src" / "new.py"
    other.write_bytes(b"one\r\ntwo\nthreE\n")
    os.replace(other, path)  # another inode at the same path
    assert _check(cache, root, frame) == (SourceOutcome.MISMATCH, 1)


def test_a_source_changed_just_now_is_read_on_every_pass(root: Path) -> None:
    """A timestamp is one clock tick wide: a file written within the settling time of
    its read could change again unseen, so it is not reused until it has settled."""
    path = root / "src" / "a.py"
    frame = _frame(_prov(path, path.read_bytes(), "L2-3"))
    changed = path.stat().st_ctime_ns
    cache = SourceCache(clock=lambda: changed + SETTLE_NS - 1)
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 1)
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 1)
    assert cache.hits == 0


def test_the_cache_keeps_at_most_its_bytes_least_recent_out(root: Path) -> None:
    files = []
    for name in ("b", "c", "d"):
        path = root / "src" / f"{name}.txt"
        path.write_bytes(name.encode() * 100 + b"\n")  # 101 bytes, 1 line: cost 109
        files.append(_frame(_prov(path, path.read_bytes())))
    cache = SourceCache(250, clock=_Later())
    for frame in files:
        assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 1)
    assert len(cache) == 2 and cache.size <= 250
    assert _check(cache, root, files[2])[1] == 0  # the most recent is kept
    assert _check(cache, root, files[0])[1] == 1  # the least recent went first


def test_a_cached_range_that_addresses_nothing_stays_unverifiable(root: Path) -> None:
    path = root / "src" / "a.py"
    frame = _frame(_prov(path, None, "L9", digest="sha256:" + "0" * 64))
    cache = SourceCache(clock=_Later())
    for reads in (1, 0):
        reader = SourceReader([root], cache=cache)
        got = reader.check_frame(frame)
        assert got is not None and got.outcome is SourceOutcome.UNVERIFIABLE
        assert (got.reason, reader.reads) == ("start_past_end", reads)


def test_a_symlink_planted_over_a_cached_source_is_not_followed(root: Path, tmp_path: Path) -> None:
    path = root / "src" / "a.py"
    frame = _frame(_prov(path, path.read_bytes(), "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame)[0] is SourceOutcome.VERIFIED
    outside = tmp_path / "outside.py"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)
    got = SourceReader([root], cache=cache).check_frame(frame)
    assert got is not None and got.outcome is SourceOutcome.UNVERIFIABLE
    assert got.reason == "untrusted_path"


def test_a_directory_swapped_for_a_symlink_out_is_refused(root: Path, tmp_path: Path) -> None:
    """Directories below a root are resolved each pass: a directory replaced by a symlink
    out of the root, over a file of the very same bytes, is refused unread."""
    path = root / "src" / "a.py"
    data = path.read_bytes()
    frame = _frame(_prov(path, data, "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_bytes(data)
    (root / "src").rename(root / "old")
    (root / "src").symlink_to(outside, target_is_directory=True)
    reader = SourceReader([root], cache=cache)
    got = reader.check_frame(frame)
    assert got is not None and got.reason == "untrusted_path" and reader.reads == 0


def test_a_directory_swapped_for_a_symlink_within_is_followed(root: Path) -> None:
    path = root / "src" / "a.py"
    data = path.read_bytes()
    frame = _frame(_prov(path, data, "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame)[0] is SourceOutcome.VERIFIED
    (root / "src").rename(root / "moved")
    (root / "moved" / "a.py").write_bytes(data.replace(b"two", b"TWO"))
    (root / "src").symlink_to(root / "moved", target_is_directory=True)
    assert _check(cache, root, frame) == (SourceOutcome.MISMATCH, 1)


def test_a_source_named_through_a_symlink_is_served_from_the_cache(root: Path) -> None:
    """Its identity is taken (``stat``) at the resolved path, so the next pass reuses it."""
    (root / "alias.py").symlink_to(root / "src" / "a.py")
    data = (root / "src" / "a.py").read_bytes()
    frame = _frame(_prov(root / "alias.py", data, "L2-3"))
    cache = SourceCache(clock=_Later())
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 1)
    assert _check(cache, root, frame) == (SourceOutcome.VERIFIED, 0)
