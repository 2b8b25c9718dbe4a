"""``providers.langchain``: a LangChain retriever (or vector store) served as a CGP provider.

Run it with ``python -m providers.langchain --retriever module:factory`` (``--help``
lists options); the ``langchain`` extra installs ``langchain-core``. See
docs/integrations.md.
"""

from functools import partial

from .._retriever_cli import main as _main

main = partial(_main, "langchain")

__all__ = ["main"]
