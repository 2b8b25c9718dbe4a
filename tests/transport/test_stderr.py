"""A provider's stderr in the log: rate-limited by a token bucket, the rest counted and
summarised, the pipe always drained."""

from __future__ import annotations

import sys

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from hostd.transport import ChildProcess, StderrPolicy
from hostd.transport.process._stderr import TokenBucket
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
