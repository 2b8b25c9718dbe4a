"""A ``Corpus``'s chunks on disk, so a restarted provider starts warm.

The cache maps every file to the ``(mtime_ns, size)`` it had when it was
chunked, its chunks and why its bytes kept it out, if they did (a binary file is
not read again to learn it is binary); a restart adopts it and re-reads only
files whose figures changed (``Corpus.refresh``). With ``ChunkTerms``, each chunk
also keeps what an index derived from it (the ``files`` provider's search terms),
so a restart does not derive it again. One file per corpus under
``$XDG_CACHE_HOME/hostd/<provider>/``, named by a key over everything that
decides the chunks: the root, the read and chunk options, and the source of
the chunker itself (``hostd.chunking``'s modules), so a changed chunker never
serves old chunks. Which files belong is not in the key: every refresh walks the
tree again and keeps only what the walk yields, and ``Corpus.adopt`` drops at
once a cached file the built-in rules refuse (a ``.env`` cached by a version
without them), marking the corpus modified so the cache is written again without
it. Keeping the key unchanged for that matters: a new key would leave the old
file, secret and all, in the cache directory. A missing, torn or foreign cache is
simply a cold start; writes are atomic (temporary file, then rename) and private (0600).

Keys change (another root, other options, a new chunker), so the directory would only
grow: a cache is touched whenever it is adopted or written, and writing one removes
its siblings untouched for ``STALE_AFTER_S`` (30 days), whatever project they were of.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from hostd.chunking import Chunk
from hostd.chunking import _chunk as _chunker
from hostd.chunking import _json_walk as _chunker_json
from hostd.chunking import _notebook as _chunker_notebook
from hostd.chunking import _tokens as _chunker_tokens

from ._corpus import Corpus, FileEntry

__all__ = [
    "STALE_AFTER_S",
    "ChunkTerms",
    "cache_dir",
    "corpus_key",
    "load_corpus",
    "save_corpus",
]

#: A corpus cache neither adopted nor written for this long is removed (``_prune``).
STALE_AFTER_S = 30 * 24 * 3600
#: What a corpus cache is called (``files``: ``<key>.json``; ``semantic``:
#: ``corpus-<key>.json``): nothing else in the directory is ever removed.
_CACHE_NAME = re.compile(r"(?:corpus-)?[0-9a-f]{32}\.json")

#: In the key: a new one leaves the old file behind (until ``_prune``), so it changes
#: only with what decides the chunks.
_VERSION = 1
#: In the file: one of another layout at the same path is a cold start, then replaced;
#: one of the layout before (no ``refused``, no terms) is adopted (``load_corpus``).
_LAYOUT = 2
_LAYOUT_BEFORE = 1
#: The chunker's own sources: a change to any is a change to every chunk.
_CHUNKER_SOURCES = (
    Path(_chunker.__file__),
    Path(_chunker_tokens.__file__),
    Path(_chunker_notebook.__file__),
    Path(_chunker_json.__file__),  # how the notebook reader walks a notebook's JSON
)


def cache_dir(provider: str) -> Path:
    """``$XDG_CACHE_HOME/hostd/<provider>``, else under ``~/.cache``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hostd" / provider


def corpus_key(corpus: Corpus) -> str:
    """The digest of everything that decides the corpus's chunks."""
    opts = corpus.options
    h = hashlib.sha256()
    h.update(
        orjson.dumps(
            [
                _VERSION,
                str(corpus.root),
                list(opts.include),
                list(opts.exclude),
                opts.max_file_bytes,
                opts.window_lines,
                opts.honour_gitignore,
                opts.chunk_tokens,
                opts.min_chunk_tokens,
            ]
        )
    )
    for source in _CHUNKER_SOURCES:
        h.update(source.read_bytes())
    return h.hexdigest()[:32]


@dataclass(slots=True)
class ChunkTerms:
    """What an index derived from each chunk, kept in the cache beside it: one string
    per chunk, by ``(rel, digest)`` (the same text in the same file derives the same).
    ``tag`` names the code that derived them: terms saved under another tag are not
    loaded, so a changed tokenizer never serves old terms."""

    tag: str
    by_chunk: dict[tuple[str, str], str] = field(default_factory=dict)


def _chunk_row(c: Chunk, terms: ChunkTerms | None) -> list[Any]:
    """``[start, end, text, digest, heading, kind]``, then its terms when known (else
    ``null`` when more follows), then, for a chunk whose text is not its lines (a
    notebook cell's), ``place`` and ``source_digest``."""
    row: list[Any] = [c.start, c.end, c.text, c.digest, c.heading, c.kind]
    said = terms.by_chunk.get((c.rel, c.digest)) if terms is not None else None
    if said is not None or c.source_digest is not None:
        row.append(said)
    if c.source_digest is not None:
        row.extend((c.place, c.source_digest))
    return row


def save_corpus(corpus: Corpus, path: Path, terms: ChunkTerms | None = None) -> None:
    """Write the corpus's state (and ``terms``) to ``path`` atomically (0600); errors
    are the caller's."""
    files = {
        rel: [mtime, size, refused, [_chunk_row(c, terms) for c in chunks]]
        for rel, (mtime, size, chunks, refused) in sorted(corpus.state().items())
    }
    body = orjson.dumps(
        {
            "version": _LAYOUT,
            "root": str(corpus.root),
            "terms": terms.tag if terms is not None else None,
            "files": files,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".corpus-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _prune(path.parent, keep=path)


def _prune(folder: Path, keep: Path) -> None:
    """Remove the corpus caches in ``folder`` untouched for ``STALE_AFTER_S``."""
    cutoff = time.time() - STALE_AFTER_S
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name == keep.name or not _CACHE_NAME.fullmatch(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:  # gone meanwhile, or not ours to remove: left as it is
            continue


def load_corpus(corpus: Corpus, path: Path, terms: ChunkTerms | None = None) -> bool:
    """Adopt the state at ``path``; ``False`` (nothing adopted) when there is none usable.
    With ``terms``, the chunks' saved terms of its tag are added to it."""
    try:
        raw = orjson.loads(path.read_bytes())
        layout = raw.get("version")
        if layout not in (_LAYOUT, _LAYOUT_BEFORE) or raw.get("root") != str(corpus.root):
            return False
        same_terms = terms is not None and raw.get("terms") == terms.tag
        saved: dict[tuple[str, str], str] = {}
        state: dict[str, FileEntry] = {}
        for rel, entry in raw["files"].items():
            if layout == _LAYOUT_BEFORE:
                mtime, size, rows = entry
                refused = None
                if not rows:  # why it gave no chunk is not recorded: read it again
                    continue
            else:
                mtime, size, refused, rows = entry
            if refused is not None and not isinstance(refused, str):
                raise TypeError("refused")
            file = corpus.root / rel
            chunks = []
            for row in rows:
                a, b, t, d, h, k = row[:6]
                place, source = row[7:9] if len(row) == 9 else (None, None)
                chunks.append(Chunk(rel, file, int(a), int(b), t, d, h, k, place, source))
                if same_terms and len(row) > 6 and isinstance(row[6], str):
                    saved[rel, d] = row[6]
            state[rel] = (int(mtime), int(size), chunks, refused)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False  # missing, torn or foreign: a cold start
    corpus.adopt(state)
    if terms is not None:
        terms.by_chunk.update(saved)
    try:
        os.utime(path)  # in use: not stale (_prune), though it may not be written again
    except OSError:
        pass
    return True
