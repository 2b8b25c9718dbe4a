"""TOML config → validated settings.

Owns the config file format, its pydantic validation, and the translation of
every problem into a ``ConfigError`` that names the file, the key and what is
wrong — never a stack trace. Which file is read is ``hostd._discovery``'s
(``--config``, ``$HOSTD_CONFIG``, the nearest ``hostd.toml``, the user's, the
embedded default inside the package). Relative paths in a file are resolved
against that file's directory. Nothing here starts processes or opens sockets.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.util
import json
import os
import pkgutil
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hostd._defaults import (
    DEFAULT_WAIT_S,
    HOST_OVERFETCH,
    HOST_START_TIMEOUT_S,
    PROVIDER_TIMEOUT_MS,
)
from hostd._discovery import CONFIG_NAME, EMBEDDED_CONFIG, find_config
from hostd.errors import ConfigError, did_you_mean
from hostd.protocol import is_loopback_host, sha256_digest

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_WAIT_S",
    "RERANK_SERVER_TIMEOUT_MS",
    "Config",
    "ConfigError",
    "HostSettings",
    "LogSettings",
    "McpSettings",
    "McpToolSettings",
    "ProviderSettings",
    "RerankerSettings",
    "ShadowSettings",
    "TcpSettings",
    "default_socket_path",
    "default_state_dir",
    "discover_log_file",
    "discover_socket",
    "discover_state_dir",
    "logs_to_stderr",
    "find_config",
    "open_secret_files",
    "secret_file_open",
    "secret_file_words",
    "secret_files_open",
    "load_config",
    "parse_config",
    "provider_command",
]

#: The embedded default (package data): no provider, the host's defaults.
DEFAULT_CONFIG_PATH = EMBEDDED_CONFIG

_PYTHON_NAMES = frozenset({"python", "python3"})


#: What a socket's name keeps of a config file's stem (the rest becomes ``_``).
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def default_socket_path(config_file: str | os.PathLike[str] | None = None) -> Path:
    """The socket of a daemon whose config names none, in ``$XDG_RUNTIME_DIR/hostd``
    (else ``/tmp/hostd-<uid>``): ``<stem>-<digest>.sock`` for ``config_file`` (the
    digest of its real absolute path, so two projects' daemons never share one and
    every name of the same file finds the same); ``hostd.sock`` with no file (the
    embedded default, a config built in code)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "hostd" if runtime else Path(f"/tmp/hostd-{os.getuid()}")
    if config_file is None:
        return base / "hostd.sock"
    real = os.path.realpath(config_file)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    # A Unix socket's path is short (about 108 bytes): the stem is capped.
    stem = _UNSAFE_NAME.sub("_", Path(real).stem)[:32] or "hostd"
    return base / f"{stem}-{digest}.sock"


def _own_file(file: Path) -> Path | None:
    """``file`` when its daemon gets a socket of its own; None for the embedded default."""
    return None if os.path.realpath(file) == os.path.realpath(EMBEDDED_CONFIG) else file


def _table(file: Path, name: str) -> dict[str, Any]:
    """The ``[name]`` table of a config file, read raw (nothing else validated)."""
    file = file.absolute()  # named in errors as load_config names it, wherever it is read
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{file}: no such config file", file=str(file), key=None, problem="not found"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"{file}: cannot read: {exc}", file=str(file), key=None, problem=str(exc)
        ) from None
    table = raw.get(name)
    return table if isinstance(table, dict) else {}


