"""``ProviderSpec``: what the engine needs to start and query one provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostd.transport import binding_problem

__all__ = ["ProviderSpec"]


@dataclass(slots=True, frozen=True)
class ProviderSpec:
    """One configured provider. ``command`` is the argv of its child process, or
    ``url`` names a remote provider (HTTPS; ``token_file``/``token_env`` its bearer
    credential, ``ca_file``/``client_cert``/``client_key`` its TLS); ``env`` is added
    to the scrubbed environment; ``weight`` sizes its budget share
    (``budget_split``); ``trusted_roots`` is for source re-reads (F5)."""

    id: str
    command: Sequence[str] = ()
    binding: str = "jsonrpc"
    timeout_ms: int = 2000
    weight: float = 1.0
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | Path | None = None
    trusted_roots: Sequence[str | Path] = field(default_factory=list)
    #: "exclude" | "include" for frames whose ``file`` provenance lies outside every
    #: trusted root; ``None``: the host's setting.
    untrusted: str | None = None
    #: The binding's own settings (``mcp``: ``hostd.config.McpSettings`` as a dict).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: A remote provider: its URL instead of a command (C7 is checked by the transport).
    url: str | None = None
    token_file: str | Path | None = None
    token_env: str | None = None
    ca_file: str | Path | None = None
    client_cert: str | Path | None = None
    client_key: str | Path | None = None
    #: HTTP connections one remote provider may hold open at once.
    max_connections: int = 16
    #: Seconds its start (spawn and handshake) may take before it is killed; ``None``:
    #: the host's ``start_timeout_s``. A request naming no timeout waits up to this for
    #: the provider to be ready.
    start_timeout_s: float | None = None
    #: Kept when it answers ``-32601`` to the handshake, without one: the reranker only
    #: (a process written to the ``rerank`` method alone); a provider needs its handshake.
    optional_handshake: bool = False

    @property
    def remote(self) -> bool:
        return self.url is not None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("provider id must not be empty")
        if self.url is not None:
            if self.command:
                raise ValueError(f"provider {self.id!r}: give command or url, not both")
        elif isinstance(self.command, str) or not self.command:
            raise ValueError(f"provider {self.id!r}: command must be a non-empty argv list")
        # The binding registry decides: known, may it be remote, is its extra installed.
        problem = binding_problem(self.binding, remote=self.url is not None)
        if problem is not None:
            raise ValueError(f"provider {self.id!r}: {problem}")
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
        remote = {
            key: getattr(settings, key)
            for key in (
                "url",
                "token_file",
                "token_env",
                "ca_file",
                "client_cert",
                "client_key",
                "max_connections",
            )
            if getattr(settings, key, None) is not None
        }
        return cls(
            id=settings.id,
            command=list(getattr(settings, "command", None) or ()),
            binding=getattr(settings, "binding", "jsonrpc"),
            timeout_ms=getattr(settings, "timeout_ms", 2000),
            weight=getattr(settings, "weight", 1.0),
            env=dict(getattr(settings, "env", {}) or {}),
            cwd=getattr(settings, "cwd", None),
            trusted_roots=list(getattr(settings, "trusted_roots", []) or []),
            untrusted=getattr(settings, "untrusted", None),
            options=dict(getattr(settings, "options", None) or {}),
            **remote,
            start_timeout_s=getattr(settings, "start_timeout_s", None),
        )
