"""Defaults the command line's help texts name, apart from the config's models.

``hostd.config`` takes its fields' defaults from here (one value each), so building
the command line (``hostd --help``) names them without loading pydantic and the models.
A leaf: it imports nothing.
"""

from __future__ import annotations

__all__ = ["DEFAULT_WAIT_S", "HOST_OVERFETCH", "HOST_START_TIMEOUT_S", "PROVIDER_TIMEOUT_MS"]

#: How long a client waits by default for a daemon at its socket that is starting (no
#: socket yet, or refused): ``hostd serve &`` binds it a moment after it is started.
#: The CLI's ``--connect --wait`` and the framework adapters' ``wait``.
DEFAULT_WAIT_S = 10.0

#: ``[host] overfetch``.
HOST_OVERFETCH = 2.0

#: ``[host] start_timeout_s``.
HOST_START_TIMEOUT_S = 30.0

#: ``[[provider]] timeout_ms``.
PROVIDER_TIMEOUT_MS = 2000
