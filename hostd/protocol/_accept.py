"""An accept-only schema for a reply's frames: the frame rules checked in pydantic-core.

``accept_frames`` validates a whole reply with a tightened copy of ``ContextFrame``'s
own core schema (the same class, fields and coercions; only constraints added), so a
list it accepts holds real ``ContextFrame``s for which ``check_frame`` finds nothing:
F1 (score in [0, 1], finite), F2/F3 (title, citation_label present and not blank),
F4 (calendar-valid UTC stamps, ASCII digits), F5 (a ``file`` provenance carries a
``sha256:`` digest), D1, P1 (a full frame: content, no ``representation``,
``content_ref``, ``transform`` or ``canonical_content_hash``), G1/G2 and U2 (a known
kind). B3 (the declared cost is ``ceil(utf8 bytes/4)``) is the one rule a schema cannot
state: it is checked here in one pass, and its honest costs are returned for B1.

``accept_reply`` is what a leg's audit asks: a reply accepted whole, its frames also
within the query's budget (B1, B4, on those honest costs), each with its ``FrameId``.

It only ever accepts: anything it refuses (an unknown kind, a compact frame, a stamp
in another script's digits …) takes ``parse_frames``, which names every rule exactly. A test
checks, on generated frames and near misses, that acceptance implies
``check_frame(frame) == []`` and equal instances.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, ne
from typing import Any, cast

import orjson
from pydantic_core import CoreSchema, SchemaValidator, ValidationError
from pydantic_core import core_schema as cs

from ._bytes import canonical_token_cost
from ._identity import FrameId
from ._models import FRAME_KINDS, ContextFrame, ContextQuery
from ._rules import check_budget

__all__ = ["PY_WHITESPACE", "AcceptMemo", "AcceptedReply", "accept_frames", "accept_reply"]

#: Every character ``str.isspace`` holds (``str.strip`` removes them, so ``_blank`` in
#: ``_rules`` calls a string of only these blank). Rust's ``\s`` is Unicode White_Space,
#: which lacks U+001C–U+001F, hence the explicit set; a test compares it with all of
#: Unicode.
PY_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# At least one character outside that set: not blank (F2, F3, G1, G2). Searched, not
# anchored (pydantic-core's rust-regex ``pattern`` is a search).
_NOT_BLANK = "[^" + "".join(f"\\x{{{ord(c):x}}}" for c in PY_WHITESPACE) + "]"

# F4 with the calendar ``is_timestamp`` enforces, in ASCII digits only (the rule takes
# any script's; those frames take the exact path): year 0001–9999, each month's days,
# 29 February in Gregorian leap years, hours 00–23, minutes and seconds 00–59.
_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
_MONTH_DAY = (
    "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    "|(?:0[13-9]|1[0-2])-(?:29|30)"
    "|(?:0[13578]|1[02])-31)"
)
_LEAP_DAY = (
    "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
)
_TIMESTAMP = (
    f"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?Z$"
)
_DIGEST = "^sha256:[0-9a-f]{64}$"  # F5, D1 (``DIGEST_RE`` in full)
# Any string but exactly "file" (a provenance of another type needs no digest, F5).
_NOT_FILE = "^(?s:(?:[^f]|f[^i]|fi[^l]|fil[^e]|file.).*|f|fi|fil)?$"


def _text(pattern: str) -> CoreSchema:
    return cs.str_schema(pattern=pattern, regex_engine="rust-regex")


def _optional(schema: CoreSchema) -> CoreSchema:
    return cs.with_default_schema(cs.nullable_schema(schema), default=None)


def _absent() -> CoreSchema:
    """Only ``null`` or missing: a full frame's P1 members."""
    return cs.with_default_schema(cs.none_schema(), default=None)


def _tighten(model: Any, fields: dict[str, CoreSchema]) -> CoreSchema:
    """``model``'s core schema with the named fields' value schemas replaced; the
    class, config and every other field stay as they are."""
    base = model if isinstance(model, dict) else model.__pydantic_core_schema__
    inner = base["schema"]
    missing = set(fields) - set(inner["fields"])
    if missing:  # a renamed field must not silently lose its constraint
        raise KeyError(f"no such field(s): {sorted(missing)}")
    new_fields = {
        name: {**field, "schema": fields[name]} if name in fields else field
        for name, field in inner["fields"].items()
    }
    out = {k: v for k, v in base.items() if k != "ref"}
    out["schema"] = {**inner, "fields": new_fields}
    return out


