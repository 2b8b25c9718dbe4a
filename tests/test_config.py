"""Config: pydantic-validated TOML whose every problem names the file, the key and what
is wrong, and reaches the user as one line without a stack trace."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

from hostd.config import (
    DEFAULT_CONFIG_PATH,
    Config,
    ConfigError,
    default_socket_path,
    discover_socket,
    load_config,
    parse_config,
)
from tests.fixtures.cli import run_hostd

ROOT = Path(__file__).resolve().parent.parent


#: A provider table the type checks below add a key to.
_FILES = '[[provider]]\nid = "files"\ncommand = ["x"]\n'


def _write(tmp_path: Path, text: str) -> Path:
    return _write_as(tmp_path, "hostd.toml", text)


def _write_as(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_checkout_config_is_valid_and_the_embedded_default_has_no_provider() -> None:
    assert load_config(DEFAULT_CONFIG_PATH).provider == []
    cfg = load_config(ROOT / "config" / "hostd.toml")
    assert [p.id for p in cfg.provider] == ["files", "memory"]
    command = cfg.provider[0].command
    assert command is not None and command[0] == sys.executable
    assert cfg.provider[0].cwd == ROOT


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("[host]\ndefault_budget = -1\n", "host.default_budget", "greater than 0"),
        ("[host]\ndefault_budgte = 10\n", "host.default_budgte", "unknown key"),
        ("[host]\nstart_providers = 'sometimes'\n", "host.start_providers", "'lazy' or 'boot'"),
        ("[[provider]]\nid = 'a'\n", "provider[0]", "exactly one of command or url"),
        ("[[provider]]\nid = 'a'\ncommand = []\n", "provider[0].command", "at least 1"),
        (
            "[[provider]]\nid = 'a'\ncommand = ['x']\nbinding = 'grpc'\n",
            "provider[0].binding",
            "'jsonrpc', 'cgp' or 'mcp'",
        ),
        (
            "[[provider]]\nid = 'a'\ncommand = ['x']\n[[provider]]\nid = 'a'\ncommand = ['y']\n",
            "provider",
            "duplicate provider id 'a'",
        ),
        ("[tcp]\nport = 70000\n", "tcp.port", "less than or equal to 65535"),
        ("[log]\naudit = 'everything'\n", "log.audit", "'summary', 'sample' or 'entries'"),
        ("[log]\naudit_sample = 1.5\n", "log.audit_sample", "less than or equal to 1"),
        ("[log]\nmax_bytes = -1\n", "log.max_bytes", "greater than or equal to 0"),
        (
            "[host]\nretry_failed_after_s = -1\n",
            "host.retry_failed_after_s",
            "greater than or equal to 0",
        ),
        ("[host]\nmerge_max_ratio = 0.5\n", "host.merge_max_ratio", "greater than or equal to 1"),
        ("[host]\nrestart_attempts = 0\n", "host.restart_attempts", "greater than or equal to 1"),
        ("[host]\nrestart_attempts = 2.5\n", "host.restart_attempts", "valid integer"),
        ("[host]\nrestart_attempts = true\n", "host.restart_attempts", "not a boolean"),
        (
            "[host]\nrestart_backoff_max_s = -1\n",
            "host.restart_backoff_max_s",
            "greater than or equal to 0",
        ),
        ("[host]\nrestart_backoff_max_s = nan\n", "host.restart_backoff_max_s", "finite number"),
        (
            "[host]\nrestart_backoff_s = 10\nrestart_backoff_max_s = 2\n",
            "host.restart_backoff_max_s",
            "below restart_backoff_s (10)",
        ),
        (
            "[host]\nretry_failed_after_s = 600\nretry_failed_max_s = 120\n",
            "host.retry_failed_max_s",
            "120 is below retry_failed_after_s (600)",
        ),
        ("[host]\ntokenizer = 'absent/tokenizer.json'\n", "host.tokenizer", "no such file"),
    ],
)
def test_a_bad_value_names_file_key_and_problem(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    message = str(exc.value)
    assert str(path) in message and key in message and problem in message
    assert exc.value.data["key"] == key


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[host]\ndefualt_budget = 3\n",
            "host.defualt_budget: unknown key (did you mean default_budget?)",
        ),
        (
            "[[provider]]\nid = 'a'\ncomand = ['x']\n",
            'provider[0].comand (provider "a"): unknown key (did you mean command?)',
        ),
        ("[hots]\n", "hots: unknown key (did you mean host?)"),
        ("[host]\nzzz = 1\n", "host.zzz: unknown key"),
    ],
)
def test_a_misspelt_key_is_told_with_the_key_it_is_closest_to(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(_write(tmp_path, text))
    assert said in str(exc.value)
    assert "did you mean" not in said or str(exc.value).count("did you mean") == 1
    if "zzz" in text:
        assert "did you mean" not in str(exc.value)


def test_our_own_checks_are_told_in_our_words_without_pydantics_prefix(tmp_path: Path) -> None:
    text = "[[provider]]\nid = 'a'\ncommand = ['x']\n[[provider]]\nid = 'a'\ncommand = ['y']\n"
    with pytest.raises(ConfigError) as exc:
        load_config(_write(tmp_path, text))
    assert "provider: duplicate provider id 'a'" in str(exc.value)
    assert "Value error" not in str(exc.value)


def test_a_tokenizer_path_resolves_against_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tokenizer.json").write_text("{}", encoding="utf-8")
    cfg = parse_config("[host]\ntokenizer = 'model/tokenizer.json'\n", base=tmp_path)
    assert cfg.host.tokenizer == tmp_path / "model" / "tokenizer.json"
    assert cfg.host.merge_max_ratio == 2.0


def test_a_tokenizer_that_is_not_a_file_says_what_the_key_wants(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config("[host]\ntokenizer = 'cl100k_base'\n", base=tmp_path)
    message = str(exc.value)
    assert f"no such file: {tmp_path / 'cl100k_base'}" in message
    assert "Hugging Face tokenizer.json" in message and "cl100k_base is not one" in message


def test_a_tokenizer_directory_names_the_file_inside_it(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    with pytest.raises(ConfigError) as empty:
        parse_config("[host]\ntokenizer = 'model'\n", base=tmp_path)
    assert (
        f"{tmp_path / 'model'} is a directory, not a tokenizer.json: name the model's "
        "tokenizer.json file"
    ) in str(empty.value)
    (tmp_path / "model" / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError) as holding:
        parse_config("[host]\ntokenizer = 'model'\n", base=tmp_path)
    assert f"name the file, {tmp_path / 'model' / 'tokenizer.json'}" in str(holding.value)


def test_bad_toml_and_a_missing_file_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write(tmp_path, "[host\n"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.toml")


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    cfg = parse_config(
        "[host]\nsocket = 'run/h.sock'\nstate_dir = 'state'\n"
        "[[provider]]\nid = 'a'\ncommand = ['python3', '-m', 'x']\ncwd = '..'\n",
        source="x.toml",
        base=tmp_path,
    )
    assert cfg.socket_path == tmp_path / "run" / "h.sock"
    assert cfg.state_path == tmp_path / "state"
    assert cfg.provider[0].cwd == tmp_path.parent
    assert cfg.provider[0].command == [sys.executable, "-m", "x"]


def test_the_cli_reports_a_bad_config_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, "[host]\ngrace_period_s = 'soon'\n")
    done = subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(path), "serve"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and "host.grace_period_s" in lines[0]
    assert "Traceback" not in done.stderr


def test_trusted_roots_expand_home_and_resolve_against_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (tmp_path / "project" / "docs").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    cfg = parse_config(
        '[host]\ntrusted_roots = ["~/notes"]\n' + _FILES + 'trusted_roots = ["docs", "."]\n',
        base=tmp_path / "project",
    )
    assert cfg.host.trusted_roots == [home / "notes"]
    assert cfg.provider[0].trusted_roots == [tmp_path / "project" / "docs", tmp_path / "project"]
    assert cfg.roots_of("files") == [*cfg.provider[0].trusted_roots, home / "notes"]


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ('[host]\ntrusted_roots = ["absent"]\n', "host.trusted_roots[0]", "no such directory"),
        (
            _FILES + 'trusted_roots = [".", "docs/"]\n',
            "provider[0].trusted_roots[1]",
            "no such directory",
        ),
        (
            _FILES + 'trusted_roots = ["hostd.toml"]\n',
            "provider[0].trusted_roots[0]",
            "not a directory",
        ),
    ],
)
def test_a_trusted_root_that_is_no_directory_is_refused_naming_the_path(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert exc.value.data["key"] == key
    named = text.split("trusted_roots = ", 1)[1].split("\n", 1)[0]
    missing = tmp_path / json.loads(named)[int(key[-2])]
    assert f"{problem}: {missing} (a trusted root must be an existing directory" in str(exc.value)


def test_the_cli_refuses_a_boolean_timeout_naming_the_provider(tmp_path: Path) -> None:
    path = _write(tmp_path, _FILES + "timeout_ms = true\n")
    done = run_hostd("--config", str(path), "compose", "a goal")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f'hostd: {path}: provider[0].timeout_ms (provider "files"): Input should be a valid '
        "integer, not a boolean (write a number) [bad_config]\n"
    )


def test_providers_start_at_boot_with_a_30_s_start_deadline_unless_told_otherwise() -> None:
    config = parse_config(
        '[host]\nstart_timeout_s = 12\n\n[[provider]]\nid = "a"\ncommand = ["x"]\n'
        'start_timeout_s = 90\n\n[[provider]]\nid = "b"\ncommand = ["y"]\n'
    )
    assert config.host.start_providers == "boot" and config.host.start_timeout_s == 12
    specs = {s.id: s for s in config.provider_specs()}
    assert specs["a"].start_timeout_s == 90 and specs["b"].start_timeout_s is None
    assert parse_config("").host.start_timeout_s == 30
    with pytest.raises(ConfigError) as err:
        parse_config('[[provider]]\nid = "a"\ncommand = ["x"]\nstart_timeout_s = 0\n')
    assert err.value.data["key"] == "provider[0].start_timeout_s"


def test_a_providers_command_and_cwd_resolve_against_the_config_file(tmp_path: Path) -> None:
    cfg = parse_config(
        "[[provider]]\nid = 'script'\ncommand = ['python', 'prov/notes.py']\n"
        "[[provider]]\nid = 'local'\ncommand = ['./bin/prov', '--root', '.']\n"
        "[[provider]]\nid = 'onpath'\ncommand = ['node', 'server.js']\ncwd = 'srv'\n"
        "[reranker]\ncommand = ['bin/rerank']\n",
        source="x.toml",
        base=tmp_path,
    )
    script, local, onpath = cfg.provider
    # No cwd: the config file's directory, so "prov/notes.py" and "." are read there.
    assert (script.cwd, local.cwd, cfg.reranker.cwd) == (tmp_path, tmp_path, tmp_path)
    assert script.command == [sys.executable, "prov/notes.py"]
    assert local.command == [str(tmp_path / "bin" / "prov"), "--root", "."]
    assert cfg.reranker.command == [str(tmp_path / "bin" / "rerank")]
    # A bare name is looked up in PATH; a given cwd is the config's too.
    assert (onpath.command, onpath.cwd) == (["node", "server.js"], tmp_path / "srv")


def test_a_bundled_provider_runs_with_P_so_the_project_cannot_shadow_it(tmp_path: Path) -> None:
    """``-m`` puts the working directory (the project) first on the module path, where a
    package of its own named ``providers`` would stand in for hostd's: each bundled
    provider runs with ``-P``; a user's own module keeps the project on the path."""
    cfg = parse_config(
        "[[provider]]\nid = 'files'\ncommand = ['python', '-m', 'providers.files', '--root', '.']\n"
        "[[provider]]\nid = 'memory'\ncommand = ['python3', '-u', '-m', 'providers.memory']\n"
        "[[provider]]\nid = 'li'\n"
        "command = ['python', '-X', 'dev', '-m', 'providers.llama_index']\n"
        "[[provider]]\nid = 'own'\ncommand = ['python', '-m', 'mypkg.provider']\n"
        "[[provider]]\nid = 'theirs'\ncommand = ['python', '-m', 'providers.notes']\n"
        "[[provider]]\nid = 'script'\ncommand = ['python', 'serve.py', '-m', 'providers.files']\n"
        "[reranker]\ncommand = ['python', '-m', 'providers.rerank']\n",
        source="x.toml",
        base=tmp_path,
    )
    commands = {p.id: p.command for p in cfg.provider}
    py = sys.executable
    assert commands["files"] == [py, "-P", "-m", "providers.files", "--root", "."]
    assert commands["memory"] == [py, "-P", "-u", "-m", "providers.memory"]
    assert commands["li"] == [py, "-P", "-X", "dev", "-m", "providers.llama_index"]
    assert cfg.reranker.command == [py, "-P", "-m", "providers.rerank"]
    # Not hostd's: the module (or script) is the project's, found there.
    assert commands["own"] == [py, "-m", "mypkg.provider"]
    assert commands["theirs"] == [py, "-m", "providers.notes"]
    assert commands["script"] == [py, "serve.py", "-m", "providers.files"]


