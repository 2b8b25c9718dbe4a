"""Credit for used evidence: every frame folded into a used candidate is credited.

One candidate in the prompt can stand for several offered frames: dedup (D2) keeps
one frame of each group quoting the same evidence, and a span merge one block for
overlapping regions of a file. The provider whose copy lost the tie offered the
same evidence, so feedback that the candidate was used credits every member, and a
shown candidate shows every member: ``hostd calibrate`` counts each member as a
shown (and, if used, used) frame of its own provider, ``shadow replay`` names every
provider behind the used evidence, and ``eval --from-shadow`` takes every member as
gold.

The members are the record's (``Recorded.members``, read off the composition's audit
when it was held); a record from before they were kept has them recomputed by the
same dedup over its recorded candidates, whose stand-ins carry the identity and
regions dedup reads.
"""

from __future__ import annotations

from collections.abc import Iterable

from hostd.compose import dedup_cross_provider

from ._feedback import Key
from ._frames import recorded_frames
from ._record import Members, Recorded

__all__ = ["credited", "members_of"]


def _recomputed(record: Recorded) -> Members:
    shown = set(record.included)
    folded: dict[Key, list[Key]] = {}
    for drop in dedup_cross_provider(recorded_frames(record)).dropped:
        kept = (drop.kept.provider_id, drop.kept.frame_id, drop.kept.content_digest)
        if kept in shown:
            gone = drop.dropped
            member = (gone.provider_id, gone.frame_id, gone.content_digest)
            folded.setdefault(kept, []).append(member)
    return tuple((k, tuple(v)) for k, v in folded.items())


def members_of(record: Recorded) -> dict[Key, tuple[Key, ...]]:
    """Each included candidate's members: its own key first, then every frame it absorbed."""
    members = record.members if record.members is not None else _recomputed(record)
    out: dict[Key, tuple[Key, ...]] = {key: (key,) for key in record.included}
    for key, absorbed in members:
        out[key] = (key, *absorbed)
    return out


def credited(record: Recorded, keys: Iterable[Key]) -> tuple[Key, ...]:
    """``keys`` (included candidates) with every member of each, each once, in order."""
    members = members_of(record)
    out: dict[Key, None] = {}
    for key in keys:
        for member in members.get(key, (key,)):
            out[member] = None
    return tuple(out)
