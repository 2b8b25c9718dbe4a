"""The build step that records which commit a hostd package was built from.

Everything else about the package is in pyproject.toml. Built from a git checkout
(``pip install ./hostd``), the wheel gets ``hostd/_data/build.json`` holding the
commit's label (``g0fda9cc``, ``g0fda9cc.dirty``), so the installed ``hostd --version``
and ``host/status`` say which build runs (hostd/_build.py reads it). An sdist made from
a checkout carries the file, so a wheel built from that sdist keeps it. An editable
install writes nothing: its ``hostd`` reads the checkout itself.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
BUILD_FILE = Path("hostd") / "_data" / "build.json"


def _label() -> str | None:
    # hostd/_build.py alone, loaded from its file: the build imports no hostd dependency.
    spec = importlib.util.spec_from_file_location("_hostd_build", HERE / "hostd" / "_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    label: str | None = module.checkout_label(HERE)
    return label


def _write(target: Path) -> None:
    """Write the checkout's label into ``target`` or, built from an sdist (no checkout),
    copy the one that sdist carries; with neither, write nothing."""
    label = _label()
    target.parent.mkdir(parents=True, exist_ok=True)
    if label is not None:
        target.write_text(json.dumps({"label": label}) + "\n", encoding="utf-8")
    elif (HERE / BUILD_FILE).is_file() and (HERE / BUILD_FILE).resolve() != target.resolve():
        shutil.copyfile(HERE / BUILD_FILE, target)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            _write(Path(self.build_lib) / BUILD_FILE)


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: Any) -> None:
        super().make_release_tree(base_dir, files)
        _write(Path(base_dir) / BUILD_FILE)


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
