"""A lazy binding's module is imported one thread at a time with ``hostd mcp``'s face.

``hostd mcp`` imports the MCP SDK in a worker thread while providers start, and an MCP
provider's binding imports the same SDK: a package whose modules import each other in
a cycle, entered from two threads at once, hands one of them a module still
half-initialised (``cannot import name 'Server' from partially initialized module
'mcp.server'``). Both imports go through ``import_one_at_a_time``; the modules here
record when their bodies run. The provider's process is spawned before its binding's
module is imported, so it boots while that import waits its turn.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketListener

from hostd.transport import ProviderConnection
from hostd.transport.bindings import (
    BindingRow,
    find_binding,
    import_one_at_a_time,
    register_binding,
    unregister_binding,
)

ROOT = Path(__file__).resolve().parents[2]

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


#: A provider that says it runs (a connection to the test's port), then serves.
_CHILD = """
import runpy, socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()
sys.argv = ["healthy_provider", "--name", "held"]
runpy.run_module("tests.fixtures.healthy_provider", run_name="__main__")
"""


@pytest.mark.anyio
@pytest.mark.usefixtures("modules")
async def test_a_provider_runs_while_its_bindings_module_waits_to_import() -> None:
    # hostd mcp's face imports the SDK while an MCP provider starts: the provider's
    # process boots meanwhile (seconds on a busy machine), not after both imports.
    face = threading.Thread(target=import_one_at_a_time, args=("held_face_mod",))
    face.start()
    assert await anyio.to_thread.run_sync(ENTERED.wait, _GUARD_S)
    opened: list[ProviderConnection] = []
    handshaken = anyio.Event()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    socket_listener = listener.listeners[0]
    assert isinstance(socket_listener, SocketListener)
    command = [sys.executable, "-c", _CHILD, str(port)]
    async with listener, anyio.create_task_group() as tg:

        async def open_it() -> None:
            opened.append(
                await ProviderConnection.open(
                    "held", command, task_group=tg, binding="held-test", cwd=ROOT,
                    handshake_timeout=_GUARD_S,
                )
            )  # fmt: skip
            handshaken.set()

        tg.start_soon(open_it)
        try:
            with anyio.fail_after(_GUARD_S):  # a hang guard: the old order never gets here
                said = await socket_listener.accept()
            await said.aclose()
            assert ORDER == ["face begins"]  # spawned while the binding waits its turn
        except BaseException:
            tg.cancel_scope.cancel()  # the start too, once the import lets it go
            raise
        finally:
            RELEASE.set()
        face.join(_GUARD_S)
        with anyio.fail_after(_GUARD_S):
            await handshaken.wait()
        conn = opened[0]
        assert conn.handshaken and ORDER == ["face begins", "face ends", "binding"]
        await conn.aclose()