def _provenance_items() -> CoreSchema:
    from ._models import Provenance

    file = _tighten(Provenance, {"type": _text("^file$"), "digest": _text(_DIGEST)})
    other = _tighten(Provenance, {"type": _text(_NOT_FILE)})
    return cs.union_schema([file, other], mode="left_to_right")


def _frame_schema() -> CoreSchema:
    from ._models import Relation

    relation = _tighten(
        Relation, {"target_uri": _text(_NOT_BLANK), "display_name": _text(_NOT_BLANK)}
    )
    stamp = _optional(_text(_TIMESTAMP))
    return _tighten(
        ContextFrame,
        {
            "kind": cs.literal_schema(sorted(FRAME_KINDS)),  # U2
            "title": _text(_NOT_BLANK),  # F2
            "citation_label": _text(_NOT_BLANK),  # F3: required here
            # F1; a JSON number only (strict: no string, no boolean), as the model's own
            # check; an integral 2.0 token_cost takes the exact path, which reads it as 2.
            "score": cs.float_schema(ge=0.0, le=1.0, allow_inf_nan=False, strict=True),
            "token_cost": cs.int_schema(strict=True),
            "valid_from": stamp,  # F4
            "valid_to": stamp,
            "recorded_at": stamp,
            "content": cs.str_schema(),  # P1: a full frame carries content
            "content_digest": _optional(_text(_DIGEST)),  # D1
            "representation": _absent(),  # P1: absent means full
            "content_ref": _absent(),
            "transform": _absent(),
            "canonical_content_hash": _absent(),
            "provenance": cs.with_default_schema(
                cs.list_schema(_provenance_items()), default_factory=list
            ),  # F5
            "relations": cs.with_default_schema(
                cs.list_schema(relation), default_factory=list
            ),  # G1, G2
        },
    )


def _own_validator(schema: CoreSchema) -> SchemaValidator:
    """A validator of ``schema`` itself. pydantic-core builds a schema naming a complete
    model's class as that model's own (lenient) validator, whatever fields it lists; it
    reads completeness from the class's ``__dict__`` at build time only, so the models
    tightened here are marked incomplete while it builds, and complete again after."""
    from ._models import Provenance, Relation

    models = (ContextFrame, Provenance, Relation)
    for model in models:
        type.__setattr__(model, "__pydantic_complete__", False)
    try:
        return SchemaValidator(schema)
    finally:
        for model in models:
            type.__setattr__(model, "__pydantic_complete__", True)


_STRICT_FRAMES = _own_validator(cs.list_schema(_frame_schema()))
_TOKEN_COST = attrgetter("token_cost")
_CONTENT = attrgetter("content")


def accept_frames(
    data: Sequence[Any], memo: AcceptMemo | None = None
) -> tuple[list[ContextFrame], list[int]] | None:
    """A reply's frames and their honest costs when every frame passes every frame rule
    (``check_frame`` would find nothing in any); ``None`` when one might not, and then
    ``parse_frames`` judges them one by one. Frames already parsed are left to it.

    With a ``memo``, a frame whose JSON text was accepted before is not validated
    again (see ``AcceptMemo``): ``data`` must then be values decoded from JSON text."""
    if memo is not None:
        return memo.accept(data)
    return _accept(data)


@dataclass(frozen=True, slots=True)
class AcceptedReply:
    """A reply ``accept_reply`` accepted: its frames in the reply's order, each one's
    ``FrameId`` (``ids[i]`` is ``frames[i]``'s) and their honest total cost (B3)."""

    frames: list[ContextFrame]
    ids: list[FrameId]
    tokens: int


