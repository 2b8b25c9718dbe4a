"""What the one-shot CLI says when it fails, at default settings: the real ``hostd``
run as a child, its stderr and exit status read as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from tests.fixtures.cli import run_hostd as _hostd
from tests.fixtures.unstartable import unstartable_files

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, body: str = "") -> Path:
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{tmp_path}/state"\n{body}',
        encoding="utf-8",
    )
    return path


def _provider(pid: str, command: list[str], cwd: Path | str = ROOT) -> str:
    return f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(command)}\ncwd = "{cwd}"\n'


def _healthy(pid: str) -> str:
    return _provider(pid, ["python", "-m", "tests.fixtures.healthy_provider", "--name", pid])


def _human(stderr: str) -> list[str]:
    """The CLI's own lines (the JSON log lines are the log's)."""
    return [line for line in stderr.splitlines() if not line.startswith("{")]


@pytest.fixture
def unstartable(tmp_path: Path) -> dict[str, str]:
    """Provider id → the config text of a provider that cannot start, and why."""
    files = unstartable_files(tmp_path)
    plain, noformat, badshebang = files["plain"], files["noformat"], files["badshebang"]
    return {
        "ghost": _provider("ghost", ["no-such-provider-cmd", "--flag"]),
        "nocwd": _provider("nocwd", ["python", "-c", "pass"], cwd=tmp_path / "missing"),
        "noexec": _provider("noexec", [str(plain)]),
        "noformat": _provider("noformat", [str(noformat)]),
        "badshebang": _provider("badshebang", [str(badshebang)]),
    }


WHY = {
    "ghost": ("no-such-provider-cmd --flag", "no-such-provider-cmd was not found on the PATH"),
    "nocwd": ("python", "its working directory"),
    "noexec": ("plain.sh", "plain.sh is not executable:"),
    "noformat": ("noformat", "is neither a program nor a script"),
    "badshebang": ("badshebang", "(/no/such/interpreter) was not found"),
}


def test_a_provider_that_cannot_start_says_which_command_and_why(
    tmp_path: Path, unstartable: dict[str, str]
) -> None:
    config = _config(tmp_path, "".join(unstartable.values()))
    done = _hostd("--config", str(config), "compose", "anything", "--json")
    errors = {p["provider_id"]: p["error"]["message"] for p in json.loads(done.stdout)["providers"]}
    for pid, (command, os_error) in WHY.items():
        message = errors[pid]
        assert f"provider {pid!r} cannot start" in message and command in message, message
        assert os_error in message, message
        lines = [
            line
            for line in _human(done.stderr)
            if line.removeprefix("hostd:").strip().startswith(f"{pid}:")
        ]
        assert len(lines) == 1 and os_error in lines[0], done.stderr
    assert "nocwd" in errors and str(tmp_path / "missing") in errors["nocwd"]


def test_an_empty_prompt_exits_1_and_says_how_each_leg_failed(
    tmp_path: Path, unstartable: dict[str, str]
) -> None:
    config = _config(tmp_path, unstartable["ghost"] + unstartable["nocwd"])
    done = _hostd("--config", str(config), "compose", "anything")
    assert done.returncode == 1, done.stderr
    human = _human(done.stderr)
    assert "hostd: empty prompt: no provider produced evidence" in human, done.stderr
    assert any("ghost: crashed: provider 'ghost' cannot start" in line for line in human)
    assert any("nocwd: crashed: provider 'nocwd' cannot start" in line for line in human)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--budget", "0"],
            "invalid params: budget: got 0; expected an integer from 1 to 10,000,000",
        ),
        (["--max-frames", "0"], "invalid params: max_frames:"),
        (["--as-of", "2026-06-31"], "invalid params: as_of: not a UTC time such as"),
        (["--as-of", "yesterday"], "invalid params: as_of: not a UTC time such as"),
    ],
)
def test_params_the_daemon_would_refuse_are_refused_before_a_provider_starts(
    tmp_path: Path, args: list[str], said: str
) -> None:
    started = tmp_path / "started"
    # A provider that leaves a mark when it is started.
    run = f'touch "{started}"; exec "$0" -m tests.fixtures.healthy_provider'
    mark = ["sh", "-c", run, sys.executable]
    config = _config(tmp_path, _provider("alpha", mark))
    done = _hostd("--config", str(config), "compose", "anything", *args)
    assert done.returncode == 1, done.stderr
    assert any(said in line and "[invalid_params]" in line for line in _human(done.stderr))
    assert not started.exists()
    # The same provider starts for a request it can serve (the mark is a real one).
    assert _hostd("--config", str(config), "compose", "anything").returncode == 0
    assert started.exists()


_RAISES = """\
import sys

