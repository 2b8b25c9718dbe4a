"""A lazy binding's module is imported one thread at a time with ``hostd mcp``'s face.

``hostd mcp`` imports the MCP SDK in a worker thread while providers start, and an MCP
provider's binding imports the same SDK: a package whose modules import each other in
a cycle, entered from two threads at once, hands one of them a module still
half-initialised (``cannot import name 'Server' from partially initialized module
'mcp.server'``). Both imports go through ``import_one_at_a_time``; the modules here
record when their bodies run.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostd.transport.bindings import (
    BindingRow,
    find_binding,
    import_one_at_a_time,
    register_binding,
    unregister_binding,
)

#: What ran, in order: the modules' bodies append to it.
ORDER: list[str] = []
ENTERED, RELEASE = threading.Event(), threading.Event()
_GUARD_S = 60  # a hang guard, never the thing tested

_FACE = f"""
import sys
t = sys.modules[{__name__!r}]
t.ORDER.append("face begins")
t.ENTERED.set()
t.RELEASE.wait({_GUARD_S})
t.ORDER.append("face ends")
"""

_BINDING = f"""
import sys
from hostd.transport.bindings import BindingRow, JsonRpcCodec, register_binding
sys.modules[{__name__!r}].ORDER.append("binding")
register_binding(BindingRow("held-test", codec=JsonRpcCodec))
"""


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[None]:
    (tmp_path / "held_face_mod.py").write_text(_FACE, encoding="utf-8")
    (tmp_path / "held_binding_mod.py").write_text(_BINDING, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    register_binding(BindingRow("held-test", module="held_binding_mod"))
    ORDER.clear()
    ENTERED.clear()
    RELEASE.clear()
    try:
        yield
    finally:
        RELEASE.set()
        unregister_binding("held-test")
        sys.path.remove(str(tmp_path))
        for name in ("held_face_mod", "held_binding_mod"):
            sys.modules.pop(name, None)


@pytest.mark.usefixtures("modules")
def test_a_lazy_binding_is_not_imported_beside_the_face_but_after_it() -> None:
    face = threading.Thread(target=import_one_at_a_time, args=("held_face_mod",))
    face.start()
    assert ENTERED.wait(_GUARD_S)  # the face's import is under way, and held
    found: list[BindingRow] = []
    binding = threading.Thread(target=lambda: found.append(find_binding("held-test")))
    binding.start()
    # Given a moment to run beside the held import (without the lock, it would): it
    # must still be waiting. A slow machine that had not started it would pass anyway.
    binding.join(0.5)
    RELEASE.set()
    face.join(_GUARD_S)
    binding.join(_GUARD_S)
    assert ORDER == ["face begins", "face ends", "binding"]
    assert found and not found[0].lazy
