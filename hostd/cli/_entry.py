"""``hostd``'s entry point ahead of the command line: ``hostd --version`` alone is
answered here, before the commands (and the config, pydantic, anyio, ... they import)
load; anything else is ``_main``'s. Imports only ``hostd._build``, and that only for
the version."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``hostd`` command line; returns the process exit status.

    A script or a health check that asks for the version pays for an interpreter and
    one ``git status`` (``build_version``), not for the command line. ``--version``
    among other options goes through argparse, which prints the same line."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from hostd._build import build_version

        sys.stdout.write(f"hostd {build_version()}\n")
        return 0
    from ._main import main as run

    return run(argv)
