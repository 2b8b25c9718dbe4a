"""Typed results: what ``context/compose`` (and ``memory/remember``, ``memory/forget``)
returns, as pydantic models for the client.

``hostd.client`` validates a reply into a ``ComposeResult`` once, when it arrives;
after that every member is a plain attribute (``result.prompt``,
``result.evidence[0].content``, ``result.audit.entries``). The models are the
wire's reading, not a second schema: field names are the wire's members and
``to_wire()`` gives back the dict that was received, member for member.

Members a model does not know are accepted and left alone (U1: a newer daemon
never breaks an older client). They are not typed or checked, only carried, so
``to_wire()`` still returns them; a member the wire omitted stays omitted and an
explicit ``null`` stays ``null``. A reply that does not fit (a missing ``prompt``,
a count that is not a number) is one ``UnexpectedReply`` naming the fields, never
quoting their values.

This module imports nothing of the host side: a client loads only these models.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hostd.errors import UnexpectedReply

__all__ = [
    "Audit",
    "AuditEntry",
    "Citation",
    "ComposeResult",
    "DegradedReason",
    "Evidence",
    "FloorRecord",
    "Forgotten",
    "FrameRef",
    "Provenance",
    "NeedsRestart",
    "PromptUsage",
    "ProviderFailure",
    "ProviderReport",
    "Reloaded",
    "Remembered",
    "TcpTokenState",
    "Usage",
    "UsageFrame",
    "Verification",
    "WireResult",
    "parse_reply",
]

M = TypeVar("M", bound="WireResult")


class WireResult(BaseModel):
    """Base of the result models: frozen, unknown members carried but not read (U1)."""

    # ``allow``, not ``ignore``: an unknown member is never validated or used, but it
    # is kept, so ``to_wire()`` is the exact dict received from a newer daemon too.
    model_config = ConfigDict(extra="allow", frozen=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict this was read from: the members it had, as they were."""
        return self.model_dump(mode="json", exclude_unset=True)


class FrameRef(WireResult):
    """A FrameId: ``(provider_id, frame_id, content_digest)``, the one key of a frame
    (D2, A1); what ``usage/feedback`` accepts besides a citation label."""

    provider_id: str
    frame_id: str
    content_digest: str | None = None


class Provenance(WireResult):
    """One origin of a frame (``type`` ``file``, ``derivation``, …)."""

    type: str
    uri: str | None = None
    range: str | None = None
    digest: str | None = None


class Verification(WireResult):
    """What hostd established about a frame: ``state`` (``source_verified``,
    ``content_checked``, ``provider_verified``, ``unverifiable``, ``unverified`` or
    ``unchecked``) and, for ``unverifiable``, the ``reason``."""

    state: str
    reason: str | None = None


class Citation(WireResult):
    """A label of the prompt resolved to its frame and merged provenance. ``rank`` is the
    frame's place in the composition's order (0: the best; citations are in prompt
    order), read off its included audit entry as ``hostd compose --json`` does; ``None``
    when the reply's audit gives none (an older daemon)."""

    label: str
    frame: FrameRef
    provenance: list[Provenance] = Field(default_factory=list)
    rank: int | None = None


class Evidence(WireResult):
    """One included frame as its provider sent it (``include_content``), in prompt order.

    ``content`` is the provider's own text, never the fenced, neutralised copy in the
    prompt; ``content_digest`` is ``sha256:`` of its UTF-8 bytes, computed by hostd
    (``None`` for a frame without inline content). ``score`` is the provider's own,
    meaningful only against that provider's other frames (F10); ``rank`` is the
    frame's place in the composition's order, best first; ``valid_from`` and
    ``valid_to``, when the provider says, the window in which it was true;
    ``vouched_by``, the providers that served the same evidence, read off its included
    audit entry (``ComposeResult`` fills it in)."""

    label: str
    provider_id: str
    frame_id: str
    kind: str
    title: str
    uri: str | None = None
    range: str | None = None
    content: str | None = None
    content_digest: str | None = None
    score: float | None = None
    rank: int | None = None
    verification: Verification | None = None
    #: When the frame was true, as its provider sent it (Q2: half-open, F4 stamps).
    valid_from: str | None = None
    valid_to: str | None = None
    #: Every provider that served this evidence (dedup's duplicates', a coalesced
    #: block's members' too), as its included audit entry's ``vouched_by`` names them;
    #: empty from a daemon whose audit does not name them.
    vouched_by: list[str] = Field(default_factory=list)


