"""``hostd check-provider --url``: a remote provider checked over HTTPS as the daemon reaches it.

The provider is the bundled files provider served over HTTPS on loopback by a real
process (``python -m providers.files --http``, a test CA), and check-provider runs
as a real ``python -m hostd`` child: the same endpoint, credential and TLS rules as
the daemon's ``[[provider]] url``. What only a child's pipes can show is skipped with
why; a refused credential or an untrusted certificate fails the handshake with the
transport's words; the token is never printed (C8). Calls get a generous deadline
(a hang guard), so no verdict depends on how fast the machine is.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from hostd._hints import FLAGS, no_remote_handshake
from hostd.cli._checks import Deadlines, check_remote_provider, render_remote_header
from hostd.engine import ProviderSpec
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT, no_process_left_behind
from tests.remote._servers import (
    TOKEN,
    Scope,
    after_handshake,
    make_tls,
    remote_spec,
    serving,
    silent,
)
from tests.remote.test_serve import served

__all__ = ["no_process_left_behind"]  # an autouse fixture: every test here is checked

#: A hang guard, not the thing tested.
_GUARD_MS = "60000"
_CHECKED = ["handshake", "query", "budget honesty", "kinds filter", "verify honesty"]
_SKIPPED = ["malformed input", "shutdown"]


class Served:
    def __init__(self, url: str, ca_file: Path, token_file: Path) -> None:
        self.url, self.ca_file, self.token_file = url, ca_file, token_file


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One files provider served over HTTPS for the module (its token in a file)."""
    tmp = tmp_path_factory.mktemp("served")
    corpus = tmp / "corpus"
    corpus.mkdir()
    (corpus / "config.md").write_text(
        "# Loading the configuration\n\nThe configuration is loaded from hostd.toml.\n"
    )
    (corpus / "retry.md").write_text(
        "# Retry policy\n\nThe retry loop gives up after five tries.\n"
    )
    with served("providers.files", tmp, "--root", str(corpus)) as (url, ca_file):
        yield Served(url, ca_file, tmp / "served-token")


def _check(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """``hostd check-provider --json ARGS``: its exit status, its rows by name, and all
    it wrote (stdout and stderr)."""
    done = run_hostd("check-provider", "--json", "--timeout-ms", _GUARD_MS, *args, env=env)
    assert done.stdout, done.stderr[-2000:]
    rows = {r["check"]: r for r in json.loads(done.stdout)}
    return done.returncode, rows, done.stdout + done.stderr


def _assert_nothing_after_the_handshake(rows: dict[str, Any]) -> None:
    """The handshake failed: every other check is listed, never run (a failure), save
    the pipe-only ones a remote provider skips anyway."""
    assert list(rows) == ["handshake", *_CHECKED[1:4], "malformed input", "verify honesty",
                          "shutdown"]  # fmt: skip
    for name in ("query", "budget honesty", "kinds filter", "verify honesty"):
        assert rows[name]["detail"] == "not run: the handshake failed", rows[name]
        assert (rows[name]["passed"], rows[name]["not_run"]) == (False, True), rows[name]
    for name in _SKIPPED:
        assert rows[name]["skipped"], rows[name]


def test_a_remote_provider_passes_over_https_and_the_pipe_only_checks_are_skipped(
    remote: Served,
) -> None:
    code, rows, said = _check(
        "--url",
        remote.url,
        "--token-file",
        str(remote.token_file),
        "--ca-file",
        str(remote.ca_file),
    )
    assert code == 0, rows
    assert list(rows) == [*_CHECKED[:4], "malformed input", "verify honesty", "shutdown"]
    for name in _CHECKED:
        assert (rows[name]["passed"], rows[name]["skipped"]) == (True, False), rows[name]
    # Skipped, never passed: a remote provider has no stdin and no process here.
    for name in _SKIPPED:
        assert rows[name]["skipped"], rows[name]
        assert rows[name]["detail"].startswith("not asked of a remote provider: "), rows[name]
    assert rows["handshake"]["detail"].startswith("hostd-files "), rows["handshake"]
    assert TOKEN not in said


def test_the_cgp_binding_reaches_it_too_and_the_table_names_the_credential_not_its_value(
    remote: Served,
) -> None:
    done = run_hostd(
        "check-provider",
        "--binding",
        "cgp",
        "--timeout-ms",
        _GUARD_MS,
        "--url",
        remote.url + "?api_key=QSECRET-999",  # a server's key in the query: sent, never shown
        "--token-file",
        str(remote.token_file),
        "--ca-file",
        str(remote.ca_file),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"asked {remote.url} (its query not shown) over HTTPS (cgp), "
        "as the daemon asks a [[provider]] url"
    )
    assert "QSECRET" not in done.stdout + done.stderr
    # Given by flags: named as the flags that gave them, as --help and the advice say.
    assert lines[1] == (
        f"credential: the bearer token in --token-file {remote.token_file} (never shown); "
        f"trusting --ca-file {remote.ca_file}"
    )
    assert lines[-1] == "5/5 passed, 2 skipped"
    assert TOKEN not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("section", "credential"),
    [
        (
            None,
            "the bearer token in $TEAM_TOKEN (never shown); trusting ca_file /ca.pem; "
            "client_cert /me.pem",
        ),
        (
            FLAGS,
            "the bearer token in --token-env TEAM_TOKEN (never shown); trusting --ca-file "
            "/ca.pem; --client-cert /me.pem",
        ),
    ],
)
def test_the_header_names_a_remote_provider_s_options_as_they_were_given(
    section: str | None, credential: str
) -> None:
    """A configured provider's options by its config's keys; one given by flags by the
    flags (``--token-env NAME``, ``--ca-file PATH``), as ``--help`` spells them."""
    spec = ProviderSpec(
        "remote",
        url="https://search.example/cgp",
        token_env="TEAM_TOKEN",
        ca_file="/ca.pem",
        client_cert="/me.pem",
        client_key="/me.key",
    )
    header = render_remote_header(spec, Deadlines.of(), section=section)
    assert header.splitlines()[1] == f"credential: {credential}"


