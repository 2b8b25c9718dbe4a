"""A provider's stderr in the log: rate-limited by a token bucket, the rest counted and
summarised, the pipe always drained."""

from __future__ import annotations

import sys

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from hostd.errors import MAX_STDERR_TAIL_CHARS
from hostd.transport import ChildProcess, Redactor, StderrPolicy, printable
from hostd.transport.process._stderr import TAIL_LINES, StderrPump, TokenBucket, last_lines
from tests.fixtures.procs import marked_env

pytestmark = pytest.mark.anyio

FLOOD_LINES = 50_000


async def test_a_flood_is_bounded_in_the_log_and_its_suppressed_lines_are_counted() -> None:
    # rate=0: the bucket never refills, so exactly ``burst`` lines may reach the log.
    policy = StderrPolicy(burst=25, rate=0.0)
    code = (
        "import os\n"
        f"for i in range({FLOOD_LINES}):\n"
        "    os.write(2, b'noise %d\\n' % i) if i % 1000 == 0 else None\n"
        f"os.write(2, b''.join(b'line %d\\n' % i for i in range({FLOOD_LINES})))\n"
        "os.write(2, b'unterminated tail')\n"
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "flood", [sys.executable, "-c", code], env=marked_env(), policy=policy
            )
            child.start_pumps(tg)
            with anyio.fail_after(60):
                await child.exited.wait()
            await child.aclose(grace=5)
    total = FLOOD_LINES // 1000 + FLOOD_LINES + 1  # the noise, the flood, the tail
    logged = [e["line"] for e in logs if e["event"] == "provider.stderr"]
    assert logged == [f"noise {i}" for i in range(0, 25_000, 1000)]  # the first 25, in order
    assert child.stderr_lines == total
    assert child.stderr_suppressed == total - 25
    summaries = [e for e in logs if e["event"] == "provider.stderr.suppressed"]
    assert summaries and summaries[-1]["suppressed"] == total - 25
    assert {e["provider"] for e in summaries} == {"flood"}


async def test_stderr_lines_reach_the_log_tagged_with_the_provider_id() -> None:
    # Within the bucket every line is logged, the unterminated last one too; no summary.
    code = "import sys; sys.stderr.write('warming up\\nready\\n' * 10 + 'bye')"
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "noisy", [sys.executable, "-c", code], env=marked_env()
            )
            child.start_pumps(tg)
            with anyio.fail_after(60):
                await child.exited.wait()
            await child.aclose(grace=5)
    lines = [(e["provider"], e["line"]) for e in logs if e["event"] == "provider.stderr"]
    assert lines == [("noisy", "warming up"), ("noisy", "ready")] * 10 + [("noisy", "bye")]
    assert (child.stderr_lines, child.stderr_suppressed) == (21, 0)
    assert "provider.stderr.suppressed" not in [e["event"] for e in logs]


@given(
    capacity=st.integers(0, 50),
    rate=st.floats(0, 100),
    steps=st.lists(st.tuples(st.floats(0, 5), st.integers(0, 60)), max_size=30),
)
def test_the_bucket_never_grants_more_than_its_capacity_plus_the_refill(
    capacity: int, rate: float, steps: list[tuple[float, int]]
) -> None:
    bucket = TokenBucket(capacity, rate, now=0.0)
    now = granted = 0.0
    for wait, wanted in steps:
        now += wait
        take = min(wanted, bucket.available(now))
        assert 0 <= take <= capacity
        bucket.take(take)
        granted += take
    assert granted <= capacity + rate * now + 1e-6


def _levels(*chunks: bytes, policy: StderrPolicy | None = None) -> list[tuple[str, str]]:
    """``(level, line)`` of each ``provider.stderr`` event for ``chunks`` read from one
    stream, on a clock that stands still (the bucket does not refill)."""
    pump = StderrPump("p", policy or StderrPolicy(), clock=lambda: 0.0)
    with capture_logs() as logs:
        for chunk in chunks:
            pump.feed(chunk)
        pump.end()
    return [(e["log_level"], e["line"]) for e in logs if e["event"] == "provider.stderr"]