def discover_socket(
    config: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> Path:
    """The socket ``hostd serve`` listens on with the config discovery finds (``config``,
    else ``$HOSTD_CONFIG``, the nearest ``hostd.toml`` from ``cwd``, …): its
    ``host.socket``, else its default (``default_socket_path``). Reads only that key, so
    a client needs nothing the daemon's providers need."""
    file = find_config(config, cwd=cwd).path
    try:
        named = _table(file, "host").get("socket")
    except ConfigError as exc:
        # Not TOML (an edit under way, a typo): the one line that names it, if any,
        # so status and stop still reach the daemon that file started.
        if not isinstance(exc.__context__, tomllib.TOMLDecodeError):
            raise
        named = _socket_line(file.read_text(encoding="utf-8", errors="replace"))
    if isinstance(named, str) and named:
        return _resolve(named, file.resolve().parent)
    return default_socket_path(_own_file(file))


_TABLE_LINE = re.compile(r"\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(?:#.*)?$")
_SOCKET_LINE = re.compile(r"\s*socket\s*=\s*(\"[^\"\n]*\"|'[^'\n]*')\s*(?:#.*)?$")


def _socket_line(text: str) -> str | None:
    """``host.socket`` as one line of a file that is not valid TOML as a whole names
    it: the ``socket = "…"`` line under ``[host]``; None when there is none."""
    table = ""
    for line in text.splitlines():
        header = _TABLE_LINE.match(line)
        if header is not None:
            table = header.group(1)
            continue
        found = _SOCKET_LINE.match(line) if table == "host" else None
        if found is not None:
            try:
                value = tomllib.loads(f"v = {found.group(1)}")["v"]
            except tomllib.TOMLDecodeError:
                return None
            return value if isinstance(value, str) else None
    return None


def logs_to_stderr(
    config: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> bool:
    """Whether ``hostd serve`` with the config discovery finds writes its log to stderr
    (no ``[log] file``). Reads only that key; a file that cannot be read says yes (the
    daemon would then fail at start, on stderr)."""
    try:
        named = _table(find_config(config, cwd=cwd).path, "log").get("file")
    except ConfigError:
        return True
    return not (isinstance(named, str) and named)


def discover_log_file(
    config: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> Path | None:
    """The ``log.file`` of the config discovery finds, resolved as ``load_config``
    resolves it (against the file's directory), read raw: a file that does not validate
    may still name it. None when it names none or cannot be read as TOML."""
    try:
        file = find_config(config, cwd=cwd).path
        named = _table(file, "log").get("file")
    except ConfigError:
        return None
    if not (isinstance(named, str) and named):
        return None
    return _resolve(named, file.resolve().parent)


def discover_state_dir(
    config: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> Path:
    """The state directory of the config discovery finds: its ``host.state_dir``, else
    the global one (``default_state_dir``). Reads only that key, as ``discover_socket``."""
    file = find_config(config, cwd=cwd).path
    named = _table(file, "host").get("state_dir")
    if isinstance(named, str) and named:
        return _resolve(named, file.resolve().parent)
    return default_state_dir()


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/hostd``, else ``~/.local/state/hostd``."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else Path.home() / ".local" / "state"
    return base / "hostd"


def _trusted_root(value: Path) -> Path:
    """A trusted root is a directory there at load. A misspelt or missing one would
    load and then drop every frame of its provider as ``untrusted_source`` (F5), with
    nothing to say the root is why; a root is not made later by hostd or a provider."""
    if not value.is_dir():
        what = "not a directory" if value.exists() else "no such directory"
        raise ValueError(
            f"{what}: {value} (a trusted root must be an existing directory; a relative "
            "one reads against the config file's directory)"
        )
    return value


#: A ``trusted_roots`` entry (resolved by ``_absolutise``, checked by ``_trusted_root``).
_TrustedRoot = Annotated[Path, AfterValidator(_trusted_root)]


class _Section(BaseModel):
    # A misspelt key must fail loudly, not be ignored: this is our own file, not a peer's wire.
    model_config = ConfigDict(extra="forbid", frozen=True)


class HostSettings(_Section):
    socket: Path | None = None
    state_dir: Path | None = None
    default_budget: Annotated[int, Field(gt=0, le=10_000_000)] = 4000
    #: Each provider is asked for ``min(budget, ceil(share * overfetch))`` tokens: above
    #: 1 the providers together offer more than the budget and the ranking policy decides
    #: what gets in. A request's ``overfetch`` param overrides it.
    overfetch: Annotated[float, Field(ge=1.0, le=1000.0, allow_inf_nan=False, strict=True)] = (
        HOST_OVERFETCH
    )
    #: "boot": every provider starts with the daemon (its index builds before the first
    #: request asks); "lazy": a provider starts on its first query.
    start_providers: Literal["lazy", "boot"] = "boot"
    #: Seconds a provider's start (spawn and handshake) may take before it is killed; a
    #: request naming no ``timeout_ms`` waits up to this for a provider to be ready.
    start_timeout_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = (
        HOST_START_TIMEOUT_S
    )
    #: Seconds in-flight requests get to finish after a stop is requested.
    grace_period_s: Annotated[float, Field(ge=0, le=3600)] = 10.0
    #: Seconds between checks that the Unix socket file is still this daemon's. One that
    #: was removed or replaced stops a daemon the socket was the only way into; 0: never.
    socket_check_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 5.0
    #: Per-connection limits (protocol.md framing: an over-long line is the peer's fault).
    max_line_bytes: Annotated[int, Field(ge=1024, le=1 << 30)] = 8 * 1024 * 1024
    max_in_flight: Annotated[int, Field(ge=1, le=100_000)] = 64
    max_batch: Annotated[int, Field(ge=1, le=100_000)] = 1024
    max_connections: Annotated[int, Field(ge=1, le=100_000)] = 1024
    #: Seconds a TCP client has to send ``$/authenticate`` before it is closed.
    auth_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    #: Roots under which any provider's ``file`` provenance may be re-read (F5, F17).
    trusted_roots: list[_TrustedRoot] = Field(default_factory=list)
    #: A frame whose ``file`` provenance resolves outside every trusted root: "exclude"
    #: it (audit reason ``untrusted_source``) or "include" it marked ``unverifiable``.
    untrusted: Literal["exclude", "include"] = "exclude"
    #: Span merging: a candidate made of touching line ranges of one source holds at most
    #: this many times the bytes of its largest member (so no merge pulls in a whole file).
    merge_max_ratio: Annotated[float, Field(ge=1.0, le=1000.0, allow_inf_nan=False)] = 2.0
    #: A Hugging Face ``tokenizer.json``: the budget then counts the prompt in that
    #: model's tokens (unset: canonical tokens, B3: UTF-8 bytes / 4).
    tokenizer: Path | None = None
    #: The ranking policy of a composition that names none: any ``strategy`` spelling a
    #: request may give (``"rrf"``, ``"quota:2"``, ``{"rrf": {"k": 60}}``). Unset:
    #: ``score``. A request's ``strategy`` (``--strategy``) overrides it.
    strategy: str | dict[str, Any] | None = None

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if value is not None:
            from hostd.compose import strategy_from_wire  # imported late, as the transport

            try:
                strategy_from_wire(value)  # its ValueError names the spellings
            except TypeError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_file(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        if value.is_dir():
            inside = value / "tokenizer.json"
            hint = (
                f": name the file, {inside}"
                if inside.is_file()
                else ": name the model's tokenizer.json file"
            )
            raise ValueError(f"{value} is a directory, not a tokenizer.json{hint}")
        if not value.is_file():
            raise ValueError(
                f"no such file: {value} (the path of a Hugging Face tokenizer.json, such as "
                "the one a model ships beside its weights; an encoding name such as "
                "cl100k_base is not one: docs/api.md#what-the-budget-counts)"
            )
        if importlib.util.find_spec("tokenizers") is None:
            raise ValueError(
                'needs the tokenizers library: pip install "/path/to/hostd[tokenizer]" '
                "(a checkout or a wheel)"
            )
        return value

    #: A crashed provider's first restart waits this long, each further failure in a row
    #: twice as long (at most ``restart_backoff_max_s``), until its ``restart_attempts``
    #: are spent (by default 0.5, 1, 2 and 4 s: 7.5 s in all).
    restart_backoff_s: Annotated[float, Field(ge=0, le=60, allow_inf_nan=False)] = 0.5
    #: The longest of those waits: not below ``restart_backoff_s`` when set (left to its
    #: default, it rises to a larger ``restart_backoff_s``).
    restart_backoff_max_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 5.0
    #: Failed starts or crashes in a row before a provider is parked (``failed``): a
    #: flaky provider may be given more; at least one (its first failure parks it).
    restart_attempts: Annotated[int, Field(ge=1, le=1000)] = 5
    #: A provider whose restart attempts are spent is started again this many seconds
    #: after its last failure (one attempt per cool-down); 0: only ``providers/restart``.
    retry_failed_after_s: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = 60.0
    #: Each of those retries that fails in a row doubles the cool-down, up to this: not
    #: below ``retry_failed_after_s`` when set (left to its default, it rises to a larger
    #: ``retry_failed_after_s``).
    retry_failed_max_s: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = 3600.0

    @field_validator("restart_backoff_max_s")
    @classmethod
    def _cap_not_below_base(cls, value: float, info: ValidationInfo) -> float:
        """A cap the file sets below the base backoff is a contradiction, said with the
        key (run only for a value the file gives: the default rises to the base)."""
        base = info.data.get("restart_backoff_s")
        if base is not None and value < base:
            raise ValueError(
                f"below restart_backoff_s ({base:g}): the longest wait between restarts "
                "cannot be shorter than the first; raise it or lower restart_backoff_s"
            )
        return value

    @field_validator("retry_failed_max_s")
    @classmethod
    def _cool_down_cap_not_below_first(cls, value: float, info: ValidationInfo) -> float:
        """A cap the file sets below the first cool-down is a contradiction, said with the
        key (run only for a value the file gives: the default rises to the first)."""
        first = info.data.get("retry_failed_after_s")
        if first is not None and value < first:
            raise ValueError(
                f"{value:g} is below retry_failed_after_s ({first:g}): the longest cool-down "
                "cannot be shorter than the first; raise it or lower retry_failed_after_s"
            )
        return value


class TcpSettings(_Section):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    #: The bearer token, or the path of a file holding it (one of them when enabled).
    token: str | None = None
    token_file: Path | None = None


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    #: JSON lines go here instead of stderr when set (created mode 0600).
    file: Path | None = None
    #: Per-composition audit in the log: "summary" writes one ``compose.audit.summary``
    #: (counts) and per-entry ``compose.audit`` events at debug only; "sample" adds a
    #: share ``audit_sample`` of the entries at info; "entries" writes every entry at info.
    audit: Literal["summary", "sample", "entries"] = "summary"
    audit_sample: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.05
    #: ``log.file`` is rotated once it reaches this size (0: never), keeping ``backups``.
    max_bytes: Annotated[int, Field(ge=0, le=1 << 40)] = 64 * 1024 * 1024
    backups: Annotated[int, Field(ge=0, le=1000)] = 5


class ShadowSettings(_Section):
    """Shadow ranking (opt-in): a sample of compositions recorded to ``state_dir/shadow.db``."""

    enabled: bool = False
    #: Share of ``context/compose`` requests recorded, in [0, 1].
    sample: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.1
    #: Keep frame content and the goal; otherwise only their digests are stored.
    store_content: bool = False
    #: Bounds: the newest requests kept, the stored bytes, and the age in days.
    max_requests: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    max_bytes: Annotated[int, Field(ge=4096, le=1 << 34)] = 64 * 1024 * 1024
    retention_days: Annotated[float, Field(gt=0, le=3650, allow_inf_nan=False)] = 7.0


def _remote_url(value: str | None) -> str | None:
    """A ``url`` key's check (C7, judged on the text only), for every section that has one."""
    if value is not None:
        from hostd.transport import remote_url_problem

        problem = remote_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
    return value


#: ``[reranker] timeout_ms`` when a ``url`` is set and the key is not: a cross-encoder
#: server (Infinity, TEI) on a CPU takes 2-4 s for 15 candidates, and more on a loaded
#: machine or with several compositions at once, where the process reranker's 1.5 s
#: suits the bundled reranker (a small model, loaded once, beside the daemon). Too short a
#: deadline makes every ``rerank`` composition a ``round_robin`` one; too long costs only
#: while a server hangs, which its cool-down bounds (three deadlines, then one per
#: cool-down). A server on a GPU answers in well under a second either way.
RERANK_SERVER_TIMEOUT_MS = 10_000


class RerankerSettings(_Section):
    """``[reranker]``: what orders the candidates before composition (``rerank``): a
    process (``command``) or a standard rerank server (``url``, docs/eval.md)."""

    #: Its argv (unset, and no ``url``: no reranker; ``rerank`` then falls back to
    #: ``round_robin``).
    command: Annotated[list[str], Field(min_length=1)] | None = None
    #: A rerank server instead of a process: https:// (http:// to loopback only, C7).
    url: str | None = None
    #: The server's API: ``cohere`` (``{model, query, documents, top_n}`` →
    #: ``results[].index, relevance_score``; Infinity, vLLM, Jina, Cohere) or ``tei``
    #: (text-embeddings-inference: ``{query, texts, truncate}`` → ``[{index, score}]``).
    api: Literal["cohere", "tei"] = "cohere"
    #: The model the server is asked for (``cohere``) and the audit names.
    model: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    #: The server's bearer credential (C8), its private CA, mutual TLS, its connections.
    token_file: Path | None = None
    token_env: Annotated[str, Field(min_length=1)] | None = None
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    max_connections: Annotated[int, Field(ge=1, le=1024)] = 4
    #: Documents per request at most (a server's own cap: TEI's default is 32); more
    #: candidates are scored in several requests at once (unset: one request).
    batch_size: Annotated[int, Field(ge=1, le=10_000)] | None = None
    #: A server that gives no answer (no connection, a timeout, a 5xx or 429) this many
    #: times in a row is not asked for ``cool_down_ms``, doubled after each failed try
    #: up to ``max_cool_down_ms``, then asked once (0: asked every time).
    cool_down_after: Annotated[int, Field(ge=0, le=1000)] = 3
    cool_down_ms: Annotated[int, Field(gt=0, le=86_400_000)] = 1000
    max_cool_down_ms: Annotated[int, Field(gt=0, le=86_400_000)] = 60_000
    #: How long a composition waits for its verdict (its start included); unset with a
    #: ``url``: ``RERANK_SERVER_TIMEOUT_MS`` (a cross-encoder server on a CPU takes seconds).
    timeout_ms: Annotated[int, Field(gt=0, le=600_000)] = 1500
    #: Its start deadline (the handshake, after its model has loaded), off the request path.
    start_timeout_ms: Annotated[int, Field(gt=0, le=3_600_000)] = 60_000
    #: Candidates shown to it at most: the best by the fallback policy (``round_robin``).
    max_candidates: Annotated[int, Field(ge=1, le=10_000)] = 100
    #: The fan-out's overfetch when ``rerank`` composes (unset: ``host.overfetch``).
    overfetch: Annotated[float, Field(ge=1.0, le=1000.0, allow_inf_nan=False)] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None

    _safe_url = field_validator("url")(_remote_url)

    @model_validator(mode="before")
    @classmethod
    def _server_timeout(cls, data: Any) -> Any:
        """A rerank server's own ``timeout_ms`` default (``RERANK_SERVER_TIMEOUT_MS``)."""
        if isinstance(data, dict) and data.get("url") is not None and "timeout_ms" not in data:
            return {**data, "timeout_ms": RERANK_SERVER_TIMEOUT_MS}
        return data

    @model_validator(mode="after")
    def _command_or_url(self) -> RerankerSettings:
        if self.command is not None and self.url is not None:
            raise ValueError("give command or url, not both")
        given = self.model_fields_set
        if self.url is None:
            remote = [k for k in _RERANK_SERVER_KEYS if k in given]
            if remote:
                raise ValueError(f"{', '.join(remote)}: only for a rerank server (url)")
        else:
            local = [k for k in ("env", "cwd", "start_timeout_ms") if k in given]
            if local:
                raise ValueError(f"{', '.join(local)}: only for a reranker process (command)")
        if self.token_file is not None and self.token_env is not None:
            raise ValueError("give token_file or token_env, not both")
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("client_cert and client_key go together")
        return self


#: ``[reranker]`` keys that only a rerank server (``url``) reads.
_RERANK_SERVER_KEYS = (
    "api",
    "model",
    "token_file",
    "token_env",
    "ca_file",
    "client_cert",
    "client_key",
    "max_connections",
    "batch_size",
    "cool_down_after",
    "cool_down_ms",
    "max_cool_down_ms",
)


class McpToolSettings(_Section):
    """One tool a ``binding = "mcp"`` provider calls per query, with its arguments."""

    name: Annotated[str, Field(min_length=1)]
    #: String values may hold ``{query}`` (the query text) and ``{goal}``.
    arguments: dict[str, Any] = Field(default_factory=dict)
    #: Offer its answer's head even when none of it matches the goal: context wanted
    #: whatever is asked (the current time). Without it, only a tool whose arguments
    #: carry ``{query}`` or ``{goal}`` (the server chose its answer for the goal) is.
    always: bool = False


class McpSettings(_Section):
    """``[provider.mcp]``: what a ``binding = "mcp"`` provider serves as frames (docs/mcp.md)."""

    #: Read the server's resources (``resources/list`` then ``resources/read``).
    resources: bool = True
    #: Only resources whose URI starts with one of these (empty: every resource).
    uri_prefixes: list[str] = Field(default_factory=list)
    #: At most this many resources are read per listing (the rest: ``truncated``).
    max_resources: Annotated[int, Field(ge=1, le=100_000)] = 256
    #: One tool called per query; string values in ``arguments`` may hold ``{query}``
    #: (the query text) and ``{goal}``. ``tools`` names more (each with its arguments).
    tool: Annotated[str, Field(min_length=1)] | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    tools: list[McpToolSettings] = Field(default_factory=list)
    #: The frame kind every frame of this provider gets.
    kind: Annotated[str, Field(min_length=1, max_length=64)] = "doc"
    #: Seconds a listing or a read is reused when the server gives no ``ttlMs``.
    cache_ttl_s: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = 30.0
    #: The read cache's bounds: listings and reads kept at most, and their bytes
    #: (least recently used out first).
    cache_max_entries: Annotated[int, Field(ge=1, le=1_000_000)] = 1024
    cache_max_bytes: Annotated[int, Field(ge=0, le=1 << 34)] = 64 * 1024 * 1024
    #: The server sends data off the machine: it needs consent (C1, C6) like any such
    #: provider; ``egress_scopes`` names where to (default: the generic ``egress``).
    egress: bool = False
    egress_scopes: list[str] = Field(default_factory=list)

    def egress_problem(self, provider_id: str) -> str | None:
        """Why these settings may not run as provider ``provider_id``: a tool argument
        sends the query off this machine (``_query_sent_off``) and ``egress`` does not
        say so (C1); ``None`` when none does or it does. The config's load and
        ``hostd check-provider --binding mcp`` refuse with the same words."""
        sent = None if self.egress else _query_sent_off(self)
        if sent is None:
            return None
        key, placeholder, host = sent
        return (
            f"mcp.{key} puts {placeholder} into a URL to {host}, off this machine, "
            "so the server sends it there: set egress = true in the mcp table (a "
            f"query is then sent once you grant it: hostd consent grant {provider_id} egress)"
        )


# A URL in a string (a scheme, then up to a space or a quote): where a ``fetch`` tool
# would send what ``{query}`` or ``{goal}`` fills in.
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]*")
_PLACEHOLDERS = ("{query}", "{goal}")


def _query_sent_off(mcp: McpSettings) -> tuple[str, str, str] | None:
    """The first tool argument that puts the query into a URL whose host is not this
    machine: its key under the mcp table, the placeholder and that host; ``None`` when
    none does.

    A tool that is given the query is no egress by itself: a local server (a code
    search, a notes store) keeps it here, and hostd cannot know where a server sends
    what it gets. A URL template says where, as a ``fetch`` tool's ``url =
    "https://search.example/?q={query}"`` does: the goal leaves the machine, which
    ``egress`` must declare (C1). Judged on the text, as C7 judges a provider's URL:
    loopback (``is_loopback_host``) and a URL with no host (``file:///``) stay here."""
    calls = [
        ("arguments", mcp.arguments),
        *((f"tools[{n}].arguments", t.arguments) for n, t in enumerate(mcp.tools)),
    ]
    for key, arguments in calls:
        for at, value in _strings(arguments, key):
            for url in _URL_RE.findall(value):
                placeholder = next((p for p in _PLACEHOLDERS if p in url), None)
                host = _url_host(url)
                if placeholder is not None and host and not is_loopback_host(host):
                    return at, placeholder, host
    return None


def _url_host(url: str) -> str:
    """A URL's host (``""`` for none), without the user and password it may name, which
    an error must never show, nor the port."""
    authority = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
    host = authority.rpartition("@")[2]
    if host.startswith("["):  # an IPv6 address: its colons are no port's
        return host.partition("]")[0] + "]"
    return host.partition(":")[0].lower()


def _strings(value: object, key: str) -> Iterator[tuple[str, str]]:
    """Every string in ``value`` at any depth, as ``render_arguments`` fills them, with
    its key (``arguments.url``, ``tools[1].arguments.urls[0]``)."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            name = k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)
            yield from _strings(v, f"{key}.{name}")
    elif isinstance(value, list):
        for n, v in enumerate(value):
            yield from _strings(v, f"{key}[{n}]")


class ProviderSettings(_Section):
    id: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")]
    #: A child process's argv, or ``url``: a remote provider (docs/remote.md).
    command: Annotated[list[str], Field(min_length=1)] | None = None
    #: A registered binding's name (``hostd.transport.binding_names()``).
    binding: str = "jsonrpc"
    timeout_ms: Annotated[int, Field(gt=0, le=3_600_000)] = PROVIDER_TIMEOUT_MS
    weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1.0
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    trusted_roots: list[_TrustedRoot] = Field(default_factory=list)
    #: Overrides ``host.untrusted`` for this provider's frames.
    untrusted: Literal["exclude", "include"] | None = None
    #: Overrides ``host.start_timeout_s`` for this provider.
    start_timeout_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] | None = None
    #: ``binding = "mcp"`` only: what the MCP server's resources and tool become.
    mcp: McpSettings | None = None

    @field_validator("binding")
    @classmethod
    def _registered(cls, value: str) -> str:
        from hostd.transport import binding_problem  # imported late, as remote_url_problem

        problem = binding_problem(value)  # the binding registry: known, its extra installed
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _mcp_table(self) -> ProviderSettings:
        if self.mcp is not None and self.binding != "mcp":
            raise ValueError('mcp: only for binding = "mcp"')
        egress = self.mcp.egress_problem(self.id) if self.mcp is not None else None
        if egress is not None:
            raise ValueError(egress)
        # The binding registry decides whether it may be remote.
        from hostd.transport import binding_problem

        problem = binding_problem(self.binding, remote=self.url is not None)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The binding's own settings, as the engine's ``ProviderSpec.options``."""
        if self.binding != "mcp":
            return {}
        return (self.mcp or McpSettings()).model_dump()

    #: A remote provider (docs/remote.md): https:// (http:// to loopback only, C7),
    #: its bearer credential from a file or a variable (C8), a private CA, mutual TLS.
    url: str | None = None
    token_file: Path | None = None
    token_env: Annotated[str, Field(min_length=1)] | None = None
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    max_connections: Annotated[int, Field(ge=1, le=1024)] | None = None

    @field_validator("command")
    @classmethod
    def _non_empty_words(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not word for word in value):
            raise ValueError("command words must be non-empty strings")
        return value

    _safe_url = field_validator("url")(_remote_url)

    @model_validator(mode="after")
    def _command_or_url(self) -> ProviderSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command or url")
        remote_only = ("token_file", "token_env", "ca_file", "client_cert", "client_key")
        if self.url is None:
            given = [k for k in (*remote_only, "max_connections") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only for a remote provider (url)")
        if self.token_file is not None and self.token_env is not None:
            raise ValueError("give token_file or token_env, not both")
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("client_cert and client_key go together")
        return self


class Config(_Section):
    host: HostSettings = Field(default_factory=HostSettings)
    tcp: TcpSettings = Field(default_factory=TcpSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    shadow: ShadowSettings = Field(default_factory=ShadowSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    provider: list[ProviderSettings] = Field(default_factory=list)
    #: Where this config came from ("<defaults>" when built in code).
    source: str = Field(default="<defaults>", exclude=True)
    #: What discovery looked at before ``source`` (empty when it was named or nearest).
    searched: tuple[str, ...] = Field(default=(), exclude=True)
    #: The file loaded, when its daemon's default socket is its own (not the embedded
    #: default's, not a config built in code): ``default_socket_path``.
    file: Path | None = Field(default=None, exclude=True)
    #: ``sha256:<hex>`` of the bytes ``load_config`` parsed (None when built in code): what
    #: a running daemon was started from, whatever the file holds later.
    digest: str | None = Field(default=None, exclude=True)

    @field_validator("provider")
    @classmethod
    def _unique_ids(cls, value: list[ProviderSettings]) -> list[ProviderSettings]:
        seen: set[str] = set()
        for spec in value:
            if spec.id in seen:
                raise ValueError(f"duplicate provider id {spec.id!r}")
            seen.add(spec.id)
        return value

    @model_validator(mode="after")
    def _strategy_names_providers(self) -> Config:
        """A default strategy's weights name configured providers, as a request's must."""
        if self.host.strategy is not None and self.provider:
            from hostd.compose import strategy_from_wire

            weights = getattr(strategy_from_wire(self.host.strategy), "weights", None) or {}
            ids = [p.id for p in self.provider]
            unknown = sorted(set(weights) - set(ids))
            if unknown:
                raise ValueError(
                    f"host.strategy: weights name {unknown}, not configured providers "
                    f"({', '.join(ids)})"
                )
        return self

    def no_providers(self) -> str:
        """Why no provider can answer: the file used, where else was looked, the way out."""
        where = self.source
        if where == str(DEFAULT_CONFIG_PATH):
            where += " (the embedded default)"
        searched = f"; searched {', '.join(self.searched)}" if self.searched else ""
        return (
            f"no providers configured in {where}{searched}; run `hostd init` in your "
            f"project to write its {CONFIG_NAME}, or add a [[provider]] (docs/config.md)"
        )

    @property
    def socket_path(self) -> Path:
        """``host.socket``, else the default socket of this config's file."""
        return self.host.socket or default_socket_path(self.file)

    @property
    def state_path(self) -> Path:
        return self.host.state_dir or default_state_dir()

    def roots_of(self, provider_id: str) -> list[Path]:
        """The trusted roots a provider's ``file`` sources are re-read under, as the
        verify stage takes them: its own, then the host's unless it is remote (its paths
        name another machine's files, docs/remote.md)."""
        for p in self.provider:
            if p.id == provider_id:
                return [*p.trusted_roots, *(() if p.url else self.host.trusted_roots)]
        return []

    def tcp_token(self) -> str | None:
        """The bearer token for the TCP listener (read from ``token_file`` if given)."""
        if self.tcp.token:
            return self.tcp.token
        if self.tcp.token_file is not None:
            try:
                text = self.tcp.token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"{self.source}: tcp.token_file: cannot read {self.tcp.token_file}: "
                    f"{exc.strerror}",
                    file=self.source,
                    key="tcp.token_file",
                ) from exc
            return text or None
        return None

    def provider_specs(self) -> list[Any]:
        """The engine's ``ProviderSpec`` for every configured provider."""
        from hostd.engine import ProviderSpec  # imported late: config must load without it

        return [
            ProviderSpec(
                id=p.id,
                command=list(p.command or ()),
                binding=p.binding,
                timeout_ms=p.timeout_ms,
                weight=p.weight,
                env=dict(p.env),
                cwd=str(p.cwd) if p.cwd is not None else None,
                trusted_roots=[str(r) for r in p.trusted_roots],
                untrusted=p.untrusted,
                start_timeout_s=p.start_timeout_s,
                options=p.options,
                **_remote_fields(p),
            )
            for p in self.provider
        ]


def _remote_fields(p: ProviderSettings) -> dict[str, Any]:
    """A remote provider's keys for its ``ProviderSpec`` (none for a child process)."""
    keys = ("url", "token_file", "token_env", "ca_file", "client_cert", "client_key")
    out: dict[str, Any] = {k: getattr(p, k) for k in keys if getattr(p, k) is not None}
    if p.max_connections is not None:
        out["max_connections"] = p.max_connections
    return out


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top level>"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config section an annotation holds (``Section``, ``list[Section]``, ``Section |
    None`` …), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the section at ``loc`` knows (none when ``loc`` names no section)."""
    model: type[BaseModel] | None = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
    return list(model.model_fields) if model is not None else []


def _named(loc: tuple[int | str, ...], raw: Mapping[str, Any]) -> str:
    """``_loc``, and the id of the ``[[provider]]`` it is in, when it has one:
    ``provider[2].timeout_ms (provider "facts")``, so a user finds the table by its name."""
    key = _loc(loc)
    providers = raw.get("provider")
    if len(loc) > 1 and loc[0] == "provider" and isinstance(loc[1], int):
        at = loc[1]
        table = providers[at] if isinstance(providers, list) and at < len(providers) else None
        pid = table.get("id") if isinstance(table, dict) else None
        if isinstance(pid, str) and pid and len(pid) <= 64:
            key += f" (provider {json.dumps(pid)})"
    return key


def _toml_kind(value: Any) -> str:
    """What TOML made of a value, in its own words (``a string``, ``a boolean``); empty
    for what TOML cannot give."""
    for kind, name in (
        (bool, "a boolean"),  # before int: a bool is an int to Python, never to TOML
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (list, "an array"),
        (dict, "a table"),
        (datetime.date | datetime.time, "a date or time"),
    ):
        if isinstance(value, kind):
            return name
    return ""


def _type_hint(kind: str, value: Any) -> str:
    """How to write what a key wants, for the TOML mistakes people make: a number or a
    boolean in quotes, a boolean where a number goes (nothing of the value is shown)."""
    if kind in ("int_type", "float_type") and isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return " (write the number without quotes)"
    if kind == "bool_type" and isinstance(value, str):
        return " (write true or false, without quotes)"
    if kind == "bool_type" and isinstance(value, int | float):
        return " (write true or false)"
    if kind in ("int_type", "float_type") and isinstance(value, bool):
        return " (write a number)"
    return ""


def _describe(
    exc: ValidationError, source: str, raw: Mapping[str, Any] | None = None
) -> ConfigError:
    problems = []
    for err in exc.errors():
        key = _loc(err["loc"])
        shown = _named(err["loc"], raw or {})
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            close = did_you_mean(str(err["loc"][-1]), _keys_at(err["loc"][:-1]))
            msg = "unknown key" + (f" (did you mean {close}?)" if close else "")
        elif err["type"] == "value_error":  # our own validator's words, without pydantic's
            msg = msg.removeprefix("Value error, ")
        elif err["type"].endswith("_type") and _toml_kind(err["input"]):
            msg += f", not {_toml_kind(err['input'])}"  # the kind only: a value may be secret
            msg += _type_hint(err["type"], err["input"])
        problems.append((key, shown, msg))
    key, _, msg = problems[0]
    text = "; ".join(f"{k}: {m}" for _, k, m in problems)
    return ConfigError(f"{source}: {text}", file=source, key=key, problem=msg)


def _resolve(value: Any, base: Path) -> Path:
    path = Path(os.path.expandvars(os.path.expanduser(str(value))))
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _absolutise(raw: dict[str, Any], base: Path) -> None:
    """Resolve relative paths against the config file's directory, in place."""
    host = raw.get("host")
    if isinstance(host, dict) and isinstance(host.get("trusted_roots"), list):
        host["trusted_roots"] = [
            _resolve(r, base) if isinstance(r, str) else r for r in host["trusted_roots"]
        ]
    for section, keys in (("host", ("socket", "state_dir", "tokenizer")), ("log", ("file",))):
        table = raw.get(section)
        if isinstance(table, dict):
            for key in keys:
                if isinstance(table.get(key), str) and table[key]:
                    table[key] = _resolve(table[key], base)
                elif table.get(key) == "":
                    table.pop(key)
    tcp = raw.get("tcp")
    if isinstance(tcp, dict) and isinstance(tcp.get("token_file"), str):
        tcp["token_file"] = _resolve(tcp["token_file"], base)
    providers = raw.get("provider")
    reranker = raw.get("reranker")  # a process like a provider: the same path rules
    if isinstance(providers, list) or isinstance(reranker, dict):
        for spec in [*(providers if isinstance(providers, list) else ()), reranker]:
            if not isinstance(spec, dict):
                continue
            for key in ("cwd", "token_file", "ca_file", "client_cert", "client_key"):
                if isinstance(spec.get(key), str):
                    spec[key] = _resolve(spec[key], base)
            roots = spec.get("trusted_roots")
            if isinstance(roots, list):
                spec["trusted_roots"] = [
                    _resolve(r, base) if isinstance(r, str) else r for r in roots
                ]
            command = spec.get("command")
            if not isinstance(command, list) or not command:
                continue
            # A process's paths are the config's, not the caller's: an MCP client or a
            # service manager launching hostd from elsewhere runs the same providers. Its
            # working directory defaults to the config file's directory, so the words of
            # its command (a script, ``--root .``) read against it; a first word that is
            # a relative path (``./prov``, ``bin/prov``) resolves against it too, while a
            # bare name (``node``) is looked up in PATH.
            if "cwd" not in spec:
                spec["cwd"] = Path(os.path.normpath(base))
            spec["command"] = provider_command(command, base)


#: The directory of hostd's own ``providers`` package: installed beside ``hostd`` (one
#: distribution). Not ``find_spec("providers")``: run as ``python -m hostd`` in a project,
#: this process has the project first on its path, and a package of its own named so.
_BUNDLED_DIR = Path(__file__).resolve().parents[1] / "providers"


@functools.cache
def _bundled_modules() -> frozenset[str]:
    """``providers.files``, ``providers.memory``, …: every module of hostd's own
    ``providers`` package, as ``python -m`` names it (empty when it is not there)."""
    return frozenset(f"providers.{m.name}" for m in pkgutil.iter_modules([str(_BUNDLED_DIR)]))


def _runs_bundled(args: list[Any]) -> bool:
    """Whether an interpreter's ``args`` run a bundled provider: ``-m providers.X``,
    after nothing but the interpreter's own options (``-u``, ``-X dev``)."""
    words = iter(args)
    for word in words:
        if word == "-m":
            return next(words, None) in _bundled_modules()
        if word in ("-X", "-W"):  # an option whose value is the next word
            next(words, None)
        elif not isinstance(word, str) or word == "-" or not word.startswith("-"):
            return False  # a script, or ``-`` (stdin): no module is run
        elif word.startswith(("-c", "--")):
            return False  # ``-c CODE``, or the end of the options
    return False


def provider_command(command: list[Any], base: Path) -> list[Any]:
    """A provider's ``command`` as the daemon runs it: ``python`` is the interpreter
    running hostd (the engine scrubs PATH-derived guesses, and a venv's python is the
    one that can import the bundled providers); a first word that is a relative path
    (``./prov``, ``bin/prov``) reads against ``base``; a bare name is PATH's.

    ``python -m providers.files`` (any bundled provider) runs with ``-P``: ``-m`` puts
    the working directory (the project) first on the module path, where a package of the
    project's own named ``providers`` (or ``hostd``) would shadow hostd's. A user's own
    ``python -m mypkg.provider`` keeps it: that module is found there."""
    if not command:
        return command
    first = command[0]
    if first in _PYTHON_NAMES:
        safe = ["-P"] if _runs_bundled(command[1:]) else []
        return [sys.executable, *safe, *command[1:]]
    if isinstance(first, str) and "/" in first:
        return [str(_resolve(first, base)), *command[1:]]
    return list(command)


def parse_config(text: str, *, source: str = "<string>", base: Path | None = None) -> Config:
    """Parse and validate TOML text; ``base`` resolves relative paths (default: cwd)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid TOML: {exc}", file=source, key=None, problem=str(exc)
        ) from None
    _absolutise(raw, base or Path.cwd())
    raw["source"] = source
    try:
        # Strict: a TOML value has a type of its own, and a key takes only its type. Lax
        # coercion would read ``timeout_ms = true`` as 1 ms and ``enabled = "off"`` as
        # off by accident of spelling (an integer where a float is wanted stays fine).
        # Path keys arrive as ``Path``: ``_absolutise`` resolves every one.
        return Config.model_validate(raw, strict=True)
    except ValidationError as exc:
        raise _describe(exc, source, raw) from None


def load_config(path: str | os.PathLike[str] | None = None, *, cwd: Path | None = None) -> Config:
    """Load ``path``, else the file discovery finds from ``cwd`` (``hostd._discovery``)."""
    found = find_config(path, cwd=cwd)
    # Absolute (as named, symlinks kept): the file logs, errors and hints name is the
    # same wherever they are read, and `hostd serve --config` with it works from anywhere.
    file = found.path.absolute()
    try:
        raw = file.read_bytes()
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{file}: no such config file", file=str(file), key=None, problem="not found"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{file}: cannot read: {exc}", file=str(file), key=None, problem=str(exc)
        ) from None
    config = parse_config(text, source=str(file), base=file.resolve().parent)
    digest = sha256_digest(raw)  # the very bytes parsed
    return config.model_copy(
        update={"searched": found.searched, "file": _own_file(file), "digest": digest}
    )


def open_secret_files(cfg: Config) -> list[tuple[str, Path, int]]:
    """The credential files this config names (``tcp.token_file``; each remote
    provider's and the reranker's ``token_file`` and ``client_key``) that other users
    may read or write: ``(key, path, mode)``, for a warning with the ``chmod`` that fixes
    it (``secret_file_open``)."""
    named: list[tuple[str, Path | None]] = [("tcp.token_file", cfg.tcp.token_file)]
    for p in cfg.provider:
        named += [(f"provider {p.id}: token_file", p.token_file)]
        named += [(f"provider {p.id}: client_key", p.client_key)]
    named += [("reranker.token_file", cfg.reranker.token_file)]
    named += [("reranker.client_key", cfg.reranker.client_key)]
    return secret_files_open(named)


def secret_files_open(named: Iterable[tuple[str, Path | None]]) -> list[tuple[str, Path, int]]:
    """Of the credential files ``named`` (``(key, path)``, a path ``None`` when none is
    set), those other users may read or write: ``(key, path, mode)``. A file that cannot
    be stat'ed is left to the code that reads it."""
    out = []
    for key, path in named:
        if path is None:
            continue
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            continue
        if mode & 0o077:
            out.append((key, path, mode))
    return out


def secret_file_open(key: str, path: Path, mode: int) -> dict[str, str]:
    """The ``config.secret_file_open`` warning of one file ``secret_files_open`` found:
    the fields the daemon logs at start, which check-provider says in the same words
    (``secret_file_words``). Said, not refused: the file may be shared on purpose."""
    return {"key": key, "file": str(path), "mode": f"{mode:04o}", "fix": f"chmod 600 {path}"}


def secret_file_words(warning: dict[str, str]) -> str:
    """``secret_file_open``'s warning as a line of text (check-provider's)."""
    return (
        f"warning: {warning['key']} {warning['file']} is open to other users (mode "
        f"{warning['mode']}): {warning['fix']} (config.secret_file_open)"
    )
