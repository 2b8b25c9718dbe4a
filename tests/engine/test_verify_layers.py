"""The verification and consent modules stay in their layer and expose what they name."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["consent", "verify/__init__", "verify/_stage", "verify/_rules", "verify/_source"]
MODULES += ["verify/_reuse", "verify/_turn", "verify/_checks"]


@pytest.mark.parametrize("name", MODULES)
def test_imports_only_protocol_errors_and_siblings(name: str) -> None:
    tree = ast.parse((ROOT / f"hostd/engine/{name}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("hostd"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("hostd"))
    # No transport, compose or server: the stage is handed send_verify, never a connection.
    # (hostd._log is the one logger factory, a leaf every layer may use.)
    assert found <= {"hostd.protocol", "hostd.errors", "hostd._log"}


def test_engine_package_reexports_the_consent_store() -> None:
    engine = importlib.import_module("hostd.engine")
    from hostd.engine.consent import ConsentStore, required_scopes

    assert engine.ConsentStore is ConsentStore
    assert engine.required_scopes is required_scopes
