"""Provider child processes: scrubbed env, stderr into the log, the teardown ladder."""

from __future__ import annotations

import json
import os
import signal
import sys

import anyio
import pytest
from structlog.testing import capture_logs

from hostd.errors import HostdError, LineTooLong, ProviderCrashed, ShuttingDown
from hostd.protocol import ContextQuery
from hostd.transport import ENV_ALLOW_LIST, ChildProcess, ProviderConnection, scrubbed_env
from tests.fixtures.lines import Lines, read_stdout
from tests.fixtures.procs import MARK_VAR, ROOT, leftovers, marked_env, python

pytestmark = pytest.mark.anyio


def test_scrubbed_env_keeps_the_allow_list_and_the_named_extras() -> None:
    source = {"PATH": "/bin", "HOME": "/h", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "LANG": "C"}
    env = scrubbed_env({"PROVIDER_TOKEN": "given"}, source=source)
    assert env == {"PATH": "/bin", "HOME": "/h", "LANG": "C", "PROVIDER_TOKEN": "given"}


def test_scrubbed_env_keeps_the_cache_and_state_dirs_the_providers_persist_under() -> None:
    # files and semantic cache their indexes under XDG_CACHE_HOME, memory keeps its
    # database under XDG_STATE_HOME: a daemon told to use other dirs must pass them on.
    source = {"XDG_CACHE_HOME": "/c", "XDG_STATE_HOME": "/s", "XDG_SESSION_COOKIE": "x"}
    assert scrubbed_env(source=source) == {"XDG_CACHE_HOME": "/c", "XDG_STATE_HOME": "/s"}


def test_scrubbed_env_keeps_where_the_toolchains_live() -> None:
    # A provider run as `cargo run` or `go run`, or on a JVM, finds a toolchain that is
    # not at its default place.
    homes = {
        "CARGO_HOME": "/t/cargo",
        "RUSTUP_HOME": "/t/rustup",
        "GOPATH": "/t/go",
        "GOROOT": "/t/goroot",
        "GOMODCACHE": "/t/gomod",
        "GOCACHE": "/t/gocache",
        "JAVA_HOME": "/t/jdk",
        "NODE_PATH": "/t/node_modules",
    }
    assert scrubbed_env(source={**homes, "CARGO_REGISTRY_TOKEN": "x"}) == homes


def test_scrubbed_env_keeps_the_numeric_libraries_thread_counts() -> None:
    # A daemon limited to one core's worth of threads has its semantic provider's
    # torch follow, not start one thread per core of the machine.
    counts = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1"}
    assert scrubbed_env(source={**counts, "OMP_SECRET": "x"}) == counts


def test_config_md_names_the_toolchain_homes_it_passes_on() -> None:
    env_row = next(
        line
        for line in (ROOT / "docs" / "config.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| `env` |")
    )
    kept = ENV_ALLOW_LIST[ENV_ALLOW_LIST.index("CARGO_HOME") :]
    assert [name for name in kept if f"`{name}`" not in env_row] == []


async def test_a_child_sees_only_the_scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_SECRET", "do-not-leak")
    code = "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)) + chr(10))"
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn(
            "env", [sys.executable, "-c", code], env={**marked_env(), "GIVEN": "yes"}
        )
        child.start_pumps(tg)
        lines = await read_stdout(child)
        data = await lines.next()
        await child.aclose(grace=5)
    seen = json.loads(data)
    assert "HOSTD_TEST_SECRET" not in seen
    assert seen["GIVEN"] == "yes" and seen[MARK_VAR]


async def test_a_child_that_ignores_sigterm_is_killed() -> None:
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "sys.stdout.write('armed\\n'); sys.stdout.flush(); time.sleep(600)"
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "stubborn", [sys.executable, "-c", code], env=marked_env()
            )
            child.start_pumps(tg)
            lines = await read_stdout(child)
            assert await lines.next() == b"armed"  # the SIGTERM handler is installed
            code_ = await child.aclose(grace=0.2)
    assert code_ == -signal.SIGKILL
    events = [e["event"] for e in logs]
    assert "provider.process.sigterm" in events and "provider.process.sigkill" in events


async def test_a_child_that_exits_on_stdin_eof_needs_no_signal() -> None:
    code = "import sys; sys.stdin.read()"
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "polite", [sys.executable, "-c", code], env=marked_env()
            )
            child.start_pumps(tg)
            assert await child.aclose(grace=30) == 0
    assert "provider.process.sigterm" not in [e["event"] for e in logs]


async def test_teardown_reaches_grandchildren_in_the_process_group() -> None:
    async with anyio.create_task_group() as tg:
        conn = await ProviderConnection.open(
            "g",
            python("tests.fixtures.adversarial_provider", "grandchild"),
            task_group=tg,
            env=marked_env(),
            cwd=ROOT,
            grace=0.3,
            handshake_timeout=30,
        )
        pgid = os.getpgid(conn.child.pid)
        assert pgid == conn.child.pid  # its own process group (new session)
        with anyio.move_on_after(0.2):
            await conn.query(ContextQuery(goal="g", max_frames=1, max_tokens=10))
        await conn.aclose()
    assert leftovers() == []