class AuditEntry(WireResult):
    """One offered frame and what became of it: ``included`` (``rank``, ``position``,
    ``tokens``, ``verification``) or excluded with one ``reason`` and its ``detail``.
    ``label`` is an excluded frame's citation label, which ticket or file it was
    (``None`` for a frame an earlier stage dropped, or from a daemon that does not
    report it); an included one's is its citation's."""

    frame: FrameRef
    provider: str
    disposition: str
    reason: str | None = None
    detail: dict[str, Any] | None = None
    rank: int | None = None
    score: float | None = None
    tokens: int | None = None
    position: int | None = None
    verification: Verification | None = None
    vouched_by: list[str] = Field(default_factory=list)
    label: str | None = None

    @property
    def included(self) -> bool:
        return self.disposition == "included"


class FloorRecord(WireResult):
    """A floor as admitted: its label, where it was pinned and what it cost."""

    label: str
    position: str
    tokens: int


class Audit(WireResult):
    """The record of one composition: exactly one entry per offered frame, the budget,
    what the prompt cost (``tokens_used``), the ``policy`` and the floors.

    ``tokens_other`` is what ``tokens_used`` holds beyond the included entries'
    ``tokens`` (the preamble, the floors, the lines a coalesced block quotes for its
    ``merged_into`` members, rounding), so the two add up to it; ``None`` from a daemon
    that does not report it."""

    entries: list[AuditEntry] = Field(default_factory=list)
    global_budget: int
    tokens_used: int
    tokens_other: int | None = None
    policy: dict[str, Any] = Field(default_factory=dict)
    floors: list[FloorRecord] = Field(default_factory=list)

    def included(self) -> list[AuditEntry]:
        """The included entries, in audit (rank) order."""
        return [e for e in self.entries if e.included]

    def excluded(self) -> list[AuditEntry]:
        """The excluded entries, each with its ``reason``."""
        return [e for e in self.entries if not e.included]


class ProviderFailure(WireResult):
    """Why a provider's leg did not end ``ok``: hostd's ``code`` and a ``message``; for
    a provider whose process wrote on its stderr before it failed, ``stderr_tail``: its
    last lines (bounded, one line, secrets scrubbed)."""

    code: str
    message: str = ""
    stderr_tail: str | None = None


class ProviderReport(WireResult):
    """One provider's leg of the fan-out: ``status`` (``ok``, ``timeout``, ``crashed``,
    ``error``, ``quarantined``, ``no_consent``, ``skipped``, ``warming``, …), its frame
    counts, latency, the tokens it was asked for, on failure the ``error``, and for an
    ``ok`` leg that gave nothing, the ``note`` saying why."""

    provider_id: str
    status: str
    frames_offered: int = 0
    frames_accepted: int = 0
    latency_ms: float = 0.0
    tokens_accepted: int = 0
    violations: list[dict[str, Any]] = Field(default_factory=list)
    max_tokens: int | None = None
    share: int | None = None
    #: Why its share was kept out of the split the providers expected to answer shared
    #: (``warming``, ``starting``, ``no_consent``, ``restarting``, ``failed``, ``down``):
    #: ``share`` is then its nominal one, and the others were asked for more.
    share_apart: str | None = None
    error: ProviderFailure | None = None
    missing_scopes: list[str] = Field(default_factory=list)
    #: Why an ``ok`` leg gave nothing, when hostd can tell (``nothing fit: …``), what it
    #: lost, or that it answered from an index older than some changed files.
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def where_to_look(self) -> str | None:
        """Where the provider's own words on this leg's failure are, when it explained
        it on its stderr (an ``internal`` error it answered, whose message hostd does
        not quote, only sizes, saying ``provider.stderr``); else ``None``. The daemon
        logs that stderr, so this names the log, as ``hostd compose`` does, and the
        command that shows the provider's stderr apart from any daemon."""
        if self.error is None or "provider.stderr" not in self.error.message:
            return None
        pid = self.provider_id
        return (
            f"{pid}'s own words are on its stderr, which the daemon logs as provider.stderr "
            "in its [log] file, else on its own stderr (a Client.spawn daemon's: yours): "
            "its errors (a traceback) at warning, the rest at info; "
            f"`hostd check-provider --provider {pid}` (with the daemon's --config) runs it "
            "alone and shows the last lines of its stderr"
        )


