"""Span merging end to end: a real daemon, two real provider children, one real file.

Two providers quote shifted six-line windows (``L1-6`` and ``L4-9``) of one 12-line
file under the daemon's trusted root. The verify stage re-reads the file, and the
composition quotes lines 1-9 once, as one ``source_verified`` frame. Rewriting the
file after the providers read it makes a window stale: the verify stage excludes it
with the digests that disagree, and nothing is merged.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hostd.client import ComposeResult, connect
from hostd.compose import compose_for_prompt
from hostd.protocol import ContextFrame, address_line_range, canonical_token_cost, sha256_digest
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio

LINES = [f"line {n:02d}: the quick brown fox number {n * 7919} jumps\n" for n in range(1, 13)]


def window_table(pid: str, marker: str, path: Path, window: str) -> str:
    cmd = ", ".join(
        f'"{w}"'
        for w in [
            "python",
            "-m",
            "tests.fixtures.window_provider",
            "--name",
            f"{pid}-{marker}",
            "--file",
            str(path),
            "--window",
            window,
        ]
    )
    return f'[[provider]]\nid = "{pid}"\ncommand = [{cmd}]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'


async def _daemon(start_daemon: Any, marker: str, workdir: Path) -> tuple[Any, Path]:
    corpus = workdir / "corpus"
    corpus.mkdir()
    path = corpus / "module.txt"
    path.write_text("".join(LINES), encoding="utf-8")
    tables = window_table("dense", marker, path, "L4-9:0.8") + window_table(
        "lexical", marker, path, "L1-6:0.4"
    )
    daemon = await start_daemon(providers={}, extra=tables, trusted_roots=[str(corpus)])
    return daemon, path


def _source_lines(prompt: str) -> Counter[str]:
    return Counter(line for line in prompt.splitlines() if line.startswith("line "))


def _by_id(result: ComposeResult) -> dict[str, dict[str, Any]]:
    return {e.frame.frame_id: e.to_wire() for e in result.audit.entries}


async def test_shifted_windows_are_quoted_once_and_a_stale_one_is_not_merged(
    start_daemon: Any, marker: str, workdir: Path
) -> None:
    daemon, path = await _daemon(start_daemon, marker, workdir)
    async with connect(daemon.socket) as client:
        result = await client.compose("the fox", budget=2000)
        offered = await client.query("the fox", budget=2000)

    # every line the two windows quote is in the prompt exactly once, none is lost
    assert _source_lines(result.prompt) == Counter(line.rstrip("\n") for line in LINES[:9])
    by_id = _by_id(result)
    kept, absorbed = by_id["module.txt#L4-9"], by_id["module.txt#L1-6"]
    assert kept["disposition"] == "included"
    assert kept["verification"] == {"state": "source_verified"}
    assert kept["vouched_by"] == ["dense", "lexical"]
    union = "".join(LINES[:9]).encode()
    assert kept["merged"]["range"] == "L1-9"
    assert kept["merged"]["content_digest"] == sha256_digest(union)
    assert absorbed["reason"] == "merged_into"
    assert absorbed["detail"]["kept"]["frame_id"] == "module.txt#L4-9"
    # the citation resolves the label to the union and to both windows' provenance
    (citation,) = result.citations
    assert [p.range for p in citation.provenance] == ["L1-9", "L4-9", "L1-6"]
    # its label names the lines it quotes, in the citation and on the fence
    assert citation.label == "module.txt L1-9"
    assert 'kind="snippet" cite="module.txt L1-9"' in result.prompt
    # its evidence is the union as cut from the file, with the union's range and digest
    (evidence,) = result.evidence
    assert (evidence.frame_id, evidence.range) == ("module.txt#L4-9", "L1-9")
    assert evidence.content == union.decode() and evidence.content_digest == sha256_digest(union)
    # the same frames composed apart pay the overlap (and a fence) twice
    frames = [
        (pid, ContextFrame.model_validate(f))
        for pid in sorted(offered["frames"])
        for f in offered["frames"][pid]
    ]
    apart = compose_for_prompt(frames, 2000)
    overlap = canonical_token_cost("".join(LINES[3:6]))
    assert result.audit.tokens_used <= apart.tokens_used - overlap

    # Line 8 changes after the providers read the file: L4-9 is stale, L1-6 still holds.
    data = path.read_bytes()
    path.write_bytes(data.replace(b"line 08: the quick", b"line 08: a changed"))
    assert address_line_range(path.read_bytes(), "L1-6") == address_line_range(data, "L1-6")
    async with connect(daemon.socket) as client:
        stale = await client.compose("the fox", budget=2000)
    by_id = _by_id(stale)
    assert by_id["module.txt#L4-9"]["reason"] == "source_mismatch"
    detail = by_id["module.txt#L4-9"]["detail"]
    assert detail["range"] == "L4-9" and detail["expected"] != detail["actual"]
    only = by_id["module.txt#L1-6"]
    assert only["disposition"] == "included" and "merged" not in only
    assert only["verification"] == {"state": "source_verified"}
    assert _source_lines(stale.prompt) == Counter(line.rstrip("\n") for line in LINES[:6])
    assert await daemon.stop() == 0
