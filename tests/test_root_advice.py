"""The trusted root suggested for cited files (``hostd._root_advice``): one that holds them,
written as the config reads it, so copying it into ``trusted_roots`` works."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd._root_advice import cited_path, covering_roots, roots_toml


def test_a_file_under_the_config_s_folder_is_held_by_dot(tmp_path: Path) -> None:
    assert covering_roots([str(tmp_path / "a" / "b.md")], tmp_path) == ["."]


def test_a_file_elsewhere_is_held_by_its_marked_project_else_its_own_folder(
    tmp_path: Path,
) -> None:
    project, repo, loose = tmp_path / "project", tmp_path / "repo", tmp_path / "loose"
    (repo / "pyproject.toml").parent.mkdir()
    (repo / "pyproject.toml").write_text("")
    roots = covering_roots([str(repo / "src" / "x.py"), str(loose / "y.md")], project)
    assert roots == [str(repo), str(loose)]


def test_a_root_inside_another_named_is_left_out(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    roots = covering_roots([str(loose / "deep" / "a.md"), str(loose / "b.md")], None)
    assert roots == [str(loose)]


def test_the_home_directory_is_never_named_for_a_file_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A home holding a repository (its dotfiles) is too wide a root: the file's folder.
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert covering_roots([str(home / "notes" / "a.md")], None) == [str(home / "notes")]


def test_a_cited_uri_is_read_as_the_daemon_reads_it_and_shown_printable() -> None:
    assert cited_path("file:///srv/deploy%20notes.md") == "/srv/deploy notes.md"
    assert cited_path("https://example.com/a.md") is None
    assert cited_path("file:relative.md") is None
    assert roots_toml(["/srv/a\x1b[2J", 'b"c']) == '["/srv/a?[2J", "b\\"c"]'