class UsageFrame(WireResult):
    """One served frame and its canonical cost (UR1)."""

    frame: FrameRef
    token_cost: int


class PromptUsage(WireResult):
    """The prompt's size both ways: UTF-8 ``bytes``, ``canonical_tokens`` (B3) and, with
    ``[host] tokenizer``, ``tokens`` in that tokenizer's count and its name."""

    bytes: int
    canonical_tokens: int
    tokens: int | None = None
    tokenizer: str | None = None


class Usage(WireResult):
    """UR1: the summed canonical cost of the served frames, walkable to each FrameId;
    ``prompt``: what the composed prompt itself weighs."""

    budget_consumed: int
    global_budget: int
    frames: list[UsageFrame] = Field(default_factory=list)
    providers: dict[str, int] = Field(default_factory=dict)
    prompt: PromptUsage | None = None


class DegradedReason(WireResult):
    """Why a composition is not whole: a ``reason`` from hostd's closed vocabulary
    (``provider_failed``, ``consent_missing``, ``rerank_fallback``, …), the
    ``provider`` it concerns where one does, a short ``detail`` code, and a ``message``
    for a person where hostd has one (a ``rerank_fallback``: ``unavailable:
    ConnectError: connection refused at …: is the server running, on that port?``),
    hostd's words, at most 500 characters."""

    reason: str
    provider: str | None = None
    detail: str | None = None
    message: str | None = None


class ComposeResult(WireResult):
    """What ``context/compose`` returns (a ComposedPrompt on the wire).

    ``prompt`` is the fenced, cited evidence to paste; ``citations`` resolve its
    labels (prompt order); ``evidence`` (asked with ``include_content``) holds each
    included frame's own content in the same order, empty when not asked;
    ``audit`` says what became of every offered frame; ``providers`` report each
    leg; ``usage`` is UR1; ``request_id`` names the request (feedback, usage).
    ``degraded`` is ``None`` when the daemon does not say."""

    prompt: str
    citations: list[Citation] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    audit: Audit
    providers: list[ProviderReport] = Field(default_factory=list)
    usage: Usage | None = None
    verification: dict[str, Any] | None = None
    request_id: str
    #: Asked with ``record: true``: whether the shadow record is on disk.
    recorded: bool | None = None
    degraded: bool | None = None
    degraded_reasons: list[DegradedReason] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rank_citations(self) -> ComposeResult:
        """Each citation's ``rank``, from its included audit entry (the wire's citations
        carry none). Set past pydantic's ``__setattr__`` (the models are frozen), and so
        not marked as received: ``to_wire()`` stays the dict that came."""
        ranks = {
            _frame_key(e.frame): e.rank
            for e in self.audit.entries
            if e.disposition == "included" and e.rank is not None
        }
        for citation in self.citations:
            rank = ranks.get(_frame_key(citation.frame))
            if citation.rank is None and rank is not None:
                object.__setattr__(citation, "rank", rank)
        return self

    @model_validator(mode="after")
    def _vouch_evidence(self) -> ComposeResult:
        """Each evidence item's ``vouched_by``, from its included audit entry (the
        wire's evidence carries none): the one at its place in the prompt (an included
        entry's ``position``), else the one of its FrameId (a daemon that gives no
        position). Set as ``_rank_citations`` sets a rank: ``to_wire()`` is unchanged."""
        included = [e for e in self.audit.entries if e.included and e.vouched_by]
        at = {e.position: e.vouched_by for e in included if e.position is not None}
        by_key = {_frame_key(e.frame): e.vouched_by for e in included}
        for position, item in enumerate(self.evidence):
            if "vouched_by" in item.model_fields_set:  # a daemon that sends its own
                continue
            key = (item.provider_id, item.frame_id, item.content_digest)
            named = at.get(position) or by_key.get(key)
            if named:
                object.__setattr__(item, "vouched_by", list(named))
        return self

    @property
    def tokens_used(self) -> int:
        return self.audit.tokens_used


