"""What a config reload may change in a running daemon, decided apart from any I/O.

``reload_plan`` compares the config file as the daemon last read it with the file
read now and returns the config to run (``Reload.config``): the new one, except the
keys a running daemon cannot change (``NEEDS_RESTART``: its listeners, its state
directory, its log file, the pools' start and restart settings, the shadow store, the
reranker's process), which keep the values in force, each named in
``Reload.needs_restart`` when the file changed it. Which providers start, stop,
restart or are kept is the engine's to decide from the new specs
(``ProviderPool.reconfigure``); everything else (compose defaults, the strategy,
budgets, the audit mode, the tokenizer, the reranker's per-request settings, the TCP
token: ``tcp.token``, ``tcp.token_file``) is read per request or per authentication and
takes effect for those that arrive after the reload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hostd.config import Config

__all__ = ["NEEDS_RESTART", "Reload", "reload_plan"]

#: Keys (``section.key``; a section alone: every key of it) a running daemon keeps until
#: it is restarted, and why: each is read once, at start.
NEEDS_RESTART: dict[str, str] = {
    "host.socket": "the listening socket is bound at start",
    "host.state_dir": "the state directory holds the daemon's lock, consent and shadow files",
    "host.start_timeout_s": "the provider pool's start deadline is set at start",
    "host.max_line_bytes": "the provider pool's line limit is set at start",
    "host.restart_backoff_s": "the provider pool's restart policy is set at start",
    "host.restart_backoff_max_s": "the provider pool's restart policy is set at start",
    "host.restart_attempts": "the provider pool's restart policy is set at start",
    "host.retry_failed_after_s": "the provider pool's restart policy is set at start",
    "host.retry_failed_max_s": "the provider pool's restart policy is set at start",
    "host.trusted_roots": "the verify stage's roots are set at start",
    "host.untrusted": "the verify stage's choice is set at start",
    "host.max_connections": "the connection caps are set at start",
    "host.socket_check_s": "the socket watcher is started at start",
    "tcp.enabled": "the TCP listener is set up at start",
    "tcp.host": "the TCP listener is set up at start",
    "tcp.port": "the TCP listener is set up at start",
    "log.level": "the log is configured at start",
    "log.file": "the log file is opened at start",
    "log.max_bytes": "the log file is opened at start",
    "log.backups": "the log file is opened at start",
    "shadow": "the shadow store is opened at start",
    "reranker": "the reranker's process or server client is made at start",
}

#: ``[reranker]`` keys the pipeline reads per request: applied, unlike the rest of it.
_RERANKER_PER_REQUEST = frozenset({"timeout_ms", "max_candidates", "overfetch"})


@dataclass(slots=True, frozen=True)
class Reload:
    """The config to run after a reload, and the keys whose change waits for a restart."""

    config: Config
    #: ``section.key`` of each change applied (providers aside), sorted.
    applied: list[str]
    #: ``section.key`` of each change not applied, sorted.
    needs_restart: list[str]


def _held(section: str, key: str) -> bool:
    """Whether ``section.key`` keeps its running value until a restart."""
    if section == "reranker":
        return key not in _RERANKER_PER_REQUEST
    return section in NEEDS_RESTART or f"{section}.{key}" in NEEDS_RESTART


def reload_plan(loaded: Config, running: Config, new: Config) -> Reload:
    """``loaded``: the file as last read (before any command-line override); ``running``:
    the config in force (with them); ``new``: the file as read now. The result runs
    ``new``, but every held key (``NEEDS_RESTART``) as ``running`` has it; those the
    file changed are named."""
    applied: list[str] = []
    needs_restart: list[str] = []
    sections: dict[str, Any] = {}
    for section in ("host", "tcp", "log", "shadow", "reranker"):
        was, now, kept = (getattr(c, section) for c in (loaded, new, running))
        held = {key: getattr(kept, key) for key in type(now).model_fields if _held(section, key)}
        for key in type(now).model_fields:
            if getattr(was, key) != getattr(now, key):
                (needs_restart if key in held else applied).append(f"{section}.{key}")
        if held:
            sections[section] = now.model_copy(update=held)
    return Reload(new.model_copy(update=sections), sorted(applied), sorted(needs_restart))
