"""Export the first public eval's corpus: this repository's docs/, hostd/ and providers/.

    python evals/repo_corpus.py [--commit REV]

writes the three folders as they stand in commit ``PINNED`` (``git archive``)
to ``.state/eval/repo/`` under the repository root (git-ignored) and checks
that every gold phrase of ``evals/repo.jsonl`` is in its file there. The
corpus is pinned so that the set's figures in docs/eval.md do not move each
time the repository is edited (the page itself is part of the corpus). Move
the pin when questions about newer code are added, then measure again;
``--commit`` exports another commit for a one-off run. Exit 1 names the
questions whose gold is missing; exit 2 when the commit cannot be read (not
a git checkout, or a shallow one without it).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

#: The commit the tables in docs/eval.md were measured on.
PINNED = "1ecc632"
FOLDERS = ("docs", "hostd", "providers")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = ROOT / ".state" / "eval" / "repo"


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def archive(commit: str) -> bytes:
    """``git archive`` of ``FOLDERS`` at ``commit``, as a tar; ``OSError`` if git cannot."""
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit, *FOLDERS],
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise OSError("git is not installed") from None
    if done.returncode != 0:
        raise OSError(done.stderr.decode(errors="replace").strip() or "git archive failed")
    return done.stdout


def export(commit: str, target: Path) -> None:
    """Write ``FOLDERS`` at ``commit`` to ``target`` (emptied first); ``OSError`` if git cannot."""
    tar = archive(commit)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(target, filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--commit", default=PINNED, help="the commit to export (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    try:
        export(args.commit, TARGET)
    except OSError as exc:
        print(f"cannot export {args.commit}: {exc}", file=sys.stderr)
        return 2
    missing = []
    for line in (HERE / "repo.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        for gold in question["gold"]:
            path = TARGET / gold["file"]
            if not path.is_file() or _fold(gold["phrase"]) not in _fold(path.read_text("utf-8")):
                missing.append(question["id"])
    print(f"{', '.join(FOLDERS)} at {args.commit} exported to {TARGET}")
    if missing:
        print(f"gold phrases not found at {args.commit}: {sorted(set(missing))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
