"""The provider → host progress notification (``context/progress``, protocol.md):
its method and the bounds on its text, shared by the provider runtime that sends it,
the transport that reads it and check-provider."""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_PROGRESS_TEXT", "MAX_READY_MESSAGE", "PROGRESS_METHOD"]

#: The notification that carries a provider's readiness and warm-up progress.
PROGRESS_METHOD: Final = "context/progress"
#: The longest ``state``, ``phase`` or ``message`` the host keeps of a note.
MAX_PROGRESS_TEXT: Final = 200
#: The longest ready message (a summary line, not a report): room for the bundled
#: providers to name a few files of each kind they left out.
MAX_READY_MESSAGE: Final = 1000
