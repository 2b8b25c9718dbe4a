"""Shared by every test: async tests run on anyio's asyncio backend, Hypothesis never
judges an example by how long it took, the suite keeps out of its user's home, and
every child process imports the checkout under test.

jsonrpcserver gathers batches with asyncio, so the daemon runs there too.
"""

import os
import shutil
import tempfile
from pathlib import Path

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


# The directories hostd and its providers default to (their indexes' caches, the
# state directory, the user's config) point into one directory of this run's: a test
# run on a developer's machine neither fills their ~/.cache/hostd with the corpora of
# thousands of temporary projects nor meets their own ~/.config/hostd/hostd.toml or
# $HOSTD_CONFIG. Made by the first process (the xdist controller, or pytest alone),
# inherited by the workers and every child process, removed when the run ends; the
# workers share it, so a cache built by one test serves the others of the run.
_RUN_DIR = "HOSTD_TEST_RUN_DIR"
_OWNED = pytest.StashKey[Path]()
_HOMES = {"XDG_CACHE_HOME": "cache", "XDG_STATE_HOME": "state", "XDG_CONFIG_HOME": "config"}


# Every child a test starts imports the checkout under test first: a child run outside
# the checkout (in a temporary project) would otherwise import whatever tree the venv's
# editable install points at, which, from another worktree or copy, is other code.
_CHECKOUT = str(Path(__file__).resolve().parent.parent)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(_RUN_DIR):
        return  # a worker: the controller set it up
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    os.environ["PYTHONPATH"] = os.pathsep.join([_CHECKOUT, *(p for p in paths if p)])
    run = Path(tempfile.mkdtemp(prefix="hostd-tests-"))
    config.stash[_OWNED] = run
    os.environ[_RUN_DIR] = str(run)
    for var, name in _HOMES.items():
        (run / name).mkdir(mode=0o700)
        os.environ[var] = str(run / name)
    os.environ.pop("HOSTD_CONFIG", None)
    # The workers share two cores: torch (the semantic provider, the rerank models) and
    # numpy's BLAS would each start one thread per core in every process and contend
    # with the other workers' (a model's load or a batch's encoding then took ten times
    # its CPU). One thread each, unless the run says otherwise; providers inherit it
    # (the daemon passes the thread counts on).
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` run first, each in its place among them. pytest-xdist
    hands tests to its workers in this order, so the long ones are spread over the
    workers from the start and the session ends on short tests, with its workers
    finishing together, instead of one worker running a long test alone at the end.
    A stable sort: the same order on every worker, as xdist requires."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(_OWNED, None)
    if run is not None:
        shutil.rmtree(run, ignore_errors=True)
        os.environ.pop(_RUN_DIR, None)
