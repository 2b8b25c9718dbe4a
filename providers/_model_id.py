"""A local model's name and version, for the verdicts and fingerprints that name it."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["model_identity"]

#: Files whose bytes identify a model directory's weights (the first one found).
_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "config.json")


def model_identity(name_or_path: str) -> str:
    """``name@version``: a local directory is named by its base name and the first 12 hex
    digits of its weights' SHA-256; a hub name is ``name@unpinned``."""
    path = Path(name_or_path)
    if not path.is_dir():
        return f"{name_or_path}@unpinned"
    for file in _WEIGHTS:
        if (path / file).is_file():
            digest = hashlib.sha256()
            with open(path / file, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            return f"{path.resolve().name}@{digest.hexdigest()[:12]}"
    return f"{path.resolve().name}@unversioned"
