"""What each client method accepts: one pydantic model a method (protocol.md §4).

Strict at the wire: a misspelt member is a named error (``extra="forbid"``), JSON
integers are never coerced from ``true``, ``"100"`` or ``1.5``, and text that must
say something refuses whitespace alone; each failure is a −32602 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

__all__ = [
    "CancelParams",
    "ComposeParams",
    "ConsentListParams",
    "ConsentParams",
    "ContextQueryParams",
    "FeedbackParams",
    "FloorParam",
    "ForgetParams",
    "FrameIdParam",
    "NoParams",
    "QueryParams",
    "RememberParams",
    "RestartParams",
    "UsageParams",
    "WarmParams",
]

_MAX_STR = 64 * 1024


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


#: A name or text that must say something: whitespace alone is refused (−32602).
_Text = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
#: JSON integers only: ``true``, ``"100"`` and ``1.5`` are refused, never coerced.
_Count = Annotated[int, Field(strict=True)]


class _Params(BaseModel):
    # Our own API: a misspelt member is a named error, not silently ignored. Each model's
    # validator is built by its first use (a daemon serves a few of these methods, and
    # its start none), not by every daemon's import.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class FloorParam(_Params):
    label: Annotated[str, Field(min_length=1, max_length=256)]
    content: Annotated[str, Field(max_length=4 * 1024 * 1024)]
    position: Literal["top", "bottom"] = "top"


def _as_utc(value: Any) -> Any:
    """A date or a time with an offset as the F4 UTC stamp providers are sent; anything
    else as it came, for the F4 check to refuse in its words."""
    if isinstance(value, str) and len(value) <= 64:
        # Here, not at import: the rule checks build the wire models, which a command
        # checking its params before it sends them (``hostd compose --connect``) needs not.
        from hostd.protocol import utc_timestamp

        return utc_timestamp(value) or value
    return value


#: An instant as F4 carries it; a date (midnight UTC) or an offset time is taken too.
_Instant = Annotated[str, BeforeValidator(_as_utc)]

#: The goal: bounded before the blank check, so a long one is told in characters.
_Goal = Annotated[str, Field(min_length=1, max_length=_MAX_STR), AfterValidator(_not_blank)]


class QueryParams(_Params):
    goal: _Goal
    query_text: Annotated[str, Field(max_length=_MAX_STR)] | None = None
    kinds: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(default_factory=list)
    anchors: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list)
    as_of: _Instant | None = None
    budget: Annotated[_Count, Field(gt=0, le=10_000_000)] | None = None
    max_frames: Annotated[_Count, Field(ge=1, le=10_000)] = 64
    providers: list[Annotated[str, Field(min_length=1)]] | None = None
    timeout_ms: Annotated[_Count, Field(gt=0, le=600_000)] | None = None
    #: How long to wait for providers that are not ready (starting, warming up), apart
    #: from ``timeout_ms``; 0: answer with the ready ones alone. None: up to each
    #: one's start deadline (or ``timeout_ms``, when named).
    ready_wait_ms: Annotated[_Count, Field(ge=0, le=600_000)] | None = None
    session: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    progress_token: str | int | None = None
    #: Overrides ``[host] overfetch``: each provider is asked for up to its share × this.
    overfetch: (
        Annotated[float, Field(ge=1.0, le=1000.0, allow_inf_nan=False, strict=True)] | None
    ) = None


class ContextQueryParams(QueryParams):
    #: Also ask the reranker for its order of the accepted frames (``result.rerank``).
    rerank: Annotated[bool, Field(strict=True)] = False


class ComposeParams(QueryParams):
    #: Passed to ``hostd.compose.strategy_from_wire`` as given: it owns the spellings.
    strategy: str | dict[str, Any] | None = None
    #: ``hostd.compose.PLACEMENTS`` (this module may not import it: tests/test_errors.py
    #: keeps the two equal), checked with the other params so ``data.errors`` lists it.
    placement: Literal["edges", "ranked", "grouped", "canonical"] | None = None
    floors: list[FloorParam] = Field(default_factory=list)
    caps: dict[str, Annotated[float, Field(ge=0, le=1)]] | None = None
    #: Keep this composition's shadow record whatever the sample draws, and answer
    #: only once it is committed (needs ``[shadow] enabled``).
    record: Annotated[bool, Field(strict=True)] = False
    #: Also return ``evidence``: each included frame's own content. Off unless asked,
    #: so a client that wants only the prompt gets the same reply as before.
    include_content: Annotated[bool, Field(strict=True)] = False


class ConsentParams(_Params):
    provider: _Text
    scope: Annotated[_Text, Field(max_length=1024)]
    grantor: Annotated[_Text, Field(max_length=256)] = "client"


class ConsentListParams(_Params):
    provider: str | None = None


class UsageParams(_Params):
    request_id: Annotated[str, Field(min_length=1)]


class FrameIdParam(_Params):
    provider_id: _Text
    frame_id: _Text
    content_digest: str | None = None


class FeedbackParams(_Params):
    request_id: Annotated[str, Field(min_length=1, max_length=256)]
    #: Citation labels of that request's prompt, or FrameIds; empty: none was used.
    used: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=4096)] | FrameIdParam],
        Field(max_length=1024),
    ]
    helpful: Annotated[bool, Field(strict=True)] | None = None
    note: Annotated[str, Field(max_length=4096)] | None = None


class CancelParams(_Params):
    #: A float too: a request with a fractional id is served under it (docs/api.md).
    id: str | int | float | None


class RestartParams(_Params):
    provider: _Text


class NoParams(_Params):
    pass


class WarmParams(_Params):
    progress_token: str | int | None = None


#: An entry id as a provider serves it (a frame ``id``: ``mem-3``).
_EntryId = Annotated[_Text, Field(max_length=256)]


class _WriteParams(_Params):
    #: The provider that stores it; None: the one configured provider that declares
    #: ``capabilities.remember`` (none or several: −32602 naming them).
    provider: _Text | None = None
    #: How long to wait for the provider's commit (default: its ``timeout_ms``, at
    #: least 10 s): one given up may still have been stored.
    timeout_ms: Annotated[_Count, Field(gt=0, le=600_000)] | None = None


class RememberParams(_WriteParams):
    kind: Annotated[_Text, Field(max_length=64)]
    title: Annotated[_Text, Field(max_length=4096)]
    content: Annotated[_Text, Field(max_length=4 * 1024 * 1024)]
    #: F4 times (checked by the pipeline, as ``as_of`` is).
    valid_from: Annotated[_Instant, Field(max_length=64)] | None = None
    valid_to: Annotated[_Instant, Field(max_length=64)] | None = None
    #: The entry whose window closes at this one's ``valid_from``.
    supersedes: _EntryId | None = None


class ForgetParams(_WriteParams):
    id: _EntryId