#: What hostd's Python provider runtime writes when a ``query`` raises (here a chained
#: error), as recorded, between two ordinary lines.
HOSTD_RUNTIME = """\
. provider: notes index loaded (20 notes)
W provider: context/query failed: RuntimeError: notes database is locked
W Traceback (most recent call last):
W   File "/home/u/notes.py", line 9, in query
W     rows = self.db["notes"]
W            ~~~~~~~^^^^^^^^^
W KeyError: 'notes'
.
W The above exception was the direct cause of the following exception:
.
W Traceback (most recent call last):
W   File "/home/u/notes.py", line 16, in <module>
W     Notes().query()
W   File "/home/u/notes.py", line 11, in query
W     raise RuntimeError("notes database is locked") from exc
W RuntimeError: notes database is locked
. provider: context/query served in 3 ms
"""

#: ``python notes.py`` whose function raised: the traceback Python prints as it exits.
PLAIN_RAISE = """\
. loading notes
W Traceback (most recent call last):
W   File "/home/u/notes.py", line 3, in <module>
W     f()
W   File "/home/u/notes.py", line 2, in f
W     def f(): raise ValueError('bad value')
W ValueError: bad value
"""

#: ``console.error(err)`` in a Node.js provider: the error first, its stack after it.
NODE = """\
. provider ready
W Error: notes database is locked
W     at query (/home/u/notes.js:1:33)
W     at Object.<anonymous> (/home/u/notes.js:3:1)
W     at node:internal/main/run_main_module:28:49
. listening on stdin
"""

#: What loggers print: at warning or worse by their level, the rest info.
LOGGERS = """\
W ERROR:notes:database is locked
W WARNING:notes:index is stale
. INFO:notes:20 notes
W 2026-01-01 12:00:00,000 ERROR notes: database is locked
. 2026-01-01 12:00:00,000 INFO notes: 20 notes
W [ERROR] database is locked
. [INFO] 20 notes
W time=2026-01-01T12:00:00Z level=error msg="database is locked"
. time=2026-01-01T12:00:00Z level=info msg="20 notes"
"""

#: Ordinary lines stay at info, words such as error or warning inside them too.
ORDINARY = """\
. warming up
. indexed 20 notes in 3 s (0 errors)
.     indented, but no report is under way
. retrying after the error budget reset
. done
"""


#: Sentences a provider logs as it works, with error words inside them: info.
SENTENCES = """\
. cache not found, building
. config.toml not found; using the defaults
. no such file or directory yet at ~/.cache/notes, creating it
. retrying after the error: the connection was reset
. last error: none
. fatal errors so far: 0
. non-fatal: skipped one unreadable note
. error handling: strict
. panic mode off
"""

#: Go's panic and its goroutine dump (a blank line inside), then go run's last words.
GO = """\
W panic: runtime error: index out of range [5] with length 3
.
W goroutine 1 [running]:
W main.main()
W \t/home/u/notes/main.go:8 +0x1d
. exit status 2
"""

#: Rust's panic: its message on the line after it, then its note.
RUST = """\
W thread 'main' panicked at src/main.rs:2:5:
W index out of bounds: the len is 3 but the index is 5
. note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
"""

#: Java's uncaught exception, its stack and its cause.
JAVA = """\
W Exception in thread "main" java.lang.IllegalStateException: notes database is locked
W \tat Notes.query(Notes.java:5)
W \tat Notes.main(Notes.java:9)
W Caused by: java.io.IOException: disk full
W \tat Notes.read(Notes.java:12)
W \t... 2 more
. serving
"""

#: What a shell and Python say of a command or file that is not there.
MISSING = """\
W sh: 1: notes-index: not found
W python3: can't open file '/home/u/notes.py': [Errno 2] No such file or directory
W error[E0425]: cannot find value `notes` in this scope
W fatal: not a git repository (or any of the parent directories): .git
"""


@pytest.mark.parametrize(
    "recorded",
    [HOSTD_RUNTIME, PLAIN_RAISE, NODE, LOGGERS, ORDINARY, SENTENCES, GO, RUST, JAVA, MISSING],
    ids=[
        "hostd-runtime",
        "plain-raise",
        "node",
        "loggers",
        "ordinary",
        "sentences",
        "go",
        "rust",
        "java",
        "missing",
    ],
)
def test_an_error_report_on_stderr_is_logged_at_warning_the_rest_at_info(recorded: str) -> None:
    expected = [
        ("warning" if line[0] == "W" else "info", line[2:]) for line in recorded.splitlines()
    ]
    text = "".join(f"{line}\n" for _, line in expected).encode()
    assert _levels(text) == expected
    # Read in pieces as the pipe delivers them, a line split across two reads: the same.
    assert _levels(text[:7], text[7:60], text[60:]) == expected


