"""Copy the second public eval's corpus: a few Python standard library modules.

    python evals/stdlib_corpus.py

copies the modules below from the running interpreter's standard library into
``.state/eval/stdlib/`` (under the repository root, git-ignored) and checks that
every gold phrase of ``evals/stdlib.jsonl`` is in its file there. The phrases
quote CPython 3.11's sources; another version may word a docstring differently,
and then this script names the questions whose gold it cannot find (exit 1).
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
from pathlib import Path

MODULES = (
    "argparse.py",
    "base64.py",
    "bisect.py",
    "copy.py",
    "csv.py",
    "difflib.py",
    "fnmatch.py",
    "functools.py",
    "glob.py",
    "heapq.py",
    "json/__init__.py",
    "json/decoder.py",
    "json/encoder.py",
    "json/scanner.py",
    "shlex.py",
    "textwrap.py",
)
HERE = Path(__file__).resolve().parent
TARGET = HERE.parent / ".state" / "eval" / "stdlib"


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def main() -> int:
    source = Path(sysconfig.get_paths()["stdlib"])
    if TARGET.exists():
        shutil.rmtree(TARGET)
    for name in MODULES:
        (TARGET / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, TARGET / name)
    missing = []
    for line in (HERE / "stdlib.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        for gold in question["gold"]:
            text = (TARGET / gold["file"]).read_text(encoding="utf-8")
            if _fold(gold["phrase"]) not in _fold(text):
                missing.append(question["id"])
    print(f"{len(MODULES)} modules from {source} copied to {TARGET}")
    if missing:
        print(f"gold phrases not found (another Python version?): {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