def test_a_refused_token_fails_the_handshake_naming_its_flag_and_file_never_its_value(
    remote: Served, tmp_path: Path
) -> None:
    wrong = "wrong-token-5d1e0b7a"
    token_file = tmp_path / "wrong.token"
    token_file.write_text(wrong + "\n")
    code, rows, said = _check(
        "--url", remote.url, "--token-file", str(token_file), "--ca-file", str(remote.ca_file)
    )
    assert code == 1
    _assert_nothing_after_the_handshake(rows)
    assert rows["handshake"]["detail"] == (
        "unauthorized: remote provider refused the credential (HTTP 401): "
        f"check the token in --token-file {token_file}"  # the flag given, as --help says
    )
    assert wrong not in said and TOKEN not in said


def test_a_refused_token_from_a_variable_is_named_by_its_flag_and_variable(
    remote: Served,
) -> None:
    wrong = "wrong-token-93c4aa20"
    env = {**os.environ, "TEAM_SEARCH_TOKEN": wrong}
    code, rows, said = _check(
        "--url",
        remote.url,
        "--token-env",
        "TEAM_SEARCH_TOKEN",
        "--ca-file",
        str(remote.ca_file),
        env=env,
    )
    assert code == 1
    assert rows["handshake"]["detail"] == (
        "unauthorized: remote provider refused the credential (HTTP 401): "
        "check the token in --token-env TEAM_SEARCH_TOKEN"  # the flag given, as --help says
    )
    assert wrong not in said


def test_no_credential_where_one_is_wanted_names_the_flags_that_give_one(remote: Served) -> None:
    code, rows, _ = _check("--url", remote.url, "--ca-file", str(remote.ca_file))
    assert code == 1
    _assert_nothing_after_the_handshake(rows)
    assert rows["handshake"]["detail"] == (
        "unauthorized: remote provider refused the request (HTTP 401): it wants a "
        "credential; set --token-env NAME or --token-file PATH"
    )


