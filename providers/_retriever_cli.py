"""``python -m providers.langchain`` and ``providers.llama_index``: a framework's retriever
served as a CGP provider (``hostd.integrations.RetrieverProvider``).

The framework is imported only when the retriever is loaded, after the handshake
(``RetrieverProvider.warm``), so the host learns at once that the provider is up;
what can be checked without running the user's code (the reference's form, that
its module exists, that the framework is installed) is checked before serving, and
a mistake there exits 2 with one line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

from hostd.integrations import RetrieverProvider, Search
from hostd.protocol import FRAME_KINDS
from hostd.provider import run_stdio

from ._cli import http_arguments, serve

__all__ = ["FRAMEWORKS", "main"]

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


def _resolve(module: str, attr: str) -> Any:
    target: Any = importlib.import_module(module)
    for name in attr.split("."):
        target = getattr(target, name)
    return target


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is not there, or not one
        return False


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
        help="where the retriever is: a module on the Python path and a function of no "
        "arguments returning it (or the object itself); called once, after the handshake",
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
    if not _module_exists(package):
        parser.error(
            f"needs {package.replace('_', '-')}: install hostd with the {extra} extra "
            f'(pip install "/path/to/hostd[{extra}]", a checkout or a wheel)'
        )
    if not _module_exists(module):
        parser.error(f"--retriever: no module {module!r} on the Python path")

    def load() -> Search:
        search: Search = importlib.import_module(glue).retriever_search(_resolve(module, attr))
        return search

    provider = RetrieverProvider(load, name=args.name, kind=args.kind, egress_scopes=args.egress)
    if getattr(args, "http", None) is not None:
        provider.load()  # over HTTPS no progress can reach the host: loaded before serving
        serve(provider, args, parser)
        return 0
    run_stdio(provider)  # stdout is the wire alone: what the framework prints goes to stderr
    return 0
