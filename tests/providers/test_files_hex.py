"""A hex literal in code (``0x1f2e3d4c``) is found by the ``files`` provider whichever
way a question spells it, with ``0x`` or without."""

from __future__ import annotations

from pathlib import Path

from providers import CorpusOptions
from providers.files import FileIndex


def test_a_hex_literal_is_found_with_or_without_its_prefix(tmp_path: Path) -> None:
    (tmp_path / "magic.c").write_text("#define FORMAT_MAGIC 0x1F2E3D4C\n")
    (tmp_path / "notes.md").write_text("# Notes\n\nThe header starts with 1f2e3d4c.\n")
    (tmp_path / "other.c").write_text("int x = 0x10 + 1 + 2 + 3 + 4 + 5 + 6 + 7 + 0xe;\n")
    ix = FileIndex(CorpusOptions(root=tmp_path), refresh_interval_s=0.0, refresh_wait_s=60)
    ix.refresh(force=True)
    for query in ("0x1f2e3d4c", "1f2e3d4c", "0X1F2E3D4C"):
        assert sorted(h.chunk.rel for h in ix.search(query)) == ["magic.c", "notes.md"]
    assert [h.chunk.rel for h in ix.search("0x10")] == ["other.c"]
