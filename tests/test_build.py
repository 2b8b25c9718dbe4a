"""Which build runs (hostd/_build.py, setup.py): the release and the commit, from the
checkout it is imported from or from what the build wrote; ``hostd --version`` says it.
Real ``git`` repositories in a temporary directory; real ``hostd`` and ``setup.py``
processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import hostd
from hostd import _build
from hostd._build import build_version, checkout_label
from hostd.cli._daemon import other_build
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def test_a_checkout_is_labelled_by_its_commit_and_dirty_by_its_tracked_files(
    tmp_path: Path,
) -> None:
    assert checkout_label(tmp_path) is None  # no checkout
    _git(tmp_path, "init", "-q")
    assert checkout_label(tmp_path) is None  # no commit yet
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    sha = _git(tmp_path, "rev-parse", "HEAD")
    assert checkout_label(tmp_path) == f"g{sha[:7]}"
    # A build's own leftovers (build/, *.egg-info) are untracked: still that commit.
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "b.py").write_text("")
    assert checkout_label(tmp_path) == f"g{sha[:7]}"
    (tmp_path / "a.py").write_text("x = 2\n")
    assert checkout_label(tmp_path) == f"g{sha[:7]}.dirty"


def test_an_install_says_the_commit_its_build_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_build, "BUILD_FILE", tmp_path / "build.json")
    assert _build._built_label() is None  # none written: the release alone
    (tmp_path / "build.json").write_text(json.dumps({"label": "g1234567.dirty"}))
    assert _build._built_label() == "g1234567.dirty"
    (tmp_path / "build.json").write_text("{not json")
    assert _build._built_label() is None


def test_the_build_writes_the_checkouts_commit_into_the_package(tmp_path: Path) -> None:
    # setup.py's build step, as `pip install ./hostd` runs it, in a checkout of its own
    # (the build leaves its egg-info beside setup.py).
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, repo / name)
    shutil.copytree(ROOT / "hostd", repo / "hostd", ignore=shutil.ignore_patterns("__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "a release")
    sha = _git(repo, "rev-parse", "HEAD")
    built = tmp_path / "built"
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(built)],
        cwd=repo,
        capture_output=True,
        check=True,
        timeout=120,
    )
    written = json.loads((built / "hostd" / "_data" / "build.json").read_text())
    assert written == {"label": f"g{sha[:7]}"}


def test_version_names_the_commit_this_hostd_runs_from() -> None:
    label = checkout_label(ROOT)
    if label is None:
        pytest.skip("the tests run from no git checkout: nothing to name")
    assert build_version() == f"{hostd.__version__}+{label}"
    done = run_hostd("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"hostd {hostd.__version__}+{label}\n"


def test_status_notes_a_daemon_that_runs_another_build() -> None:
    status = {"version": "0.1.0+gaaaaaaa", "pid": 7}
    assert other_build(status, "/run/h.sock", "0.1.0+gaaaaaaa") is None
    assert other_build({"pid": 7}, "/run/h.sock", "0.1.0+gbbbbbbb") is None  # too old to say
    said = other_build(status, "/run/h.sock", "0.1.0+gbbbbbbb")
    assert said is not None
    assert said.startswith("the daemon at /run/h.sock runs hostd 0.1.0+gaaaaaaa; ")
    assert "this hostd is 0.1.0+gbbbbbbb" in said and "`hostd stop`" in said


def test_the_dev_install_is_a_plain_path_without_a_deprecation_warning(tmp_path: Path) -> None:
    """``scripts/_venv.sh``'s editable install, built by setuptools as pip builds it (with
    the config settings the script passes): a ``.pth`` holding the checkout's path (what
    mypy and editors follow), and no warning, which newer pips print through
    ``--quiet`` as a 12-line ``BuildBackendWarning`` that reads like a failure."""
    script = (ROOT / "scripts" / "_venv.sh").read_text(encoding="utf-8")
    settings: dict[str, str] = {}
    for word in script.split("--config-settings")[1:]:
        key, _, value = word.split()[0].partition("=")
        settings[key] = value
    project = tmp_path / "hostd"
    project.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for package in ("hostd", "providers"):
        shutil.copytree(
            ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path / "wheel"
    out.mkdir()
    build = (
        "import sys; from setuptools import build_meta; "
        f"print(build_meta.build_editable({str(out)!r}, {settings!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", build],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    with zipfile.ZipFile(out / done.stdout.split()[-1]) as wheel:
        (pth,) = [n for n in wheel.namelist() if n.endswith(".pth")]
        lines = wheel.read(pth).decode().split()
    assert lines == [str(project)], lines