async def test_a_missing_command_is_a_crash_not_an_exception_group() -> None:
    async with anyio.create_task_group() as tg:
        with pytest.raises(ProviderCrashed):
            await ProviderConnection.open("x", ["/nonexistent/provider"], task_group=tg)


# -- stdout, read in the event loop's callback (ChildProcess.start_reading) -------------


async def _stdout_of(code: str, **kw: int) -> tuple[list[bytes], HostdError | None, Lines]:
    """Run ``code``; the stdout lines the sink saw and how the stream ended."""
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn("out", [sys.executable, "-c", code], env=marked_env())
        child.start_pumps(tg)
        lines = await read_stdout(child, **kw)
        with anyio.fail_after(30):
            await child.output_ended.wait()
        await child.aclose(grace=5)
    return lines.seen, (lines.ends[0] if lines.ends else None), lines


async def test_lines_written_in_pieces_arrive_whole_and_in_order() -> None:
    code = (
        "import os, time\n"
        "os.write(1, b'one\\ntw'); time.sleep(0.05); os.write(1, b'o\\nthr'); time.sleep(0.05)\n"
        "os.write(1, b'ee\\n' + b'x' * 100000 + b'\\nlast\\n')\n"
    )
    seen, end, lines = await _stdout_of(code)
    assert seen == [b"one", b"two", b"three", b"x" * 100000, b"last"]
    assert isinstance(end, ProviderCrashed) and "its output" in end.message
    assert len(lines.ends) == 1  # the end is told once (EOF, then the pipe closing)


async def test_an_end_of_output_the_host_asked_for_is_no_crash() -> None:
    # A provider that exits when its stdin closes: the teardown ladder's own doing.
    code = "import os, sys; os.write(1, b'ready\\n'); sys.stdin.read()"
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn("out", [sys.executable, "-c", code], env=marked_env())
        child.start_pumps(tg)
        lines = await read_stdout(child)
        with anyio.fail_after(30):
            assert await lines.next() == b"ready"
            assert await child.aclose(grace=5) == 0
            end = await lines.end()
    assert len(lines.ends) == 1
    assert isinstance(end, ShuttingDown) and not isinstance(end, ProviderCrashed)
    assert "as the host stopped it" in end.message


async def test_a_child_that_dies_mid_line_ends_the_stream_mid_line() -> None:
    seen, end, _ = await _stdout_of("import os; os.write(1, b'whole\\n{\"cut')")
    assert seen == [b"whole"]
    assert isinstance(end, ProviderCrashed) and "mid-line" in end.message


async def test_an_over_long_line_ends_the_stream_and_nothing_after_it_is_read() -> None:
    code = "import os; os.write(1, b'ok\\n' + b'y' * 5000 + b'\\nafter\\n')"
    seen, end, _ = await _stdout_of(code, max_line_bytes=1000)
    assert seen == [b"ok"]
    assert isinstance(end, LineTooLong) and end.data["max_line_bytes"] == 1000


async def test_the_sink_stops_the_reading_by_returning_false() -> None:
    seen, end, _ = await _stdout_of("import os; os.write(1, b'a\\nb\\nc\\n')", stop_after=1)
    assert seen == [b"a"] and end is None  # it ended the stream itself: no end is told


async def test_stdout_can_be_read_only_once() -> None:
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn("once", [sys.executable, "-c", "pass"], env=marked_env())
        child.start_pumps(tg)
        await read_stdout(child)
        with pytest.raises(RuntimeError, match="already"):
            await read_stdout(child)
        await child.aclose(grace=5)


async def test_unread_stdout_is_closed_by_the_teardown() -> None:
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn("unread", [sys.executable, "-c", "pass"], env=marked_env())
        child.start_pumps(tg)
        fd = child._stdout_fd  # noqa: SLF001 - the descriptor the teardown must close
        pipe = os.fstat(fd).st_ino
        await child.aclose(grace=5)
    assert child.output_ended.is_set()
    try:
        assert os.fstat(fd).st_ino != pipe  # the number may be reused, not for our pipe
    except OSError:
        pass  # closed


class _Broken(Lines):
    def on_line(self, line: bytes) -> bool:
        raise KeyError("a bug in a binding")


async def test_a_failing_sink_is_logged_and_ends_the_stream_instead_of_hanging() -> None:
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "bug", [sys.executable, "-c", "print('x'); print('y')"], env=marked_env()
            )
            child.start_pumps(tg)
            lines = _Broken()
            await child.start_reading(lines)
            end = await lines.end()
            await child.aclose(grace=5)
    assert type(end) is HostdError and "a bug in a binding" in end.message
    assert lines.ends == [end]  # told once; the second line was never handed over
    assert [e["provider"] for e in logs if e["event"] == "provider.stdout.dispatch_failed"] == [
        "bug"
    ]


async def test_reading_stdout_outside_an_asyncio_loop_is_a_clear_error() -> None:
    def start_elsewhere(child: ChildProcess) -> None:
        coro = child.start_reading(Lines())  # driven in a thread with no event loop
        with pytest.raises(RuntimeError, match="asyncio event loop"):
            coro.send(None)

    child = await ChildProcess.spawn("elsewhere", [sys.executable, "-c", "pass"], env=marked_env())
    try:
        await anyio.to_thread.run_sync(start_elsewhere, child)
        await read_stdout(child)  # nothing was taken: it can still be read here
    finally:
        await child.aclose(grace=5)
