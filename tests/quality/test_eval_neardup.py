"""The near-duplicate eval corpus: the same bytes on every run, every gold passage in
every copy, and copies that are near, not exact, duplicates of their module."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from hostd.compose._mmr import shingles

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    path = ROOT / "evals" / "neardup_corpus.py"
    spec = importlib.util.spec_from_file_location("neardup_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the set quotes CPython 3.11")
def test_the_corpus_is_deterministic_and_every_copy_holds_every_gold_phrase(
    tmp_path: Path,
) -> None:
    script = _script()
    source = Path(sysconfig.get_paths()["stdlib"])
    assert script.build(tmp_path / "a", source, 2) == []
    assert script.build(tmp_path / "b", source, 2) == []
    first, second = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert first == second and len(first) == 3 * len(script.MODULES)

    for name in script.MODULES:
        original = (tmp_path / "a" / script.BASE / name).read_text(encoding="utf-8")
        assert original == (source / name).read_text(encoding="utf-8")
        lines = original.split("\n")
        for k in (1, 2):
            copy = (tmp_path / "a" / f"vendor/v{k}" / name).read_text(encoding="utf-8")
            marked = copy.split("\n")
            assert len(marked) == len(lines)  # lines are marked, never added or removed
            changed = sum(a != b for a, b in zip(lines, marked, strict=True))
            assert 0 < changed <= len(lines) * 0.25
            # a near-duplicate: most of its word 3-shingles are the original's
            a, b = shingles(original), shingles(copy)
            assert len(a & b) / len(a | b) > 0.5


def test_a_marked_line_never_touches_a_gold_phrase() -> None:
    script = _script()
    lines = ["alpha beta", "gamma", "  delta  epsilon", "zeta"]
    keep = script.protected_lines(lines, ["beta gamma delta"])
    assert keep == {0, 1, 2}
    text = "\n".join(lines)
    for copy in range(1, 40):  # enough draws that unprotected lines get marked
        out = script.vendored(text, copy, "m.py", ["beta gamma delta"]).split("\n")
        assert out[:3] == lines[:3]
    assert any(
        script.vendored(text, copy, "m.py", ["beta gamma delta"]).split("\n")[3] != "zeta"
        for copy in range(1, 40)
    )
