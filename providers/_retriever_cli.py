"""``python -m providers.langchain`` and ``providers.llama_index``: a framework's retriever
served as a CGP provider (``hostd.integrations.RetrieverProvider``).

The framework is imported only when the retriever is loaded, after the handshake
(``RetrieverProvider.warm``), so the host learns at once that the provider is up;
what can be checked without running the user's code (the reference's form, that
its module exists, that the framework is installed) is checked before serving, and
a mistake there exits 2 with one line, no usage block (1 when a package the module is
in raised as it was imported to look). Loading then says what went wrong in one line
naming the reference (``RetrieverNotFound``: no such attribute; ``RetrieverFailed``:
the module's import, the factory or the framework's adapter raised, with the
exception's type and message, the user's own): on stdio the warm-up's failure, which
every query then names; over ``--http``, where it is loaded before serving, the exit
(2, or 1 when code raised).

The user's module is the project's, found in the working directory; the framework is
the installed library, found before it. hostd runs the bundled providers with ``-P``
(``hostd.config.provider_command``), so the working directory is not on the module
path; run by hand as ``python -m``, it is first. Either way it is taken off, the
framework's package is looked up, and only then is the working directory searched: a
project's ``llama_index/`` directory never stands in for the library, and the module
``--retriever`` names is read from the project even when an installed module has its
name.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

from hostd.integrations import RetrieverProvider, Search
from hostd.protocol import FRAME_KINDS
from hostd.provider import run_stdio

from ._cli import http_arguments, serve

__all__ = ["FRAMEWORKS", "RetrieverFailed", "RetrieverNotFound", "RetrieverNotLoaded", "main"]

#: Framework → (the module its ``retriever_search`` lives in, the package it needs,
#: the extra that installs it, what a factory may return).
FRAMEWORKS = {
    "langchain": (
        "hostd.integrations.langchain",
        "langchain_core",
        "langchain",
        "a LangChain retriever (BaseRetriever or any runnable from text to documents) "
        "or vector store",
    ),
    "llama_index": (
        "hostd.integrations.llama_index",
        "llama_index.core",
        "llama-index",
        "a LlamaIndex retriever or index",
    ),
}


def _reference(text: str) -> tuple[str, str]:
    module, sep, attr = text.partition(":")
    names = [*module.split("."), *attr.split(".")]
    if not sep or not all(n.isidentifier() for n in names):
        raise argparse.ArgumentTypeError(f"expected MODULE:FACTORY (dotted names), got {text!r}")
    return module, attr


class RetrieverNotLoaded(Exception):
    """The retriever ``--retriever`` names could not be loaded; ``exit_code`` when that
    ends the process (before serving)."""

    exit_code = 1


class RetrieverNotFound(RetrieverNotLoaded):
    """``--retriever`` names nothing there: no such module, or no such attribute in it."""

    exit_code = 2


class RetrieverFailed(RetrieverNotLoaded):
    """The code ``--retriever`` names raised: its module's import, the factory, or the
    framework's adapter refusing what the factory returned."""


