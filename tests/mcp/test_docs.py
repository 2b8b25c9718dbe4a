"""docs/mcp.md states the face's bounds as the code has them, and its Python client
example runs as written against a real ``hostd mcp``."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hostd.mcp import DEFAULT_MAX_CITED_BYTES, DEFAULT_MAX_CITED_TEXTS, DRAIN_S
from hostd.mcp._schema import ProgressTrack
from hostd.mcp._server import _PAGE
from tests.fixtures.home import fresh_home, hostd_in
from tests.server.conftest import ROOT

_TEXT = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
# Words, whatever the line breaks.
_DOC = " ".join(_TEXT.split())


def test_the_stated_bounds_are_the_codes() -> None:
    assert f"up to {DEFAULT_MAX_CITED_TEXTS:,} texts" in _DOC
    assert f"{DEFAULT_MAX_CITED_BYTES // (1024 * 1024)} MiB of text" in _DOC
    assert f"{DRAIN_S:g} s after the close" in _DOC
    assert f"{_PAGE} a page" in _DOC
    assert f"at most {ProgressTrack().max_notes} such" in _DOC


def test_the_compose_result_shape_names_every_member_of_a_citation_and_a_legs_error() -> None:
    from hostd.mcp import COMPOSE_OUTPUT_SCHEMA

    props = COMPOSE_OUTPUT_SCHEMA["properties"]
    citation = props["citations"]["items"]["properties"]
    provenance = citation["provenance"]["items"]["properties"]
    error = props["providers"]["items"]["properties"]["error"]
    shown = [f"{m}?" if m != "type" else m for m in provenance]
    assert f"provenance: [{{{', '.join(shown)}}}]" in _DOC
    shown = [m if m in error["required"] else f"{m}?" for m in error["properties"]]
    assert f"error?: {{{', '.join(shown)}}}" in _DOC


@pytest.mark.slow
def test_the_python_client_example_runs_as_written_against_hostd_mcp(tmp_path: Path) -> None:
    # The block is taken from docs/mcp.md and run unmodified, as a user's script: the
    # SDK starts `hostd` from PATH with a bare environment (no PYTHONPATH), so `hostd`
    # here is this checkout's, as an install of it would be.
    section = _TEXT.split("### A Python client\n", 1)[1].split("\n## ", 1)[0]
    (client,) = re.findall(r"```python\n(.*?)```", section, re.S)
    env = fresh_home(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hostd = bin_dir / "hostd"
    hostd.write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT))} "
        f'exec {shlex.quote(sys.executable)} -m hostd "$@"\n'
    )
    hostd.chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    project = Path(env["HOME"]) / "project"
    project.mkdir()
    (project / "settings.md").write_text(
        "# How the config is loaded\n\nThe config is loaded from settings.toml by "
        "load_settings(), which reads the file once at start and validates every key.\n"
    )
    assert hostd_in(project, env, "init", "--providers", "files").returncode == 0
    (tmp_path / "client.py").write_text(client)
    done = subprocess.run(
        [sys.executable, "client.py", str(project / "hostd.toml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("hostd "), done.stdout  # server_info's name and version
    assert "load_settings()" in done.stdout, done.stdout  # the prompt
    cited = re.search(r"^0 settings\.md L\S+ file://\S+/project/settings\.md$", done.stdout, re.M)
    assert cited, done.stdout  # the best citation: its rank, label and file
