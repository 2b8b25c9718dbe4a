"""The daemon harness of tests/server (real ``hostd serve`` children), shared here."""

from tests.server.conftest import marker, start_daemon, workdir

__all__ = ["marker", "start_daemon", "workdir"]
