"""Which database the CLI's editing commands (``add``, ``import``, ``supersede``,
``list``, ``forget``) use, and the words that say why.

``--db`` wins. Without it: the database of the memory provider in the config hostd
itself would use here (``hostd.config``: ``--config``, ``$HOSTD_CONFIG``, the nearest
``hostd.toml``, the user's, the embedded default), read as hostd reads it, so a
memory added inside a project is one that project's provider serves. More than one
memory provider there: refused unless ``--provider`` names one. None: the global
default, as ever. Serving never asks: it uses ``--db`` or the global default,
exactly as hostd starts it. The decision (``choose``) is plain code over a loaded
config; ``choose_database`` loads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._store import parse_keep_forgotten

if TYPE_CHECKING:  # loaded only by the editing commands: serving never reads a config
    from hostd.config import Config

__all__ = [
    "GLOBAL_DEFAULT",
    "Chosen",
    "DatabaseChoiceError",
    "MemoryDatabase",
    "choose",
    "choose_database",
    "default_db_path",
    "memory_databases",
]

#: How ``Chosen.why`` starts when no config named a database.
GLOBAL_DEFAULT = "the global default"
#: The module a memory provider's command runs (``python -m providers.memory``).
_MODULE = "providers.memory"


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/hostd/memory.db``, else ``~/.local/state/hostd/memory.db``
    (``environ``: default ``os.environ``)."""
    env = os.environ if environ is None else environ
    home = env.get("HOME")
    state = env.get("XDG_STATE_HOME") or str(
        (Path(home) if home else Path.home()) / ".local" / "state"
    )
    return Path(state) / "hostd" / "memory.db"


class DatabaseChoiceError(ValueError):
    """No single database to edit: the config in use cannot be read, configures several
    memory providers, or not the one ``--provider`` names. The message is one line."""


@dataclass(slots=True, frozen=True)
class MemoryDatabase:
    """A configured memory provider and the database its process opens, and how many
    forgets' records it keeps (its ``--keep-forgotten``; ``None``: not given)."""

    provider_id: str
    path: Path
    keep_forgotten: int | None = None


@dataclass(slots=True, frozen=True)
class Chosen:
    """The database an editing command uses, and why (the stderr line's words); the
    ``--keep-forgotten`` of the provider that serves it, so a ``forget`` from the shell
    keeps as many forgets' records as that provider does (``None``: its default)."""

    path: Path
    why: str
    keep_forgotten: int | None = None


def _memory_args(command: Sequence[str]) -> list[str] | None:
    """The provider's own arguments when ``command`` runs ``python -m providers.memory``."""
    for i, word in enumerate(command):
        if word == "-m" and list(command[i + 1 : i + 2]) == [_MODULE]:
            return list(command[i + 2 :])
        if word == f"-m{_MODULE}":
            return list(command[i + 1 :])
    return None


def _option_word(args: Sequence[str], option: str) -> str | None:
    """The value of ``option`` (``--db``) the provider's own parser takes (the last one
    given)."""
    found: str | None = None
    for i, word in enumerate(args):
        if word == option and i + 1 < len(args):
            found = args[i + 1]
        elif word.startswith(f"{option}="):
            found = word.removeprefix(f"{option}=")
    return found


def memory_databases(config: Config) -> list[MemoryDatabase]:
    """Each configured ``providers.memory`` process and its database, in config order.

    The path is the one the process opens: its ``--db`` (else the global default under
    the environment it is given: hostd passes ``HOME`` and ``XDG_STATE_HOME`` on, and
    its ``env`` table over them), relative to the directory it runs in, which
    ``hostd.config`` has resolved (``cwd``, default the config file's directory). A
    ``--keep-forgotten`` that is no count is a ``DatabaseChoiceError`` naming the
    provider: that provider would not start either."""
    found = []
    for spec in config.provider:
        args = _memory_args(spec.command or ())
        if args is None:
            continue
        keep_word = _option_word(args, "--keep-forgotten")
        try:
            keep = None if keep_word is None else parse_keep_forgotten(keep_word)
        except ValueError as exc:
            raise DatabaseChoiceError(f'provider "{spec.id}" of {config.source}: {exc}') from None
        named = _option_word(args, "--db")
        if named is not None:
            path = Path(named).expanduser()  # as the provider's own parser reads it
        else:
            inherited = {k: os.environ[k] for k in ("HOME", "XDG_STATE_HOME") if k in os.environ}
            path = default_db_path({**inherited, **spec.env})
        if not path.is_absolute():
            path = (spec.cwd or Path.cwd()) / path
        found.append(MemoryDatabase(spec.id, path, keep))
    return found


def choose(config: Config, provider: str | None) -> Chosen:
    """The database of ``config``'s memory provider (the one named ``provider``), else
    the global default; ``DatabaseChoiceError`` when that is not one database."""
    from hostd.config import DEFAULT_CONFIG_PATH

    where = config.source
    dbs = memory_databases(config)
    if provider is not None:
        for db in dbs:
            if db.provider_id == provider:
                return Chosen(db.path, f'provider "{db.provider_id}" of {where}', db.keep_forgotten)
        listed = ", ".join(d.provider_id for d in dbs) or "none"
        raise DatabaseChoiceError(
            f'{where} has no memory provider "{provider}" (its memory providers: {listed})'
        )
    if not dbs:
        embedded = ", the embedded default" if where == str(DEFAULT_CONFIG_PATH) else ""
        why = f"{GLOBAL_DEFAULT}: no memory provider in {where}{embedded}"
        return Chosen(default_db_path(), why)
    if len(dbs) > 1:
        listed = ", ".join(f"{d.provider_id}: {d.path}" for d in dbs)
        raise DatabaseChoiceError(
            f"{where} configures {len(dbs)} memory providers ({listed}): "
            "name one with --provider ID, or its database with --db PATH"
        )
    (db,) = dbs
    return Chosen(db.path, f'provider "{db.provider_id}" of {where}', db.keep_forgotten)


def choose_database(db: Path | None, provider: str | None, config: Path | None = None) -> Chosen:
    """``--db``, else ``choose`` over the config hostd would use from here (``config``:
    ``--config``, which names that file as ``hostd --config`` does)."""
    if db is not None:
        if provider is not None or config is not None:
            given = "--provider" if provider is not None else "--config"
            raise DatabaseChoiceError(f"give --db or {given}, not both")
        return Chosen(db, "--db")
    from hostd.config import ConfigError, load_config

    try:
        config_ = load_config(config)
    except ConfigError as exc:
        raise DatabaseChoiceError(
            f"cannot tell which database to use: {exc.message}; name it with --db PATH"
        ) from exc
    return choose(config_, provider)
