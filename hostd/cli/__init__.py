"""The ``hostd`` command line: serve, compose, providers, consent, mcp, eval, shadow,
check-provider, warm.

One module a group of commands, each registering its own options and handler:
``_commands`` (the daemon's own), ``_quality`` (eval, shadow replay and the policy
options of compose), ``_check`` (check-provider, whose checks are
``_checks`` and whose raw driver is ``_check_driver``), ``_warm`` (warm, and the progress
bars of compose); ``_common`` is what they share, ``_outcome`` what a one-shot
command says when it did not get what it asked for,
and ``_main`` parses and turns errors into exit statuses. ``compose``,
``providers`` and ``consent`` run in-process against the configured providers
(one shot) unless ``--connect`` names a running daemon's socket.
"""

import typing

from ._entry import main

if typing.TYPE_CHECKING:
    from ._main import build_parser

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> object:
    # ``build_parser`` loads every command's module: imported with its first use, so that
    # ``hostd --version`` (``_entry``) loads none of them.
    if name == "build_parser":
        from ._main import build_parser

        return build_parser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
