"""``--checkout DIR`` for the benchmark scripts: which checkout's hostd is measured.

Read from ``sys.argv`` before any hostd import, so a script can put that checkout
first on ``sys.path`` and give before/after figures with the same code.
"""

from __future__ import annotations

import sys
from pathlib import Path


def checkout() -> Path:
    """``--checkout DIR`` (or ``--checkout=DIR``), else the checkout holding scripts/."""
    for i, arg in enumerate(sys.argv):
        if arg == "--checkout" and i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1]).resolve()
        if arg.startswith("--checkout="):
            return Path(arg.split("=", 1)[1]).resolve()
    return Path(__file__).resolve().parent.parent
