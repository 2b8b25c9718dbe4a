"""FrameId: the one key for dedup, reuse, verify, usage and attribution (D2, A1)."""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from ._models import ContextFrame, FrameIdentity

__all__ = ["FrameId"]


class FrameId(tuple[str, str, bool, str]):
    """``(provider_id, frame_id, content_digest|None)``, hashable and totally ordered.

    The canonical order compares provider id, then frame id, then digest, with a
    missing digest ordered before any present one. A FrameId *is* its sort key,
    the tuple ``(provider_id, frame_id, has_digest, digest or "")``, so hashing,
    equality and ordering run at C speed wherever frames are keyed or sorted
    (every leg audit, dedup and verification map). It therefore also equals
    that plain tuple.
    """

    __slots__ = ()

    def __new__(cls, provider_id: str, frame_id: str, content_digest: str | None = None) -> FrameId:
        return tuple.__new__(
            cls, (provider_id, frame_id, content_digest is not None, content_digest or "")
        )

    def __getnewargs__(self) -> tuple[str, str, str | None]:
        return (self[0], self[1], self.content_digest)

    # C-level getters: these two are read in the composer's hot loops.
    provider_id: str = property(itemgetter(0))  # type: ignore[assignment]
    frame_id: str = property(itemgetter(1))  # type: ignore[assignment]

    @property
    def content_digest(self) -> str | None:
        return self[3] if self[2] else None

    @classmethod
    def of(cls, provider_id: str, frame: ContextFrame) -> FrameId:
        digest = frame.content_digest  # built as ``__new__`` does, one call fewer a frame
        return tuple.__new__(cls, (provider_id, frame.id, digest is not None, digest or ""))

    @classmethod
    def many(cls, provider_id: str, frames: Iterable[ContextFrame]) -> list[FrameId]:
        """``of`` each frame, built in one comprehension (no call per frame)."""
        new = tuple.__new__
        return [
            new(cls, (provider_id, f.id, (d := f.content_digest) is not None, d or ""))
            for f in frames
        ]

    @classmethod
    def from_wire(cls, identity: FrameIdentity | dict[str, Any]) -> FrameId:
        if isinstance(identity, dict):
            identity = FrameIdentity.model_validate(identity)
        return cls(identity.provider_id, identity.frame_id, identity.content_digest)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider_id": self[0], "frame_id": self[1]}
        if self[2]:
            out["content_digest"] = self[3]
        return out

    def identity(self) -> FrameIdentity:
        return FrameIdentity(
            provider_id=self[0],
            frame_id=self[1],
            content_digest=self.content_digest,
        )

    def __repr__(self) -> str:
        return (
            f"FrameId(provider_id={self[0]!r}, frame_id={self[1]!r}, "
            f"content_digest={self.content_digest!r})"
        )

    def __str__(self) -> str:
        return f"{self[0]}:{self[1]}@{self.content_digest or '-'}"