# -- the default socket: one per config file ----------------------------------------------


def test_each_config_file_gets_a_socket_of_its_own_unless_it_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = load_config(_write(tmp_path / "a", "")).socket_path
    b = load_config(_write(tmp_path / "b", "")).socket_path
    assert a != b
    for sock in (a, b):
        assert sock.parent == tmp_path / "run" / "hostd"
        assert re.fullmatch(r"hostd-[0-9a-f]{12}\.sock", sock.name), sock.name
    # the same file, however it is named (relative, through a symlink), the same socket
    monkeypatch.chdir(tmp_path)
    assert load_config(Path("a/hostd.toml")).socket_path == a
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert load_config(tmp_path / "link" / "hostd.toml").socket_path == a
    # the stem names it: another file in the same directory, another socket
    other = load_config(_write_as(tmp_path / "a", "agent.toml", "")).socket_path
    assert other.name.startswith("agent-") and other != a
    # an explicit host.socket wins; the embedded default (and a config built in code)
    # keeps the one fixed path
    named = load_config(_write(tmp_path / "b", "[host]\nsocket = 'run/h.sock'\n"))
    assert named.socket_path == tmp_path / "b" / "run" / "h.sock"
    assert load_config(DEFAULT_CONFIG_PATH).socket_path == tmp_path / "run" / "hostd" / "hostd.sock"
    assert parse_config("").socket_path == tmp_path / "run" / "hostd" / "hostd.sock"
    assert default_socket_path() == tmp_path / "run" / "hostd" / "hostd.sock"


