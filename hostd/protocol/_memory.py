"""hostd's memory-write extension of the provider wire: ``memory/remember`` and
``memory/forget`` (docs/providers.md, "Memories your agent writes").

A provider that can store entries says so in its handshake reply's capabilities
(``"remember": {"kinds": [...]}``, ``RememberCapability``), a member other hosts
ignore (U1), so a peer that knows nothing of it is unaffected. hostd sends the two
requests only to a provider that declared it, and the provider answers only once its
write has committed. Entry ids are the frame ids its queries serve (``mem-3``), so an
agent supersedes or forgets the very frame it was shown. The models ignore unknown
members (U1), as every wire model does; values are judged by whoever stores them.
"""

from __future__ import annotations

from pydantic import ConfigDict

from ._models import WireModel

__all__ = [
    "FORGET_METHOD",
    "REMEMBER_METHOD",
    "ForgetRequest",
    "ForgetResult",
    "RememberRequest",
    "RememberResult",
]

REMEMBER_METHOD = "memory/remember"
FORGET_METHOD = "memory/forget"


#: Each model's validator is built by its first use: a provider that stores memory and
#: the daemon's remember and forget need them, a daemon's start none.
_ON_USE = ConfigDict(defer_build=True)


class RememberRequest(WireModel):
    """Params of ``memory/remember``: one new entry. ``supersedes``: the id of an entry
    whose window closes at this one's ``valid_from`` (both in one transaction)."""

    model_config = _ON_USE
    kind: str
    title: str
    content: str
    valid_from: str | None = None
    valid_to: str | None = None
    supersedes: str | None = None


class RememberResult(WireModel):
    """The committed entry: its frame ``id``, when it was recorded, its window, and the
    entry it superseded (if it did)."""

    model_config = _ON_USE
    id: str
    recorded_at: str
    valid_from: str
    valid_to: str | None = None
    supersedes: str | None = None


class ForgetRequest(WireModel):
    """Params of ``memory/forget``: the id of the entry to delete."""

    model_config = _ON_USE
    id: str


class ForgetResult(WireModel):
    """The deleted entry's id (its frames then verify ``gone``) and, when it had
    superseded one, that entry's id, valid again (``reopened``). ``already``: the entry
    had been forgotten before (a retry whose first reply was lost), so nothing was
    deleted now (``reopened`` then says what that first forget reopened); absent
    (``None``) when it was deleted now, as a provider that predates the member answers."""

    model_config = _ON_USE
    forgotten: str
    reopened: str | None = None
    already: bool | None = None
