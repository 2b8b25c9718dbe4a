"""``.hostdignore``: paths only hostd should skip, said once for both bundled providers
(they share the corpus walk), at any level, with or without ``--no-gitignore``; a
``!`` line brings back what a ``.gitignore`` keeps out, never a secret."""

from __future__ import annotations

from pathlib import Path

from providers._corpus import IGNORE_FILE, Corpus, CorpusOptions

WORD = "zebracorn"


def _rels(root: Path, *, honour_gitignore: bool = True) -> set[str]:
    corpus = Corpus(CorpusOptions(root=root, honour_gitignore=honour_gitignore))
    corpus.refresh()
    return {c.rel for c in corpus.chunks}


def test_hostdignore_keeps_paths_out_at_any_level(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for rel in ("src/app.py", "src/fixtures/big.json", "docs/a.md", "docs/old/b.md", "build/x.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{WORD}\n", encoding="utf-8")
    (root / ".gitignore").write_text("build/\n", encoding="utf-8")
    (root / IGNORE_FILE).write_text("fixtures/\n!build/\n", encoding="utf-8")
    (root / "docs" / IGNORE_FILE).write_text("old/\n", encoding="utf-8")
    (root / ".env").write_text(f"TOKEN={WORD}\n", encoding="utf-8")
    (root / IGNORE_FILE).write_text("fixtures/\n!build/\n!.env\n", encoding="utf-8")
    want = {
        "src/app.py",
        "docs/a.md",
        "build/x.md",
        ".gitignore",
    }
    assert _rels(root) == want  # build/ brought back; .env never; the ignore files not
    assert _rels(root, honour_gitignore=False) == want
    (root / IGNORE_FILE).unlink()
    assert "src/fixtures/big.json" in _rels(root) and "build/x.md" not in _rels(root)