def test_warning_lines_are_bounded_by_the_bucket_as_every_line_is() -> None:
    flood = b"Error: notes database is locked\n    at query (/home/u/notes.js:1:33)\n" * 1000
    logged = _levels(flood, policy=StderrPolicy(burst=25, rate=0.0))
    assert len(logged) == 25
    assert {level for level, _ in logged} == {"warning"}


def test_a_report_is_left_where_a_line_went_unread() -> None:
    # Lines past the bucket are not read, so the indented line after them may belong to
    # the traceback or to anything else: info. Nor is an over-long line read: the
    # report it was in is its level, and ends there.
    clock = [0.0]
    policy = StderrPolicy(burst=3, rate=1.0, max_line_bytes=64)
    pump = StderrPump("p", policy, clock=lambda: clock[0])
    with capture_logs() as logs:
        pump.feed(
            b'Traceback (most recent call last):\n  File "a.py"\n  File "b.py"\n  File "c.py"\n'
        )
        clock[0] = 1.0  # one token more
        pump.feed(b"    indented\n")
        clock[0] = 10.0  # the bucket full again
        pump.feed(b"Traceback (most recent call last):\n" + b"x" * 100 + b"\n    indented\n")
    logged = [(e["log_level"], e["line"]) for e in logs if e["event"] == "provider.stderr"]
    assert logged == [
        ("warning", "Traceback (most recent call last):"),
        ("warning", '  File "a.py"'),
        ("warning", '  File "b.py"'),
        ("info", "    indented"),
        ("warning", "Traceback (most recent call last):"),
        ("warning", "<over-long stderr line>"),
        ("info", "    indented"),
    ]


@given(st.lists(st.text(max_size=1500), max_size=60), st.booleans())
def test_the_last_lines_are_bounded_end_with_the_last_line_and_say_a_cut(
    lines: list[str], cut: bool
) -> None:
    shown = last_lines(lines, cut=cut)
    assert len(shown) <= MAX_STDERR_TAIL_CHARS
    if not lines:
        assert shown == ""
        return
    assert shown.endswith(printable(lines[-1])[-(MAX_STDERR_TAIL_CHARS - 1) :])
    whole = " | ".join(printable(line) for line in lines)
    if cut:
        assert shown.startswith("…")
    # All of it fits: a mark's room kept, unless it is one line (nothing to leave out).
    elif len(whole) <= MAX_STDERR_TAIL_CHARS - 4 * (len(lines) > 1) and len(lines) <= TAIL_LINES:
        assert shown == whole
    else:
        assert shown.startswith("…") and len(shown) < len(whole) + 4


def test_the_last_lines_keep_whole_lines_up_to_the_bound_with_a_mark() -> None:
    lines = [f"line {i} " + "x" * 80 for i in range(50)]
    shown = last_lines(lines)
    kept = shown.split(" | ")
    assert kept[0] == "…" and kept[1:] == lines[-(len(kept) - 1) :]
    assert len(shown) <= MAX_STDERR_TAIL_CHARS < len(shown) + len(" | ") + len(lines[0])
    assert last_lines(["a", "b"]) == "a | b" and last_lines(["a", "b"], cut=True) == "… | a | b"
    many = last_lines([f"l{i}" for i in range(30)])  # short lines: at most TAIL_LINES
    assert many == "… | " + " | ".join(f"l{i}" for i in range(30 - TAIL_LINES, 30))
    long = last_lines(["first", "y" * 5000 + "END"])  # one line past the bound: its end
    assert long.startswith("…y") and long.endswith("END") and len(long) == 1000
    assert last_lines(["a\x1b[2Jb"]) == "a?[2Jb"  # no terminal escape gets through


def test_the_pumps_last_lines_leave_out_a_line_cut_at_its_start() -> None:
    secret = "s" * 40 + "-secret-tail"
    pump = StderrPump("p", StderrPolicy(), redactor=Redactor([secret]))
    pump.feed(("x" * 5000 + f" {secret}\n").encode())  # the kept end starts inside it
    pump.feed(f"token {secret} refused\nImportError: no module\n".encode())
    assert pump.last_lines() == "… | token <redacted> refused | ImportError: no module"
    whole = StderrPump("q", StderrPolicy())
    whole.feed(b"one\n\ntwo\nthree")  # blank lines left out, an unterminated end kept
    assert whole.last_lines() == "one | two | three"
    assert StderrPump("r", StderrPolicy()).last_lines() == ""
