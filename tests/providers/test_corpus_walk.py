"""What the corpus walk enters and what its ready line says about the rest: a tagged
cache directory or hostd's own state directory is never entered, nor a Python tool's
virtualenv, ``vendor/``, package metadata and SVG pictures are left out unless
``.hostdignore`` brings them back, git's index is not read (``.hostdignore``
is the way back for a force-added file), and the files left out are counted against
the files seen, binaries apart, a few of each named."""

from __future__ import annotations

import os
from pathlib import Path

from hostd._state_tag import STATE_TAG
from hostd.server import private_state_dir
from providers._corpus import (
    DEFAULT_MAX_FILE_BYTES,
    IGNORE_FILE,
    SKIP_BINARY,
    SKIP_DEFAULT,
    SKIP_DEFAULT_DIR,
    SKIP_NOT_UTF8,
    SKIP_SECRET,
    SKIP_TOO_LARGE,
    Corpus,
    CorpusOptions,
    files_figure,
    not_indexed,
    skipped_summary,
)

WORD = "zebracorn"
CACHEDIR_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"


def _write(root: Path, rel: str, data: bytes | str = f"{WORD}\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)


def _walked(
    root: Path, *, honour_gitignore: bool = True, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> Corpus:
    options = CorpusOptions(
        root=root, honour_gitignore=honour_gitignore, max_file_bytes=max_file_bytes
    )
    corpus = Corpus(options)
    corpus.refresh()
    return corpus


def _rels(root: Path, *, honour_gitignore: bool = True) -> set[str]:
    return {c.rel for c in _walked(root, honour_gitignore=honour_gitignore).chunks}


# --- directories never entered -----------------------------------------------------------


def test_hostds_state_directory_inside_the_project_is_never_indexed(tmp_path: Path) -> None:
    # A user's state_dir = ".hostd": the daemon tags it as it makes it ready.
    root = tmp_path / "p"
    _write(root, "src/app.py")
    state = root / ".hostd"
    private_state_dir(state)
    _write(root, ".hostd/handshakes/files.json", f'{{"name": "{WORD}"}}\n')
    _write(root, ".hostd/memory.json", f'{{"note": "{WORD}"}}\n')
    assert (state / STATE_TAG).is_file()
    assert _rels(root) == {"src/app.py"}
    assert _rels(root, honour_gitignore=False) == {"src/app.py"}
    # Whatever it is called, and a tag that is there already is kept as it is.
    moved = root / "ops" / "hostd-state"
    moved.parent.mkdir()
    state.rename(moved)
    before = (moved / STATE_TAG).stat().st_mtime_ns
    private_state_dir(moved)
    assert (moved / STATE_TAG).stat().st_mtime_ns == before
    assert _rels(root) == {"src/app.py"}


def test_a_directory_tagged_as_a_cache_is_never_indexed_and_a_bare_name_tags_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    _write(root, "src/main.rs")
    _write(root, "target/CACHEDIR.TAG", CACHEDIR_SIGNATURE + b"\n# This file is a cache tag\n")
    _write(root, "target/debug/build/out.rs")
    # Not the convention's signature: a file that merely has the name marks nothing.
    _write(root, "notes/CACHEDIR.TAG", "Signature: something else\n")
    _write(root, "notes/todo.md")
    _write(root, "fake/HOSTD_STATE.TAG", "not a tag\n")
    _write(root, "fake/kept.md")
    assert _rels(root) == {
        "src/main.rs",
        "notes/CACHEDIR.TAG",
        "notes/todo.md",
        "fake/HOSTD_STATE.TAG",
        "fake/kept.md",
    }


def test_a_symbolic_link_named_as_a_tag_tags_nothing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (tmp_path / "tag").write_bytes(CACHEDIR_SIGNATURE)
    _write(root, "lib/code.py")
    os.symlink(tmp_path / "tag", root / "lib" / "CACHEDIR.TAG")
    assert _rels(root) == {"lib/code.py"}


def test_a_root_that_holds_a_tag_is_indexed_all_the_same(tmp_path: Path) -> None:
    # A provider rooted there was pointed at it on purpose.
    root = tmp_path / "state"
    private_state_dir(root)
    _write(root, "notes.md")
    assert "notes.md" in _rels(root)


def test_vendor_is_left_out_at_any_depth_unless_hostdignore_brings_it_back(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    _write(root, "main.go")
    _write(root, "vendor/github.com/x/y/y.go")
    _write(root, "svc/vendor/z/z.go")
    _write(root, "docs/vendor.md")  # a file of that name is no vendor/ directory
    own = {"main.go", "docs/vendor.md"}
    assert _rels(root) == own
    assert _rels(root, honour_gitignore=False) == own
    # A .gitignore that re-includes vendor/ says what git commits, not what hostd reads.
    _write(root, ".gitignore", "!vendor/\n")
    assert _rels(root) == own | {".gitignore"}
    _write(root, IGNORE_FILE, "!vendor/\n")
    assert _rels(root) == own | {
        ".gitignore",
        "vendor/github.com/x/y/y.go",
        "svc/vendor/z/z.go",
    }


def test_package_metadata_and_svg_pictures_are_left_out_unless_hostdignore_brings_them_back(
    tmp_path: Path,
) -> None:
    # As in Django's sdist: SOURCES.txt names every file, so it matched every goal.
    root = tmp_path / "p"
    _write(root, "django/db/models/query.py")
    _write(root, "Django.egg-info/SOURCES.txt", f"django/{WORD}.py\n")
    _write(root, "site-packages/six-1.16.0.dist-info/METADATA", f"Summary: {WORD}\n")
    _write(root, "docs/internals/_images/triage_process.svg", f"<svg><title>{WORD}</title>\n")
    _write(root, "PKG-INFO", f"Metadata-Version: 2.1\nSummary: {WORD}\n")  # the sdist's
    _write(root, "docs/egg-info.md")  # a file of that name is no package metadata
    _write(root, "docs/PKG-INFO")  # only the root's is the sdist's
    own = {"django/db/models/query.py", "docs/egg-info.md", "docs/PKG-INFO"}
    assert _rels(root) == own
    assert _rels(root, honour_gitignore=False) == own
    _write(root, IGNORE_FILE, "!*.egg-info/\n!*.svg\n!/PKG-INFO\n")
    assert _rels(root) == own | {
        "PKG-INFO",
        "Django.egg-info/SOURCES.txt",
        "docs/internals/_images/triage_process.svg",
    }


def test_an_svg_picture_is_left_out_whatever_the_case_of_its_suffix(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "README.md")
    for name in ("logo.svg", "LOGO.SVG", "assets/Icon.Svg"):
        _write(root, name, f"<svg><title>{WORD}</title>\n")
    assert _rels(root) == {"README.md"}
    # ``!*.svg`` brings back the lower-case ones, as git matches; every case by a class.
    _write(root, IGNORE_FILE, "!*.svg\n")
    assert _rels(root) == {"README.md", "logo.svg"}
    _write(root, IGNORE_FILE, "!*.[sS][vV][gG]\n")
    assert _rels(root) == {"README.md", "logo.svg", "LOGO.SVG", "assets/Icon.Svg"}


def test_the_virtualenvs_and_downloads_of_python_tools_are_never_indexed(tmp_path: Path) -> None:
    # No .gitignore keeps them out here (an sdist has none), and no ignore line brings
    # them back: they are installed third-party packages, as .venv is.
    root = tmp_path / "p"
    _write(root, "setup.py")
    _write(root, ".tox/py311/lib/python3.11/site-packages/six.py")
    _write(root, ".nox/tests/lib/python3.11/site-packages/six.py")
    _write(root, ".eggs/setuptools_scm-8.0.egg/setuptools_scm/git.py")
    _write(root, IGNORE_FILE, "!.tox/\n!.nox/\n!.eggs/\n")
    assert _rels(root) == {"setup.py"}
    assert _rels(root, honour_gitignore=False) == {"setup.py"}


def test_the_ignore_files_of_hostd_are_settings_not_evidence(tmp_path: Path) -> None:
    # A goal about "tools" must not be answered with the .hostdignore line that hides
    # tools/: hostd's own ignore files are left out at every level, as `hostd init`
    # keeps hostd.toml out, unless the root's brings them back.
    root = tmp_path / "p"
    _write(root, "README.md")
    _write(root, IGNORE_FILE, "tools/\n")
    _write(root, f"svc/{IGNORE_FILE}", "fixtures/\n")
    _write(root, "tools/gen.py")
    assert _rels(root) == {"README.md"}
    assert _rels(root, honour_gitignore=False) == {"README.md"}
    _write(root, IGNORE_FILE, f"tools/\n!/{IGNORE_FILE}\n")
    assert _rels(root) == {"README.md", IGNORE_FILE}


def test_a_file_git_tracks_though_ignored_is_left_out_until_hostdignore_names_it(
    tmp_path: Path,
) -> None:
    # `git add -f` puts an ignored file in git's index; the walk reads the ignore files
    # only (no git needed), so .hostdignore is how such a file is brought back.
    root = tmp_path / "p"
    _write(root, ".gitignore", "*.log\nbuild/\n")
    _write(root, "logs/audit.log")
    _write(root, "build/release-notes.md")
    _write(root, "build/out.md")
    assert _rels(root) == {".gitignore"}
    # A file: its own line. In an ignored directory: the directory first, as in git.
    _write(root, IGNORE_FILE, "!logs/audit.log\n!build/\nbuild/*\n!build/release-notes.md\n")
    assert _rels(root) == {".gitignore", "logs/audit.log", "build/release-notes.md"}


# --- what the ready line says ------------------------------------------------------------


def test_binary_files_are_counted_apart_from_text_that_is_not_utf8(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "ok.py")
    _write(root, "legacy.py", f"# {WORD}\nsaid = 'Don\x92t'\n".encode("latin-1"))
    _write(root, "blob.txt", f"{WORD}\0\0\0 valid UTF-8 all the same\n")  # was counted nowhere
    _write(root, "logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\xfe")
    corpus = _walked(root)
    assert {c.rel for c in corpus.chunks} == {"ok.py"}
    assert corpus.skipped == {SKIP_BINARY: 2, SKIP_NOT_UTF8: 1}
    assert skipped_summary(corpus.skipped) == "2 binary files, 1 file not UTF-8"
    assert (corpus.file_count, corpus.seen_count) == (1, 4)
    # The next walk reads nothing again and says the same.
    corpus.refresh()
    assert corpus.skipped == {SKIP_BINARY: 2, SKIP_NOT_UTF8: 1}
    assert (corpus.file_count, corpus.seen_count) == (1, 4)


def test_the_ready_line_counts_files_indexed_of_files_seen_and_names_a_few_left_out(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    for name in ("a.py", "b.py", "c.md"):
        _write(root, f"src/{name}")
    for n in range(5):
        _write(root, f"data/dump{n}.bin", b"\0" * 10)
    _write(root, "big.json", "[" + "1," * 400 + "1]\n")
    _write(root, ".env", "TOKEN=x\n")
    _write(root, "empty.txt", "")  # holds nothing: neither indexed nor left out
    _write(root, "ignored.log", "x\n")
    _write(root, ".gitignore", "*.log\n")  # what the user's own rules drop is not counted
    corpus = _walked(root, max_file_bytes=500)
    assert corpus.file_count == 4  # src/*, .gitignore
    assert files_figure(corpus) == "4 of 11 files"
    assert corpus.skipped == {SKIP_BINARY: 5, SKIP_TOO_LARGE: 1, SKIP_SECRET: 1}
    assert not_indexed(corpus) == (
        "; not indexed: 1 secret file (.env), "
        "5 binary files (data/dump0.bin, data/dump1.bin, data/dump2.bin and 2 more), "
        "1 file over --max-file-bytes (big.json)"
    )
    # Every file seen indexed: one figure.
    for rel in (".env", "big.json"):
        (root / rel).unlink()
    for n in range(5):
        (root / "data" / f"dump{n}.bin").unlink()
    corpus.refresh()
    assert (files_figure(corpus), not_indexed(corpus)) == ("4 files", "")


def test_the_ready_line_counts_what_the_default_ignores_left_out(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "setup.py")
    _write(root, "PKG-INFO", f"Summary: {WORD}\n")
    _write(root, "docs/logo.svg", "<svg/>\n")
    _write(root, "Django.egg-info/SOURCES.txt", "setup.py\n")
    _write(root, "svc/vendor/z/z.go")
    _write(root, "assets/icon.svg", "<svg/>\n")
    _write(root, "assets/keep.md")
    # What the user's own ignore files leave out is not counted, nor those files.
    _write(root, ".gitignore", "assets/\n")
    _write(root, IGNORE_FILE, "*.egg-info/\n")
    _write(root, f"svc/{IGNORE_FILE}", "fixtures/\n")
    corpus = _walked(root)
    assert {c.rel for c in corpus.chunks} == {"setup.py", ".gitignore"}
    assert corpus.skipped == {SKIP_DEFAULT: 2, SKIP_DEFAULT_DIR: 1}
    # A directory is not read: its files are not counted as seen.
    assert files_figure(corpus) == "2 of 4 files"
    assert not_indexed(corpus) == (
        "; not indexed: 2 files skipped by default (PKG-INFO, docs/logo.svg), "
        "1 directory skipped by default (svc/vendor/)"
    )
    # Brought back by a ``!`` line: indexed, no longer counted.
    _write(root, IGNORE_FILE, "*.egg-info/\n!/PKG-INFO\n!vendor/\n")
    corpus.refresh()
    assert corpus.skipped == {SKIP_DEFAULT: 1}
    assert files_figure(corpus) == "4 of 5 files"


def test_a_named_path_is_one_bounded_line_whatever_its_bytes(tmp_path: Path) -> None:
    root = tmp_path / "p"
    long_dir = "d" * 100
    _write(root, f"{long_dir}/x.bin", b"\0")
    _write(root, "two\nlines.bin", b"\0")
    undecodable = os.fsdecode(b"caf\xe9.bin")  # a Latin-1 name: a lone surrogate
    _write(root, undecodable, b"\0")
    corpus = _walked(root)
    summary = skipped_summary(corpus.skipped, corpus.skipped_paths)
    assert summary.startswith("3 binary files (caf?.bin, ddd"), summary
    assert "two?lines.bin" in summary and "\n" not in summary
    summary.encode("utf-8")  # no surrogate left to break a JSON wire
    long_shown = summary.split(", ")[1]
    assert "…" in long_shown and len(long_shown) <= 60 and long_shown.endswith("/x.bin")
