"""A ``Corpus``'s chunks on disk, so a restarted provider starts warm.

The cache maps every file to the ``(mtime_ns, size)`` it had when it was
chunked, its chunks and why its bytes kept it out, if they did (a binary file is
not read again to learn it is binary); a restart adopts it and re-reads only
files whose figures changed (``Corpus.refresh``). With ``ChunkTerms``, each chunk
also keeps what an index derived from it (the ``files`` provider's search terms),
so a restart does not derive it again, and the index built over all of them (the
``files`` provider's BM25 matrix, ``SavedIndex``), so a restart of an unchanged tree
does not build it again either, and the names each chunk defines (``ChunkTerms.names``:
the ``files`` provider's definition lift), so a restart does not scan the chunks for
definitions again. One file per corpus under ``$XDG_CACHE_HOME/hostd/<provider>/``,
named by a key over everything that decides the chunks: the root, the read and chunk
options, and the source of the chunker itself (``hostd.chunking``'s modules) and which
count it cut by (the model tokenizer's or the estimate: ``counter_identity``), so a
changed chunker, or the ``semantic`` extra installed after a first build, never serves
old chunks.
Which files belong is not in the key: every refresh walks the tree again and keeps
only what the walk yields, and ``Corpus.adopt`` drops at
once a cached file the built-in rules refuse (a ``.env`` cached by a version
without them), marking the corpus modified so the cache is written again without
it. Keeping the key unchanged for that matters: a new key would leave the old
file, secret and all, in the cache directory. A cache says which rules judged its
files' bytes (``_judged_by``): one judged by these rules, for these options, is not
searched again for keys and tokens (every byte of it passed them when it was read);
any other is. A missing, torn or foreign cache is
simply a cold start; writes are atomic (temporary file, then rename) and private (0600).

Keys change (another root, other options, a new chunker), so the directory would only
grow: a cache is touched whenever it is adopted or written, and writing one removes
its siblings untouched for ``STALE_AFTER_S`` (30 days), whatever project they were of,
then, while the folder's caches together pass ``max_bytes`` (``DEFAULT_MAX_BYTES``, a
provider's ``--cache-max-bytes``), the least recently used. Never the one just written,
nor one a running provider uses: a process holds a shared ``flock`` on the cache it
adopted or wrote last (``_hold``), and a cache that cannot be locked exclusively is
left (``_in_use``). A removed cache costs its provider's next start a build, nothing
more: a running provider keeps its index in memory.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from hostd.chunking import Chunk, counter_identity
from hostd.chunking import _chunk as _chunker
from hostd.chunking import _items as _chunker_items
from hostd.chunking import _json_walk as _chunker_json
from hostd.chunking import _notebook as _chunker_notebook
from hostd.chunking import _rst as _chunker_rst
from hostd.chunking import _tokens as _chunker_tokens

from . import _corpus
from ._corpus import Corpus, FileEntry

__all__ = [
    "DEFAULT_MAX_BYTES",
    "STALE_AFTER_S",
    "ChunkTerms",
    "SavedIndex",
    "cache_dir",
    "corpus_key",
    "load_corpus",
    "save_corpus",
]

#: A corpus cache neither adopted nor written for this long is removed (``_prune``).
STALE_AFTER_S = 30 * 24 * 3600
#: The most a provider's folder of corpus caches holds, by default, before the least
#: recently used go (``_prune``): a 1 MB tree's cache takes about 3 MB, so this keeps
#: hundreds of projects, or a few very large ones.
DEFAULT_MAX_BYTES = 1024**3
#: How many caches one process holds locked (``_hold``): a provider uses one; a process
#: that loads many (a test run) releases the oldest.
_HELD_MOST = 16
#: What a corpus cache is called (``files``: ``<key>.json``; ``semantic``:
#: ``corpus-<key>.json``): nothing else in the directory is ever removed.
_CACHE_NAME = re.compile(r"(?:corpus-)?[0-9a-f]{32}\.json")

#: In the key: a new one leaves the old file behind (until ``_prune``), so it changes
#: only with what decides the chunks.
_VERSION = 1
#: In the file: one of another layout at the same path is a cold start, then replaced;
#: one of the layouts before is adopted (``load_corpus``): 3 (no chunk's defined names:
#: they are derived again), 2 (nor an index, nor ``judged``: its files are checked for
#: keys and tokens again), 1 (nor ``refused``, nor terms).
_LAYOUT = 4
_LAYOUT_INDEX = 3
_LAYOUT_TERMS = 2
_LAYOUT_BEFORE = 1
_LAYOUTS = (_LAYOUT, _LAYOUT_INDEX, _LAYOUT_TERMS, _LAYOUT_BEFORE)
#: The chunker's own sources: a change to any is a change to every chunk.
_CHUNKER_SOURCES = (
    Path(_chunker.__file__),
    Path(_chunker_items.__file__),  # a chunk's item
    Path(_chunker_tokens.__file__),
    Path(_chunker_notebook.__file__),
    Path(_chunker_json.__file__),  # how the notebook reader walks a notebook's JSON
    Path(_chunker_rst.__file__),  # reStructuredText's sections and directives
)


#: The code that judges a file's bytes (keys and tokens, generated headers, lines too
#: long to quote: ``Corpus._refused_bytes``), part of ``_judged_by``.
_RULES_SOURCE = Path(_corpus.__file__)


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
                opts.definition_tokens,
                # files and semantic must cut the same chunks (D2): chunks the estimate
                # cut are not the model tokenizer's, installed since.
                counter_identity(),
            ]
        )
    )
    for source in _CHUNKER_SOURCES:
        h.update(source.read_bytes())
    return h.hexdigest()[:32]


def _judged_by(corpus: Corpus) -> str:
    """The digest of what decided which bytes a cache may hold: the corpus's key (its
    options: an include glob that names a generated file lets it in) and the rules'
    source. A cache that names another digest (or none) is checked again on adoption."""
    h = hashlib.sha256(corpus_key(corpus).encode())
    h.update(_RULES_SOURCE.read_bytes())
    return h.hexdigest()[:32]


@dataclass(slots=True, frozen=True)
class SavedIndex:
    """An index built over every chunk of a corpus, in the corpus's order (``docs`` of
    them): its arrays by name and its vocabulary (term to column). ``tag`` names the
    code that built it; whether it fits the chunks a start has is its user's to say."""

    tag: str
    docs: int
    vocab: dict[str, int]
    arrays: dict[str, np.ndarray[Any, Any]]


