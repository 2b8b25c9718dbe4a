"""The audit entries of one composition, built once, in their wire form.

Every offered frame gets exactly one JSON-ready entry: the ranked frames in rank
order (included, ``provider_cap`` or ``over_budget``), then the duplicates, then
the earlier stages' exclusions, those two in canonical FrameId order with every
other field as the tie-break. Nothing is kept to be expanded later: the entries
the packer's walk produces are the entries the wire carries (and ``AuditEntry``
reads them back as typed values).

An excluded entry of a frame that reached composition carries its ``label``: the
frame's own citation label (``citation_label_for``, without the ``" #2"`` a repeat
would get), so a reader can tell which ticket or file was left out, as the citations
tell the included ones. A frame an earlier stage dropped is known here by its FrameId
only, and has none.

An ``over_budget`` frame is priced as the block it would have been when the walk
reached it (its label as made unique then, the room left after the last inclusion
ranked above it) from its ``rendered_sizes`` price: priced, never rendered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from operator import eq, itemgetter
from typing import Any

import orjson

from hostd.protocol import ContextFrame, FrameId

from ._candidates import CandidateSet, SortKey, key_to_wire
from ._meter import CANONICAL, Meter
from ._pack import Labels, Packing, tokens_of_bytes
from ._render import citation_label_for

__all__ = ["ranked_entries", "unranked_entries"]

_FIRST = itemgetter(0)
_THIRD = itemgetter(2)
_INF = math.inf
#: The verification state of evidence hostd could not check (its fence says so).
UNVERIFIABLE = "unverifiable"


def _wire_score(score: float | None) -> float | None:
    """A score as JSON carries it: NaN and infinities (NaN is read as -inf) are null."""
    return score if score is not None and -_INF < score < _INF else None


def is_verified(verification: Mapping[FrameId, Mapping[str, Any]] | None, key: SortKey) -> bool:
    """False for a frame whose verification state is ``unverifiable`` (fenced so).

    A FrameId *is* its sort key (an equal tuple, equal hash): looked up by the key."""
    if not verification:
        return True
    state = verification.get(key)  # type: ignore[call-overload]  # a FrameId equals its key
    return state is None or state.get("state") != UNVERIFIABLE


def ranked_entries(
    order: Sequence[int],
    cands: CandidateSet,
    packing: Packing,
    positions: Sequence[int],
    labels: Sequence[str],
    sizes: Sequence[int],
    *,
    budget: int,
    floor_labels: Iterable[str],
    verification: Mapping[FrameId, Mapping[str, Any]] | None,
    notes: Mapping[int, Mapping[str, Any]] | None = None,
    meter: Meter = CANONICAL,
    render_block: Callable[[int, str], str] | None = None,
    coalesced: Mapping[int, Mapping[str, Any]] | None = None,
    contained: Mapping[int, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One entry per ranked candidate, best first. ``positions[j]`` is where the
    ``j``-th included frame (in rank order) was placed; ``labels`` and ``sizes``
    are the candidates' prices (``rendered_sizes``); ``notes`` adds members to a
    candidate's entry (span merging's ``merged`` and ``span``). With a tokenizer
    ``meter`` costs are its tokens, and a block whose label would have changed is
    rendered (``render_block``) and counted. ``coalesced`` (``_coalesce.audit_notes``,
    by candidate index): a group lead's ``coalesced`` note and ``vouched_by``; each
    other member, admitted but quoted by the lead's block, is ``merged_into`` it
    (with its rank and the tokens the walk charged it); an admitted block a later
    one quotes (``same_text``) is ``contained_in`` it the same way. ``contained``
    (by candidate index): the ``detail`` of a frame the walk skipped because an
    admitted block quotes its text (``contained_in``, with its rank and cost)."""
    frames, scores = cands.frames, cands.scores
    pids, ids, digests = cands.provider_ids, cands.ids, cands.digests
    support, capped = cands.support, packing.capped
    replay = Labels(set(floor_labels))
    peek, taken = replay.peek, replay.taken
    out: list[dict[str, Any]] = []
    append = out.append
    start = 0
    canonical = meter is CANONICAL
    recounted = set(packing.recounted)
    chosen, costs, walk_labels, used_after = (
        packing.chosen,
        packing.costs,
        packing.labels,
        packing.used_after,
    )
    admitted = len(chosen)
    # The hot loop (one pass per excluded frame) reads plain columns and builds
    # each wire dict inline: no key tuple, no helper call per frame. The room left
    # is worked out only where an excluded frame reads it (most inclusions follow
    # one another with none between).
    for j, stop in enumerate([*packing.ranks, len(order)]):
        if start < stop:
            used = used_after[j - 1] if j else packing.fixed
            spent = tokens_of_bytes(used) if canonical else meter.tokens(used)
            remaining = max(0, budget - spent)
        for rank in range(start, stop):
            i = order[rank]
            pid, digest = pids[i], digests[i]
            frame = (
                {"provider_id": pid, "frame_id": ids[i]}
                if digest is None
                else {"provider_id": pid, "frame_id": ids[i], "content_digest": digest}
            )
            cap = capped.get(rank) if capped else None
            if cap is None:
                size = sizes[i]
                base = labels[i]
                if not canonical:
                    if base in taken and render_block is not None:
                        size = meter.size(render_block(i, peek(base)))
                    cost = meter.tokens(size)
                else:
                    if base in taken:  # the suffix it gets is ASCII: one byte a character
                        size += len(peek(base)) - len(base)
                    cost = (size + 3) >> 2  # tokens_of_bytes, inline
                quoted = contained.get(i) if contained else None
                detail: dict[str, Any]
                if quoted is not None:  # its text is in the prompt: no room was its
                    detail = {**quoted, "kept": dict(quoted["kept"])}
                    reason = "contained_in"
                else:
                    detail = {"cost": cost, "remaining": remaining}
                    if spent > budget:  # the prompt's own lines alone are over: by how much
                        detail["over_by"] = spent - budget
                    if rank in recounted:  # fitted block by block, not once counted whole
                        detail["whole_prompt"] = True
                    reason = "over_budget"
            else:
                (provider, cap_tokens, share), cost = cap
                detail = {"provider": provider, "cap": cap_tokens, "share": share}
                reason = "provider_cap"
            score = scores[i]
            append(
                {
                    "frame": frame,
                    "provider": pid,
                    "disposition": "excluded",
                    "reason": reason,
                    "detail": detail,
                    "label": labels[i],
                    "rank": rank,
                    "score": score if -_INF < score < _INF else None,
                    "tokens": cost,
                }
            )
            if notes and i in notes:
                out[-1].update(_copy_notes(notes[i]))
        if j == admitted:  # the ranked frames past the last inclusion: done
            break
        i = chosen[j]
        folded = coalesced.get(i) if coalesced else None
        if folded is not None and "kept" in folded:
            detail = {**folded, "kept": dict(folded["kept"])}
            if "region" in folded:
                detail["region"] = dict(folded["region"])
            append(
                {
                    "frame": key_to_wire(cands.key(i)),
                    "provider": pids[i],
                    "disposition": "excluded",
                    "reason": "merged_into" if folded.get("coalesced") else "contained_in",
                    "detail": detail,
                    "label": labels[i],
                    "rank": stop,
                    "score": _wire_score(frames[i].score),
                    "tokens": costs[j],
                }
            )
            if notes and i in notes:
                out[-1].update(_copy_notes(notes[i]))
            replay.claim(walk_labels[j])
        else:
            pid, digest = pids[i], digests[i]
            if digest is None:
                frame = {"provider_id": pid, "frame_id": ids[i]}
                state = verification.get((pid, ids[i], False, "")) if verification else None  # type: ignore[call-overload]  # a FrameId equals its key
            else:
                frame = {"provider_id": pid, "frame_id": ids[i], "content_digest": digest}
                state = verification.get((pid, ids[i], True, digest)) if verification else None  # type: ignore[call-overload]  # a FrameId equals its key
            # Scores are the frames' own with NaN read as -inf: both are null on the wire.
            score = scores[i]
            sup = support.get(i) if support else None
            append(
                {
                    "frame": frame,
                    "provider": pid,
                    "disposition": "included",
                    "rank": stop,
                    "score": score if -_INF < score < _INF else None,
                    "tokens": costs[j],
                    "position": positions[j],
                    "verification": dict(state) if state is not None else {"state": "unchecked"},
                    "vouched_by": [pid] if sup is None else [p for p, _ in sup],
                }
            )
            if notes and i in notes:
                out[-1].update(_copy_notes(notes[i]))
            if folded is not None:  # a group's lead: its block quotes the others too
                out[-1]["vouched_by"] = list(folded["vouched_by"])
                out[-1]["coalesced"] = _copy_notes({"c": folded["coalesced"]})["c"]
            label = walk_labels[j]
            if label in taken:  # else the walk's label is this one's too: no suffix to find
                replay.claim(label)
            else:
                taken.add(label)
        start = stop + 1
    return out


