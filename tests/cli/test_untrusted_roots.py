"""A frame dropped as ``untrusted_source`` is told with the file it cites and the
trusted roots in force, so a root that covers none of a provider's files is seen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.cli._outcome import leg_failures, no_evidence
from tests.fixtures.cli import run_hostd
from tests.fixtures.facts_provider import FACTS

ROOT = Path(__file__).resolve().parents[2]


def _entry(pid: str, reason: str, uri: str = "") -> dict[str, Any]:
    detail = {"uri": uri, "range": "L1-3", "provenance": 0} if uri else {}
    return {"frame": {"provider_id": pid}, "reason": reason, "detail": detail}


def _result(prompt: str, *entries: dict[str, Any]) -> dict[str, Any]:
    legs = sorted({e["frame"]["provider_id"] for e in entries})
    return {
        "prompt": prompt,
        "audit": {"entries": list(entries)},
        "providers": [{"provider_id": pid, "status": "ok"} for pid in legs],
    }


def test_a_dropped_frame_names_the_file_and_the_roots_in_force() -> None:
    result = _result(
        "some evidence",
        _entry("files", "untrusted_source", "file:///srv/docs/deploy%20notes.md"),
        _entry("files", "untrusted_source", "file:///srv/docs/other.md"),
    )
    (line,) = leg_failures(result, roots={"files": [Path("/srv/elsewhere")]})
    assert line == (
        "  files: ok, but 2 frame(s) dropped: untrusted_source 2 (/srv/docs/deploy notes.md "
        'is outside its trusted roots (/srv/elsewhere): add "/srv/docs" to its '
        'trusted_roots, or set untrusted = "include" to keep such frames unverified)'
    )


def test_the_root_to_add_is_the_cited_files_project_relative_to_the_config_or_absolute(
    tmp_path: Path,
) -> None:
    """A file under the config's directory is held by ``"."``; one elsewhere by its
    project's directory (a repository's), else its own, absolute: the root named holds
    every file cited, so copying it works."""
    project, notes, repo = tmp_path / "project", tmp_path / "notes", tmp_path / "wiki"
    (repo / ".git").mkdir(parents=True)
    entries = [
        _entry("files", "untrusted_source", f"file://{notes}/deploy.md"),
        _entry("files", "untrusted_source", f"file://{project}/docs/guide.md"),
        _entry("files", "untrusted_source", f"file://{repo}/pages/a/b.md"),
        _entry("files", "untrusted_source", f"file://{notes}/sub/more.md"),
    ]
    (line,) = leg_failures(_result("x", *entries), roots={"files": [project / "src"]}, base=project)
    assert f'add "{notes}", ".", "{repo}" to its trusted_roots' in line, line
    # With no config's directory known, every root is absolute.
    (line,) = leg_failures(_result("x", entries[1]), roots={"files": [project / "src"]})
    assert f'add "{project}/docs" to its trusted_roots' in line, line


def test_the_roots_named_are_bounded_and_shortened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ann")
    long = Path("/data/" + "deep/" * 40 + "corpus")
    roots = [Path("/home/ann/src"), long, Path("/a"), Path("/b"), Path("/c")]
    result = _result("x", _entry("files", "untrusted_source", "file:///home/ann/x.md"))
    (line,) = leg_failures(result, roots={"files": roots})
    named = line.split("trusted roots (", 1)[1].split("):", 1)[0]
    shown = named.split(", ")
    assert shown[0] == "~/src" and shown[2] == "/a and 2 more"
    assert (
        len(shown[1]) <= 120
        and "…" in shown[1]
        and shown[1].startswith("/data/")
        and shown[1].endswith("corpus")
    )
    assert "~/x.md is outside" in line


def test_a_cited_path_reaches_the_terminal_without_its_control_characters() -> None:
    # The URI is the provider's: percent-decoded, an ESC would drive the user's terminal.
    uri = "file:///srv/%1B%5B2Jdocs/a%0Ab.md"
    result = _result("x", _entry("files", "untrusted_source", uri))
    (line,) = leg_failures(result, roots={"files": [Path("/srv/elsewhere")]})
    assert "\x1b" not in line and "\n" not in line
    assert "/srv/?[2Jdocs/a | b.md is outside" in line


def test_an_empty_prompt_says_why_its_frames_were_untrusted() -> None:
    result = _result("", _entry("files", "untrusted_source", "file:///srv/docs/deploy.md"))
    lines = no_evidence(result, {"files": [Path("/srv/elsewhere")]})
    assert lines is not None
    (line,) = [x for x in lines if x.startswith("  files: ok")]
    assert "/srv/docs/deploy.md is outside its trusted roots (/srv/elsewhere)" in line


def test_roots_not_known_here_keep_the_general_words() -> None:
    result = _result("x", _entry("far", "untrusted_source", "file:///srv/a.md"))
    (line,) = leg_failures(result)  # e.g. a provider of a daemon's other config
    assert "/srv/a.md is outside the trusted roots (host.untrusted)" in line


def test_compose_names_the_root_that_covers_none_of_a_providers_files(tmp_path: Path) -> None:
    docs, elsewhere = tmp_path / "docs", tmp_path / "elsewhere"
    docs.mkdir()
    elsewhere.mkdir()
    (docs / "deploy.md").write_text("# Deploy\n\nDeploys happen on Tuesdays.\n")
    files = ["python", "-m", "providers.files", "--root", "docs", "--no-cache"]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\n'
        'trusted_roots = ["elsewhere"]\ntimeout_ms = 60000\n'
    )
    done = run_hostd("--config", str(config), "compose", "when are deploys")
    assert done.returncode == 1, done.stderr  # every frame dropped: the prompt is empty
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("hostd:   files: ok")]
    # Each path may be cut in its middle when long: their ends are kept.
    assert "/docs/deploy.md is outside its trusted roots (" in line, line
    # Under the config's directory: "." holds it.
    assert '/elsewhere): add "." to its trusted_roots' in line, line


def test_compose_names_a_root_outside_the_project_that_copied_keeps_the_frames(
    tmp_path: Path,
) -> None:
    """A provider indexing a folder outside the config's directory: ``"."`` would not
    hold its files, so the root named is that folder, absolute; with it added, its
    frames are re-read and kept, checked."""
    project, docs = tmp_path / "project", tmp_path / "docs"
    project.mkdir()
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploy\n\nDeploys happen on Tuesdays.\n")
    files = ["python", "-m", "providers.files", "--root", str(docs), "--no-cache"]
    config = project / "hostd.toml"
    head = (
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"
    )
    config.write_text(head + 'trusted_roots = ["."]\n')
    done = run_hostd("--config", str(config), "compose", "when are deploys")
    assert done.returncode == 1, done.stderr  # every frame dropped: the prompt is empty
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("hostd:   files: ok")]
    assert f'add "{docs}" to its trusted_roots' in line, line
    config.write_text(head + f'trusted_roots = [".", "{docs}"]\n')
    result = _compose_json(config, "when are deploys")
    states = [e["verification"] for e in result["audit"]["entries"]]
    assert states and all(s == {"state": "source_verified"} for s in states), states


def test_compose_says_frames_whose_file_digest_did_not_match_were_dropped(
    tmp_path: Path,
) -> None:
    facts = tmp_path / "facts.md"
    facts.write_text("".join(f"- {content}\n" for _, _, content in FACTS), encoding="utf-8")
    command = [
        "python",
        str(ROOT / "tests/fixtures/facts_provider.py"),
        "file_text_digest",
        str(facts),
    ]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f"trusted_roots = [{json.dumps(str(tmp_path))}]\n"
        f'[[provider]]\nid = "facts"\ncommand = {json.dumps(command)}\ntimeout_ms = 60000\n',
        encoding="utf-8",
    )
    done = run_hostd("--config", str(config), "compose", "how is the configuration loaded")
    assert done.returncode == 1, done.stderr  # every frame dropped: the prompt is empty
    (audit,) = [x for x in done.stderr.splitlines() if "audit: " in x]
    # Offered, and dropped for what the provider sent: not outranked, not unchecked.
    assert "providers: facts=ok(0 of 3, 3 dropped);" in audit, audit
    assert "degraded: frames_unverified(facts: source_mismatch);" in audit, audit


# -- a file citation of a provider with no trusted root: kept, never shown as checked -----


def _facts_config(tmp_path: Path, mode: str, roots: str = "") -> tuple[Path, Path]:
    """A config of the facts provider citing its lines of ``facts.md`` (``mode``), with
    ``roots`` (a ``trusted_roots`` line) or none, as README's ``[[provider]]`` has."""
    facts = tmp_path / "facts.md"
    facts.write_text("".join(f"- {content}\n" for _, _, content in FACTS), encoding="utf-8")
    command = ["python", str(ROOT / "tests/fixtures/facts_provider.py"), mode, str(facts)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "facts"\ncommand = {json.dumps(command)}\ntimeout_ms = 60000\n'
        + roots,
        encoding="utf-8",
    )
    return config, facts


