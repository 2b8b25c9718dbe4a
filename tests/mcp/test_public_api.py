"""The MCP package's public surface is deliberate: ``__all__`` is exact."""

from __future__ import annotations

import hostd.mcp as mcp


def test_all_names_exist_and_nothing_public_is_unlisted() -> None:
    for name in mcp.__all__:
        assert hasattr(mcp, name), name
    public = {n for n in vars(mcp) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(mcp, n)).__name__ == "module"}
    assert public - modules == set(mcp.__all__)
    assert len(mcp.__all__) == len(set(mcp.__all__))
