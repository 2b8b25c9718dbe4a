"""``[host] tokenizer``: a Hugging Face ``tokenizer.json`` as the budget's token counter.

Every open model ships a ``tokenizer.json``; the ``tokenizers`` library (the
``tokenizer`` extra, also part of ``semantic``) reads it with no model, no torch
and no network. ``load_tokenizer`` returns a ``str -> int`` counter for
``compose_for_prompt(tokenizer=...)``, loaded once per file and shared: the
``tokenizers`` object encodes from several threads at once, which is where the
daemon counts (a worker thread, never its event loop).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from hostd.errors import ConfigError

__all__ = ["HfTokenizer", "load_tokenizer"]


class HfTokenizer:
    """A ``tokenizer.json`` as a counter: ``tok(text)`` is the number of tokens the
    model reads for ``text`` (no special tokens: the prompt sits inside a larger
    input). ``name`` is the file's name and the start of its SHA-256, for the audit."""

    __slots__ = ("_tokenizer", "name", "path")

    def __init__(self, path: Path) -> None:
        if importlib.util.find_spec("tokenizers") is None:
            raise ConfigError(
                f"host.tokenizer: {path} needs the tokenizers library: "
                'pip install "/path/to/hostd[tokenizer]" (a checkout or a wheel)',
                key="host.tokenizer",
                problem="tokenizers is not installed",
            )
        from tokenizers import Tokenizer

        data = b""
        try:
            data = path.read_bytes()
            tokenizer: Any = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:  # the library raises plain Exception for a bad file
            # The library's words are about the user's own file (bounded); a .tiktoken
            # file is a common mistake, said as such.
            said = " ".join(str(exc).split())[:200] or type(exc).__name__
            hint = ""
            if path.suffix == ".tiktoken":
                hint = (
                    ": a .tiktoken file is not one (docs/api.md#what-the-budget-counts says "
                    "how to convert it)"
                )
            elif _json_without_model(data):  # tokenizer_config.json, config.json, …
                said = 'JSON, but no "model" in it'
                hint = (
                    ": a model ships its tokenizer.json beside files such as "
                    "tokenizer_config.json; name that one"
                )
            raise ConfigError(
                f"host.tokenizer: {path} is not a tokenizer.json the tokenizers library "
                f"reads ({said}){hint}",
                key="host.tokenizer",
                problem="unreadable tokenizer",
            ) from exc
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.path = path
        self.name = f"{path.name}@{hashlib.sha256(data).hexdigest()[:12]}"

    def __call__(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def __repr__(self) -> str:
        return f"HfTokenizer({self.name!r})"


def _json_without_model(data: bytes) -> bool:
    """Whether ``data`` is a JSON object with no ``model`` (every tokenizer.json has one)."""
    try:
        value = json.loads(data)
    except ValueError:
        return False
    return isinstance(value, dict) and "model" not in value


@functools.lru_cache(maxsize=4)
def load_tokenizer(path: Path) -> HfTokenizer:
    """The counter for ``path`` (loaded once; ``ConfigError`` naming the key if it cannot)."""
    return HfTokenizer(Path(path))
