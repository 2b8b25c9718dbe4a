"""A provider that dies is reported with its error line, whatever its language.

Python ends a traceback with its error; Node, Go, Rust and Java print the error first and
the stack after it. The reason a failed start or a crash carries (``ChildProcess.
failure_report``: the transport's error, ``providers[].error``, ``hostd providers``,
``check-provider``) holds the error line either way, and stays one bounded line,
scrubbed, its control characters neutralised.

The providers are real child processes (``foreign_crash``: Python writing what each
runtime writes, so no runtime is needed); the one test that runs ``node`` itself is
skipped without it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import anyio
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.engine import Host, LegStatus, ProviderSpec, RestartPolicy
from hostd.errors import ProviderCrashed
from hostd.transport import ProviderConnection, Redactor, StderrPolicy
from hostd.transport.process._stderr import HEAD_BYTES, TAIL_BYTES, TAIL_SHOWN_BYTES, StderrPump
from tests.engine._helpers import query
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT, marked_env, python
from tests.transport.foreign_crash import CRASHES

pytestmark = pytest.mark.anyio

#: What must never reach a one-line report: control characters (a tab aside, as the
#: log's own lines keep it) and line breaks.
_CONTROL = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029] if c != 0x09]


def _stderr_part(message: str, *, started: bool = False) -> str:
    """What a report quotes of the stderr: after ``stderr: `` (``its stderr's last lines:
    `` once it ``started``), bounded on its own."""
    _, sep, shown = message.partition("; its stderr's last lines: " if started else "; stderr: ")
    assert sep, message
    assert len(shown.encode()) <= TAIL_SHOWN_BYTES, shown
    assert not any(c in shown for c in _CONTROL), shown
    return shown


# -- real child processes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["node_syntax", "node_missing", "go", "go_dump", "rust", "java", "sh", "python"]
)
async def test_a_provider_that_dies_at_start_is_reported_with_its_error_line(kind: str) -> None:
    crash = CRASHES[kind]
    with anyio.fail_after(60):  # a hang guard: it dies at once
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProviderCrashed) as caught:
                await ProviderConnection.open(
                    "p1",
                    python("tests.transport.foreign_crash", kind),
                    task_group=tg,
                    env=marked_env(),
                    cwd=ROOT,
                )
    message = caught.value.message
    assert f"exited with status {crash.status}; stderr: " in message, message
    assert crash.error in _stderr_part(message), message
    assert "\n" not in message


async def test_a_crash_in_a_query_handler_after_its_log_is_reported_with_its_error() -> None:
    # 300 log lines first: the crash is in the stream's last bytes, its error above the
    # stack that ends it. Its leg's error and its health record both carry the error.
    spec = ProviderSpec(
        "facts",
        python("tests.transport.foreign_crash", "node_throw", "query"),
        env=marked_env(),
        cwd=str(ROOT),
        timeout_ms=30_000,  # a hang guard: it answers the handshake and dies at the query
    )
    with structlog.testing.capture_logs():
        async with Host(
            [spec], start="boot", restart_policy=RestartPolicy(base_delay_s=0.01)
        ) as host:
            with anyio.fail_after(120):  # a hang guard
                fan = await host.query_all(query(), 1000)
            (row,) = host.providers_list()
    report = fan.reports["facts"]
    assert report.status is LegStatus.CRASHED, report
    message = report.error_message or ""
    # It answered its handshake: what its stderr ended with is quoted as that, not as
    # the cause a failed start's stderr is.
    assert "exited with status 1; its stderr's last lines: " in message, message
    error = CRASHES["node_throw"].error
    assert error in _stderr_part(message, started=True), message
    assert error in row["health"]["last_failure"], row


def test_check_provider_shows_the_error_line_of_a_node_style_crash(tmp_path: Path) -> None:
    # The user's own words for it: ``hostd check-provider -- python script.py``.
    script = tmp_path / "facts.py"
    crash = CRASHES["node_syntax"]
    script.write_text(
        f"import sys\nsys.stderr.write({crash.stderr!r})\nsys.exit({crash.status})\n",
        encoding="utf-8",
    )
    done = run_hostd("check-provider", "--json", "--", "python", str(script))
    assert done.stdout, done.stderr[-2000:]
    checks = {r["check"]: r for r in json.loads(done.stdout)}
    detail = checks["handshake"]["detail"]
    # Which end of the pipes the host finds closed first (the handshake's write, or
    # the read) is the scheduler's choice; what follows it is the same either way.
    ended = r"provider closed its (output|input); exited with status 1; stderr: "
    assert re.match(ended, detail), detail
    assert crash.error in _stderr_part(detail), detail


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")
@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("const a = 1;\nconst x = ;\n", "SyntaxError: Unexpected token ';'"),
        (None, "Error: Cannot find module"),  # no script at all: the path is wrong
        ("throw new TypeError('no index at /var/lib/facts');\n", "TypeError: no index at"),
    ],
    ids=["syntax", "missing", "throw"],
)
async def test_a_real_node_provider_that_dies_is_reported_with_its_error_line(
    tmp_path: Path, source: str | None, error: str
) -> None:
    script = tmp_path / "facts.js"
    if source is not None:
        script.write_text(source, encoding="utf-8")
    node = shutil.which("node")
    assert node is not None
    with anyio.fail_after(60):  # a hang guard: it dies at once
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProviderCrashed) as caught:
                await ProviderConnection.open(
                    "p1", [node, str(script)], task_group=tg, env=marked_env(), cwd=tmp_path
                )
    message = caught.value.message
    assert "exited with status 1; stderr: " in message, message
    assert error in _stderr_part(message), message


#: A Node provider with a one-character typo on its line 10 (``=`` for ``=>``): it dies as
#: it loads, with ``ReferenceError: s is not defined``.
_NODE_TYPO = (
    "// facts: a provider\n"
    "const readline = require('readline');\n"
    "const crypto = require('crypto');\n"
    "\n"
    "function hello() {\n"
    "  return 1;\n"
    "}\n"
    "\n"
    "\n"
    "const sha = (s) = crypto.createHash('sha256').update(s).digest('hex');\n"
)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")
def test_check_provider_keeps_the_file_and_line_of_a_node_provider_s_error(
    tmp_path: Path,
) -> None:
    # Node prints where it was thrown first (``facts.js:10``) and its first frame is the
    # author's (``at Object.<anonymous> (…facts.js:10:…)``); the frames after it are
    # Node's own. The author's two go last when the line is too long, Node's first.
    script = tmp_path / "facts.js"
    script.write_text(_NODE_TYPO, encoding="utf-8")
    done = run_hostd("check-provider", "--json", "--", "node", str(script))
    assert done.stdout, done.stderr[-2000:]
    checks = {r["check"]: r for r in json.loads(done.stdout)}
    shown = _stderr_part(checks["handshake"]["detail"])
    assert shown.startswith(f"{script}:10 | … | ReferenceError: s is not defined | "), shown
    assert f"at Object.<anonymous> ({script}:10:" in shown, shown


async def test_a_python_provider_s_crash_keeps_its_first_frame_outside_the_runtime(
    tmp_path: Path,
) -> None:
    # Run as ``python -m``: its traceback starts with the runtime's ``<frozen runpy>``
    # frames, then the module's own line that called into the failure, which the last
    # lines (the raising frame and the error) do not hold.
    (tmp_path / "facts_crash.py").write_text(
        "def open_index(path):\n"
        "    return load(path)\n"
        "\n"
        "\n"
        "def load(path):\n"
        '    raise ValueError(f"index at {path} is from version 1: run reindex")\n'
        "\n"
        "\n"
        'open_index("/var/lib/facts/index.db")\n',
        encoding="utf-8",
    )
    with anyio.fail_after(60):  # a hang guard: it dies at once
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProviderCrashed) as caught:
                await ProviderConnection.open(
                    "p1",
                    python("facts_crash"),
                    task_group=tg,
                    env=marked_env(),
                    cwd=tmp_path,
                )
    shown = _stderr_part(caught.value.message)
    assert shown.startswith(f'… |   File "{tmp_path / "facts_crash.py"}", line 9, in <module>'), (
        shown
    )
    assert "<frozen" not in shown, shown
    assert shown.endswith(
        "ValueError: index at /var/lib/facts/index.db is from version 1: run reindex"
    ), shown


def test_the_lines_that_locate_an_error_outlast_the_runtime_s_frames() -> None:
    where = "/home/u/projects/facts-provider/src/providers/changelog/index.js"
    internal = "".join(
        f"    at Module._compile{n} (node:internal/modules/cjs/loader:{n}:14)\n" for n in range(6)
    )
    data = (
        f"{where}:10\n"
        "const sha = (s) = crypto.createHash('sha256').update(s).digest('hex');\n"
        "                                                     ^\n\n"
        "ReferenceError: s is not defined\n"
        f"    at Object.<anonymous> ({where}:10:54)\n{internal}\n"
        "Node.js v20.20.2\n"
    ).encode()
    shown = _fed(data)
    assert len(shown.encode()) <= TAIL_SHOWN_BYTES, shown
    assert shown.startswith(f"{where}:10 | … | ReferenceError: s is not defined | "), shown
    assert f"at Object.<anonymous> ({where}:10:54) | … | " in shown, shown  # Node's own, out


# -- what is kept of the stream, and how it is cut -----------------------------------------


def _pump(redactor: Redactor | None = None) -> StderrPump:
    # Nothing logged (a bucket of none): only what is kept for the report matters here.
    return StderrPump("p", StderrPolicy(burst=0, rate=0.0), redactor=redactor)


def _fed(data: bytes, chunk: int = 1000, redactor: Redactor | None = None) -> str:
    pump = _pump(redactor)
    for i in range(0, len(data), chunk):
        pump.feed(data[i : i + chunk])
    pump.end()
    return pump.tail()


def test_an_error_in_the_first_bytes_of_a_long_stream_is_still_shown() -> None:
    crash = CRASHES["go_dump"]
    data = crash.stderr.encode()
    assert len(data) > HEAD_BYTES + TAIL_BYTES  # the panic is in neither end but the first
    shown = _fed(data)
    assert shown.startswith(crash.error + " | … | "), shown
    assert shown.endswith(" | exit status 2"), shown
    assert len(shown.encode()) <= TAIL_SHOWN_BYTES


def test_where_the_first_and_last_bytes_overlap_each_line_is_shown_once() -> None:
    # Longer than the kept end, shorter than both ends: they overlap, and nothing is lost.
    lines = ["Error: Cannot find module '/tmp/x/facts.js'"]
    lines += [f"    at frame{n} (/tmp/x/facts.js:{n}:1)" for n in range(150)]
    lines.append("Node.js v20.20.2")
    data = ("\n".join(lines) + "\n").encode()
    assert TAIL_BYTES < len(data) < HEAD_BYTES + TAIL_BYTES
    shown = _fed(data, chunk=333)
    assert shown.count(lines[0]) == 1, shown
    # The error, and its first frame: where it was raised.
    assert shown.startswith(f"{lines[0]} | {lines[1]} | … | "), shown
    assert shown.endswith(" | Node.js v20.20.2"), shown


def test_stack_frames_give_way_to_the_error_when_the_bytes_run_out() -> None:
    where = "/home/u/projects/facts-provider/node_modules/some-library/dist/index.js"
    stack = "".join(f"    at handler{n} ({where}:{n}:1)\n" for n in range(12))
    data = f"TypeError: Cannot read properties of undefined (reading 'id')\n{stack}".encode()
    shown = _fed(data)
    assert shown.startswith("TypeError: Cannot read properties of undefined (reading 'id')")
    assert len(shown.encode()) <= TAIL_SHOWN_BYTES
    assert shown.endswith(f"at handler11 ({where}:11:1)"), shown  # the last line, if it fits


def test_an_error_line_past_the_bound_keeps_its_start() -> None:
    shown = _fed(b"warming up\n" + b"SyntaxError: " + b"x" * 1000 + b"\n    at f (a.js:1:1)\n")
    assert shown.startswith("… | SyntaxError: xxx"), shown
    assert shown.endswith("…") and len(shown.encode()) <= TAIL_SHOWN_BYTES


def test_a_line_cut_at_the_end_of_the_first_bytes_is_never_shown() -> None:
    # A secret straddles the last byte kept of the stream's start: its first half must
    # not be shown (the redactor cannot know it), though the line looks like an error.
    secret = "tok-" + "9f2c71d0e4b8a5" * 4
    first = "x" * (HEAD_BYTES - 30) + "\n"
    data = (first + f"Error: the token {secret} was refused\n").encode()
    data += b"".join(b"    at frame%d (a.js:1:1)\n" % n for n in range(300))
    shown = _fed(data, redactor=Redactor([secret]))
    assert "tok-" not in shown and "the token" not in shown, shown


def test_a_stream_with_no_line_end_is_shown_by_its_end() -> None:
    # The kept end is a fragment: it is never taken for an error line, only its end shown.
    data = b"Error: " + b"y" * 10_000 + b" last words"
    shown = _fed(data)
    assert shown.endswith("y last words") and shown.startswith("…"), shown
    assert len(shown.encode()) <= TAIL_SHOWN_BYTES


# -- any stream: bounded, one line, its error line kept ------------------------------------

#: Lines no error pattern can match: none of their letters spells error, exception,
#: panic, fatal, "not found" or "no such file"; control characters and non-ASCII in.
_PLAIN = st.text(
    st.sampled_from("abcdeghijkmpqrsuvwxyz0123456789 ._-/()[]{}'\"\t\x1b\x07\x00\x9béü漢"),
    max_size=200,
)
_ERRORS = [c.error.split(" | ")[0] for c in CRASHES.values()]


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(_PLAIN, max_size=60),
    error=st.sampled_from(_ERRORS),
    after=st.lists(_PLAIN, max_size=60),
    chunk=st.integers(1, 5000),
)
def test_any_stream_gives_one_bounded_line_holding_its_error(
    before: list[str], error: str, after: list[str], chunk: int
) -> None:
    head = "".join(f"{line}\n" for line in before).encode()
    data = head + f"{error}\n".encode() + "".join(f"{line}\n" for line in after).encode()
    shown = _fed(data, chunk)
    assert len(shown.encode()) <= TAIL_SHOWN_BYTES, shown
    assert not any(c in shown for c in _CONTROL), shown
    # The error line is kept when it is whole in what is kept: the whole stream (its two
    # ends meet), its first bytes, or its last bytes after the first line end there.
    start, end = len(head), len(head) + len(error.encode()) + 1
    tail_from = len(data) - TAIL_BYTES  # the line before it ends in the kept end
    if len(data) <= HEAD_BYTES + TAIL_BYTES or end <= HEAD_BYTES or start > tail_from:
        assert error in shown, shown


def test_python_s_traceback_reads_as_before() -> None:
    # Its error is its last line, its header left out: the last lines, as they always were.
    data = (
        b"Traceback (most recent call last):\n"
        b'  File "/tmp/x/provider.py", line 3, in <module>\n'
        b"    import facts_index\n"
        b"ModuleNotFoundError: No module named 'facts_index'\n"
    )
    assert _fed(data) == (
        '  File "/tmp/x/provider.py", line 3, in <module> |     import facts_index | '
        "ModuleNotFoundError: No module named 'facts_index'"
    )
