"""Retrievers built the way users build them, written out as importable factory modules
for ``python -m providers.langchain|llama_index --retriever module:factory``."""

from __future__ import annotations

from pathlib import Path

NOTES = (
    "# Retries\n"
    "\n"
    "The retry loop gives up after three attempts.\n"
    "It waits two seconds between attempts.\n"
    "\n"
    "## Caching\n"
    "\n"
    "The cache misses when the key includes a timestamp.\n"
)
NET = (
    "def retry_loop(attempts):\n"
    "    # the retry loop gives up after three attempts\n"
    "    for _ in range(attempts):\n"
    "        pass\n"
)

# An InMemoryVectorStore over paragraphs split as a text splitter would (whitespace
# stripped, ``start_index`` kept), with langchain-core's deterministic fake embeddings.
LANGCHAIN = """
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

CORPUS = Path({corpus!r})


def build():
    print("building the index")  # stdout is the wire: this must land in the log
    docs = []
    for path in sorted(CORPUS.iterdir()):
        text = path.read_text()
        at = 0
        for part in text.split("\\n\\n"):
            start = text.index(part, at)
            at = start + len(part)
            if part.strip():
                meta = {{"source": str(path), "start_index": start}}
                docs.append(Document(page_content=part.strip(), metadata=meta))
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents(docs)
    return store.as_retriever(search_kwargs={{"k": {k}}})


def broken():
    raise RuntimeError("the index is not there")
"""

# A VectorStoreIndex over the files as SimpleDirectoryReader reads them, split by
# SentenceSplitter, embedded with llama-index-core's mock embedding.
LLAMA_INDEX = """
from pathlib import Path

from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.node_parser import SentenceSplitter

CORPUS = Path({corpus!r})


def build():
    docs = SimpleDirectoryReader(input_dir=str(CORPUS)).load_data()
    splitter = SentenceSplitter(chunk_size=256, chunk_overlap=0)
    index = VectorStoreIndex.from_documents(
        docs, embed_model=MockEmbedding(embed_dim=8), transformations=[splitter]
    )
    return index.as_retriever(similarity_top_k={k})
"""


def corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(NOTES)
    (root / "net.py").write_text(NET)
    return root


def write_factories(folder: Path, corpus_dir: Path, k: int = 8) -> Path:
    """``lc_factory`` and ``li_factory`` modules in ``folder`` (put it on PYTHONPATH);
    each retriever returns up to ``k`` documents (the default: every one of them)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lc_factory.py").write_text(LANGCHAIN.format(corpus=str(corpus_dir), k=k))
    (folder / "li_factory.py").write_text(LLAMA_INDEX.format(corpus=str(corpus_dir), k=k))
    return folder
