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


def test_the_compose_result_shape_names_every_member_of_a_citation_and_a_legs_error() -> None:
    from hostd.mcp import COMPOSE_OUTPUT_SCHEMA

    props = COMPOSE_OUTPUT_SCHEMA["properties"]
    citation = props["citations"]["items"]["properties"]
    provenance = citation["provenance"]["items"]["properties"]
    error = props["providers"]["items"]["properties"]["error"]
    shown = [f"{m}?" if m != "type" else m for m in provenance]
    assert f"provenance: [{{{', '.join(shown)}}}]" in _DOC
    shown = [m if m in error["required"] else f"{m}?" for m in error["properties"]]
    assert f"error?: {{{', '.join(shown)}}}" in _DOC