from hostd.protocol import Capabilities, ProviderInfo, QueryCapability
from hostd.provider import Provider, run_stdio


class Raises(Provider):
    info = ProviderInfo(name="raises", version="1.0")
    capabilities = Capabilities(query=QueryCapability(kinds=["fact"]))

    async def query(self, query):
        print("notes: opening the database", file=sys.stderr)
        raise RuntimeError("notes database is locked")


run_stdio(Raises())
"""


def test_a_provider_whose_query_fails_is_pointed_at_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "raises.py"
    script.write_text(_RAISES, encoding="utf-8")
    config = _config(tmp_path, _provider("raises", ["python", str(script)]))
    done = _hostd("--config", str(config), "compose", "anything")
    assert done.returncode == 1, done.stderr
    human = _human(done.stderr)
    failed = next(line for line in human if "raises: error:" in line)
    assert "provider answered internal" in failed and "provider.stderr" in failed, failed
    assert any("--log-level warning" in line for line in human), human
    assert "database is locked" not in done.stderr  # the error's text is not quoted
    # Where the hint points: the provider's traceback, in the log at warning; the rest
    # of its stderr at info, which the hint there names.
    shown = _hostd("--config", str(config), "--log-level", "warning", "compose", "anything")
    said = [json.loads(line) for line in shown.stderr.splitlines() if line.startswith("{")]
    stderr = [e["line"] for e in said if e.get("event") == "provider.stderr"]
    assert "RuntimeError: notes database is locked" in stderr, stderr
    assert "notes: opening the database" not in stderr, stderr
    assert any("--log-level info" in line for line in _human(shown.stderr))


def test_with_connect_the_hint_points_at_the_daemons_log(tmp_path: Path) -> None:
    script = tmp_path / "raises.py"
    script.write_text(_RAISES, encoding="utf-8")
    config = _config(tmp_path, _provider("raises", ["python", str(script)]))
    log = tmp_path / "daemon.log"
    with log.open("w") as sink:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "hostd", "--config", str(config), "serve"],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
        try:  # --wait: the CLI waits for the daemon's socket (an event), not a sleep
            done = _hostd("--config", str(config), "compose", "x", "--connect", "--wait", "60")
        finally:
            daemon.terminate()
            daemon.wait(timeout=60)
    assert done.returncode == 1, done.stderr
    human = _human(done.stderr)
    assert any("raises: error:" in line and "provider.stderr" in line for line in human), human
    assert any("in the daemon's log" in line for line in human), human
    assert not any("--log-level info" in line for line in human), human
    # And the daemon's log does hold the provider's account.
    assert "RuntimeError: notes database is locked" in log.read_text()


def test_a_daemon_at_warning_logs_the_traceback_of_a_provider_whose_query_raised(
    tmp_path: Path,
) -> None:
    # The failed leg points at the daemon's log; at --log-level warning (a user's quiet
    # daemon) the provider's error is there, its ordinary lines are not.
    script = tmp_path / "raises.py"
    script.write_text(_RAISES, encoding="utf-8")
    config = _config(tmp_path, _provider("raises", ["python", str(script)]))
    said: list[dict[str, object]] = []
    error_logged = threading.Event()

    def read(stream: IO[str]) -> None:  # drains the daemon's log until it exits
        for line in stream:
            if line.startswith("{"):
                said.append(event := json.loads(line))
                if event.get("line") == "RuntimeError: notes database is locked":
                    error_logged.set()

    argv = ["--config", str(config), "--log-level", "warning", "serve"]
    with subprocess.Popen(
        [sys.executable, "-m", "hostd", *argv],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as daemon:
        assert daemon.stderr is not None
        reader = threading.Thread(target=read, args=(daemon.stderr,), daemon=True)
        reader.start()
        try:
            done = _hostd("--config", str(config), "compose", "x", "--connect", "--wait", "60")
            assert done.returncode == 1, done.stderr
            # Its stderr and its failed reply come on two pipes, in no set order: the
            # test waits for the line.
            assert error_logged.wait(timeout=60), said  # a hang guard
        finally:
            daemon.terminate()
            daemon.wait(timeout=60)
            reader.join(timeout=60)
    stderr = [e for e in said if e.get("event") == "provider.stderr"]
    error = next(e for e in stderr if e["line"] == "RuntimeError: notes database is locked")
    assert (error["level"], error["provider"]) == ("warning", "raises")
    # The traceback's first line came before it, at warning too; the provider's own
    # ordinary line, written before any of it, at info: not in this log.
    assert any(e["line"] == "Traceback (most recent call last):" for e in stderr), stderr
    assert not any("opening the database" in str(e["line"]) for e in stderr), stderr


def test_an_empty_prompt_of_evidence_that_did_not_fit_says_so(tmp_path: Path) -> None:
    # Frames came, and the preamble left too little of the budget for any of them.
    words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "alpha", "--size", "200"]
    config = _config(tmp_path, _provider("alpha", words))
    done = _hostd("--config", str(config), "compose", "anything", "--budget", "100")
    assert done.returncode == 1, done.stderr
    human = _human(done.stderr)
    assert "hostd: empty prompt: 2 frame(s) offered, none included (over_budget 2)" in human
    assert any("raise --budget" in line for line in human), human
    assert not any("no provider produced evidence" in line for line in human)


def test_a_prompt_with_evidence_exits_0_and_still_names_the_failed_leg(
    tmp_path: Path, unstartable: dict[str, str]
) -> None:
    config = _config(tmp_path, _healthy("alpha") + unstartable["ghost"])
    done = _hostd("--config", str(config), "compose", "anything")
    assert done.returncode == 0, done.stderr
    assert "<frame " in done.stdout
    assert any(
        "ghost: crashed" in line and "no-such-provider-cmd" in line for line in _human(done.stderr)
    )


def test_providers_names_why_a_provider_is_down(
    tmp_path: Path, unstartable: dict[str, str]
) -> None:
    config = _config(tmp_path, unstartable["ghost"])
    done = _hostd("--config", str(config), "providers")
    assert done.returncode == 0 and done.stdout.startswith("ghost\t")
    # It never answered a handshake: no name to show, and no "?" standing for one.
    assert done.stdout.split("\n")[0].split("\t")[3] == "-", done.stdout
    assert any(
        line.startswith("hostd: ghost: crashed: provider 'ghost' cannot start")
        for line in _human(done.stderr)
    ), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", [["compose", "x"], ["providers"], ["consent", "list"]])
def test_connect_without_a_daemon_names_the_socket_and_hostd_serve(
    tmp_path: Path, command: list[str]
) -> None:
    config = _config(tmp_path, _healthy("alpha"))
    done = _hostd("--config", str(config), *command, "--connect", "--wait", "0")
    assert done.returncode == 3, done.stderr
    (line,) = _human(done.stderr)
    assert f"no daemon at {tmp_path}/run/s.sock" in line
    assert f"`hostd serve --config {config}`" in line
    other = tmp_path / "elsewhere.sock"
    done = _hostd("--config", str(config), *command, "--connect", str(other), "--wait", "0")
    assert done.returncode == 3 and f"no daemon at {other}" in done.stderr
    # Not this config's socket: its daemon would serve elsewhere, so the line says what
    # starts one there, and where this config's would be.
    (line,) = _human(done.stderr)
    assert f"`hostd serve --socket {other}` in the project whose daemon it is" in line, line
    assert f"({config}, read here, serves at {tmp_path}/run/s.sock)" in line, line
    assert f"`hostd serve --config {config}`" not in line, line
    # A config with no provider: a daemon of it would have nothing to ask, so the way
    # out is a config that has some, not `hostd serve`.
    empty = _config(tmp_path)
    done = _hostd("--config", str(empty), *command, "--connect", "--wait", "0")
    assert done.returncode == 3, done.stderr
    (line,) = _human(done.stderr)
    assert f"no providers configured in {empty}" in line and "`hostd init`" in line
    assert "hostd serve" not in line
    # A socket named outright is some daemon's, whatever this config holds.
    done = _hostd("--config", str(empty), *command, "--connect", str(other), "--wait", "0")
    assert done.returncode == 3 and "start one with `hostd serve" in done.stderr


@pytest.mark.parametrize("command", [["compose", "x"], ["providers"]])
def test_connect_to_a_named_socket_with_a_broken_config_names_that_config_to_fix(
    tmp_path: Path, command: list[str]
) -> None:
    config = _config(tmp_path, "bogus_key = 1\n" + _healthy("alpha"))
    other = tmp_path / "elsewhere.sock"
    done = _hostd("--config", str(config), *command, "--connect", str(other), "--wait", "0")
    assert done.returncode == 3, done.stderr
    # One line: the error said once, with the file a daemon would start from once it
    # is fixed; never the embedded default that stood in for it to reach the socket.
    (line,) = _human(done.stderr)
    assert line.startswith(f"hostd: no daemon at {other} ("), line
    assert f"`hostd serve --socket {other} --config {config}` once the config loads" in line
    assert f"fix its error first: {config}: host.bogus_key: unknown key" in line, line
    assert "default.toml" not in line, line


CONFIG_ERRORS = [
    ('[log]\nfile = "{tmp}"\n', "log.file"),
    ("[log]\nlevel = 3\n", "log.level"),
    ("[shadow]\nno_such_key = 1\n", "shadow.no_such_key"),
    ('[host]\nstate_dir = "/proc/hostd-no-such"\n', "host.state_dir"),
]


@pytest.mark.parametrize(
    ("body", "key", "command"),
    # log.file is the daemon's log: a one-shot command logs to stderr and never opens it.
    [(body, key, ["providers"]) for body, key in CONFIG_ERRORS if key != "log.file"]
    + [(body, key, ["serve", "--stdio"]) for body, key in CONFIG_ERRORS]
    # Only a command that listens on TCP reads the token.
    + [('[tcp]\nenabled = true\ntoken_file = "{tmp}/none"\n', "tcp.token_file", ["serve"])],
    ids=lambda v: (
        v if isinstance(v, str) and "\n" not in v else (v[0] if isinstance(v, list) else "")
    ),
)
def test_every_config_error_exits_2_naming_the_key(
    tmp_path: Path, body: str, key: str, command: list[str]
) -> None:
    config = tmp_path / "bad.toml"
    text = f'[host]\nsocket = "{tmp_path}/run/s.sock"\n' if not body.startswith("[host]") else ""
    config.write_text(text + body.format(tmp=tmp_path), encoding="utf-8")
    done = _hostd("--config", str(config), *command)  # stdin closed: serve --stdio ends
    assert done.returncode == 2, done.stderr
    (line,) = _human(done.stderr)
    assert line.startswith("hostd: ") and key in line and str(config) in line, line


@pytest.mark.parametrize("command", [["compose", "anything"], ["providers"]])
def test_a_provider_failure_is_reported_once_per_command(
    tmp_path: Path, command: list[str]
) -> None:
    # A provider whose script fails at import: the start fails at boot and again when
    # the request retries it; the command's own report says so once, the log not again.
    (tmp_path / "bad.py").write_text("import no_such_module_anywhere\n")
    config = _config(tmp_path, _provider("bad", ["python", "bad.py"], cwd=tmp_path))
    done = _hostd("--config", str(config), *command)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len([line for line in lines if "bad: crashed" in line]) == 1, done.stderr
    # Not again in the log: its warnings would repeat each failed start.
    assert not [line for line in lines if line.startswith("{")], done.stderr


def test_frames_dropped_as_invalid_are_named_with_their_rules(tmp_path: Path) -> None:
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "invalid_frames"]
    config = _config(tmp_path, _provider("adv", words))
    # A budget no frame fits: the valid one is over_budget, the rest were dropped.
    done = _hostd("--config", str(config), "compose", "anything", "--budget", "60")
    assert done.returncode == 1, done.stderr
    human = _human(done.stderr)
    line = next(line for line in human if line.startswith("hostd:   adv: ok"))
    assert "invalid_frame 5" in line and "over_budget 1" in line, line
    assert all(rule in line for rule in ("F1", "F3", "F4", "F5")), line
    assert any("degraded: frames_invalid(adv)" in line for line in human), human


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (
            "invalid_frames",
            [
                "invalid_frame 5 (",
                "F1 frames[1].score",
                "F3 frames[2].citation_label",
                "schema frames[4].title, frames[4].score, frames[4].token_cost: missing",
            ],
        ),
        ("wrong_digest", ["1 frame(s) dropped: digest_mismatch 1 (content_digest is not"]),
    ],
)
def test_an_ok_leg_whose_frames_were_dropped_says_how_many_and_why(
    tmp_path: Path, mode: str, said: list[str]
) -> None:
    words = ["python", "-m", "tests.fixtures.adversarial_provider", mode]
    config = _config(tmp_path, _provider("adv", words))
    done = _hostd("--config", str(config), "compose", "anything", "--budget", "2000")
    assert done.returncode == 0, done.stderr  # frame 0 is good: the prompt holds it
    (line,) = [x for x in _human(done.stderr) if x.startswith("hostd:   adv: ok, but ")]
    assert all(words in line for words in said), line


@pytest.mark.slow
def test_providers_without_connect_lists_the_daemon_serving_this_config(tmp_path: Path) -> None:
    from tests.fixtures.procs import ServeChild

    config = _config(tmp_path, _healthy("alpha"))
    note = "a daemon is serving this config at"
    child = ServeChild(config)
    assert child.start(60)
    try:
        # The daemon's provider answers a compose first: it is ready there, and only
        # there (a fresh one-shot's has not started).
        asked = _hostd("--config", str(config), "compose", "x", "--connect", "--budget", "300")
        assert asked.returncode == 0, asked.stderr
        shown = _hostd("--config", str(config), "providers", "--json")
    finally:
        assert child.stop() == 0
    assert shown.returncode == 0, shown.stderr
    (said,) = [line for line in _human(shown.stderr) if note in line]
    assert str(tmp_path / "run" / "s.sock") in said and "listing its providers" in said
    (row,) = json.loads(shown.stdout)["providers"]
    assert row["state"] == "ready" and row["health"]["legs"] >= 1, row
    alone = _hostd("--config", str(config), "providers")  # no daemon now: no note
    assert alone.returncode == 0 and note not in alone.stderr


def test_a_timed_out_leg_says_which_setting_allows_more(tmp_path: Path) -> None:
    # It answers after ten minutes; its deadline is 300 ms: the leg times out whatever
    # the machine's speed.
    words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "slow"]
    body = _provider("slow", [*words, "--delay-ms", "600000"]) + "timeout_ms = 300\n"
    config = _config(tmp_path, body + _healthy("alpha"))
    done = _hostd("--config", str(config), "compose", "anything")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in _human(done.stderr) if line.startswith("hostd:   slow: timeout")]
    assert "raise its [[provider]] timeout_ms" in line, line


def test_a_start_that_timed_out_names_start_timeout_s(tmp_path: Path) -> None:
    # It never answers its handshake; its start deadline is 0.3 s: whatever the machine.
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "slow_handshake"]
    body = _provider("stuck", words) + "start_timeout_s = 0.3\n"
    config = _config(tmp_path, body + _healthy("alpha"))
    done = _hostd("--config", str(config), "compose", "anything")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in _human(done.stderr) if line.startswith("hostd:   stuck: ")]
    assert "timeout" in line and "raise its [[provider]] start_timeout_s" in line, line
    assert "timeout_ms" not in line, line
    # The usual causes in any language's words: a reply never flushed, set-up before it;
    # warm() is only the Python runtime's.
    assert "end each reply line with a newline and flush it" in line, line
    assert "set up after it" in line and "warm()" not in line, line


@pytest.mark.slow
def test_budget_left_unspent_by_the_frame_cap_says_so(tmp_path: Path) -> None:
    # Each provider offers up to max_frames small frames: at --max-frames 1 both offer
    # one, far under a large budget, and nothing was left out for the budget.
    config = _config(tmp_path, _healthy("alpha") + _healthy("beta"))
    done = _hostd("--config", str(config), "compose", "x", "--budget", "50000", "--max-frames", "1")
    assert done.returncode == 0, done.stderr
    (note,) = [x for x in _human(done.stderr) if "as many frames as a provider may" in x]
    assert note.startswith("hostd: note: ") and "of 50000 tokens used" in note
    assert "alpha, beta offered as many frames as a provider may (1; --max-frames" in note
    roomy = _hostd("--config", str(config), "compose", "x", "--budget", "50000")
    assert "as many frames as" not in roomy.stderr  # they had fewer than 64 to offer


def test_serve_stdio_on_dev_null_ends_and_makes_its_log_file_s_directories(
    tmp_path: Path,
) -> None:
    """stdin from /dev/null (a script, a service with no input): epoll refuses to watch
    it, so it is read in a thread and its end seen; the log's missing folders are
    made."""
    config = tmp_path / "hostd.toml"
    log = tmp_path / "no" / "such" / "folder" / "hostd.log"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\n[log]\nfile = "{log}"\n', encoding="utf-8"
    )
    done = _hostd("--config", str(config), "serve", "--stdio")  # stdin: /dev/null
    assert done.returncode == 0, done.stderr
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events[0] == "host.serving" and events[-1] == "host.stopped"


@pytest.mark.parametrize("command", ["status", "compose"])
def test_a_missing_config_is_named_by_its_absolute_path(tmp_path: Path, command: str) -> None:
    args = [sys.executable, "-m", "hostd", "--config", "nope.toml", command]
    done = subprocess.run(
        [*args, "goal"] if command == "compose" else args,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=90,
        check=False,
    )
    assert f"hostd: {tmp_path / 'nope.toml'}: no such config file [bad_config]" in done.stderr


def test_a_goal_taken_by_connect_is_named_with_the_way_to_write_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ``--connect`` takes an optional socket, so the goal after it is taken as one and
    # the goal is then missing: the error names the word taken and how to write it.
    from hostd.cli._main import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["compose", "--connect", "how is the config loaded?"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "required: goal" in err
    assert "--connect took 'how is the config loaded?' as its socket" in err
    assert "give the goal before --connect, or name a socket as --connect=SOCKET" in err
    # A goal given, or --connect with nothing after it: no such words.
    with pytest.raises(SystemExit):
        parser.parse_args(["compose", "--connect"])
    assert "--connect took" not in capsys.readouterr().err
    args = parser.parse_args(["compose", "--connect", "/run/s.sock", "a goal"])
    assert (args.connect, args.goal) == ("/run/s.sock", "a goal")
