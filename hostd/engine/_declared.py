"""What each provider declared at its last handshake, kept under the state directory.

``hostd consent`` must know which scopes a provider declares (C1, C6) to refuse one
it did not, and must not start every provider (load a model) to read a ledger. The
pool tells this record of every successful handshake (``handshake_listeners``); it
keeps the provider's ``ProviderInfo`` (name, version, ``data_flow``: never a frame
or a credential) in ``state_dir/handshakes/<id>.json``, mode 0600, written whole
(a temporary file renamed into place). Each record carries a digest of the spec
that produced it (binding, command or URL, the binding's options): a provider whose
config changed since is read as not recorded, never with a stale declaration.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from hostd._log import get_logger
from hostd.protocol import HandshakeAck, ProviderInfo

from ._spec import ProviderSpec

__all__ = ["HandshakeRecords", "spec_digest"]

log = get_logger("hostd.engine")

#: The folder under the state directory.
_FOLDER = "handshakes"


def spec_digest(spec: ProviderSpec) -> str:
    """What decides a provider's handshake: its binding, argv or URL, and options."""
    key = [spec.id, spec.binding, list(spec.command), spec.url, dict(spec.options)]
    raw = orjson.dumps(key, default=str, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


class HandshakeRecords:
    """``state_dir/handshakes``: the last handshake of each provider, by id."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.folder = Path(state_dir) / _FOLDER

    def record(self, spec: ProviderSpec, ack: HandshakeAck) -> None:
        """Keep ``ack``'s provider info for ``spec`` (a failure is logged, never raised:
        a provider that answered is served whether or not its record was written)."""
        body = {"spec": spec_digest(spec), "provider": ack.provider.to_wire()}
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{spec.id}.", dir=self.folder)
            try:
                with os.fdopen(fd, "wb") as out:  # mkstemp creates it 0600
                    out.write(orjson.dumps(body))
                os.replace(tmp, self.folder / f"{spec.id}.json")
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.warning("provider.handshake.unrecorded", provider=spec.id, error=exc.strerror)

    def read(self, spec: ProviderSpec) -> ProviderInfo | None:
        """The info ``spec``'s provider declared at its last handshake; ``None`` when
        none is recorded, the record is unreadable, or it came from another spec."""
        try:
            body: Any = orjson.loads((self.folder / f"{spec.id}.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(body, dict) or body.get("spec") != spec_digest(spec):
            return None
        try:
            return ProviderInfo.model_validate(body.get("provider"))
        except ValidationError:
            return None
