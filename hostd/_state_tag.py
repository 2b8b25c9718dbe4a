"""The file that marks a directory as a hostd state directory (``host.state_dir``).

A user may put the state directory inside the project (``state_dir = ".hostd"``): the
bundled ``files`` and ``semantic`` providers, which index the project, would then serve
hostd's own records (handshakes, receipts) as evidence. The daemon writes this tag into
the state directory it uses (``hostd.server.private_state_dir``), and the providers' walk
never enters a directory holding it, wherever it is and whatever it is called. The form
follows the cache-directory tagging convention (``CACHEDIR.TAG``): a fixed first line,
so a file that merely has the name marks nothing. It is not a ``CACHEDIR.TAG`` itself:
backup tools skip those, and consent receipts and memories are no cache.

A leaf: imports nothing of hostd, so the daemon and the provider programs both load it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STATE_TAG", "STATE_TAG_SIGNATURE", "write_state_tag"]

#: The tag's name, in the state directory itself.
STATE_TAG = "HOSTD_STATE.TAG"
#: What a tag begins with: only a file that does marks its directory.
STATE_TAG_SIGNATURE = b"Signature: hostd state directory"
_BODY = STATE_TAG_SIGNATURE + (
    b"\n# hostd keeps its state here (consent receipts, handshake records, shadow records)."
    b"\n# hostd's files and semantic providers never index a directory holding this file.\n"
)


def write_state_tag(directory: Path) -> None:
    """Tag ``directory`` (which must exist) unless it is tagged already.

    Best effort: a tag that cannot be written costs only that the directory is indexed
    when it lies in a project, and the state itself is written (or refused) on its own."""
    path = directory / STATE_TAG
    try:
        with path.open("rb") as held:
            if held.read(len(STATE_TAG_SIGNATURE)) == STATE_TAG_SIGNATURE:
                return
    except OSError:
        pass  # none yet (or unreadable): written below
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(_BODY)
    except OSError:
        pass