#: The longest exception message quoted: a line, even for a validation error's essay.
_MAX_MESSAGE_CHARS = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _described(exc: BaseException) -> str:
    """An exception raised by the user's code as one line: its type and its message (the
    user's own words, so shown; controls neutralised, lines joined, bounded)."""
    lines = (line.strip() for line in str(exc).splitlines())
    message = _CONTROL.sub("?", " | ".join(line for line in lines if line))
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[: _MAX_MESSAGE_CHARS - 1] + "…"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _find_module(module: str) -> None:
    """Raise unless ``module`` is there, naming the first dotted part that is not. Only a
    parent package is imported to look (as ``find_spec`` does): the module itself is run
    after the handshake."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        name, parent = ".".join(parts[:i]), ".".join(parts[: i - 1])
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the parent's own import needs a module that is not there
                raise RetrieverFailed(f"importing {parent} raised {_described(exc)}") from exc
            raise RetrieverNotFound(
                f"no module named {name!r} ({parent} is a module, not a package)"
            ) from None
        except Exception as exc:  # the parent's own import raised
            raise RetrieverFailed(f"importing {parent} raised {_described(exc)}") from exc
        if spec is None:
            where = (
                f" (is it installed in this interpreter, {sys.executable}, or in {os.getcwd()}?)"
            )
            raise RetrieverNotFound(f"no module named {name!r}{where if i == 1 else ''}")


def _resolve(module: str, attr: str) -> Any:
    """The object ``module:attr`` names (the module imported now); a factory among them
    (a function or class, which the framework's adapter calls) reports its own failure."""
    try:
        target: Any = importlib.import_module(module)
    except Exception as exc:
        raise RetrieverFailed(f"importing {module} raised {_described(exc)}") from exc
    walked: list[str] = []
    for name in attr.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            owner = f"{module}:{'.'.join(walked)}" if walked else f"module {module}"
            raise RetrieverNotFound(f"{owner} has no attribute {name!r}") from None
        walked.append(name)
    if inspect.isroutine(target) or inspect.isclass(target):
        return _factory(target)
    return target


def _factory(factory: Callable[[], Any]) -> Callable[[], Any]:
    """``factory``, its failure named as the factory's (called as the adapter would)."""

    def call() -> Any:
        try:
            return factory()
        except Exception as exc:
            raise RetrieverFailed(f"the factory raised {_described(exc)}") from exc

    return call


def _package_exists(package: str) -> bool:
    """Whether the package ``package`` (a framework's) is found: a module of its name (a
    ``langchain_core.py``) is not it."""
    try:
        spec = importlib.util.find_spec(package)
    except Exception:  # a parent package that is not there, not one, or that raised
        return False
    return spec is not None and spec.submodule_search_locations is not None


def _off_the_path(directory: str) -> None:
    """Take ``directory`` (the working directory) off ``sys.path``, in every spelling:
    ``python -m`` puts it first, and ``''`` or ``.`` may name it too."""
    real = os.path.realpath(directory)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != real]


class _ProjectFinder(importlib.abc.MetaPathFinder):
    """Finds one top-level module, the one ``--retriever`` names, in the project first
    (as ``python -m`` always did), though the project is last on the module path."""

    def __init__(self, name: str, directory: str) -> None:
        self.name = name
        self.directory = directory

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name or path is not None:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.directory])


def _search_project(directory: str, module: str) -> None:
    """Let the user's code be imported from the project: ``module`` (its top-level
    package) from there first, anything else it imports after the installed packages."""
    sys.path.append(directory)
    sys.meta_path.insert(0, _ProjectFinder(module.partition(".")[0], directory))


def _shadow(package: str) -> Path | None:
    """What ``package``'s top-level name is found as when that is not the library, which
    is installed further down the module path; ``None`` when nothing shadows it."""
    top = package.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except Exception:  # a name that raised as it was imported to look is no library's
        spec = None
    if spec is None or not spec.has_location or spec.origin is None:
        return None  # not there, or a namespace package, which merges with the library's
    found = Path(spec.origin)
    if spec.submodule_search_locations is not None:
        found = found.parent  # a package: its directory, not its __init__.py
    parts = package.split(".")
    suffixes = importlib.machinery.all_suffixes()
    for entry in sys.path:
        base = Path(entry or os.curdir)
        if (base / top).resolve() == found.resolve():
            continue
        library = base.joinpath(*parts)
        if library.is_dir() or any(library.with_name(parts[-1] + s).is_file() for s in suffixes):
            return found
    return None


def _shown(path: Path) -> str:
    """``path`` as a user reads it: ``./llama_index`` under the working directory."""
    try:
        inside = path.relative_to(os.getcwd())
    except ValueError:
        return str(path)
    return f"./{inside}" if inside.parts else "."


