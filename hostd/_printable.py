"""``printable``: text from a provider made safe to print, one line, no control characters.

The transport's redaction point (``hostd.transport._redact``, C8) passes every text about
a provider through it, and the CLI's reports do too; it lives here, importing nothing of
hostd, so a command that prints a provider's words without reaching one (``_outcome``)
does not load the whole transport (its process, binding and remote carriers) to do it.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

#: C0 and C1 controls but tab, DEL, and the line and paragraph separators: what a
#: terminal or a line-oriented log reader would act on.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """``text`` with every control character (ESC, CR, NUL, …) shown as ``?``; newlines
    become `` | `` so a multi-line tail stays one line of a log or a report."""
    return _CONTROL.sub("?", text.replace("\r\n", "\n").replace("\n", " | "))