def _compose_json(config: Path, goal: str = "how is the configuration loaded") -> dict[str, Any]:
    done = run_hostd("--config", str(config), "compose", goal, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("mode", ["file_cited", "file_text_digest"])
def test_a_file_citation_not_re_read_is_kept_fenced_as_unverified(
    tmp_path: Path, mode: str
) -> None:
    """No trusted root: the file is never re-read, so a right digest and a wrong one are
    alike unchecked; each frame is kept and fenced ``verified="no"``, never shown checked."""
    config, _ = _facts_config(tmp_path, mode)
    result = _compose_json(config)
    included = [e for e in result["audit"]["entries"] if e["disposition"] == "included"]
    assert len(included) == 3, result["audit"]
    for entry in included:
        assert entry["verification"] == {
            "state": "unverifiable",
            "reason": "no_trusted_root",
            "content_checked": True,
        }, entry
    fences = [x for x in result["prompt"].splitlines() if x.startswith("<frame ")]
    assert len(fences) == 3 and all(x.endswith(' verified="no">') for x in fences), fences


def test_a_file_citation_re_read_under_trusted_roots_is_fenced_as_checked(
    tmp_path: Path,
) -> None:
    config, _ = _facts_config(tmp_path, "file_cited", 'trusted_roots = ["."]\n')
    result = _compose_json(config)
    states = [e["verification"] for e in result["audit"]["entries"]]
    assert states == [{"state": "source_verified"}] * 3, states
    assert 'verified="no"' not in result["prompt"]


# -- whose frames another provider's block took in -------------------------------------


def test_compose_names_whose_frames_a_files_chunk_contained(tmp_path: Path) -> None:
    """A provider citing lines of a project file that ``files`` also quotes loses its
    frames to ``files``'s chunk (``contained_in``): the summary names whose, and which
    block, so ``facts=ok(0 of 3)`` is explained without ``--json``."""
    config, facts = _facts_config(tmp_path, "file_cited")
    files = ["python", "-m", "providers.files", "--root", ".", "--no-cache", "--exclude", "*.toml"]
    with config.open("a", encoding="utf-8") as f:
        f.write(f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\ncwd = "."\n')
        f.write('trusted_roots = ["."]\ntimeout_ms = 60000\n')
    done = run_hostd("--config", str(config), "compose", "how is the configuration loaded")
    assert done.returncode == 0, done.stderr
    (audit,) = [x for x in done.stderr.splitlines() if "audit: " in x]
    assert "contained_in 3 (facts 3 in files facts.md L1-3)" in audit, audit
    assert "facts=ok(0 of 3)" in audit, audit
