"""A composition held for feedback, and the record built from it.

With ``[shadow]`` enabled every composition is held (``ShadowRecorder``), drawn
or not, so ``usage/feedback`` can name it; building a full ``Recorded`` (frozen
dataclasses) for each would cost about as much as the composition itself, so a
held one is plain tuples of strings and numbers (which the garbage collector
stops tracking, so the held ring adds nothing to its full passes), and becomes
a ``Recorded`` only when it is drawn or gets feedback.

Any held composition may be written (feedback writes an undrawn one), so what span
merging read (``Merging``) is taken when it is held, but only when it can matter:
with ``store_content`` (a record without content has no lines to merge) and when
the fan-out handed composition sources to merge (``FanOut.sources``). Every other
composition pays nothing for it; one that does pays a read of each source's line
count and one pass over its verification states.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, itemgetter
from typing import Any

from hostd.compose import TITLE_SCAN, ComposedPrompt, title_attribute
from hostd.protocol import ContextFrame, FrameId, LineIndex, sha256_digest

from ._feedback import CitationRow, Key
from ._record import (
    Candidate,
    Members,
    Merging,
    Recorded,
    candidate_wire,
    key_indices,
    record_body,
)
from ._sources import source_verified

__all__ = [
    "ABSORBED",
    "Composition",
    "Held",
    "absorbed_members",
    "build_record",
    "hold",
    "merging_of",
]

#: The audit reasons under which a frame was folded into another candidate, whose
#: FrameId the entry names as ``detail.kept``: dedup's (D2) and span merges'. Feedback
#: on that candidate credits every frame folded into it (docs/eval.md).
ABSORBED = frozenset({"duplicate", "merged_into", "contained_in"})

#: A candidate as held: a tuple of strings and numbers only, which the garbage
#: collector stops tracking, so 256 held compositions add nothing to its full passes.
_FIELDS = itemgetter(
    "id",
    "content_digest",
    "kind",
    "score",
    "token_cost",
    "citation_label",
    "provenance",
    "content",
    "title",
)
_REGION = itemgetter("type", "uri", "range", "digest")
_DICT = attrgetter("__dict__")
_Row = tuple[
    str, str, str | None, str, float, int, str, tuple[tuple[Any, ...], ...], str | None, str | None
]


@dataclass(slots=True, frozen=True)
class Composition:
    """One composition as it was served: the one value the request path hands the
    recorder (``ShadowRecorder.record``), held for feedback and written when drawn.

    ``contested`` is the budget the providers shared (what the floors left),
    ``accepted`` the fan-out's frames (the candidate set), ``composed`` the result;
    ``verification``, ``sources`` and ``merge_max_ratio`` what composition was handed
    for span merging (the fan-out's, read only: ``hold`` keeps line counts)."""

    request_id: str
    goal: str
    contested: int
    caps: dict[str, float] | None
    accepted: Sequence[tuple[str, ContextFrame]]
    composed: ComposedPrompt
    verification: Mapping[FrameId, Mapping[str, Any]] | None = None
    sources: Mapping[str, LineIndex] | None = None
    merge_max_ratio: float | None = None  # None: compose's default


@dataclass(slots=True, frozen=True)
class Held:
    """A composition as held for feedback: its record's parts as plain tuples, cheap
    enough to build for every request; ``record()`` makes the ``Recorded`` on demand.
    The goal is held in memory either way and stored only with ``store_content``."""

    request_id: str
    recorded_at: float
    contested: int
    policy: dict[str, Any]
    caps: dict[str, float] | None
    rows: tuple[_Row, ...]
    citations: tuple[CitationRow, ...]
    goal: str
    store_content: bool
    members: Members = ()
    merging: Merging | None = None
    unverifiable: tuple[Key, ...] = ()

    @property
    def goal_digest(self) -> str:
        return sha256_digest(self.goal.encode("utf-8"))

    @property
    def stored_goal(self) -> str | None:
        """The goal as the store keeps it: only with ``store_content``."""
        return self.goal if self.store_content else None

    def body(self) -> str:
        """``self.record().body()``, straight from the rows (the writer thread's work:
        no ``Candidate`` is built to be turned back into a dict)."""
        return record_body(
            self.contested,
            self.policy,
            self.caps,
            [candidate_wire(*self._stored(row)) for row in self.rows],
            [(p, i, d) for _, p, i, d in self.citations],
            self.citations,
            self.members,
            None if self.merging is None else self.merging.to_wire(self.rows),
            key_indices(self.unverifiable, self.rows),
        )

    def _stored(self, row: _Row) -> _Row:
        """``row`` as the record keeps it: its title as ``stored_title`` has it."""
        title = row[-1]
        if title is None:
            return row
        return (*row[:-1], stored_title(title, row[6], store_content=self.store_content))

    def record(self) -> Recorded:
        return Recorded(
            request_id=self.request_id,
            recorded_at=self.recorded_at,
            budget=self.contested,
            policy=self.policy,
            caps=self.caps,
            candidates=tuple(Candidate(*self._stored(row)) for row in self.rows),
            included=tuple((p, i, d) for _, p, i, d in self.citations),
            goal_digest=self.goal_digest,
            goal=self.stored_goal,
            citations=self.citations,
            members=self.members,
            merging=self.merging,
            unverifiable=self.unverifiable,
        )


#: One character of each size (1 to 8 bytes) as an attribute value writes it: ``x``,
#: ``é``, ``€``, ``<`` (``&lt;``), ``&`` (``&amp;``), ``"`` (``&quot;``), U+202E
#: (``&#8238;``), U+FEFF (``&#65279;``).
_SIZED = ("", "x", "\u00e9", "\u20ac", "<", "&", '"', "\u202e", "\ufeff")


def stored_title(title: str, label: str, *, store_content: bool) -> str | None:
    """A candidate's title as its record keeps it, so that a replay fences it as the
    live prompt did (``title_attribute``); ``None`` when the fence showed none of it.

    With ``store_content``, its first ``TITLE_SCAN`` characters (all the fence reads
    of it). Without, none of its text (a title can be content: a memory's headline)
    but a stand-in the fence shows in as many bytes, as a frame's content is a
    stand-in of the same cost: ``in="…"`` after the label, of characters that write
    eight bytes each and one for the rest."""
    shown = title_attribute(title, label) if label.strip() else ""
    if not shown:
        return None
    if store_content:
        return title[:TITLE_SCAN]
    eights, rest = divmod(len(shown.encode()) - len(' in=""'), 8)
    return f"{label} · in {_SIZED[8] * eights}{_SIZED[rest]}"


def _key(wire: Any) -> Key:
    return (wire["provider_id"], wire["frame_id"], wire.get("content_digest"))


def absorbed_members(entries: Sequence[Any], citations: Iterable[CitationRow]) -> Members:
    """From a composition's audit entries (their wire dicts) and its citation map: each
    cited candidate that absorbed other frames, with those frames, in the audit's order."""
    # The absorbed entries picked out in C-level passes: this runs for every composition,
    # on its path, and most entries (often all) are not absorbed ones.
    reasons = list(map(dict.get, entries, repeat("reason")))
    if ABSORBED.isdisjoint(reasons):
        return ()
    shown = {(p, i, d) for _, p, i, d in citations}
    folded: dict[Key, list[Key]] = {}
    for entry in compress(entries, map(ABSORBED.__contains__, reasons)):
        kept = (entry.get("detail") or {}).get("kept")
        if isinstance(kept, dict) and (into := _key(kept)) in shown:
            folded.setdefault(into, []).append(_key(entry["frame"]))
    return tuple((k, tuple(v)) for k, v in folded.items())


def _frame_key(f: FrameId) -> Key:
    """A FrameId (the tuple provider, id, has digest, digest or "") as a record's key."""
    return (f[0], f[1], f[3] if f[2] else None)


def unverifiable_of(composition: Composition) -> tuple[Key, ...]:
    """The candidates whose state was ``unverifiable`` (fenced ``verified="no"``)."""
    return tuple(
        _frame_key(f)
        for f, state in (composition.verification or {}).items()
        if state.get("state") == "unverifiable"
    )


def merging_of(composition: Composition) -> Merging | None:
    """What span merging read of ``composition``: each source's line count and the
    candidates it could join (``source_verified``); None when it had no source."""
    sources = composition.sources
    if not sources:
        return None
    verification = composition.verification or {}
    verified = tuple(_frame_key(f) for f, state in verification.items() if source_verified(state))
    counts = tuple((uri, sources[uri].count) for uri in sorted(sources))
    return Merging(counts, verified, composition.merge_max_ratio)


def hold(composition: Composition, *, store_content: bool) -> Held:
    """A ``Held`` from one composition.

    Fields are read from each model's ``__dict__`` (where pydantic v2 keeps them),
    in one C-level read a frame, in a plain loop (no generator per frame): this
    runs for every composition, on its path."""
    rows: list[_Row] = []
    append = rows.append
    for pid, f in composition.accepted:
        fid, digest, kind, score, cost, label, provenance, content, title = _FIELDS(f.__dict__)
        append(
            (
                pid,
                fid,
                digest,
                kind,
                score,
                cost,  # accepted frames passed the leg audit's B3: the honest cost
                label or fid,
                tuple(map(_REGION, map(_DICT, provenance))),
                content if store_content else None,
                # Only a title that can say more than the label, as it is: what the
                # fence shows of it is worked out off the request path (``_stored``).
                title if label and title != label else None,
            )
        )
    citations: list[CitationRow] = []
    composed = composition.composed
    for c in composed.citations:
        citations.append((c.label, *_frame_key(c.frame)))
    caps = composition.caps
    return Held(
        request_id=composition.request_id,
        recorded_at=time.time(),
        contested=composition.contested,
        policy=dict(composed.audit.policy),
        caps=dict(caps) if caps else None,
        rows=tuple(rows),
        citations=tuple(citations),
        goal=composition.goal,
        store_content=store_content,
        members=absorbed_members(composed.audit.entry_dicts(), citations),
        # Only a record with content can merge again (its frames' lines are the bytes).
        merging=merging_of(composition) if store_content else None,
        unverifiable=unverifiable_of(composition),
    )


def build_record(composition: Composition, *, store_content: bool) -> Recorded:
    """A ``Recorded`` from one composition."""
    return hold(composition, store_content=store_content).record()
