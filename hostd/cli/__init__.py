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

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
