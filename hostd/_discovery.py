"""Which config file a command uses: the discovery order, and the words that say so.

In order: ``--config``, ``$HOSTD_CONFIG``, the nearest ``hostd.toml`` in the working
directory or one of its parents, ``$XDG_CONFIG_HOME/hostd/hostd.toml`` (``~/.config``
when unset), and last the embedded default, which ships inside the package
(``hostd/_data/default.toml``), so an installed hostd finds the same file as a
checkout. The embedded default configures no provider: a project gets its own with
``hostd init``. Each step records what it looked at, so a command that finds no
provider can say where it searched. Nothing here parses TOML.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONFIG_NAME", "EMBEDDED_CONFIG", "Found", "find_config", "user_config_path"]

#: The file name ``hostd init`` writes and discovery looks for.
CONFIG_NAME = "hostd.toml"

#: The embedded default, package data: present in a checkout and in an installed wheel.
EMBEDDED_CONFIG = Path(__file__).resolve().parent / "_data" / "default.toml"


@dataclass(frozen=True, slots=True)
class Found:
    """The file a command uses, how it was chosen, and what was searched before it."""

    path: Path
    #: ``--config``, ``$HOSTD_CONFIG``, ``nearest``, ``user`` or ``embedded``.
    how: str
    #: One line per place looked at, in order (``--config`` and ``$HOSTD_CONFIG`` when
    #: unset are not named: nothing was searched for them).
    searched: tuple[str, ...]

    @property
    def embedded(self) -> bool:
        return self.how == "embedded"


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/hostd/hostd.toml``, else ``~/.config/hostd/hostd.toml``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or ""
    # The XDG rule: a relative value is invalid and is ignored.
    root = Path(base) if os.path.isabs(base) else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "hostd" / CONFIG_NAME


def _nearest(start: Path) -> Path | None:
    """The nearest ``hostd.toml`` at ``start`` or above it."""
    for here in (start, *start.parents):
        candidate = here / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def find_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Found:
    """The config file to load, by the discovery order (module docstring)."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        return Found(Path(explicit), "--config", ())
    from_env = env.get("HOSTD_CONFIG")
    if from_env:
        return Found(Path(from_env), "$HOSTD_CONFIG", ())
    start = (cwd or Path.cwd()).resolve()
    nearest = _nearest(start)
    if nearest is not None:
        return Found(nearest, "nearest", ())
    searched = [f"{CONFIG_NAME} in {start} and its parents"]
    user = user_config_path(env)
    if user.is_file():
        return Found(user, "user", tuple(searched))
    searched.append(str(user))
    return Found(EMBEDDED_CONFIG, "embedded", tuple(searched))