def test_no_credential_where_one_is_wanted_names_a_configured_providers_keys(
    remote: Served, tmp_path: Path
) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "team-search"\nurl = "{remote.url}"\nca_file = "{remote.ca_file}"\n'
    )
    code, rows, _ = _check("--config", str(config), "--provider", "team-search")
    assert code == 1
    _assert_nothing_after_the_handshake(rows)
    assert rows["handshake"]["detail"] == (
        "unauthorized: remote provider refused the request (HTTP 401): it wants a "
        "credential; set [[provider]] 'team-search' token_env or [[provider]] "
        "'team-search' token_file"
    )


def test_without_its_ca_file_the_handshake_names_the_ca_file_flag(remote: Served) -> None:
    # Given by flags, its CA is given by a flag too: the advice names it, not a config key.
    code, rows, said = _check("--url", remote.url, "--token-file", str(remote.token_file))
    assert code == 1
    _assert_nothing_after_the_handshake(rows)
    detail = rows["handshake"]["detail"]
    assert detail.startswith("certificate not trusted ("), detail
    assert detail.endswith(
        "CERTIFICATE_VERIFY_FAILED): give the CA that signed it with --ca-file PATH"
    )
    assert TOKEN not in said


def test_a_missing_ca_file_fails_the_start_naming_the_file(remote: Served, tmp_path: Path) -> None:
    absent = tmp_path / "absent-ca.pem"
    code, rows, said = _check(
        "--url", remote.url, "--token-file", str(remote.token_file), "--ca-file", str(absent)
    )
    assert code == 1
    assert rows["start"]["detail"] == (
        f"certificate: cannot load --ca-file {absent}: No such file or directory"
    )
    assert TOKEN not in said


def test_a_configured_remote_providers_missing_ca_file_names_its_section(
    remote: Served, tmp_path: Path
) -> None:
    """Checked by its id, a provider's TLS key is named as the daemon names it: after its
    own ``[[provider]]`` section (given by flags, it is the flag: ``--ca-file``)."""
    absent = tmp_path / "absent-ca.pem"
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "team-search"\nurl = "{remote.url}"\nca_file = "{absent}"\n'
        f'token_file = "{remote.token_file}"\n'
    )
    code, rows, said = _check("--config", str(config), "--provider", "team-search")
    assert code == 1
    assert rows["start"]["detail"] == (
        f"certificate: cannot load [[provider]] 'team-search' ca_file {absent}: "
        "No such file or directory"
    )
    assert TOKEN not in said


def test_a_configured_remote_provider_is_checked_by_its_id(remote: Served, tmp_path: Path) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "team-search"\nurl = "{remote.url}"\nca_file = "{remote.ca_file}"\n'
        f'token_file = "{remote.token_file}"\ntimeout_ms = {_GUARD_MS}\n'
    )
    done = run_hostd("--config", str(config), "check-provider", "--provider", "team-search")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"provider team-search of {config}"
    assert (
        lines[3]
        == f"each call must answer within {_GUARD_MS} ms (timeout_ms of [[provider]] team-search)"
    )
    assert lines[-1] == "5/5 passed, 2 skipped"
    assert TOKEN not in done.stdout + done.stderr


