"""docs/mcp.md states the face's bounds as the code has them."""

from __future__ import annotations

from hostd.mcp import DEFAULT_MAX_CITED_BYTES, DEFAULT_MAX_CITED_TEXTS, DRAIN_S
from hostd.mcp._schema import ProgressTrack
from hostd.mcp._server import _PAGE
from tests.server.conftest import ROOT

# Words, whatever the line breaks.
_DOC = " ".join((ROOT / "docs" / "mcp.md").read_text(encoding="utf-8").split())


def test_the_stated_bounds_are_the_codes() -> None:
    assert f"up to {DEFAULT_MAX_CITED_TEXTS:,} texts" in _DOC
    assert f"{DEFAULT_MAX_CITED_BYTES // (1024 * 1024)} MiB of text" in _DOC
    assert f"{DRAIN_S:g} s after the close" in _DOC
    assert f"{_PAGE} a page" in _DOC
    assert f"at most {ProgressTrack().max_notes} such" in _DOC
