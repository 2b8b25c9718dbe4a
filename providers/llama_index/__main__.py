import sys

from .._retriever_cli import main

sys.exit(main("llama_index"))
