"""Each project ``hostd init`` writes a config for keeps its state apart: consent
receipts, shadow records and feedback, calibration and handshake records live in a
state directory of its own under the global one's ``projects/``, while its memory
database stays where ``init`` always put it. ``init --force`` over a config that used
the global directory says what stays behind there. Real ``hostd`` child processes in a
fresh home."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from hostd.cli._project import render_project_config
from hostd.config import load_config, parse_config
from hostd.server import private_state_dir
from providers.memory._database import memory_databases
from tests.fixtures.home import fresh_home, hostd_in

# What `hostd init` wrote before projects had state directories of their own: no [host].
OLD_CONFIG = '[shadow]\nenabled = true\nsample = 0\n\n[[provider]]\nid = "files"\n'
OLD_CONFIG += 'command = ["python", "-m", "providers.files", "--root", "."]\n'


def _global(base: Path) -> Path:
    """The global state directory of ``fresh_home(base)`` (no $XDG_STATE_HOME)."""
    return base / "home" / ".local" / "state" / "hostd"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_two_projects_get_state_dirs_of_their_own_under_the_global_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fresh_home(tmp_path)
    monkeypatch.setenv("HOME", env["HOME"])  # the file names its paths from ~
    projects = [tmp_path / "a" / "frob", tmp_path / "b" / "frob"]  # one name, two places
    for project in projects:
        project.mkdir(parents=True)
        made = hostd_in(project, env, "init", "--providers", "files,memory")
        assert made.returncode == 0, made.stderr
        assert made.stderr == ""  # a first init has nothing to say about old state
        assert f"wrote {project / 'hostd.toml'}" in made.stdout
        assert f"next: cd {project} && hostd compose" in made.stdout
        assert f'"args": ["--config", "{project / "hostd.toml"}", "mcp"]' in made.stdout
    states = [load_config(project / "hostd.toml").state_path for project in projects]
    assert states[0] != states[1]
    for state in states:
        assert state.parent == _global(tmp_path) / "projects"
        assert state.name.startswith("frob-")
    # The daemon creates the state directory at start; init made its parents private.
    assert _mode(_global(tmp_path)) == _mode(_global(tmp_path) / "projects") == 0o700
    for state in states:
        private_state_dir(state)  # what the daemon does first: not refused
        assert _mode(state) == 0o700


def test_the_written_config_loads_with_its_state_path_the_projects_own(tmp_path: Path) -> None:
    project = tmp_path / "my proj!"
    project.mkdir()
    text = render_project_config(
        project, providers=("files",), state_dir=tmp_path / "state", semantic_ok=False
    )
    (project / "hostd.toml").write_text(text)
    cfg = load_config(project / "hostd.toml")
    assert cfg.state_path.parent == tmp_path / "state" / "projects"
    assert cfg.state_path.name.startswith("my-proj-")
    # Absolute in the file: the same directory wherever hostd is started from.
    (line,) = [x for x in text.splitlines() if x.startswith("state_dir = ")]
    assert f'"{cfg.state_path}"' in line and cfg.state_path.is_absolute()
    assert parse_config(text, base=tmp_path).state_path == cfg.state_path


def test_the_memory_database_stays_where_init_always_put_it(tmp_path: Path) -> None:
    project = tmp_path / "my proj!"
    project.mkdir()
    state = tmp_path / "state"
    text = render_project_config(project, providers=("memory",), state_dir=state, semantic_ok=False)
    command = parse_config(text, base=project).provider[0].command or []
    digest = hashlib.sha256(str(project).encode()).hexdigest()[:8]
    assert command[command.index("--db") + 1] == str(state / "memory" / f"my-proj-{digest}.db")
    # The project's state directory carries the same name: one slug and digest for both.
    assert parse_config(text, base=project).state_path == state / "projects" / f"my-proj-{digest}"


#: The files of the global state directory the note names, in its order.
LEFT = ("shadow.db", "calibration.json", "consent.sqlite3")


@pytest.mark.parametrize(
    ("old", "present", "noted"),
    [
        (OLD_CONFIG, ["shadow.db"], True),
        (OLD_CONFIG, ["consent.sqlite3", "calibration.json", "shadow.db"], True),
        ("this is [not toml\n", ["calibration.json"], True),  # as if it named no state_dir
        (OLD_CONFIG, [], False),  # nothing there: nothing to say
        ('[host]\nstate_dir = "state"\n' + OLD_CONFIG, ["shadow.db"], False),  # not its files
        (None, ["shadow.db"], False),  # a first init replaces no config
    ],
)
def test_init_force_over_a_config_that_used_the_global_state_dir_says_what_stays_there(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    old: str | None,
    present: list[str],
    noted: bool,
) -> None:
    env = fresh_home(tmp_path)
    monkeypatch.setenv("HOME", env["HOME"])  # the file names its paths from ~
    project = tmp_path / "frob"
    project.mkdir()
    if old is not None:
        (project / "hostd.toml").write_text(old)
    glob = _global(tmp_path)
    glob.mkdir(parents=True, mode=0o700)
    for name in present:
        (glob / name).write_bytes(b"kept")
    made = hostd_in(project, env, "init", "--force", "--providers", "files")
    assert made.returncode == 0, made.stderr
    assert f"wrote {project / 'hostd.toml'}" in made.stdout and "an MCP client" in made.stdout
    own = load_config(project / "hostd.toml").state_path
    lines = made.stderr.splitlines()
    # The replaced file is kept, and said so (another note, before this one).
    kept = f"hostd: note: the replaced hostd.toml is kept as {project / 'hostd.toml.bak'}"
    assert (old is not None) is bool(lines and lines[0].startswith(kept))
    lines = lines[old is not None :]
    if noted:
        (note,) = lines  # one line
        held = ", ".join(name for name in LEFT if name in present)
        assert note.startswith("hostd: note: ") and f"{glob}, holds {held}:" in note
        assert "they stay there" in note and note.endswith(f"now uses {own}")
    else:
        assert lines == []
    # Nothing is copied or moved.
    assert sorted(p.name for p in glob.iterdir() if p.is_file()) == sorted(present)
    assert all((glob / name).read_bytes() == b"kept" for name in present)
    assert not own.exists()


def test_config_path_names_the_state_directory_a_command_here_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fresh_home(tmp_path)
    monkeypatch.setenv("HOME", env["HOME"])  # the file names its paths from ~
    project = tmp_path / "app"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert hostd_in(tmp_path, env, "init", str(project)).returncode == 0
    inside = hostd_in(project, env, "config", "path", "--json")
    assert inside.returncode == 0, inside.stderr
    own = load_config(project / "hostd.toml").state_path
    assert inside.stdout and own != _global(tmp_path)
    assert json.loads(inside.stdout)["state_dir"] == str(own)
    told = hostd_in(project, env, "config", "path")
    assert f"hostd: its state directory: {own}" in told.stderr.splitlines()
    # With no project config, the embedded default's: the global directory.
    outside = hostd_in(elsewhere, env, "config", "path", "--json")
    assert json.loads(outside.stdout)["state_dir"] == str(_global(tmp_path))


def test_the_written_config_names_no_home_so_a_team_can_commit_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fresh_home(tmp_path)
    project = tmp_path / "app"
    project.mkdir()
    assert hostd_in(project, env, "init", "--providers", "files,memory").returncode == 0
    text = (project / "hostd.toml").read_text()
    home = env["HOME"]
    assert home not in text.replace(f"project in {project}", "")  # but the header comment
    assert 'state_dir = "~/.local/state/hostd/projects/app-' in text
    # A teammate's clone, with another home: their own state and memory under their home.
    mate = tmp_path / "mate"
    mate.mkdir()
    monkeypatch.setenv("HOME", str(mate))
    cfg = load_config(project / "hostd.toml")
    assert cfg.state_path.parent == mate / ".local" / "state" / "hostd" / "projects"
    (db,) = memory_databases(cfg)
    assert db.path.parent == mate / ".local" / "state" / "hostd" / "memory"
