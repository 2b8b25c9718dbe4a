"""``hostd memory …``: the bundled memory provider's commands (``add``, ``import``,
``supersede``, ``list``, ``forget``, and serving), run by hostd itself.

``python -m providers.memory`` puts the working directory first on the module path, so
inside a project that has a ``providers`` package of its own it runs that package, not
hostd's. This command runs the one installed beside hostd, whatever the directory (even
under ``python -m hostd``, which puts it first too), with the words given after
``memory`` passed on as they are; ``providers.memory`` parses and answers them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hostd

__all__ = ["add_memory_command", "bundled_memory_main"]

#: The memory provider's commands that read a hostd config (its ``--config``).
_EDITING = frozenset({"add", "import", "supersede", "list", "forget"})


def add_memory_command(sub: Any) -> None:
    """Register ``memory``: every word after it is the memory provider's."""
    memory = sub.add_parser(
        "memory",
        help="the memory provider's commands: add, import, supersede, list, forget "
        "(`hostd memory --help`)",
        description="Run the bundled memory provider's command line (providers.memory): "
        "every word after `memory` is its own.",
        add_help=False,  # --help is the memory provider's
        prefix_chars="\0",  # no word is an option of this parser: all are passed on
    )
    memory.add_argument("words", nargs=argparse.REMAINDER)
    memory.set_defaults(run=_memory, needs_config=False)


def bundled_memory_main() -> Callable[[Sequence[str] | None], int]:
    """``providers.memory.main`` as installed beside hostd: hostd's own directory is put
    first on the module path while it is imported, so a project's ``providers`` package
    in the working directory is never the one loaded."""
    home = str(Path(hostd.__file__).resolve().parent.parent)
    saved = sys.path[:]
    sys.path[:] = [home, *(p for p in saved if p != home)]
    try:
        from providers.memory import main
    finally:
        sys.path[:] = saved
    return lambda argv: main(argv, prog="hostd memory")


def _memory(_cfg: object, args: argparse.Namespace) -> int:
    words: list[str] = list(args.words)
    if args.config is not None and words and words[0] in _EDITING:
        # `hostd --config PATH memory list`: the config named is the one to edit by.
        words[1:1] = ["--config", args.config]
    return bundled_memory_main()(words)
