"""Standard output whose reader went away (``hostd memory list | head``).

A command's reader closing the pipe early is its choice, not a failure: what is left
to print is dropped (stdout pointed at the null device, so neither the next print nor
the interpreter's last flush raises ``BrokenPipeError`` or prints a traceback), and
the command's own work is not cut short by it (an import still imports every entry).
"""

from __future__ import annotations

import os
import sys

__all__ = ["emit", "finish"]


def emit(text: str) -> bool:
    """Print one line; False once stdout's reader has gone (the line and every later
    one dropped), so a listing can stop reading what nobody reads."""
    try:
        print(text)
    except BrokenPipeError:
        _drop()
        return False
    return True


def finish() -> None:
    """Flush stdout at a command's end, dropping what its reader no longer takes."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop()


def _drop() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)
