"""The daemon's side of shadow ranking: sample a composition and write it off the event loop."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio.to_thread

from hostd.logs import get_logger
from hostd.protocol import ContextFrame

from ._store import ShadowStore, build_record

__all__ = ["ShadowRecorder", "shadow_path"]

log = get_logger("hostd.shadow")


def shadow_path(state_dir: Path) -> Path:
    return state_dir / "shadow.db"


class ShadowRecorder:
    """Records a ``sample`` share of compositions into a ``ShadowStore``.

    Recording never fails a request: a store that cannot be written is logged
    (``shadow.record_failed``) and the composition is returned as usual.
    """

    def __init__(
        self,
        store: ShadowStore,
        *,
        sample: float = 1.0,
        store_content: bool = False,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.sample = sample
        self.store_content = store_content
        self._draw = draw

    @classmethod
    def from_settings(cls, settings: Any, state_dir: Path) -> ShadowRecorder | None:
        """``None`` unless ``settings.enabled`` (the ``[shadow]`` config section)."""
        if not settings.enabled:
            return None
        store = ShadowStore(
            shadow_path(state_dir),
            max_requests=settings.max_requests,
            max_bytes=settings.max_bytes,
            retention_days=settings.retention_days,
        )
        return cls(store, sample=settings.sample, store_content=settings.store_content)

    async def record(
        self,
        request_id: str,
        goal: str,
        contested: int,
        caps: dict[str, float] | None,
        accepted: Iterable[tuple[str, ContextFrame]],
        composed: Any,
    ) -> bool:
        """Record this composition if it is drawn; whether it was written."""
        if self.sample <= 0 or self._draw() >= self.sample:
            return False
        record = build_record(
            request_id, goal, contested, caps, accepted, composed, store_content=self.store_content
        )
        try:
            await anyio.to_thread.run_sync(self.store.write, record)
        except (OSError, sqlite3.Error) as exc:
            log.warning("shadow.record_failed", error=str(exc), path=str(self.store.path))
            return False
        log.debug("shadow.recorded", candidates=len(record.candidates))
        return True
