"""What the model reads of where a ``files`` frame sits: ``hostd compose`` run as a user
runs it, the bundled provider over a small tree, each fence naming the item or section
its chunk is in, beyond its cite."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT


def _tree(root: Path) -> None:
    code = ["class Registry:", "    def build_index(self, names):"]
    code += [f"        wombat_{i} = names.count('wombat {i}') + {i}" for i in range(60)]
    (root / "registry.py").write_text("\n".join(code) + "\n")
    doc = ["# Guide", "", "Intro.", "", "## Rotating the keys", ""]
    doc += [f"Step {i}: rotate the wombat credential number {i}." for i in range(30)]
    (root / "guide.md").write_text("\n".join(doc) + "\n")


def test_a_composed_prompt_names_each_frames_item_or_section(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    _tree(tree)
    words = ["python", "-m", "providers.files", "--root", str(tree)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"  # generous: child start-up is slow on a loaded machine
        # Its sources re-read, as `hostd init` writes it: the fences are a checked frame's
        # (an unrooted one's end in verified="no").
        f"trusted_roots = [{json.dumps(str(tree))}]\n"
    )
    done = run_hostd("--config", str(config), "compose", "wombat", "--budget", "4000", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    fences = re.findall(r'^<frame [^\n]* cite="([^"]*)"[^\n]*>$', result["prompt"], re.MULTILINE)
    lines = re.findall(r"^<frame [^\n]*>$", result["prompt"], re.MULTILINE)
    by_cite = dict(zip(fences, lines, strict=True))
    # Every chunk but the first (which starts at the class line, in no item) is inside.
    code = [f for c, f in by_cite.items() if c.startswith("registry.py L")]
    inside = [f for f in code if 'cite="registry.py L1-' not in f]
    assert len(inside) == len(code) - 1 and all(
        f.endswith(' in="class Registry › def build_index">') for f in inside
    )
    rotating = [f for c, f in by_cite.items() if c.startswith("guide.md") and "Rotating" in f]
    assert rotating and all(f.endswith(' section="Rotating the keys">') for f in rotating)
    # The citation map is as before: each cited by its label, no title in it.
    assert sorted(c["label"] for c in result["citations"]) == sorted(by_cite)
