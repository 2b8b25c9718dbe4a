"""Spec builders for engine tests (real child processes, marked for leak checks)."""

from __future__ import annotations

from typing import Any

from hostd.engine import ProviderSpec
from hostd.protocol import ContextFrame, ContextQuery, Provenance
from hostd.transport import ProviderConnection, ProviderLink
from tests.fixtures.procs import ROOT, marked_env, python


def healthy(pid: str = "healthy", *args: str, **kw: Any) -> ProviderSpec:
    # Generous: a loaded CI box may take seconds to start Python; no test times the healthy.
    kw.setdefault("timeout_ms", 30_000)
    return ProviderSpec(
        pid,
        python("tests.fixtures.healthy_provider", "--name", pid, *args),
        env=marked_env(),
        cwd=str(ROOT),
        **kw,
    )


def adversary(
    mode: str,
    pid: str | None = None,
    *,
    binding: str = "jsonrpc",
    extra: tuple[str, ...] = (),
    **kw: Any,
):
    # ``--binding cgp`` last: the provider reads its binding from the last argument.
    args = [mode, *extra] + (["--binding", "cgp"] if binding == "cgp" else [])
    kw.setdefault("timeout_ms", 30_000)
    return ProviderSpec(
        pid or f"adv-{mode}",
        python("tests.fixtures.adversarial_provider", *args),
        binding=binding,
        env=marked_env(),
        cwd=str(ROOT),
        **kw,
    )


def query(**kw: Any) -> ContextQuery:
    fields: dict[str, Any] = {"goal": "find the retry policy", "max_frames": 10, "max_tokens": 0}
    fields.update(kw)
    return ContextQuery(**fields)


def child_pid(conn: ProviderLink | None) -> int | None:
    """The process id of a local provider's connection; None when it has none."""
    if conn is None:
        return None
    assert isinstance(conn, ProviderConnection)  # a local provider, not a remote one
    return conn.child.pid


def local(conn: ProviderLink | None) -> ProviderConnection:
    """``conn``, which the test knows is a local provider's live connection."""
    assert isinstance(conn, ProviderConnection)
    return conn


def source_frame(provenance: list[Provenance], uri: str | None = None) -> ContextFrame:
    """A frame whose only interest is its provenance (the verify stage's source checks)."""
    return ContextFrame(
        id="f",
        kind="snippet",
        title="t",
        content="x",
        score=0.5,
        token_cost=1,
        citation_label="c",
        provenance=provenance,
        uri=uri,
    )