@pytest.mark.anyio
async def test_a_remote_provider_that_never_answers_misses_the_start_deadline() -> None:
    # A loopback socket whose backlog takes the connection and the request, and nothing
    # ever reads or answers them (plaintext: loopback may, C7): the deadline is held
    # against an answer that never comes, not a slow one.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        checked = await check_remote_provider(
            ProviderSpec("silent", url=url), deadlines=Deadlines.of(0.5, start_s=0.5)
        )
    assert [(r.name, r.passed) for r in checked.results[:2]] == [
        ("handshake", False),
        ("query", False),
    ]
    assert checked.results[1].detail == "not run: the handshake failed"
    hint = no_remote_handshake("[[provider]] 'silent' ")
    assert checked.results[0].detail == (
        "no answer within 500 ms (the start_timeout_s asked for): stalled waiting for the "
        f"response head, the request sent (ReadTimeout); {hint}"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("section", "url", "tls", "start"),
    [
        (
            None,
            "[[provider]] 'remote' url",
            "ca_file; client_cert and client_key",
            "its start_timeout_s",
        ),
        (FLAGS, "--url", "--ca-file; --client-cert and --client-key", "--start-timeout-s"),
    ],
)
async def test_a_https_server_that_never_answers_the_handshake_is_told_what_to_check(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    section: str | None,
    url: str,
    tls: str,
    start: str,
) -> None:
    """The server reads the handshake and answers nothing: the row names what to check
    (the url, TLS, the token, a proxy, the start deadline) by the keys of the provider's
    own section, or the flags that gave them (``--url``), never the token."""
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)
    files = make_tls(tmp_path)
    async with serving(silent, files) as (served_url, rec):
        spec = remote_spec(served_url, files)
        checked = await check_remote_provider(
            spec, deadlines=Deadlines.of(0.5, start_s=0.5), section=section
        )
    assert rec.kinds() == ["handshake"]
    row = checked.results[0]
    assert (row.name, row.passed) == ("handshake", False)
    assert row.detail == (
        "no answer within 500 ms (the start_timeout_s asked for): stalled waiting for the "
        f"response head, the request sent (ReadTimeout); check that {url} answers "
        "from here (curl's POST gets a reply at once, even a 401), its TLS "
        f"({tls} for mutual TLS) and the token; if it is only slow, raise {start}; it must "
        "answer without a proxy (hostd ignores HTTPS_PROXY and the other proxy variables)"
    )
    assert TOKEN not in " ".join(r.detail for r in checked.results)


#: The query row of a provider whose result carries its frames under ``results``: the
#: pipe's words (tests/cli/test_check_provider_says_plainly.py), over HTTPS too.
_NO_FRAMES = (
    "malformed reply: result.frames is missing (members sent: results, truncated); a "
    'query\'s result is {"frames": [...], "truncated": false} (docs/providers.md, "2. Query")'
)


async def _results_key(scope: Scope, receive: Any, send: Any) -> None:
    """Answers every request (the handshake is the provider app's) with a result whose
    frames are under ``results``, in the request's binding."""
    request = orjson.loads((await receive())["body"])
    result = {"results": [], "truncated": False}
    if "jsonrpc" in request:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    else:
        reply = {"type": "frames", "result": result}
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": orjson.dumps(reply)})


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_remote_result_without_frames_is_a_malformed_reply_as_over_a_pipe(
    binding: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)
    tls = make_tls(tmp_path)
    async with serving(after_handshake(_results_key), tls) as (url, _):
        spec = remote_spec(url, tls, binding=binding)
        checked = await check_remote_provider(spec, deadlines=Deadlines.of(60))
    rows = {r.name: r for r in checked.results}
    assert rows["handshake"].passed, rows["handshake"]
    assert (rows["query"].passed, rows["query"].detail) == (False, _NO_FRAMES)


# -- no server needed: what is refused before anything is sent ---------------------------


@pytest.mark.parametrize(
    "words", [["https://search.example:8443/cgp"], ["--", "http://127.0.0.1:9/x"]]
)
def test_a_url_given_as_the_command_is_a_usage_error_naming_url(words: list[str]) -> None:
    done = run_hostd("check-provider", *words)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "hostd check-provider: a URL is not a command: check a remote provider with --url URL\n"
    )


def test_plaintext_to_another_host_is_refused_as_the_config_refuses_it() -> None:
    done = run_hostd("check-provider", "--url", "http://search.example/cgp")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "hostd check-provider: --url: plaintext http:// to 'search.example', which is not "
        "loopback: use https://"
    ), done.stderr


@pytest.mark.anyio
async def test_the_transport_itself_refuses_plaintext_off_loopback() -> None:
    # The library entry, past the command line's check: the daemon's endpoint refuses it
    # before a client (or a name lookup) exists.
    checked = await check_remote_provider(ProviderSpec("x", url="http://search.example/cgp"))
    assert [(r.name, r.passed, r.skipped) for r in checked.results] == [
        ("start", False, False),
        ("handshake", False, False),
        ("query", False, False),
        ("budget honesty", False, False),
        ("kinds filter", False, False),
        ("malformed input", True, True),
        ("verify honesty", False, False),
        ("shutdown", True, True),
    ]
    assert checked.results[1].detail == "not run: the provider did not start"
    assert checked.results[0].detail.startswith(
        "insecure_transport: plaintext http:// to 'search.example', which is not loopback"
    ), checked.results[0].detail


