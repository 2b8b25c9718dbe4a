"""Which build of hostd runs: its release version, and the commit it was built from.

``hostd.__version__`` is the release (``0.1.0``), the same for every commit between two
releases: an operator who pulled and reinstalled could not tell the new build from the
old. ``build_version()`` adds the commit as a PEP 440 local label, ``0.1.0+g<sha>``
(``.dirty`` when tracked files differ from that commit), from one of two places:

- imported from a git checkout (an editable install, a run from the source tree): the
  checkout as it is now, asked of ``git`` once per process (one ``git status``, about
  10 ms against the CLI's second of imports), only when a command shows the version;
- installed from a checkout (``pip install ./hostd``): what ``setup.py`` wrote into
  the package at build time, ``_data/build.json``.

Neither (an sdist of no checkout, no ``git``): the release alone. It owns no I/O but
those reads; the CLI (``--version``, ``status``) and the daemon (``host/status``,
``host.serving``) show what it returns.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

__all__ = ["build_version", "checkout_label"]

#: Where ``setup.py``'s build step writes the label of the commit built from.
BUILD_FILE = Path(__file__).parent / "_data" / "build.json"
#: A hang guard for ``git status`` (a lock held, a slow disk): past it, no label.
_GIT_TIMEOUT_S = 5.0


def checkout_label(root: Path) -> str | None:
    """The local label of the git checkout at ``root`` (``g0fda9cc``, ``g0fda9cc.dirty``
    when a tracked file differs from its commit; untracked files, a build's ``build/``
    among them, do not count), or None where ``root`` is no checkout or ``git`` cannot
    say (not installed, a directory it does not trust)."""
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v2", "--branch", "-uno"],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    commit, dirty = None, False
    for line in done.stdout.splitlines():
        if line.startswith("# branch.oid "):
            commit = line.removeprefix("# branch.oid ").strip()
        elif not line.startswith("#"):
            dirty = True
    if not commit or not all(c in "0123456789abcdef" for c in commit):
        return None  # "(initial)": a checkout with no commit yet
    return f"g{commit[:7]}" + (".dirty" if dirty else "")


def _built_label() -> str | None:
    """The label ``setup.py`` wrote at build time, or None (no file, or a broken one)."""
    try:
        label = json.loads(BUILD_FILE.read_text(encoding="utf-8")).get("label")
    except (OSError, ValueError, AttributeError):
        return None
    return label if isinstance(label, str) and label else None


@functools.cache
def build_version() -> str:
    """``0.1.0+g<sha>[.dirty]``: the release and the commit this hostd runs from, the
    checkout it is imported from first (what runs is what is there now), else the one
    it was built from; the release alone where neither can be told."""
    # Imported here, not at the top: setup.py loads this file alone, with no package.
    from hostd import __version__

    label = checkout_label(Path(__file__).resolve().parent.parent) or _built_label()
    return f"{__version__}+{label}" if label else __version__
