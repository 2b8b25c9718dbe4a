"""The protocol package's public surface is deliberate: ``__all__`` is exact."""

from __future__ import annotations

import hostd.protocol as protocol


def test_all_names_exist_and_nothing_public_is_unlisted() -> None:
    for name in protocol.__all__:
        assert hasattr(protocol, name), name
    public = {n for n in vars(protocol) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(protocol, n)).__name__ == "module"}
    assert public - modules == set(protocol.__all__)
    assert len(protocol.__all__) == len(set(protocol.__all__))
