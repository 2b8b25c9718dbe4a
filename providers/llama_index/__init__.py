"""``providers.llama_index``: a LlamaIndex retriever (or index) served as a CGP provider.

Run it with ``python -m providers.llama_index --retriever module:factory`` (``--help``
lists options); the ``llama-index`` extra installs ``llama-index-core``. See
docs/integrations.md.
"""

from functools import partial

from .._retriever_cli import main as _main

main = partial(_main, "llama_index")

__all__ = ["main"]