@dataclass(slots=True)
class ChunkTerms:
    """What an index derived from each chunk, kept in the cache beside it: one string
    per chunk, by ``(rel, digest)`` (the same text in the same file derives the same).
    ``tag`` names the code that derived them: terms saved under another tag are not
    loaded, so a changed tokenizer never serves old terms. ``index``: the index built
    over them all, saved with them and loaded only with them. ``names``: the names each
    chunk defines (``defined_names``), by ``(rel, digest)`` too, whatever ``tag`` (the
    chunker's code derives them, and it is in the cache's key: ``corpus_key``); saved
    when every chunk's are known, each chunk's row then saying its own (none when it
    says none)."""

    tag: str
    by_chunk: dict[tuple[str, str], str] = field(default_factory=dict)
    index: SavedIndex | None = None
    names: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def _index_doc(index: SavedIndex) -> dict[str, Any]:
    """``index`` as JSON: each array as its dtype and its bytes in base64, which parse
    as one string each (a list of millions of numbers would take seconds)."""
    arrays = {
        name: [a.dtype.str, base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()]
        for name, a in index.arrays.items()
    }
    return {"tag": index.tag, "docs": index.docs, "vocab": index.vocab, "arrays": arrays}


def _index_of(doc: dict[str, Any]) -> SavedIndex:
    """``_index_doc``'s inverse; read-only arrays over the decoded bytes (no copy)."""
    arrays = {
        name: np.frombuffer(base64.b64decode(data, validate=True), dtype=np.dtype(dtype))
        for name, (dtype, data) in doc["arrays"].items()
    }
    if not isinstance(doc["tag"], str) or not isinstance(doc["vocab"], dict):
        raise TypeError("index")
    return SavedIndex(doc["tag"], int(doc["docs"]), doc["vocab"], arrays)


def _chunk_row(c: Chunk, terms: ChunkTerms | None) -> list[Any]:
    """``[start, end, text, digest, heading, kind]``, then its terms when known (else
    ``null`` when more follows), then, for a chunk whose text is not its lines (a
    notebook cell's), ``place`` and ``source_digest`` (else ``null`` when more
    follows), then a code chunk's ``item`` (else ``null`` when more follows), then the
    names it defines, when it defines any."""
    row: list[Any] = [c.start, c.end, c.text, c.digest, c.heading, c.kind]
    key = (c.rel, c.digest)
    said = terms.by_chunk.get(key) if terms is not None else None
    names = terms.names.get(key) if terms is not None else None
    more = c.source_digest is not None or c.item is not None or bool(names)
    if said is not None or more:
        row.append(said)
    if more:
        row.extend((c.place, c.source_digest))
    if c.item is not None or names:
        row.append(c.item)
    if names:
        row.append(list(names))
    return row


def _names_known(corpus: Corpus, terms: ChunkTerms | None) -> bool:
    """Whether ``terms`` knows the names of every chunk of ``corpus``: only then does a
    row that says none mean that its chunk defines none."""
    if terms is None:
        return False
    names = terms.names
    return all((c.rel, c.digest) in names for c in corpus.chunks)


