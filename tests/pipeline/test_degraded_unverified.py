"""Frames the verify stage dropped leave the composition degraded, per provider: an
empty prompt because every frame was untrusted is not "no evidence exists" (real
files-provider children, in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hostd.config import parse_config
from hostd.server import Daemon
from tests.fixtures.procs import ROOT

pytestmark = pytest.mark.anyio


async def test_frames_outside_every_trusted_root_degrade_the_composition(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploy\n\nDeploys happen on Tuesdays.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    files = ["python", "-m", "providers.files", "--root", str(docs), "--no-cache"]
    text = (
        f'[host]\nstate_dir = "{tmp_path / "state"}"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\ncwd = "{ROOT}"\n'
        f'trusted_roots = ["{elsewhere}"]\n'  # does not cover the provider's files
    )
    cfg = parse_config(text, source="<test>", base=tmp_path)
    async with Daemon(cfg).local() as session:
        result = await session.call("context/compose", {"goal": "when are deploys"})
    assert result["prompt"] == "" and result["providers"][0]["status"] == "ok"
    assert result["degraded"] is True
    assert result["degraded_reasons"] == [
        {"reason": "frames_unverified", "provider": "files", "detail": "untrusted_source"}
    ]