def test_a_credential_in_the_url_is_refused_and_never_echoed() -> None:
    done = run_hostd("check-provider", "--url", "https://me:pw-71c0e2@127.0.0.1:9/cgp")
    assert done.returncode == 2
    assert done.stderr == (
        "hostd check-provider: --url: a credential may not be part of the URL "
        "(use token_file or token_env)\n"
    )


def test_remote_options_go_with_url_only() -> None:
    done = run_hostd(
        "check-provider", "--token-file", "t", "--ca-file", "c", "--", sys.executable, "-c", "pass"
    )
    assert done.returncode == 2
    assert done.stderr == "hostd check-provider: --token-file, --ca-file: only with --url\n"


def test_a_command_and_a_url_are_one_or_the_other() -> None:
    done = run_hostd(
        "check-provider", "--url", "https://127.0.0.1:9/", "--", sys.executable, "-c", "pass"
    )
    assert done.returncode == 2
    assert done.stderr == (
        "hostd check-provider: give one of the provider command after --, --url URL "
        "or --provider ID\n"
    )


# -- --provider ID: a configured command, with its env -----------------------------------


def test_a_configured_command_is_checked_by_its_id_with_its_env_and_timeout(
    tmp_path: Path,
) -> None:
    secret = "tok-8c2f51e9a4d0"
    script = "import os, sys; sys.exit('auth failed with ' + os.environ['NOTES_API_TOKEN'])"
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "notes"\ncommand = {json.dumps(["python", "-c", script])}\n'
        f'cwd = "{ROOT}"\ntimeout_ms = 4321\nenv = {{ NOTES_API_TOKEN = "{secret}" }}\n'
    )
    done = run_hostd("check-provider", "--config", str(config), "--provider", "notes")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == f"provider notes of {config}"
    assert lines[3] == "each call must answer within 4321 ms (timeout_ms of [[provider]] notes)"
    # Its own env reached it (as [[provider]] env does), and what it said is scrubbed.
    handshake = next(line for line in lines if line.startswith("handshake"))
    assert handshake.endswith("exited with status 1; stderr: auth failed with <redacted>"), lines
    assert secret not in done.stdout + done.stderr


def test_an_unknown_provider_id_names_the_configured_ones(tmp_path: Path) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        '[[provider]]\nid = "notes"\ncommand = ["python", "-c", "pass"]\n'
    )
    done = run_hostd("--config", str(config), "check-provider", "--provider", "nope")
    assert done.returncode == 2
    assert done.stderr == (
        f"hostd check-provider: no provider 'nope' in {config} (its providers: notes)\n"
    )


# -- a credential file others may read -------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("given", ["--url", "--provider"])
def test_a_token_file_others_may_read_is_named_as_the_daemon_names_it(
    tmp_path: Path, given: str
) -> None:
    """The daemon warns of it at start (``config.secret_file_open``); check-provider says
    the same, in the same words, whatever the check finds (here: nothing listens)."""
    token = tmp_path / "team.token"
    token.write_text("tok-secret-5e1a\n")
    token.chmod(0o644)
    url = f"http://127.0.0.1:{_closed_port()}/"
    if given == "--url":
        args = ["check-provider", "--url", url, "--token-file", str(token)]
        key = "--token-file"
    else:
        config = tmp_path / "hostd.toml"
        config.write_text(
            f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
            f'[[provider]]\nid = "team"\nurl = "{url}"\ntoken_file = "{token}"\n'
        )
        args = ["--config", str(config), "check-provider", "--provider", "team"]
        key = "provider team: token_file"
    done = run_hostd(*args)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = (
        f"warning: {key} {token} is open to other users (mode 0644): chmod 600 {token} "
        "(config.secret_file_open)"
    )
    assert warning in done.stdout.splitlines(), done.stdout
    assert "tok-secret-5e1a" not in done.stdout + done.stderr
    token.chmod(0o600)
    assert "warning:" not in run_hostd(*args).stdout
