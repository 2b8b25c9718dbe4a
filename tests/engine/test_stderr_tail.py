"""A provider that fails carries the last lines of its stderr as a field of its own.

Beside the failure's text (its exit status and what its stderr says, bounded to a
health record's 500 characters): ``stderr_tail``, the lines as they came, bounded to
``MAX_STDERR_TAIL_CHARS``, in the leg's failure, the provider's health and the log
event, the same size however often it fails. Against a real child that writes a long
stderr and exits before its handshake.
"""

from __future__ import annotations

import anyio
import pytest
import structlog

from hostd.engine import MAX_ERROR_CHARS, Host, LegStatus, RestartPolicy
from hostd.errors import MAX_STDERR_TAIL_CHARS
from tests.engine._helpers import adversary, query

pytestmark = pytest.mark.anyio


async def test_a_start_crash_carries_the_last_lines_of_its_stderr_however_often() -> None:
    spec = adversary("noisy_start_crash", "noisy")
    policy = RestartPolicy(base_delay_s=0.01, max_attempts=10)
    with anyio.fail_after(120), structlog.testing.capture_logs() as logs:  # a hang guard
        async with Host([spec], grace_period_s=1.0, restart_policy=policy) as host:
            first = (await host.query_all(query(), 1000)).reports[spec.id]
            (row,) = host.providers_list()
            again = (await host.query_all(query(), 1000)).reports[spec.id]
            (later,) = host.providers_list()
    assert first.status is LegStatus.CRASHED
    message = first.error_message or ""
    assert "exited with status 1; stderr: " in message, message  # its reason, as before
    tail = first.stderr_tail or ""
    # Its last lines, whole, up to the bound: the earlier ones left out, marked.
    assert tail.startswith("… | loading part "), tail
    assert tail.endswith(" of the index " + "." * 60 + " | IndexLocked: the index is locked")
    assert "loading part 39 of the index" in tail and "loading part 0 " not in tail
    assert len(first.stderr_tail or "") <= MAX_STDERR_TAIL_CHARS
    assert first.to_wire()["error"]["stderr_tail"] == tail
    health = row["health"]
    assert health["stderr_tail"] == tail and len(health["last_failure"]) <= MAX_ERROR_CHARS
    # Failed again: the same lines, replaced, not added to.
    assert again.status is LegStatus.CRASHED and again.stderr_tail == tail
    assert later["health"]["consecutive_failures"] >= 2
    assert later["health"]["stderr_tail"] == tail
    failed = [e for e in logs if e["event"] == "provider.start.failed"]
    assert len(failed) >= 2 and all(e["stderr_tail"] == tail for e in failed)
    legs = [e for e in logs if e["event"] == "provider.leg.failed"]
    assert [e["stderr_tail"] for e in legs] == [tail, tail]
