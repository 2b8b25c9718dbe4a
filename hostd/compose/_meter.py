"""What the budget counts: canonical tokens (B3, bytes / 4) or the model's own tokens.

A ``Meter`` prices text in its *size* unit and turns a size into tokens. The
canonical meter's size is UTF-8 bytes and a prompt of ``n`` bytes costs
``ceil(n / 4)`` tokens (B3), so sizes add up exactly and the packer counts bytes.
A ``TokenizerMeter`` wraps any ``str -> int`` counter (a Hugging Face
``tokenizer.json``, ``tiktoken``, a model's own): its size *is* tokens, each
block is counted on its own and the whole prompt is counted once more at the
end, so a tokenizer that merges across a block boundary can never push the
prompt past the budget (``compose_for_prompt`` drops the last frame admitted
until it fits).

Counting runs a tokenizer over every candidate's block, which is work in
proportion to what the providers offered (bounded by the budget they were
asked for); the daemon runs such compositions in a worker thread, never on its
event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ._render import utf8_size

__all__ = [
    "CANONICAL",
    "CanonicalMeter",
    "Meter",
    "TokenCounter",
    "TokenizerMeter",
    "meter_for",
    "same_meter",
]

#: Any callable that says how many tokens a text is (its model's tokenizer).
TokenCounter = Callable[[str], int]


@runtime_checkable
class Meter(Protocol):
    """Prices text for the packer: ``size`` in its own unit, ``tokens`` of a size."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool:
        """Whether sizes add up exactly (else the whole prompt is counted again)."""
        ...

    def size(self, text: str) -> int: ...

    def tokens(self, size: int) -> int: ...

    def capacity(self, budget: int) -> int: ...


class CanonicalMeter:
    """B3: UTF-8 bytes, ``ceil(bytes / 4)`` tokens; what every provider is held to."""

    __slots__ = ()
    name = "bytes/4"
    exact = True

    def size(self, text: str) -> int:
        return utf8_size(text)

    def tokens(self, size: int) -> int:
        return (size + 3) >> 2

    def capacity(self, budget: int) -> int:
        return 4 * budget

    def __repr__(self) -> str:
        return "CanonicalMeter()"

    def __reduce__(self) -> str:
        # The one canonical meter: a copy (pickle, deepcopy) is ``CANONICAL`` itself, so
        # floors admitted in one process are taken as they are in another (``same_meter``).
        return "CANONICAL"


#: The meter a composition uses when no tokenizer is given.
CANONICAL = CanonicalMeter()


class TokenizerMeter:
    """A model's tokens, as counted by ``count`` (``str -> int``)."""

    __slots__ = ("count", "name")
    exact = False

    def __init__(self, count: TokenCounter, name: str | None = None) -> None:
        if not callable(count):
            raise ValueError(f"a tokenizer is a callable str -> int, got {type(count).__name__}")
        self.count = count
        self.name = name or str(getattr(count, "name", None) or _callable_name(count))

    def size(self, text: str) -> int:
        n = self.count(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"tokenizer {self.name!r} returned {n!r}, not a token count")
        return n

    def tokens(self, size: int) -> int:
        return size

    def capacity(self, budget: int) -> int:
        return budget

    def __repr__(self) -> str:
        return f"TokenizerMeter({self.name!r})"


def _callable_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def meter_for(tokenizer: TokenCounter | Meter | None) -> Meter:
    """The meter for a ``tokenizer`` argument: canonical for None, a meter as it is."""
    if tokenizer is None:
        return CANONICAL
    if isinstance(tokenizer, Meter):
        return tokenizer
    return TokenizerMeter(tokenizer)


def same_meter(a: Meter, b: Meter) -> bool:
    """Whether ``a`` and ``b`` count alike (the same meter, or the same counter)."""
    if a is b:
        return True
    return isinstance(a, TokenizerMeter) and isinstance(b, TokenizerMeter) and a.count is b.count