def accept_reply(
    data: Sequence[Any], query: ContextQuery, provider_id: str, memo: AcceptMemo | None = None
) -> AcceptedReply | None:
    """``provider_id``'s reply to ``query`` accepted whole: every frame passes every frame
    rule (``accept_frames``) and together they keep to the query's budget (B1, B4:
    ``check_budget`` on the honest costs). ``None`` when any might not: then the
    reply is judged frame by frame (``parse_frames``, ``check_budget``), which names
    what is wrong."""
    clean = accept_frames(data, memo)
    if clean is None:
        return None
    frames, costs = clean
    tokens = sum(costs)
    if check_budget(query, frames, tokens):
        return None
    return AcceptedReply(frames, FrameId.many(provider_id, frames), tokens)


def _accept(data: Sequence[Any]) -> tuple[list[ContextFrame], list[int]] | None:
    if any(map(isinstance, data, repeat(ContextFrame))):
        return None  # an instance is not revalidated by a schema: check it as it is
    try:
        frames: list[ContextFrame] = _STRICT_FRAMES.validate_python(data)
    except ValidationError:
        return None
    costs = list(map(canonical_token_cost, map(_CONTENT, frames)))
    if any(map(ne, costs, map(_TOKEN_COST, frames))):
        return None  # B3: named, with its figures, by the exact path
    return frames, costs


# A key is the frame's own JSON text; values orjson would write as JSON of another
# value (a datetime or a dataclass as an object or a string) raise instead, so they
# are never keyed.
_KEY_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class AcceptMemo:
    """The frames ``accept_frames`` accepted, by their JSON text, so a frame offered
    again (providers offer the same frames turn after turn) is not validated again.

    A frame is keyed by ``orjson.dumps`` of its decoded value: equal text decodes to
    an equal value, which the same schema accepts as the same frame with the same
    honest cost, so a hit answers what validating would. orjson writes NaN and the
    infinities as ``null``; a key holding the bytes ``null`` anywhere (a ``None``
    member, or the word in a string) is never remembered, so no two values share an
    entry. The accepted instance itself is handed out again: frames are never
    modified after validation (a copy is made with ``model_copy``).

    Bounded: at most ``max_entries`` frames whose text is at most ``max_bytes``
    bytes (4 MB of text by default, and the frames built from it: about 10 MB in
    all); when full, each frame remembered drops the oldest one (first in, first
    out: emptying a full memo at once freed some 1,000 frames in one go, about 2 ms
    in the leg audit of the request that filled it). Safe to share between threads:
    each step is one ``OrderedDict`` operation."""

    __slots__ = ("_seen", "max_bytes", "max_entries")

    def __init__(self, *, max_entries: int = 1024, max_bytes: int = 4096) -> None:
        self._seen: OrderedDict[bytes, tuple[ContextFrame, int]] = OrderedDict()
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def __len__(self) -> int:
        return len(self._seen)

    def accept(self, data: Sequence[Any]) -> tuple[list[ContextFrame], list[int]] | None:
        """``accept_frames(data)``, validating only the frames not remembered."""
        seen = self._seen
        frames: list[ContextFrame | None] = []
        costs: list[int] = []
        missed: list[int] = []
        keys: list[bytes | None] = []
        for i, item in enumerate(data):
            if type(item) is not dict:
                return _accept(data)  # a parsed frame, or not a frame: as it is
            try:
                key: bytes | None = orjson.dumps(item, option=_KEY_OPTIONS)
            except orjson.JSONEncodeError:
                key = None
            hit = seen.get(key) if key is not None else None
            if hit is None:
                missed.append(i)
                keys.append(key)
                frames.append(None)
                costs.append(0)
            else:
                frames.append(hit[0])
                costs.append(hit[1])
        if missed:
            fresh = _accept([data[i] for i in missed])
            if fresh is None:
                return None
            for i, key, frame, cost in zip(missed, keys, *fresh, strict=True):
                frames[i] = frame
                costs[i] = cost
                if key is not None and len(key) <= self.max_bytes and b"null" not in key:
                    if len(seen) >= self.max_entries:
                        try:
                            seen.popitem(last=False)  # the oldest: one frame freed at a time
                        except KeyError:  # emptied by another thread meanwhile
                            pass
                    # orjson's bytes keep their spare capacity (up to 8x the text): the
                    # key is remembered as an exact-size copy.
                    seen[memoryview(key).tobytes()] = (frame, cost)
        return cast(list[ContextFrame], frames), costs  # every None was filled above
