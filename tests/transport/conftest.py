from collections.abc import Iterator

import pytest

from tests.fixtures.procs import leftovers


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Every test must tear down every provider it started, grandchildren included."""
    before = set(leftovers())
    yield
    left = sorted(set(leftovers()) - before)
    assert left == [], f"processes left behind: {left}"
