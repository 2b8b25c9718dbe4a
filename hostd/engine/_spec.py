"""``ProviderSpec``: what the engine needs to start and query one provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ProviderSpec"]


@dataclass(slots=True, frozen=True)
class ProviderSpec:
    """One configured provider. ``command`` is the argv of its child process;
    ``env`` is added to the scrubbed environment; ``weight`` sizes its budget
    share (``budget_split``); ``trusted_roots`` is for source re-reads (F5)."""

    id: str
    command: Sequence[str]
    binding: str = "jsonrpc"
    timeout_ms: int = 2000
    weight: float = 1.0
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | Path | None = None
    trusted_roots: Sequence[str | Path] = field(default_factory=list)
    #: "exclude" | "include" for frames whose ``file`` provenance lies outside every
    #: trusted root; ``None``: the host's setting.
    untrusted: str | None = None
    #: Seconds its start (spawn and handshake) may take before it is killed; ``None``:
    #: the host's ``start_timeout_s``. A request naming no timeout waits up to this for
    #: the provider to be ready.
    start_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("provider id must not be empty")
        if isinstance(self.command, str) or not self.command:
            raise ValueError(f"provider {self.id!r}: command must be a non-empty argv list")
        if self.binding not in ("jsonrpc", "cgp"):
            raise ValueError(f"provider {self.id!r}: binding must be 'jsonrpc' or 'cgp'")
        if self.timeout_ms <= 0:
            raise ValueError(f"provider {self.id!r}: timeout_ms must be positive")
        if self.untrusted not in (None, "exclude", "include"):
            raise ValueError(f"provider {self.id!r}: untrusted must be 'exclude' or 'include'")
        if self.weight < 0:
            raise ValueError(f"provider {self.id!r}: weight must not be negative")
        if self.start_timeout_s is not None and not self.start_timeout_s > 0:
            raise ValueError(f"provider {self.id!r}: start_timeout_s must be positive")
        object.__setattr__(self, "command", tuple(str(c) for c in self.command))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "trusted_roots", tuple(self.trusted_roots))

    @classmethod
    def from_settings(cls, settings: Any) -> ProviderSpec:
        """From any object with these attribute names (``hostd.config.ProviderSettings``)."""
        return cls(
            id=settings.id,
            command=list(settings.command),
            binding=getattr(settings, "binding", "jsonrpc"),
            timeout_ms=getattr(settings, "timeout_ms", 2000),
            weight=getattr(settings, "weight", 1.0),
            env=dict(getattr(settings, "env", {}) or {}),
            cwd=getattr(settings, "cwd", None),
            trusted_roots=list(getattr(settings, "trusted_roots", []) or []),
            untrusted=getattr(settings, "untrusted", None),
            start_timeout_s=getattr(settings, "start_timeout_s", None),
        )
