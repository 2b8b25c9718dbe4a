"""The engine a daemon runs: the ``Host`` over the configured providers and, when a
``[reranker]`` is configured, the reranker beside it (stopped first): its process, or
the pooled client of its rerank server (``url``).

``start`` overrides ``host.start_providers`` for both: a daemon that boots in the
background opens them lazily and starts them as it begins serving. ``rerank_boot``
false opens the reranker lazily whatever they say (a one-shot composition it does not
rank: it starts only if asked).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from hostd.config import Config, HostSettings, RerankerSettings

from ._listeners import private_state_dir

if TYPE_CHECKING:
    # Host and RerankService are named again for the daemon's annotations: of the server,
    # only this module (its lifecycle) imports the engine (tests/test_layers.py).
    from hostd.engine import Host as Host
    from hostd.engine import PoolSettings, RestartPolicy
    from hostd.engine import RerankService as RerankService

__all__ = ["make_reranker", "open_engine", "restart_policy"]


def restart_policy(cfg: HostSettings) -> RestartPolicy:
    """The providers' restart policy of ``[host]``: the backoff (``restart_backoff_s``,
    doubling up to ``restart_backoff_max_s``), the failures in a row that park one
    (``restart_attempts``), and a parked one's cool-down."""
    from hostd.engine import RestartPolicy

    return RestartPolicy(
        base_delay_s=cfg.restart_backoff_s,
        max_delay_s=cfg.restart_backoff_max_s,
        max_attempts=cfg.restart_attempts,
        retry_failed_after_s=cfg.retry_failed_after_s,
        retry_failed_max_s=cfg.retry_failed_max_s,
    )


def make_reranker(settings: RerankerSettings, pool_settings: PoolSettings) -> RerankService | None:
    """The engine's reranker for ``[reranker]``: its process (``command``), its rerank
    server (``url``), or ``None`` when neither is set."""
    if settings.url is not None:
        from hostd.engine import CoolDownPolicy, HttpReranker, RerankServer

        server = RerankServer(
            url=settings.url,
            api=settings.api,
            model=settings.model,
            token_file=settings.token_file,
            token_env=settings.token_env,
            ca_file=settings.ca_file,
            client_cert=settings.client_cert,
            client_key=settings.client_key,
            max_connections=settings.max_connections,
            batch_size=settings.batch_size,
            cool_down=CoolDownPolicy(
                after=settings.cool_down_after,
                base_s=settings.cool_down_ms / 1000,
                max_s=settings.max_cool_down_ms / 1000,
            ),
        )
        return HttpReranker(server, pool_settings)
    if settings.command is None:
        return None
    from hostd.engine import RERANKER_ID, ProviderSpec, Reranker

    spec = ProviderSpec(
        id=RERANKER_ID,
        command=list(settings.command),
        timeout_ms=settings.timeout_ms,
        env=dict(settings.env),
        cwd=str(settings.cwd) if settings.cwd is not None else None,
        optional_handshake=True,  # one written to `rerank` alone answers -32601 to it
    )
    return Reranker(spec, pool_settings)


@contextlib.asynccontextmanager
async def open_engine(
    config: Config,
    host_factory: Callable[..., Any] | None,
    start: str | None = None,
    *,
    restart_idle: bool = False,
    boot_only: Iterable[str] | None = None,
    rerank_boot: bool = True,
) -> AsyncIterator[tuple[Any, Any]]:
    """``(host, reranker)`` for the block (``reranker`` is ``None`` without ``[reranker]``).
    ``host_factory`` (tests) builds the host instead of the configured engine.
    ``restart_idle``: a provider (or reranker process) that is down starts again on its
    own, with no request asking (a long-running host: ``hostd serve``, ``hostd mcp``).
    ``boot_only``: the providers a ``boot`` start starts (default: all; ``Host``);
    ``rerank_boot`` false: the reranker is not among them (opened lazily)."""
    from hostd.engine import Host, PoolSettings

    cfg = config.host
    policy = restart_policy(cfg)
    if host_factory is not None:
        host_cm = host_factory(config)
    else:
        private_state_dir(config.state_path, config.source)  # refused before any start
        # The engine builds its verify stage from the specs (roots, deadlines): one place.
        host_cm = Host(
            config.provider_specs(),
            state_dir=config.state_path,
            host_roots=cfg.trusted_roots,
            untrusted=cfg.untrusted,
            start=start or cfg.start_providers,
            start_timeout_s=cfg.start_timeout_s,
            max_line_bytes=cfg.max_line_bytes,
            restart_policy=policy,
            config_file=None if config.source == "<defaults>" else config.source,
            restart_idle=restart_idle,
            boot_only=boot_only,
        )
    async with host_cm as host:
        reranker = make_reranker(
            config.reranker,
            PoolSettings(
                start=(start or cfg.start_providers) if rerank_boot else "lazy",
                start_timeout_s=config.reranker.start_timeout_ms / 1000,
                max_line_bytes=cfg.max_line_bytes,
                restart_policy=policy,
                restart_idle=restart_idle,
            ),
        )
        if reranker is None:
            yield host, None
            return
        async with reranker:
            yield host, reranker
