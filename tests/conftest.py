"""Shared by every test: async tests run on anyio's asyncio backend.

jsonrpcserver gathers batches with asyncio, so the daemon runs there too.
"""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