def _api_node_socket_function() -> str:
    """The Node.js function docs/api.md gives a client to compute a daemon's socket."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    after = text.split("In Node.js, for a `hostd.toml` without `host.socket`:", 1)[1]
    return after.split("```js\n", 1)[1].split("```", 1)[0]


@pytest.mark.skipif(shutil.which("node") is None, reason="no node on PATH")
@pytest.mark.parametrize("runtime", [True, False])
@pytest.mark.parametrize("name", ["hostd.toml", "my proj été+v2.agent.toml", "x" * 60 + ".toml"])
def test_the_socket_docs_say_how_to_compute_is_the_daemons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, runtime: bool
) -> None:
    """A client in another language computes the socket by docs/api.md's recipe, through
    a symlink too: the same path as the daemon's own."""
    if runtime:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    (tmp_path / "proj").mkdir()
    config = _write_as(tmp_path / "proj", name, "")
    (tmp_path / "link").symlink_to(tmp_path / "proj")
    script = _api_node_socket_function() + "console.log(hostdSocket(process.argv[1]));\n"
    done = subprocess.run(
        ["node", "-e", script, str(tmp_path / "link" / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(default_socket_path(config))


def test_a_client_finds_the_socket_of_the_config_discovery_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.delenv("HOSTD_CONFIG", raising=False)
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    config = _write(project, "[[provider]]\nid = 'a'\ncommand = ['python3', '-m', 'x']\n")
    assert discover_socket(cwd=project / "src") == load_config(config).socket_path
    monkeypatch.setenv("HOSTD_CONFIG", str(_write_as(tmp_path, "env.toml", "")))
    assert discover_socket(cwd=project / "src") == load_config(tmp_path / "env.toml").socket_path
    assert discover_socket(config) == load_config(config).socket_path
    monkeypatch.delenv("HOSTD_CONFIG")
    _write(project, "[host]\nsocket = 'run/x.sock'\n")
    assert discover_socket(cwd=project) == project / "run" / "x.sock"


def test_the_digest_is_of_the_bytes_parsed_even_with_crlf_line_ends(tmp_path: Path) -> None:
    from hostd.config import load_config
    from hostd.server._daemon import _config_stamp

    config = tmp_path / "hostd.toml"
    raw = b'[host]\r\nsocket = "s.sock"\r\n'
    config.write_bytes(raw)
    loaded = load_config(config)
    config.write_bytes(raw + b"# edited after it was read\r\n")
    stamp = _config_stamp(loaded)
    assert stamp is not None
    assert stamp["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest()


def test_a_provider_tables_error_names_its_id_beside_its_index() -> None:
    text = (
        '[[provider]]\nid = "alpha"\ncommand = ["x"]\n'
        '[[provider]]\nid = "facts"\ncommand = ["y"]\ntimeout_ms = "5 s"\n'
    )
    with pytest.raises(ConfigError) as exc:
        parse_config(text)
    assert 'provider[1].timeout_ms (provider "facts"): ' in exc.value.message
    assert exc.value.data["key"] == "provider[1].timeout_ms"  # the data keeps the path


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        (
            _FILES + "timeout_ms = true\n",
            "provider[0].timeout_ms",
            "integer, not a boolean (write a number)",
        ),
        (
            _FILES + 'timeout_ms = "5000"\n',
            "provider[0].timeout_ms",
            "not a string (write the number without quotes)",
        ),
        (_FILES + "timeout_ms = 5000.0\n", "provider[0].timeout_ms", "valid integer, not a float"),
        (_FILES + 'weight = "2"\n', "provider[0].weight", "not a string (write the number without"),
        (
            '[shadow]\nenabled = "off"\n',
            "shadow.enabled",
            "string (write true or false, without quotes)",
        ),
        ('[shadow]\nenabled = "false"\n', "shadow.enabled", "valid boolean, not a string"),
        (
            "[shadow]\nenabled = 0\n",
            "shadow.enabled",
            "boolean, not an integer (write true or false)",
        ),
        ('[shadow]\nsample = "0.1"\n', "shadow.sample", "valid number, not a string"),
        (
            "[host]\ngrace_period_s = true\n",
            "host.grace_period_s",
            "number, not a boolean (write a number)",
        ),
        ("[tcp]\nhost = 127\n", "tcp.host", "valid string, not an integer"),
        (
            _FILES + 'binding = "mcp"\n[provider.mcp]\nresources = "yes"\n',
            "provider[0].mcp.resources",
            "valid boolean, not a string",
        ),
    ],
)
def test_a_value_of_the_wrong_toml_type_is_refused_not_coerced(
    text: str, key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(text, source="hostd.toml")
    assert exc.value.data["key"] == key
    named = ' (provider "files")' if key.startswith("provider") else ""
    assert exc.value.message.startswith(f"hostd.toml: {key}{named}: ")
    assert problem in exc.value.message


def test_an_integer_where_a_float_is_wanted_loads() -> None:
    cfg = parse_config(
        "[host]\noverfetch = 3\ngrace_period_s = 0\n[shadow]\nsample = 1\n"
        + _FILES
        + "weight = 2\nstart_timeout_s = 90\n"
    )
    assert (cfg.host.overfetch, cfg.host.grace_period_s, cfg.shadow.sample) == (3.0, 0.0, 1.0)
    assert (cfg.provider[0].weight, cfg.provider[0].start_timeout_s) == (2.0, 90.0)


def _path_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key of the config (``host.socket``, ``provider.cwd`` …) that holds a path."""
    keys = set()
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        args = {field.annotation, *get_args(field.annotation)}
        args |= {a for arg in list(args) for a in get_args(arg)}  # list[Path] | None …
        if Path in args:
            keys.add(prefix + name)
        inner = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if inner is not None:
            keys |= _path_keys(inner, f"{prefix}{name}.")
    return keys


def test_every_path_key_takes_a_toml_string(tmp_path: Path) -> None:
    """Strict types refuse a string where a ``Path`` is wanted: each path key must be
    resolved to one before validation (``_absolutise``), as every one here is."""
    for name in ("tok.json", "token", "ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("{}")
    remote = (
        'token_file = "token"\nca_file = "ca.pem"\nclient_cert = "cert.pem"\n'
        'client_key = "key.pem"\n'
    )
    local = parse_config(
        '[host]\nsocket = "h.sock"\nstate_dir = "state"\ntrusted_roots = ["."]\n'
        'tokenizer = "tok.json"\n[tcp]\ntoken_file = "token"\n[log]\nfile = "h.log"\n'
        '[reranker]\ncommand = ["r"]\ncwd = "."\n'
        '[[provider]]\nid = "a"\ncommand = ["x"]\ncwd = "."\ntrusted_roots = ["."]\n',
        base=tmp_path,
    )
    far = parse_config(
        f'[reranker]\nurl = "https://r.example"\n{remote}'
        f'[[provider]]\nid = "b"\nurl = "https://p.example"\n{remote}',
        base=tmp_path,
    )
    dumped = [local.model_dump(), far.model_dump()]
    loaded = set()
    for key in _path_keys(Config):
        section, _, name = key.rpartition(".")
        for data in dumped:
            table = data[section][0] if section == "provider" else data[section]
            value = table[name]
            if isinstance(value, Path) or (value and isinstance(value[0], Path)):
                loaded.add(key)
    assert loaded == _path_keys(Config)


def test_a_config_named_by_a_relative_path_is_known_by_its_absolute_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.toml").write_text("[host]\ndefault_budget = 0\n")
    (tmp_path / "good.toml").write_text("[host]\ndefault_budget = 10\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("good.toml").source == str(tmp_path / "good.toml")
    with pytest.raises(ConfigError) as exc:
        load_config("bad.toml")
    assert exc.value.data["file"] == str(tmp_path / "bad.toml")
    assert exc.value.message.startswith(f"{tmp_path / 'bad.toml'}: ")


def test_logs_to_stderr_reads_only_the_log_file_key(tmp_path: Path) -> None:
    from hostd.config import logs_to_stderr

    plain, filed = tmp_path / "plain.toml", tmp_path / "filed.toml"
    plain.write_text("[host]\ndefault_budget = 10\n")
    filed.write_text('[log]\nfile = "hostd.log"\n')
    assert logs_to_stderr(plain) is True
    assert logs_to_stderr(filed) is False


def test_a_providers_restarts_follow_the_host_keys_and_keep_their_defaults() -> None:
    from hostd.engine import backoff_delay
    from hostd.server._engine import restart_policy

    default = restart_policy(parse_config("").host)
    assert (default.base_delay_s, default.max_delay_s, default.max_attempts) == (0.5, 5.0, 5)
    text = "[host]\nrestart_backoff_s = 1\nrestart_backoff_max_s = 30\nrestart_attempts = 9\n"
    policy = restart_policy(parse_config(text).host)
    assert policy.max_attempts == 9
    assert [backoff_delay(n, policy) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_a_base_backoff_above_the_default_cap_raises_the_cap_it_does_not_set(
    tmp_path: Path,
) -> None:
    # Only a cap the file gives is held to the base: the default one rises to it.
    config = load_config(_write(tmp_path, "[host]\nrestart_backoff_s = 10\n"))
    assert (config.host.restart_backoff_s, config.host.restart_backoff_max_s) == (10, 5)


def test_a_first_cool_down_above_the_default_cap_raises_the_cap_it_does_not_set(
    tmp_path: Path,
) -> None:
    # Only a cap the file gives is held to the first cool-down: the default one rises.
    from hostd.engine import Health, retry_cool_down_s
    from hostd.server._engine import restart_policy

    config = load_config(_write(tmp_path, "[host]\nretry_failed_after_s = 7200\n"))
    assert (config.host.retry_failed_after_s, config.host.retry_failed_max_s) == (7200, 3600)
    policy = restart_policy(config.host)
    assert retry_cool_down_s(Health(failed_retries=3), policy) == 7200
