"""Source re-reads of ``file`` provenance under trusted roots, on real files (F5, F17)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostd.engine.verify import SourceOutcome, SourceReader
from hostd.protocol import ContextFrame, Provenance, address_line_range, sha256_digest

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "range" / "range-vectors.json"


def _prov(path: Path | str, data: bytes | None, range_: str | None = None, **kw: Any) -> Provenance:
    uri = path if isinstance(path, str) else path.as_uri()
    digest = kw.pop("digest", None)
    if digest is None and data is not None:
        digest = sha256_digest(address_line_range(data, range_))
    return Provenance(type="file", uri=uri, range=range_, digest=digest, **kw)


def _frame(*provs: Provenance, uri: str | None = None) -> ContextFrame:
    return ContextFrame(
        id="f",
        kind="snippet",
        title="t",
        content="x",
        score=0.5,
        token_cost=1,
        citation_label="c",
        provenance=list(provs),
        uri=uri,
    )


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
    assert got.detail["expected"] == prov.digest
    assert got.detail["actual"] == sha256_digest(b"ONE\r\n")


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
