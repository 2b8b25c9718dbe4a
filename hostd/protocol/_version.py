"""Protocol version strings and family compatibility (H1, H3)."""

from __future__ import annotations

import re

__all__ = [
    "PROTOCOL_VERSION",
    "is_version_string",
    "version_family",
    "versions_compatible",
]

#: The version hostd speaks. The published SDK and vectors speak ``1.0-draft``;
#: both are the ``contextgraph/1`` family and interoperate (H1).
PROTOCOL_VERSION = "contextgraph/1.0-draft"

_VERSION_RE = re.compile(r"contextgraph/[0-9]+\.[0-9]+(-draft)?")


def is_version_string(value: object) -> bool:
    """``contextgraph/<major>.<minor>[-draft]``."""
    return isinstance(value, str) and _VERSION_RE.fullmatch(value) is not None


def version_family(version: str) -> str:
    """The major family: the text before the first ``.`` (H1)."""
    return version.split(".", 1)[0]


def versions_compatible(ours: str, theirs: str) -> bool:
    """Peers interoperate iff both are well-formed and share the major family (H1, H3)."""
    return (
        is_version_string(ours)
        and is_version_string(theirs)
        and version_family(ours) == version_family(theirs)
    )
