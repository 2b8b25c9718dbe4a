"""Every public module's surface is deliberate: its ``__all__`` is exact, both ways.

Walks every public module of hostd (a dotted name with no ``_``-prefixed part):
each has an ``__all__`` without duplicates; every name in it exists, is public and
says what it is (a class or function carries a docstring); and every public name
the module defines (or, for a package, re-exports) is in it. Submodules are not
names of their parent's surface.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import hostd


def _public_modules() -> list[str]:
    found = ["hostd"]
    for info in pkgutil.walk_packages(hostd.__path__, "hostd."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return sorted(found)


MODULES = _public_modules()


def _is_package(mod: ModuleType) -> bool:
    return hasattr(mod, "__path__")


def _surface(mod: ModuleType) -> set[str]:
    """The public names ``mod`` offers: for a package every public name it holds (its
    ``__init__`` re-exports), for a module the ones defined in it."""
    names = set()
    for name, value in vars(mod).items():
        if name.startswith("_") or inspect.ismodule(value):  # dunders are not the surface
            continue
        if _is_package(mod) or getattr(value, "__module__", None) == mod.__name__:
            names.add(name)
    return names


def test_the_walk_finds_every_layer() -> None:
    # Guard against a walker that silently finds nothing.
    assert {"hostd.rpc", "hostd.transport", "hostd.client", "hostd.compose.ranking"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_every_name_in_all_exists_is_public_and_documented(module: str) -> None:
    mod = importlib.import_module(module)
    listed = list(getattr(mod, "__all__", None) or ())
    assert listed, f"{module} has no __all__"
    assert len(listed) == len(set(listed)), "duplicates in __all__"
    missing = [n for n in listed if not hasattr(mod, n)]
    private = [n for n in listed if n.startswith("_") and not n.startswith("__")]
    undocumented = [
        n
        for n in listed
        if (inspect.isclass(getattr(mod, n, None)) or inspect.isfunction(getattr(mod, n, None)))
        and not inspect.getdoc(getattr(mod, n))
    ]
    assert (missing, private, undocumented) == ([], [], [])


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_is_in_all(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(_surface(mod) - set(getattr(mod, "__all__", ()))) == []
