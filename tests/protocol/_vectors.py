"""Loading the protocol's published vectors copied into tests/vectors/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parent.parent / "vectors"


def load_json(rel: str) -> Any:
    return json.loads((VECTORS / rel).read_text(encoding="utf-8"))


def load_ndjson(rel: str) -> list[Any]:
    lines = (VECTORS / rel).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