def save_corpus(
    corpus: Corpus,
    path: Path,
    terms: ChunkTerms | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> None:
    """Write the corpus's state (and ``terms``) to ``path`` atomically (0600), then
    bound the folder's caches to ``max_bytes`` (0: no bound but age; ``_prune``);
    errors are the caller's."""
    files = {
        rel: [mtime, size, refused, [_chunk_row(c, terms) for c in chunks]]
        for rel, (mtime, size, chunks, refused) in sorted(corpus.state().items())
    }
    index = terms.index if terms is not None else None
    body = orjson.dumps(
        {
            "version": _LAYOUT,
            "root": str(corpus.root),
            "judged": _judged_by(corpus),
            "terms": terms.tag if terms is not None else None,
            "names": _names_known(corpus, terms),
            "files": files,
            "index": _index_doc(index) if index is not None else None,
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
    _hold(path)
    _prune(path.parent, keep=path, max_bytes=max_bytes)


def _prune(folder: Path, keep: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Remove the corpus caches in ``folder`` untouched for ``STALE_AFTER_S``, then,
    while those left pass ``max_bytes`` together (0: no bound), the least recently used
    (by mtime: adopting one touches it); never ``keep``, nor one in use (``_in_use``)."""
    cutoff = time.time() - STALE_AFTER_S
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    left: list[tuple[float, int, str]] = []  # (mtime, size, path) of those kept
    total = 0
    for entry in entries:
        if not _CACHE_NAME.fullmatch(entry.name):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat()
            total += st.st_size
            if entry.name == keep.name:
                continue
            if st.st_mtime < cutoff and not _in_use(entry.path):
                os.unlink(entry.path)
                total -= st.st_size
            else:
                left.append((st.st_mtime, st.st_size, entry.path))
        except OSError:  # gone meanwhile, or not ours to remove: left as it is
            continue
    if max_bytes <= 0:
        return
    for _, size, name in sorted(left):
        if total <= max_bytes:
            return
        if _in_use(name):
            continue
        try:
            os.unlink(name)
        except OSError:
            continue
        total -= size


#: The caches this process holds, by folder: an open descriptor under a shared lock.
_held: dict[str, int] = {}


def _hold(path: Path) -> None:
    """Hold a shared lock on ``path`` while this process lives (or until it holds another
    cache of the same folder), so another provider's ``_prune`` leaves it: the cache a
    running provider adopted or wrote is in use. Best effort: one that cannot be opened
    is simply not held."""
    key = str(path.parent)
    old = _held.pop(key, None)
    if old is not None:
        os.close(old)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # one being removed this moment: not held
        os.close(fd)
        return
    _held[key] = fd
    while len(_held) > _HELD_MOST:
        os.close(_held.pop(next(iter(_held))))


def _in_use(path: str) -> bool:
    """Whether a process (this one included) holds ``path`` (``_hold``): its exclusive
    lock is refused. A file that cannot be opened is not in use."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases the lock taken
    return False


def load_corpus(corpus: Corpus, path: Path, terms: ChunkTerms | None = None) -> bool:
    """Adopt the state at ``path``; ``False`` (nothing adopted) when there is none usable.
    With ``terms``, the chunks' saved terms of its tag are added to it, and the index
    saved with them (``terms.index``), and the names they define (``terms.names``) when
    the cache knows every chunk's."""
    try:
        raw = orjson.loads(path.read_bytes())
        layout = raw.get("version")
        if layout not in _LAYOUTS or raw.get("root") != str(corpus.root):
            return False
        same_terms = terms is not None and raw.get("terms") == terms.tag
        indexed = layout in (_LAYOUT, _LAYOUT_INDEX)
        index = raw.get("index") if indexed and same_terms else None
        saved_index = _index_of(index) if index is not None else None
        # A layout before this one did not say them: there a row without names is unknown.
        named = terms is not None and layout == _LAYOUT and raw.get("names") is True
        saved: dict[tuple[str, str], str] = {}
        names: dict[tuple[str, str], tuple[str, ...]] = {}
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
                place, source = row[7:9] if len(row) >= 9 else (None, None)
                item = row[9] if len(row) >= 10 else None
                chunks.append(Chunk(rel, file, int(a), int(b), t, d, h, k, place, source, item))
                if same_terms and len(row) > 6 and isinstance(row[6], str):
                    saved[rel, d] = row[6]
                if named:
                    names[rel, d] = _names_of(row[10]) if len(row) >= 11 else ()
            state[rel] = (int(mtime), int(size), chunks, refused)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False  # missing, torn or foreign: a cold start
    corpus.adopt(state, judged=indexed and raw.get("judged") == _judged_by(corpus))
    if terms is not None:
        terms.by_chunk.update(saved)
        terms.index = saved_index
        terms.names.update(names)
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used (_prune), though it may not be written again
    _hold(path)  # in use while this process lives: never pruned by another
    return True


def _names_of(said: Any) -> tuple[str, ...]:
    """A row's names, checked: a foreign cache's are a cold start (``TypeError``)."""
    if not isinstance(said, list) or not all(isinstance(name, str) for name in said):
        raise TypeError("names")
    return tuple(said)
