"""Your project, your config: ``hostd init`` writes one, discovery finds it from the
project (or says where it looked and what to do), and a compose there cites the
project's files, not hostd's. Real ``hostd`` child processes in a fresh home."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hostd._discovery import EMBEDDED_CONFIG, find_config, user_config_path
from hostd.cli._project import (
    BYTES_PER_CHUNK,
    LARGE_TREE_CHUNKS,
    render_project_config,
    semantic_installed,
)
from hostd.config import (
    DEFAULT_CONFIG_PATH,
    RERANK_SERVER_TIMEOUT_MS,
    load_config,
    parse_config,
)
from tests.fixtures.cli import run_hostd
from tests.fixtures.home import fresh_home, hostd_in

ROOT = Path(__file__).resolve().parents[2]
GOAL = "how fast does the frobnicator spin?"


def _project(base: Path) -> Path:
    project = base / "frob"
    (project / "docs" / "deep").mkdir(parents=True)
    (project / "docs" / "frobnicator.md").write_text(
        "# The frobnicator\n\nThe frobnicator spins at 42 rpm; its speed is set in frob.ini.\n"
    )
    (project / ".gitignore").write_text("secret.md\n")
    (project / "secret.md").write_text("The frobnicator secret: it spins backwards.\n")
    return project


# -- discovery ---------------------------------------------------------------------------


def test_discovery_takes_flag_then_env_then_nearest_then_user_then_embedded(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    user = tmp_path / "xdg" / "hostd" / "hostd.toml"
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    found = find_config(cwd=deep, environ=env)
    assert (found.how, found.path) == ("embedded", EMBEDDED_CONFIG)
    assert found.searched == (f"hostd.toml in {deep} and its parents", str(user))
    user.parent.mkdir(parents=True)
    user.write_text("")
    assert find_config(cwd=deep, environ=env).path == user
    (project / "hostd.toml").write_text("")
    assert find_config(cwd=deep, environ=env).path == project / "hostd.toml"
    (project / "a" / "hostd.toml").write_text("")  # the nearest wins
    assert find_config(cwd=deep, environ=env).path == project / "a" / "hostd.toml"
    env["HOSTD_CONFIG"] = "/from/env.toml"
    assert find_config(cwd=deep, environ=env).path == Path("/from/env.toml")
    assert find_config("/from/flag.toml", cwd=deep, environ=env).path == Path("/from/flag.toml")


def test_the_user_config_defaults_to_dot_config_and_ignores_a_relative_xdg_value() -> None:
    assert user_config_path({"HOME": "/h"}) == Path("/h/.config/hostd/hostd.toml")
    assert user_config_path({"HOME": "/h", "XDG_CONFIG_HOME": "rel"}) == Path(
        "/h/.config/hostd/hostd.toml"
    )
    assert user_config_path({"HOME": "/h", "XDG_CONFIG_HOME": "/x"}) == Path("/x/hostd/hostd.toml")


def test_the_embedded_default_ships_in_the_package_and_configures_no_provider() -> None:
    assert DEFAULT_CONFIG_PATH == EMBEDDED_CONFIG
    assert EMBEDDED_CONFIG.is_relative_to(ROOT / "hostd")
    assert load_config(EMBEDDED_CONFIG).provider == []
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "_data/*.toml" in package_data["package-data"]["hostd"]


# -- hostd init --------------------------------------------------------------------------


@pytest.mark.parametrize("semantic_ok", [True, False])
def test_init_writes_a_valid_config_every_key_line_saying_what_it_does(
    tmp_path: Path, semantic_ok: bool
) -> None:
    text = render_project_config(
        tmp_path,
        providers=("files", "memory", "semantic"),
        state_dir=tmp_path / "state",
        semantic_ok=semantic_ok,
    )
    cfg = parse_config(text, base=tmp_path)
    ids = [p.id for p in cfg.provider]
    assert ids == (["files", "memory", "semantic"] if semantic_ok else ["files", "memory"])
    assert cfg.shadow.enabled and cfg.shadow.sample == 0
    files = cfg.provider[0]
    assert files.cwd == tmp_path and files.trusted_roots == [tmp_path]
    memory = cfg.provider[1].command or []
    assert Path(memory[memory.index("--db") + 1]).is_relative_to(tmp_path / "state")
    for line in text.splitlines():
        if re.match(r"^[a-z_]+ = ", line):  # a key: it says what it does on its line
            assert "#" in line.split("=", 1)[1], line
    if not semantic_ok:
        assert "It needs the semantic extra" in text and '# id = "semantic"' in text
    # The tokenizer line, uncommented beside a tokenizer.json, is the key it names.
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    tokenized = parse_config(text.replace('# tokenizer = "', 'tokenizer = "'), base=tmp_path)
    assert tokenized.host.tokenizer == tmp_path / "tokenizer.json"
    # The reranker block, uncommented, is a rerank server with its own deadline.
    uncommented = re.sub(r"(?m)^# (\[reranker\]|url = |model = )", r"\1", text)
    reranked = parse_config(uncommented, base=tmp_path)
    assert reranked.reranker.url == "http://127.0.0.1:7997"
    assert reranked.reranker.model == "mixedbread-ai/mxbai-rerank-xsmall-v1"
    assert reranked.reranker.timeout_ms == RERANK_SERVER_TIMEOUT_MS
    assert "docs/eval.md" in text and '"A rerank server"' in text
    # Several providers, whose scores run on different scales: ranked each on its own.
    assert cfg.host.strategy == "rrf"
    assert "hostd eval --from-shadow" in text and "round_robin" in text


def test_init_ranks_each_providers_list_on_its_own_only_when_it_writes_several(
    tmp_path: Path,
) -> None:
    def strategy(*providers: str) -> object:
        text = render_project_config(
            tmp_path, providers=providers, state_dir=tmp_path / "state", semantic_ok=False
        )
        return parse_config(text, base=tmp_path).host.strategy

    assert strategy("files", "memory") == "rrf"
    assert strategy("files") is None
    assert strategy("files", "semantic") is None  # semantic not installed: files alone


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = _project(tmp_path)
    first = hostd_in(project, env, "init", "--providers", "files")
    assert first.returncode == 0, first.stderr
    assert "note" not in first.stderr
    written = (project / "hostd.toml").read_text()
    # A project inside this one: its own config, and a note that it takes over there.
    (project / "sub").mkdir()
    inner = hostd_in(project / "sub", env, "init", "--providers", "files")
    assert inner.returncode == 0, inner.stderr
    assert (
        f"hostd: note: {project / 'hostd.toml'} configured {project / 'sub'} until now; "
        f"commands run there and below use {project / 'sub' / 'hostd.toml'} instead"
    ) in inner.stderr
    (project / "hostd.toml").write_text("# mine\n")
    again = hostd_in(project, env, "init")
    assert again.returncode == 1 and "--force" in again.stderr
    assert (project / "hostd.toml").read_text() == "# mine\n"  # kept, byte for byte
    forced = hostd_in(tmp_path, env, "init", str(project), "--force", "--providers", "files")
    assert forced.returncode == 0 and (project / "hostd.toml").read_text() == written


def test_init_force_keeps_the_replaced_file_and_names_what_the_new_one_lacks(
    tmp_path: Path,
) -> None:
    env = fresh_home(tmp_path)
    project = _project(tmp_path)
    assert hostd_in(project, env, "init", "--providers", "files").returncode == 0
    config = project / "hostd.toml"
    written = config.read_text()
    # The user names their model's tokenizer and adds a reranker.
    mine = written.replace('# tokenizer = "tokenizer.json"', 'tokenizer = "/m/tokenizer.json"')
    mine += '\n[reranker]\nurl = "http://127.0.0.1:7997"\n'
    config.write_text(mine)
    forced = hostd_in(project, env, "init", "--force", "--providers", "files")
    assert forced.returncode == 0, forced.stderr
    assert config.read_text() == written
    assert (project / "hostd.toml.bak").read_text() == mine
    assert (
        f"hostd: note: the replaced hostd.toml is kept as {project / 'hostd.toml.bak'}; "
        "lines of it the new file lacks: tokenizer, [reranker], url; copy back what you "
        "want of it"
    ) in forced.stderr
    # A second --force keeps the first backup (it holds what the user wrote) ...
    config.write_text(written + "# more\nsample = 1\n")
    again = hostd_in(project, env, "init", "--force", "--providers", "files")
    assert (project / "hostd.toml.bak").read_text() == mine
    assert (project / "hostd.toml.bak.1").read_text() == written + "# more\nsample = 1\n"
    assert "kept as" in again.stderr and "lacks: sample;" in again.stderr
    # ... and replacing the file with its own text keeps nothing, says nothing.
    same = hostd_in(project, env, "init", "--force", "--providers", "files")
    assert "kept as" not in same.stderr and not (project / "hostd.toml.bak.2").exists()
    # The backups are hostd's, not the project's: no provider reads them.
    argv = tomllib.loads(written)["provider"][0]["command"]
    assert "hostd.toml.bak*" in argv


def test_init_says_whether_to_commit_the_file_it_leaves_untracked(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = _project(tmp_path)
    done = run_hostd("init", str(project), "--providers", "files,memory", env=env)
    assert done.returncode == 0, done.stderr
    # Its state under the home directory, named from ~: any clone can use the file.
    said = done.stdout.splitlines()[-1]
    assert said.startswith("commit hostd.toml with the project: it holds no secret"), said
    assert "outside the project" in said and "docs/config.md" in said
    assert "~/" in (project / "hostd.toml").read_text()
    # A state directory outside the home is named by its absolute path: said, with when
    # committing the file is still right.
    elsewhere = tmp_path / "srv-state"
    env["XDG_STATE_HOME"] = str(elsewhere)
    again = run_hostd("init", str(project), "--force", "--providers", "files,memory", env=env)
    assert again.returncode == 0, again.stderr
    said = again.stdout.splitlines()[-1]
    assert said.startswith("hostd.toml holds no secret"), said
    assert f"absolute path ({elsewhere / 'hostd' / 'projects'}" in said
    assert "commit it only if every clone can use that path" in said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["init", "nowhere"], "does not exist"),
        (["init", "frob/docs/frobnicator.md"], "is not a directory"),
        (["init", "frob", "--providers", "files,memroy"], "unknown bundled provider(s) memroy"),
        (["init", "frob", "--providers", ""], "name at least one of files, memory"),
    ],
)
def test_init_refuses_a_command_line_it_cannot_run_as_a_usage_error(
    tmp_path: Path, args: list[str], said: str
) -> None:
    env = fresh_home(tmp_path)
    _project(tmp_path)
    refused = hostd_in(tmp_path, env, *args)
    assert refused.returncode == 2, refused.stderr  # as argparse's own usage errors
    assert said in refused.stderr and "[usage]" in refused.stderr
    assert "internal" not in refused.stderr
    assert not (tmp_path / "frob" / "hostd.toml").exists()


def test_with_no_config_compose_names_what_it_searched_and_suggests_init(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    where = tmp_path / "elsewhere"
    where.mkdir()
    done = hostd_in(where, env, "compose", GOAL)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # one line, no traceback
    assert str(EMBEDDED_CONFIG) in lines[0] and f"hostd.toml in {where}" in lines[0]
    assert str(tmp_path / "home" / ".config" / "hostd" / "hostd.toml") in lines[0]
    assert "hostd init" in lines[0]
    path = hostd_in(where, env, "config", "path")
    assert path.stdout.strip() == str(EMBEDDED_CONFIG) and "embedded" in path.stderr


def test_init_then_compose_from_inside_the_project_cites_its_files(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = _project(tmp_path)
    assert (
        hostd_in(tmp_path, env, "init", str(project), "--providers", "files,memory").returncode == 0
    )
    # A sub-project's own config is hostd's, not the project's evidence, whatever it says.
    (project / "tool").mkdir()
    (project / "tool" / "hostd.toml").write_text("# how fast does the frobnicator spin?\n" * 3)
    # Nor is the tokenizer.json its [host] tokenizer line suggests putting beside it.
    vocab = {f"frobnicator{i}": i for i in range(20)} | {"how fast does it spin": 20}
    (project / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}}, indent=1))
    inside = project / "docs" / "deep"
    where = hostd_in(inside, env, "config", "path", "--json")
    assert json.loads(where.stdout)["file"] == str(project / "hostd.toml")
    done = hostd_in(inside, env, "compose", GOAL, "--budget", "800", "--json")
    assert done.returncode == 0, done.stderr
    cited = [c["label"] for c in json.loads(done.stdout)["citations"]]
    assert cited and all(label.startswith("docs/frobnicator.md") for label in cited), cited
    assert "42 rpm" in json.loads(done.stdout)["prompt"]
    assert "backwards" not in done.stdout  # its .gitignore is honoured


@pytest.mark.slow
def test_an_installed_wheel_finds_its_embedded_default_and_a_project_config(
    tmp_path: Path,
) -> None:
    # Build from a copy of the sources (the checkout gets no build/ or egg-info).
    src = tmp_path / "src"
    src.mkdir()
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"]
        + ["pyproject.toml", "README.md", "hostd", "providers"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        if not (ROOT / name.decode()).is_file():  # deleted in the work tree
            continue
        target = src / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name.decode()).read_bytes())
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels = tmp_path / "wheels"
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)]
    # pip and the venv see no PYTHONPATH (the suite puts this checkout on it): pip would
    # take the checkout's hostd for the wheel's, already installed, and install nothing.
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(build, check=True, timeout=600, env=bare)
    (wheel,) = wheels.glob("hostd-*.whl")
    # A fresh venv holding only the wheel; its dependencies come from this interpreter's
    # site-packages through a .pth (its editable hostd there is never loaded: a .pth
    # named by a path line is not run).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=bare)
    py = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(py), "install", "--no-deps", str(wheel)], check=True, env=bare
    )
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (Path(site) / "_deps.pth").write_text("\n".join(ours) + "\n")

    env = fresh_home(tmp_path)
    del env["PYTHONPATH"]  # the wheel's hostd, not this checkout's
    hostd = str(venv / "bin" / "hostd")

    def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [hostd, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
        )

    where = run(tmp_path, "config", "path")
    assert where.stdout.strip().startswith(site), where  # the package's own default
    none = run(tmp_path, "compose", GOAL)
    assert none.returncode == 1 and "hostd init" in none.stderr and "searched" in none.stderr
    project = _project(tmp_path)
    assert run(tmp_path, "init", str(project), "--providers", "files,memory").returncode == 0
    done = run(project, "compose", GOAL, "--budget", "800", "--json")
    assert done.returncode == 0, done.stderr
    cited = [c["label"] for c in json.loads(done.stdout)["citations"]]
    assert cited and all(label.startswith("docs/frobnicator.md") for label in cited), cited


@pytest.mark.skipif(not semantic_installed(), reason="needs the semantic extra")
def test_init_on_a_large_tree_says_semantic_s_first_build_is_long_and_what_shortens_it(
    tmp_path: Path,
) -> None:
    env = fresh_home(tmp_path)
    project = _project(tmp_path)
    small = hostd_in(project, env, "init")
    assert small.returncode == 0, small.stderr
    assert "chunks to embed" not in small.stdout  # a small tree: nothing to say
    # Few files, but long ones, as a C tree's are (BlueZ: 1,032 files, 60,366 chunks):
    # their bytes say how many chunks there are, not how many files hold them.
    line = "static int handler(struct btd_adapter *adapter, void *data);\n"
    for i in range(10):  # each under the 1 MiB a file is indexed up to
        (project / "src").mkdir(exist_ok=True)
        (project / "src" / f"big{i}.c").write_text(line * (700_000 // len(line)))
    size = sum(p.stat().st_size for p in project.rglob("*") if p.name != "hostd.toml")
    size -= (project / "secret.md").stat().st_size  # .gitignore keeps it out
    assert size // BYTES_PER_CHUNK > LARGE_TREE_CHUNKS
    large = hostd_in(project, env, "init", "--force")
    assert large.returncode == 0, large.stderr
    said = [line for line in large.stdout.splitlines() if "chunks to embed" in line]
    assert said == [
        f"semantic: about {round(size // BYTES_PER_CHUNK, -3):,} chunks to embed (12 files, "
        f"{size / 1e6:.1f} MB): its first start embeds every one on the CPU, a long build "
        "(`hostd warm` shows it and the time left; "
        "meanwhile it answers from what it has embedded, code first). To shorten it, list "
        f"in {project / '.hostdignore'} what need not be searched (tests, locale, release "
        "notes, fixtures), or leave semantic out: `hostd init --providers files,memory --force`"
    ]
    (project / ".hostdignore").write_text("src/\n")  # as it advises
    trimmed = hostd_in(project, env, "init", "--force")
    assert trimmed.returncode == 0 and "chunks to embed" not in trimmed.stdout
    without = hostd_in(project / "src", env, "init", "--providers", "files,memory")
    assert without.returncode == 0 and "chunks to embed" not in without.stdout


@pytest.mark.skipif(not semantic_installed(), reason="needs the semantic extra")
def test_init_on_many_small_files_says_nothing_of_a_long_build(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    project = _project(tmp_path)
    for i in range(2500):  # more files than hold many chunks: a line each
        (project / "tests" / f"t{i // 500}").mkdir(parents=True, exist_ok=True)
        (project / "tests" / f"t{i // 500}" / f"test_{i}.py").write_text(f"x = {i}\n")
    done = hostd_in(project, env, "init")
    assert done.returncode == 0, done.stderr
    assert "semantic:" not in done.stdout