def _frame_key(frame: FrameRef) -> tuple[str, str, str | None]:
    return (frame.provider_id, frame.frame_id, frame.content_digest)


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "result"


class Remembered(WireResult):
    """``memory/remember``'s result: the entry the provider committed. ``id`` is its
    frame id (what compositions cite it by, and what ``supersedes`` and ``forget``
    take)."""

    provider: str
    id: str
    recorded_at: str
    valid_from: str
    valid_to: str | None = None
    supersedes: str | None = None
    request_id: str | None = None


class Forgotten(WireResult):
    """``memory/forget``'s result: the entry the provider deleted. ``already``: it had
    been deleted before (a retried forget), and nothing was deleted now."""

    provider: str
    forgotten: str
    reopened: str | None = None
    already: bool = False
    request_id: str | None = None


class NeedsRestart(WireResult):
    """A changed key a running daemon cannot apply (``host/reload``'s ``needs_restart``):
    it keeps its old value until the daemon restarts, for ``reason``."""

    key: str
    reason: str


class TcpTokenState(WireResult):
    """``host/reload``'s ``tcp_token``: the ``[tcp]`` token read again; ``state``
    ``unchanged``, ``changed`` (``closed``: the TCP connections opened with the old one,
    closed) or ``unusable`` (``error``: why the file gives none)."""

    state: str
    closed: int = 0
    error: str | None = None


class Reloaded(WireResult):
    """``host/reload``'s result: what reading the config file again changed, once in
    force. Provider ids (each sorted): ``started`` (added), ``stopped`` (removed),
    ``restarted`` (their section changed), ``updated`` (changed only in keys read per
    request, applied to the running process; empty from a daemon that does not report
    it) and ``kept``; ``applied``, the other keys (``section.key``) now in force;
    ``needs_restart``, those kept as they were until a restart; ``config``, the file as
    now read (``host/status``'s ``config``: ``file``, ``digest``, ``mtime``,
    ``loaded_at``); ``tcp_token`` with a TCP listener only."""

    config: dict[str, Any] | None = None
    started: list[str]
    stopped: list[str]
    restarted: list[str]
    updated: list[str] = Field(default_factory=list)
    kept: list[str]
    applied: list[str] = Field(default_factory=list)
    needs_restart: list[NeedsRestart] = Field(default_factory=list)
    tcp_token: TcpTokenState | None = None


def parse_reply(model: type[M], raw: Any, method: str) -> M:
    """``raw`` (a reply's ``result``) validated into ``model`` once, or ``UnexpectedReply``
    naming the fields that do not fit (at most 20), never their values."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        fields = list(dict.fromkeys(_where(e["loc"]) for e in errors))[:20]
        # ``from None``: the ValidationError's own text quotes the values.
        raise UnexpectedReply(
            f"{method}: the reply does not fit {model.__name__} at {', '.join(fields)}",
            fields=fields,
        ) from None
