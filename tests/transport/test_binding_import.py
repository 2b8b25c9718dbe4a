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

import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
import structlog.testing
from anyio.abc import SocketAttribute, SocketListener

from hostd.protocol import ContextQuery
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


@contextlib.asynccontextmanager
async def _started_while_held(name: str, child: str) -> AsyncIterator[ProviderConnection]:
    """Start provider ``name``, the Python source ``child`` given the test's port, while
    its binding's module waits its turn behind the face's import (hostd mcp's face
    imports the SDK). The child connects to the port once it got past what the test
    holds it to; that must happen before the import is let go. Yields the connection,
    handshaken once the imports went on; closes it after."""
    face = threading.Thread(target=import_one_at_a_time, args=("held_face_mod",))
    face.start()
    assert await anyio.to_thread.run_sync(ENTERED.wait, _GUARD_S)
    opened: list[ProviderConnection] = []
    handshaken = anyio.Event()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    socket_listener = listener.listeners[0]
    assert isinstance(socket_listener, SocketListener)
    command = [sys.executable, "-c", child, str(port)]
    async with listener, anyio.create_task_group() as tg:

        async def open_it() -> None:
            opened.append(
                await ProviderConnection.open(
                    name, command, task_group=tg, binding="held-test", cwd=ROOT,
                    handshake_timeout=_GUARD_S,
                )
            )  # fmt: skip
            handshaken.set()

        tg.start_soon(open_it)
        try:
            with anyio.fail_after(_GUARD_S):  # a hang guard: the old order never gets here
                said = await socket_listener.accept()
            await said.aclose()
            assert ORDER == ["face begins"]  # got there while the binding waits its turn
        except BaseException:
            tg.cancel_scope.cancel()  # the start too, once the import lets it go
            raise
        finally:
            RELEASE.set()
        face.join(_GUARD_S)
        with anyio.fail_after(_GUARD_S):
            await handshaken.wait()
        yield opened[0]
        await opened[0].aclose()


@pytest.mark.anyio
@pytest.mark.usefixtures("modules")
async def test_a_provider_runs_while_its_bindings_module_waits_to_import() -> None:
    # hostd mcp's face imports the SDK while an MCP provider starts: the provider's
    # process boots meanwhile (seconds on a busy machine), not after both imports.
    async with _started_while_held("held", _CHILD) as conn:
        assert conn.handshaken and ORDER == ["face begins", "face ends", "binding"]


#: A provider that writes to its stderr at once, before its handshake, more than an
#: unread pipe takes (its 64 KiB, and the 128 KiB the event loop buffers for a stream
#: nobody reads), then says it got past that write (a connection to the test's port),
#: then serves: ``FLOOD_LINES`` lines of 100 bytes, 1 MB, framed by a first and a last.
FLOOD_LINES = 10000
_FLOODING_CHILD = f"""
import os, runpy, socket, sys
noise = "".join(f"noise {{i:05d}} " + "n" * 87 + "\\n" for i in range({FLOOD_LINES}))
data = ("the flood begins\\n" + noise + "the flood ends\\n").encode()
while data:  # one write; the loop only finishes a short one
    data = data[os.write(2, data):]
socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()
sys.argv = ["healthy_provider", "--name", "flooding"]
runpy.run_module("tests.fixtures.healthy_provider", run_name="__main__")
"""


@pytest.mark.anyio
@pytest.mark.usefixtures("modules")
async def test_a_providers_stderr_is_read_while_its_bindings_module_waits_to_import() -> None:
    # Its binding's module held (hostd mcp's face imports the SDK): a provider that
    # writes 1 MB to its stderr before its handshake gets past that write only if its
    # stderr is read from its spawn on, not from the end of that import.
    with structlog.testing.capture_logs() as logs:
        async with _started_while_held("flooding", _FLOODING_CHILD) as conn:
            with anyio.fail_after(_GUARD_S):
                result = await conn.query(
                    ContextQuery(goal="after the flood", max_frames=1, max_tokens=1000)
                )
            assert result.frames  # it answers
    # Its stderr went to the log as ever: its first lines, the rest counted, and its
    # last lines kept for a failure's report.
    child = conn.child
    assert (child.stderr_lines, child.returncode) == (FLOOD_LINES + 2, 0)
    stderr = [e["line"] for e in logs if e["event"] == "provider.stderr"]
    assert stderr[:2] == ["the flood begins", "noise 00000 " + "n" * 87]
    summaries = [e for e in logs if e["event"] == "provider.stderr.suppressed"]
    assert summaries and summaries[-1]["suppressed"] == child.stderr_suppressed
    assert len(stderr) + child.stderr_suppressed == FLOOD_LINES + 2
    assert child.stderr_tail().endswith("the flood ends")
