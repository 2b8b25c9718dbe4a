"""Opening one provider's connection: the I/O of a start, and nothing of its bookkeeping.

Owns how a start runs (``PoolSettings``), spawning and handshaking a child process
(its binding client is the binding registry's, the MCP one imported only when asked
for, by the registry),
and each remote provider's endpoint: made on its first start, its token source
read again at each handshake and when the file changes (C7), never shown (C8),
kept for the pool's life so its pooled HTTP client is reused across handshakes
and requests; while a refusal parks it, its credential is read again at each
request (``credential_changed``), and a refusal met mid-leg is handed to the pool
(``take_refusal``). Each provider has one ``Redactor`` for the pool's life (C8): the
values of its secret-named ``env`` entries and every token its source reads, scrubbed
from its stderr and from every error its connection raises. It records no health
and decides no restart: ``ProviderPool`` (``_pool``) calls ``Launcher.open`` and
records what came of it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup

from hostd.errors import ProviderCrashed, ProviderUnauthorized
from hostd.protocol import HostInfo
from hostd.transport import (
    DEFAULT_MAX_LINE_BYTES,
    REDACTED,
    OnProgress,
    ProviderConnection,
    ProviderLink,
    Redactor,
    RemoteConnection,
    RemoteEndpoint,
    StderrPolicy,
    TokenSource,
    secret_env_values,
    shown_url,
)

from ._health import RestartPolicy
from ._spec import ProviderSpec

__all__ = ["Launcher", "PoolSettings", "provider_section"]


def provider_section(provider_id: str) -> str:
    """What a remote provider's TLS keys are named after in what it says (``[[provider]]
    'team-search' ca_file``): a config may hold several remote providers, and a
    reranker's keys are ``[reranker] ``'s."""
    return f"[[provider]] {provider_id!r} "


@dataclass(slots=True, frozen=True)
class PoolSettings:
    """How the pool starts and stops providers."""

    start: str = "lazy"
    host_info: HostInfo | None = None
    #: A start's deadline (spawn and handshake), unless the provider's spec names its own;
    #: a request naming no timeout also waits up to it for the provider to be ready.
    start_timeout_s: float = 30.0
    grace_period_s: float = 2.0
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    restart_policy: RestartPolicy = RestartPolicy()
    stderr_policy: StderrPolicy | None = None
    #: The clock health decisions read (default ``anyio.current_time``); tests pass
    #: their own to move a parked provider past its cool-down without waiting it out.
    clock: Callable[[], float] | None = None
    #: The config file the specs came from, named in the command a hint gives
    #: (``hostd --config PATH check-provider --provider ID``): a command run from
    #: another directory, or under another ``$HOSTD_CONFIG``, would find another one.
    config_file: str | None = None
    #: Start a provider that is down again on its own, with no request asking, once its
    #: backoff (or, parked, its cool-down) has passed (``ProviderPool._revive``): a
    #: long-running host's (``hostd serve``, ``hostd mcp``). Off, a one-shot command's
    #: provider starts again only when a request needs it.
    restart_idle: bool = False
    #: The providers a ``boot`` start starts (``None``: all): a one-shot command's
    #: request names its providers, and one it cannot reach is not waited for.
    boot_only: frozenset[str] | None = None


class Launcher:
    """Spawns and handshakes providers for one pool; holds its remote endpoints."""

    def __init__(self, settings: PoolSettings, host_info: HostInfo) -> None:
        self.settings = settings
        self.host_info = host_info
        self._remotes: dict[str, RemoteEndpoint] = {}
        self._redactors: dict[str, Redactor] = {}
        #: The redactors that can hold a credential: a provider's with a secret ``env``
        #: value or a bearer token to read. With none, ``credentials`` asks nothing.
        self._guarded: list[Redactor] = []
        self._credential_key: list[str] = []
        self._credential_re: re.Pattern[str] | None = None

    def credentials(self) -> re.Pattern[str] | None:
        """One pattern matching any credential of any provider this host has opened (its
        ``env`` secrets, a remote one's bearer token once read), or None when there is
        none: what no frame may carry into a prompt, whoever served it (a ``files``
        provider over a directory that holds another provider's ``token_file``)."""
        if not self._guarded:  # no credential configured: nothing to look for, at no cost
            return None
        known = sorted({s for r in self._guarded for s in r.secrets})
        if not known:
            return None
        if known != self._credential_key:
            self._credential_key = known
            ordered = sorted(known, key=len, reverse=True)
            self._credential_re = re.compile("|".join(map(re.escape, ordered)))
        return self._credential_re

    def redactor(self, spec: ProviderSpec) -> Redactor:
        """The provider's one redaction point, made once (its secrets only grow)."""
        redactor = self._redactors.get(spec.id)
        if redactor is None:
            secrets = secret_env_values(spec.env)
            redactor = self._redactors[spec.id] = Redactor(secrets)
            if secrets or spec.token_file is not None or spec.token_env is not None:
                self._guarded.append(redactor)
        return redactor

    async def open(
        self,
        spec: ProviderSpec,
        *,
        task_group: TaskGroup,
        handshake_timeout: float,
        on_progress: OnProgress,
    ) -> ProviderLink:
        """Spawn (or reach) the provider and handshake it within ``handshake_timeout``
        (the transport's own bound, as its ``open`` names it); a failure is the typed
        ``HostdError`` the transport raised (a provider's command that could not run
        also names the check that tries it alone)."""
        s = self.settings
        if spec.remote:
            return await RemoteConnection.open(
                self.endpoint(spec), host=self.host_info, handshake_timeout=handshake_timeout
            )
        try:
            return await ProviderConnection.open(
                spec.id,
                spec.command,
                task_group=task_group,
                binding=spec.binding,
                env=spec.env,
                cwd=spec.cwd,
                host=self.host_info,
                handshake_timeout=handshake_timeout,
                grace=s.grace_period_s,
                max_line_bytes=s.max_line_bytes,
                stderr_policy=s.stderr_policy,
                options=spec.options,
                on_progress=on_progress,
                redactor=self.redactor(spec),
                optional_handshake=spec.optional_handshake,
            )
        except ProviderCrashed as exc:
            # A command that could not run: once fixed, check-provider runs it as the
            # daemon does (its cwd and env) and says more than a failed leg can. Not a
            # reranker's: check-provider drives providers only.
            if exc.data.get("stage") != "start" or spec.optional_handshake:
                raise
            config = "" if s.config_file is None else f"--config {shlex.quote(s.config_file)} "
            check = f"hostd {config}check-provider --provider {shlex.quote(spec.id)}"
            alone = f"then `{check}` tries it alone"
            raise ProviderCrashed(f"{exc.message}; {alone}", **exc.data) from exc

    def endpoint(
        self, spec: ProviderSpec, *, wire: str | None = None, section: str | None = None
    ) -> RemoteEndpoint:
        """The remote provider's endpoint, made once (C7 is checked before it exists).
        ``wire``: what the peer speaks when it is on no CGP binding (a rerank server);
        ``section``: what its TLS keys are named after in what it says (``[reranker] ``;
        ``""``: none, keys given another way), by default its own ``[[provider]]``
        section's (``provider_section``)."""
        endpoint = self._remotes.get(spec.id)
        if endpoint is None:
            assert spec.url is not None
            endpoint = self._remotes[spec.id] = RemoteEndpoint(
                spec.id,
                spec.url,
                binding=spec.binding,
                wire=wire,
                # read at each handshake; every token read is scrubbed from what it says
                tokens=TokenSource(spec.token_file, spec.token_env, redactor=self.redactor(spec)),
                ca_file=spec.ca_file,
                client_cert=spec.client_cert,
                client_key=spec.client_key,
                max_body_bytes=self.settings.max_line_bytes,
                max_connections=spec.max_connections,
                user_agent=f"{self.host_info.name}/{self.host_info.version}",
                section=provider_section(spec.id) if section is None else section,
            )
        return endpoint

    def credential_changed(self, spec: ProviderSpec) -> bool:
        """Whether a remote provider's credential source now gives another credential
        than the one its server refused (a token file rewritten, or back)."""
        endpoint = self._remotes.get(spec.id)
        return endpoint is not None and endpoint.credential_changed()

    @staticmethod
    def take_refusal(conn: ProviderLink | None) -> ProviderUnauthorized | None:
        """The refusal of its credential a remote connection met (HTTP 401/403, or none
        could be read), taken once; ``None`` for any other connection."""
        if not isinstance(conn, RemoteConnection):
            return None
        refusal, conn.refusal = conn.refusal, None
        return refusal

    def describe_remote(self, spec: ProviderSpec) -> dict[str, Any]:
        """``providers/list``'s ``remote`` member: the URL and "<redacted>", never the
        credential (C8), also before the first start made the endpoint."""
        endpoint = self._remotes.get(spec.id)
        if endpoint is not None:
            return endpoint.describe()
        shown = REDACTED if spec.token_file is not None or spec.token_env is not None else None
        return {"url": shown_url(spec.url or ""), "credential": shown}

    async def forget(self, provider_id: str) -> None:
        """Drop what was made for a provider a reload took out (its remote endpoint's
        pooled client, closed; its redactor): a provider of the same id added back is
        made anew from its new spec."""
        redactor = self._redactors.pop(provider_id, None)
        if redactor is not None and redactor in self._guarded:
            self._guarded.remove(redactor)
        endpoint = self._remotes.pop(provider_id, None)
        if endpoint is not None:
            await endpoint.aclose()

    async def aclose(self) -> None:
        """Close every remote endpoint's pooled client (the pool is ending)."""
        for endpoint in self._remotes.values():
            await endpoint.aclose()