def _copy_notes(notes: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's notes as fresh dicts (an entry is the wire's: never shared)."""
    out: dict[str, Any] = {}
    for k, v in notes.items():
        note = dict(v)
        if "members" in note:
            note["members"] = [dict(m) for m in note["members"]]
        out[k] = note
    return out


def _detail_key(detail: Mapping[str, Any]) -> str:
    try:
        return orjson.dumps(detail, option=orjson.OPT_SORT_KEYS, default=repr).decode()
    except TypeError:  # a value orjson cannot carry (an integer past 64 bits): still a key
        return "\x00" + repr(detail)


def unranked_entries(
    cands: CandidateSet,
    duplicates: Iterable[tuple[int, int]],
    excluded: Iterable[tuple[FrameId, str, Mapping[str, Any]]],
    absorbed: Iterable[tuple[int, int, str, Mapping[str, str]]] = (),
) -> list[dict[str, Any]]:
    """The duplicates (``(dropped, kept)`` indices into ``cands``' input pool), the
    frames span merging absorbed (``(member, survivor, reason, region)``, the same
    indices) and the earlier stages' exclusions, each in canonical FrameId order
    (every field a tie-break, so the same set gives the same entries whatever the
    arrival order)."""
    # Each row: (order key, its last tie-break as a function, entry). The last
    # tie-break (the kept frame's repr, the detail's JSON) is built only when two
    # rows tie on all the rest, which takes one identity offered twice.
    rows: list[tuple[tuple[Any, ...], Callable[[], str], dict[str, Any]]] = []
    duplicates = duplicates if isinstance(duplicates, list) else list(duplicates)
    absorbed = absorbed if isinstance(absorbed, list) else list(absorbed)
    excluded = excluded if isinstance(excluded, list) else list(excluded)
    keys = cands.key_column() if duplicates or absorbed else []
    scores, frames = cands.scores, cands.frames
    if not (absorbed or excluded):
        return _duplicate_entries(keys, scores, frames, duplicates)
    for m, k, reason, region in absorbed:
        mk, kk = keys[m], keys[k]
        score = scores[m]
        entry = {
            "frame": key_to_wire(mk),
            "provider": mk[0],
            "disposition": "excluded",
            "reason": reason,
            "detail": {"kept": key_to_wire(kk), "region": dict(region)},
            "label": citation_label_for(frames[m]),
            "score": _wire_score(score),
        }
        rows.append(((False, mk, reason, score), partial(repr, kk), entry))
    kept_wire: dict[int, dict[str, Any]] = {}
    for d, k in duplicates:
        dk = keys[d]
        kept = kept_wire.get(k)
        if kept is None:
            kept = kept_wire[k] = key_to_wire(keys[k])
        score = scores[d]
        entry = _duplicate_entry(dk, kept, score, citation_label_for(frames[d]))
        rows.append(((False, dk, "duplicate", score), partial(repr, keys[k]), entry))
    for item in excluded:
        fid, reason, detail = item
        if not isinstance(fid, FrameId):
            raise ValueError(f"excluded entries are (FrameId, reason, detail), got {fid!r}")
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"excluded {fid}: reason must be a non-empty string")
        copy = dict(detail) if detail else {}
        entry = {
            "frame": fid.to_wire(),
            "provider": fid.provider_id,
            "disposition": "excluded",
            "reason": reason,
            "detail": copy,
        }
        order = (reason != "duplicate", tuple(fid), reason, -_INF)
        rows.append((order, partial(_detail_key, copy), entry))
    rows.sort(key=_FIRST)
    if any(map(eq, map(_FIRST, rows), map(_FIRST, rows[1:]))):
        rows.sort(key=lambda row: (*row[0], row[1]()))
    return list(map(_THIRD, rows))


def _duplicate_entry(dk: SortKey, kept: dict[str, Any], score: float, label: str) -> dict[str, Any]:
    """The audit entry of a frame dedup folded into ``kept`` (its wire FrameId)."""
    return {
        "frame": key_to_wire(dk),
        "provider": dk[0],
        "disposition": "excluded",
        "reason": "duplicate",
        "detail": {"kept": dict(kept)},  # a copy each: an entry is the wire's own
        "label": label,
        "score": _wire_score(score),
    }


def _duplicate_entries(
    keys: Sequence[SortKey],
    scores: Sequence[float],
    frames: Sequence[ContextFrame],
    duplicates: Sequence[tuple[int, int]],
) -> list[dict[str, Any]]:
    """``unranked_entries`` when dedup's folds are all there is (the common case):
    the entries ordered by the dropped frame's key, then its score, by two stable
    sorts on those columns (no order tuple per entry); the kept frame's repr, the
    last tie-break, is read only when one key occurs twice."""
    entries: list[dict[str, Any]] = []
    append = entries.append
    kept_wire: dict[int, dict[str, Any]] = {}
    dropped_keys: list[SortKey] = []
    dropped_scores: list[float] = []
    # ``_duplicate_entry`` inline (one dict literal an entry, no call): the hot loop of
    # a composition whose providers overlap.
    for d, k in duplicates:
        dk = keys[d]
        kept = kept_wire.get(k)
        if kept is None:
            kept = kept_wire[k] = key_to_wire(keys[k])
        score = scores[d]
        dropped_keys.append(dk)
        dropped_scores.append(score)
        pid = dk[0]
        append(
            {
                "frame": (
                    {"provider_id": pid, "frame_id": dk[1], "content_digest": dk[3]}
                    if dk[2]
                    else {"provider_id": pid, "frame_id": dk[1]}
                ),
                "provider": pid,
                "disposition": "excluded",
                "reason": "duplicate",
                "detail": {"kept": kept.copy()},  # a copy each: an entry is the wire's own
                "label": citation_label_for(frames[d]),
                "score": score if score is not None and -_INF < score < _INF else None,
            }
        )
    order = sorted(range(len(entries)), key=dropped_scores.__getitem__)
    order.sort(key=dropped_keys.__getitem__)
    in_order = list(map(dropped_keys.__getitem__, order))
    if any(map(eq, in_order, in_order[1:])):  # one identity dropped twice
        kept_keys = [repr(keys[k]) for _, k in duplicates]
        order.sort(key=lambda j: (dropped_keys[j], dropped_scores[j], kept_keys[j]))
    return list(map(entries.__getitem__, order))
