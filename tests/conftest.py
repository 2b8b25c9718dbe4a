"""Shared by every test: async tests run on anyio's asyncio backend, and Hypothesis
never judges an example by how long it took.

jsonrpcserver gathers batches with asyncio, so the daemon runs there too.
"""

import pytest
from hypothesis import settings

# Hypothesis's per-example deadline (200 ms unless set) is a timing assertion: on a
# busy machine a correct example can take longer, and the test then fails as
# DeadlineExceeded or as "Flaky: unreliable test timings". Speed is measured by
# scripts/bench_*.py, never by a test. Loaded here, before any test module builds
# its ``@settings``, so every property test inherits it.
settings.register_profile("hostd", deadline=None)
settings.load_profile("hostd")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