def main(framework: str, argv: Sequence[str] | None = None) -> int:
    glue, package, extra, accepts = FRAMEWORKS[framework]
    parser = argparse.ArgumentParser(
        prog=f"python -m providers.{framework}",
        description=f"CGP provider: serve {accepts} as frames, on stdio (JSON-RPC binding) "
        "or over HTTPS with --http. A document whose metadata names a readable file "
        "(source or file_path) and whose text is whole lines of it is served with file "
        "provenance (uri, line range, digest; verify re-reads it); any other as a doc frame.",
    )
    parser.add_argument(
        "--retriever",
        required=True,
        type=_reference,
        metavar="MODULE:FACTORY",
        help="where the retriever is: a module of the working directory (or on the Python "
        "path) and a function of no arguments returning it (or the object itself); called "
        "once, after the handshake",
    )
    parser.add_argument(
        "--name",
        default=f"hostd-{framework.replace('_', '-')}",
        help="the provider's handshake name (default: %(default)s)",
    )
    parser.add_argument(
        "--kind",
        default="doc",
        choices=sorted(FRAME_KINDS),
        help="the kind of every frame (default: %(default)s)",
    )
    parser.add_argument(
        "--egress",
        action="append",
        default=[],
        metavar="SCOPE",
        help="declare that the retriever sends queries off the machine, to SCOPE (a hosted "
        "embedding or search API), so hostd asks for consent first (repeatable)",
    )
    http_arguments(parser)
    args = parser.parse_args(argv)
    module, attr = args.retriever
    reference = f"{module}:{attr}"
    project = os.getcwd()
    # The framework is looked up with the project off the path: looking imports its
    # parent package (``llama_index``, a namespace package), and one imported stays the
    # library's, where a project's regular ``llama_index/`` would win a later search.
    _off_the_path(project)
    library = package.replace("_", "-").replace(".", "-")  # its distribution's name
    # One line each, no usage block: the command line was read, what it names is not there.
    if not _package_exists(package):
        shadow = _shadow(package)
        if shadow is not None:
            sys.stderr.write(
                f"providers.{framework}: {_shown(shadow)} shadows the {library} library; "
                f"rename it, or take {_shown(shadow.parent)} off the Python path\n"
            )
        else:
            sys.stderr.write(
                f"providers.{framework}: needs {library}: install hostd with the {extra} "
                f'extra (pip install "/path/to/hostd[{extra}]", a checkout or a wheel)\n'
            )
        return 2
    _search_project(project, module)
    try:
        _find_module(module)
    except RetrieverNotLoaded as exc:
        return _refused(framework, _named(exc, reference))

    def load() -> Search:
        adapter = importlib.import_module(glue).retriever_search
        try:
            search: Search = adapter(_resolve(module, attr))
        except RetrieverNotLoaded as exc:
            _named(exc, reference)
            raise
        except Exception as exc:  # the adapter refused what the factory returned
            raise RetrieverFailed(f"--retriever {reference}: {_described(exc)}") from exc
        return search

    provider = RetrieverProvider(load, name=args.name, kind=args.kind, egress_scopes=args.egress)
    if getattr(args, "http", None) is not None:
        try:  # over HTTPS no progress can reach the host: loaded before serving
            provider.load()
        except RetrieverNotLoaded as exc:
            return _refused(framework, exc)
        serve(provider, args, parser)
        return 0
    run_stdio(provider)  # stdout is the wire alone: what the framework prints goes to stderr
    return 0


def _named(exc: RetrieverNotLoaded, reference: str) -> RetrieverNotLoaded:
    """``exc`` with the reference it is about in front of its message (type, cause kept)."""
    exc.args = (f"--retriever {reference}: {exc}",)
    return exc


def _refused(framework: str, exc: RetrieverNotLoaded) -> int:
    """``exc`` as the one line on stderr, and its exit status."""
    sys.stderr.write(f"providers.{framework}: {exc}\n")
    return exc.exit_code
