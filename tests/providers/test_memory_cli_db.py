"""Which database ``python -m providers.memory add`` (and the other editing commands)
writes: the project's, when run inside a project ``hostd init`` set up, so the
project's memory provider serves it; the global default outside any project; a
refusal when the config has several; ``--db`` as ever. Each names it on stderr.
Real ``hostd`` and provider child processes in a fresh home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostd.config import load_config, parse_config
from providers.memory import DatabaseChoiceError
from providers.memory._database import MemoryDatabase, choose, memory_databases
from tests.fixtures.home import fresh_home, hostd_in

FACT = "Invoice numbers restart at 1 every January"
GOAL = "when do invoice numbers restart?"


def _memory(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m providers.memory ARGS`` run in ``cwd`` (stdin closed)."""
    return subprocess.run(
        [sys.executable, "-m", "providers.memory", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,  # a hang guard
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _init(base: Path, env: dict[str, str]) -> Path:
    """A project ``hostd init`` set up with its memory provider; its real path."""
    project = base / "invoices"
    (project / "src" / "billing").mkdir(parents=True)
    done = hostd_in(base, env, "init", str(project), "--providers", "memory")
    assert done.returncode == 0, done.stderr
    return project.resolve()


def _global_db(env: dict[str, str]) -> Path:
    return Path(env["HOME"]) / ".local" / "state" / "hostd" / "memory.db"


def _cited(project: Path, env: dict[str, str], provider: str) -> dict[str, object]:
    done = hostd_in(project, env, "compose", GOAL, "--providers", provider, "--json")
    assert done.returncode == 0, done.stderr
    composed: dict[str, object] = json.loads(done.stdout)
    return composed


def test_a_memory_added_inside_a_project_is_cited_by_its_memory_provider(
    tmp_path: Path,
) -> None:
    env = fresh_home(tmp_path)
    project = _init(tmp_path, env)
    (spec,) = load_config(project / "hostd.toml").provider
    command = spec.command or []
    db = Path(command[command.index("--db") + 1].replace("~", env["HOME"], 1))  # init's ~

    added = _memory(project / "src" / "billing", env, "add", "--title", "Invoice numbering", FACT)

    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("#1 fact ")  # stdout as before: scripts parse it
    assert added.stderr == (
        f'providers.memory: database {db} (provider "memory" of {project / "hostd.toml"})\n'
    )
    assert db.is_file() and not _global_db(env).exists()
    composed = _cited(project, env, "memory")
    citations = composed["citations"]
    assert isinstance(citations, list)
    assert [c["label"] for c in citations] == ["fact #1"]
    assert FACT in str(composed["prompt"])
    listed = _memory(project, env, "list", "--json")
    assert [json.loads(line)["content"] for line in listed.stdout.splitlines()] == [FACT]
    assert listed.stderr.startswith(f"providers.memory: database {db} ")


def test_outside_any_project_the_global_default_is_used_and_named(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    added = _memory(elsewhere, env, "add", "--title", "Invoice numbering", FACT)

    assert added.returncode == 0, added.stderr
    assert added.stderr.startswith(f"providers.memory: database {_global_db(env)} (the global")
    assert "no memory provider in" in added.stderr and "the embedded default" in added.stderr
    # ... and how to write a project's memory instead: a note the user can act on.
    assert added.stderr.rstrip("\n").endswith(
        "; for a project's memory, run inside the project, or give "
        "--config PATH (its hostd.toml) or --db PATH"
    )
    assert len(added.stderr.splitlines()) == 1
    listed = _memory(elsewhere, env, "list")
    assert FACT in listed.stdout


_TWO_MEMORIES = """
[[provider]]
id = "memory"
command = ["python", "-m", "providers.memory", "--db", "state/mine.db"]
[[provider]]
id = "team"
command = ["python", "-m", "providers.memory", "--db=shared/team.db"]
cwd = "shared/.."
"""


def test_two_memory_providers_are_refused_unless_one_is_named(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = (tmp_path / "two").resolve()
    inside = project / "deep"
    inside.mkdir(parents=True)
    (project / "hostd.toml").write_text(_TWO_MEMORIES)
    mine, team = project / "state" / "mine.db", project / "shared" / "team.db"

    refused = _memory(inside, env, "add", "--title", "Invoice numbering", FACT)

    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line == (
        f"providers.memory: {project / 'hostd.toml'} configures 2 memory providers "
        f"(memory: {mine}, team: {team}): name one with --provider ID, "
        "or its database with --db PATH"
    )
    for path in (mine, team, _global_db(env)):  # nothing was written, nothing created
        assert not path.exists() and not path.parent.exists()
    unknown = _memory(inside, env, "list", "--provider", "nope")
    assert unknown.returncode == 2 and unknown.stderr.splitlines() == [
        f'providers.memory: {project / "hostd.toml"} has no memory provider "nope" '
        "(its memory providers: memory, team)"
    ]

    named = _memory(inside, env, "add", "--provider", "team", "--title", "Invoices", FACT)

    assert named.returncode == 0, named.stderr
    assert named.stderr == (
        f'providers.memory: database {team} (provider "team" of {project / "hostd.toml"})\n'
    )
    assert team.is_file() and not mine.exists()
    # The path is the one hostd's provider process opens: the team provider cites it.
    citations = _cited(project, env, "team")["citations"]
    assert isinstance(citations, list) and [c["label"] for c in citations] == ["fact #1"]


def test_a_config_that_cannot_be_read_is_refused_not_passed_over(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = tmp_path / "broken"
    project.mkdir()
    (project / "hostd.toml").write_text("[[provider]]\nid = 'memory'\ncomand = ['x']\n")

    refused = _memory(project, env, "add", "--title", "Invoice numbering", FACT)

    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith("providers.memory: cannot tell which database to use: ")
    assert "hostd.toml" in line and line.endswith("; name it with --db PATH")
    assert not _global_db(env).exists()


def test_config_names_the_project_from_anywhere_as_hostd_config_does(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = _init(tmp_path, env)
    config = project / "hostd.toml"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_word = _memory(elsewhere, env, "add", "--config", str(config), "--title", "Invoices", FACT)
    assert by_word.returncode == 0, by_word.stderr
    assert f'(provider "memory" of {config})' in by_word.stderr
    by_env = _memory(elsewhere, {**env, "HOSTD_CONFIG": str(config)}, "list", "--json")
    assert [json.loads(line)["content"] for line in by_env.stdout.splitlines()] == [FACT]
    assert not _global_db(env).exists()
    citations = _cited(project, env, "memory")["citations"]
    assert isinstance(citations, list) and [c["label"] for c in citations] == ["fact #1"]
    both = _memory(elsewhere, env, "list", "--db", "x.db", "--config", str(config))
    assert both.returncode == 2
    assert both.stderr == "providers.memory: give --db or --config, not both\n"


def test_db_given_is_the_one_used_inside_a_project_too(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = _init(tmp_path, env)
    (spec,) = load_config(project / "hostd.toml").provider
    command = spec.command or []
    project_db = Path(command[command.index("--db") + 1])
    mine = tmp_path / "mine.db"

    added = _memory(project, env, "add", "--db", str(mine), "--title", "Invoices", FACT)

    assert added.returncode == 0, added.stderr
    assert added.stderr == f"providers.memory: database {mine} (--db)\n"
    assert mine.is_file() and not project_db.exists() and not _global_db(env).exists()
    both = _memory(project, env, "list", "--db", str(mine), "--provider", "memory")
    assert both.returncode == 2
    assert both.stderr == "providers.memory: give --db or --provider, not both\n"


def test_serving_inside_a_project_still_reads_no_config(tmp_path: Path) -> None:
    # hostd starts the provider with --db; without one it serves the global default,
    # wherever it is started. stdin closed: it serves nothing and exits.
    env = fresh_home(tmp_path)
    project = _init(tmp_path, env)

    served = _memory(project, env)

    assert served.returncode == 0, served.stderr
    # Its one line out is its ready note, naming the database it serves; no reply.
    notes = [json.loads(line) for line in served.stdout.splitlines()]
    assert [n["method"] for n in notes] == ["context/progress"]
    assert notes[0]["params"]["message"].startswith("0 entries in ")
    assert served.stderr == f"providers.memory: 0 entries in {_global_db(env)}\n"


@pytest.mark.parametrize(
    ("command", "more", "expected"),
    [
        (["python", "-m", "providers.memory", "--db", "m.db"], "", "P/m.db"),
        (["python", "-m", "providers.memory", "--db=/abs/m.db"], 'cwd = "sub"', "/abs/m.db"),
        (["python", "-mproviders.memory", "serve", "--db", "x.db"], 'cwd = "sub"', "P/sub/x.db"),
        (["python", "-m", "providers.memory", "--db", "a.db", "--db", "b.db"], "", "P/b.db"),
        (
            ["python", "-m", "providers.memory"],
            'env = { XDG_STATE_HOME = "/s" }',
            "/s/hostd/memory.db",
        ),
    ],
)
def test_a_memory_provider_s_database_is_the_one_its_process_opens(
    tmp_path: Path, command: list[str], more: str, expected: str
) -> None:
    text = f'[[provider]]\nid = "m"\ncommand = {json.dumps(command)}\n{more}\n'
    (found,) = memory_databases(parse_config(text, base=tmp_path))
    assert found == MemoryDatabase("m", Path(expected.replace("P", str(tmp_path), 1)))


def test_a_memory_provider_s_keep_forgotten_is_the_one_its_process_keeps(
    tmp_path: Path,
) -> None:
    head = '[[provider]]\nid = "m"\ncommand = ["python", "-m", "providers.memory", '
    kept = parse_config(head + '"--keep-forgotten", "50", "--db", "m.db"]\n', base=tmp_path)
    assert memory_databases(kept) == [MemoryDatabase("m", tmp_path / "m.db", 50)]
    assert choose(kept, None).keep_forgotten == 50
    plain = parse_config(head + '"--db", "m.db"]\n', base=tmp_path)
    assert choose(plain, None).keep_forgotten is None  # the store's default
    bad = parse_config(head + '"--keep-forgotten=-5"]\n', base=tmp_path)
    with pytest.raises(DatabaseChoiceError, match=r'provider "m" of .*--keep-forgotten takes'):
        memory_databases(bad)


def test_forget_from_the_shell_keeps_as_many_forgets_as_the_provider_serving_it(
    tmp_path: Path,
) -> None:
    env = fresh_home(tmp_path)
    db = tmp_path / "m.db"
    config = tmp_path / "hostd.toml"
    config.write_text(
        '[[provider]]\nid = "memory"\ncommand = ["python", "-m", "providers.memory", '
        f'"--db", "{db}", "--keep-forgotten", "1"]\n'
    )

    def edit(*args: str) -> subprocess.CompletedProcess[str]:
        return _memory(tmp_path, env, *args, "--config", str(config))

    assert edit("add", "--title", "port", "--valid-from", "2026-01-01", "7000").returncode == 0
    assert edit("supersede", "1", "--at", "2026-02-01", "8000").returncode == 0
    assert edit("forget", "2").returncode == 0  # #1 valid again
    assert edit("forget", "1").returncode == 0  # the one forget kept now
    again = edit("forget", "2")
    # With the default 10,000 kept: "(it made #1 valid again)".
    assert (again.returncode, again.stdout) == (0, "#2 was already forgotten\n"), again.stderr


def test_providers_that_are_not_memory_are_not_counted(tmp_path: Path) -> None:
    text = """
    [[provider]]
    id = "files"
    command = ["python", "-m", "providers.files", "--root", "."]
    [[provider]]
    id = "notes"
    command = ["python", "-m", "providers.memory.extra", "--db", "n.db"]
    """
    assert memory_databases(parse_config(text, base=tmp_path)) == []
