"""FrameId: the one key for dedup, reuse, verify, usage and attribution (D2, A1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any

from ._models import ContextFrame, FrameIdentity

__all__ = ["FrameId"]


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class FrameId:
    """``(provider_id, frame_id, content_digest|None)``, hashable and totally ordered.

    The canonical order compares provider id, then frame id, then digest, with a
    missing digest ordered before any present one. ``sort_key`` is precomputed so
    sorting large candidate sets costs one tuple comparison per step.
    """

    provider_id: str
    frame_id: str
    content_digest: str | None = None
    sort_key: tuple[str, str, bool, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        digest = self.content_digest
        object.__setattr__(
            self,
            "sort_key",
            (self.provider_id, self.frame_id, digest is not None, digest or ""),
        )

    @classmethod
    def of(cls, provider_id: str, frame: ContextFrame) -> FrameId:
        return cls(provider_id, frame.id, frame.content_digest)

    @classmethod
    def from_wire(cls, identity: FrameIdentity | dict[str, Any]) -> FrameId:
        if isinstance(identity, dict):
            identity = FrameIdentity.model_validate(identity)
        return cls(identity.provider_id, identity.frame_id, identity.content_digest)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider_id": self.provider_id, "frame_id": self.frame_id}
        if self.content_digest is not None:
            out["content_digest"] = self.content_digest
        return out

    def identity(self) -> FrameIdentity:
        return FrameIdentity(
            provider_id=self.provider_id,
            frame_id=self.frame_id,
            content_digest=self.content_digest,
        )

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.frame_id}@{self.content_digest or '-'}"

    def __hash__(self) -> int:
        return hash(self.sort_key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrameId):
            return NotImplemented
        return self.sort_key == other.sort_key

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, FrameId):
            return NotImplemented
        return self.sort_key < other.sort_key
