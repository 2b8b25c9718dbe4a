"""``hostd status`` and ``hostd stop`` against a real daemon process (docs/cli.md)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from hostd.client import Client
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT, ServeChild

HEALTHY = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "alpha"]


def _config(
    tmp_path: Path, pid: str = "alpha", command: list[str] = HEALTHY, state: Path | None = None
) -> Path:
    """A config of one provider, ``pid`` running ``command`` (the healthy fixture), its
    state in ``state`` (``tmp_path/state`` when not given)."""
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{state or tmp_path / "state"}"\n'
        f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(command)}\ncwd = "{ROOT}"\n',
        encoding="utf-8",
    )
    return path


def _human(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("{")]


@pytest.mark.slow
def test_status_shows_the_daemon_and_stop_returns_once_it_has_exited(tmp_path: Path) -> None:
    config = _config(tmp_path)
    child = ServeChild(config)
    assert child.start(60)
    try:
        assert child.proc is not None
        pid = child.proc.pid
        shown = run_hostd("--config", str(config), "status")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0].startswith("hostd ") and f"(pid {pid}), serving for " in lines[0]
        assert f"socket: {tmp_path}/run/s.sock" in lines
        assert f"config: {config.resolve()}" in lines
        assert "provider alpha: ready" in lines or "provider alpha: idle" in lines, lines
        raw = run_hostd("--config", str(config), "status", "--json")
        shown_json = json.loads(raw.stdout)
        assert shown_json["pid"] == pid
        # What the text says, counted as it counts: each provider's state, and no
        # request in flight but this one's own.
        assert shown_json["in_flight"] == 0
        (traffic,) = [line for line in lines if line.startswith("requests: ")]
        assert traffic.startswith("requests: 0 done (0 failed), 0 others in flight; "), traffic
        (row,) = shown_json["providers"]
        assert row["id"] == "alpha" and row["state"] in ("ready", "idle")
        assert row["degraded"] is False and f"provider alpha: {row['detail']}" in lines
        assert shown_json["config_changed"] is False
        # An edit the daemon does not run: a health check reads it, the exit stays 0.
        config.write_text(config.read_text() + "# edited\n", encoding="utf-8")
        edited = run_hostd("--config", str(config), "status", "--json")
        assert edited.returncode == 0, edited.stderr
        assert json.loads(edited.stdout)["config_changed"] is True
        assert "was started from an older" in edited.stderr

        stopped = run_hostd("--config", str(config), "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout == f"stopped hostd (pid {pid}) at {tmp_path}/run/s.sock\n"
        # Said once its process had exited: it is gone (a zombie until reaped) already.
        assert child.proc.poll() is not None or _zombie(pid)
        assert not (tmp_path / "run" / "s.sock").exists()
    finally:
        code = child.stop()  # reaps it (a signal to an exited process does nothing)
    assert code == 0  # a graceful stop


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_status_and_stop_without_a_daemon_say_so(tmp_path: Path) -> None:
    config = _config(tmp_path)
    for command, says in (("status", "none is running"), ("stop", "nothing to stop")):
        done = run_hostd("--config", str(config), command)
        assert done.returncode == 3, done.stderr  # the CLI's exit status for no daemon
        (line,) = _human(done.stderr)
        assert line.startswith(f"hostd: no daemon at {tmp_path}/run/s.sock (") and says in line
        assert done.stdout == ""


def test_status_and_stop_of_a_broken_config_without_a_daemon_say_its_error_once(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    config.write_text(config.read_text() + '[tcp]\ntokn_file = "t"\n', encoding="utf-8")
    for command in ("status", "stop"):
        done = run_hostd("--config", str(config), command)
        assert done.returncode == 3, done.stderr
        # The no-daemon line names the error; no note of the same error before it.
        (said,) = _human(done.stderr)
        assert said.startswith(f"hostd: no daemon at {tmp_path}/run/s.sock ("), said
        assert "did you mean token_file?" in said, said
        assert done.stdout == ""


def test_connected_clients_of_a_broken_config_without_a_daemon_say_its_error_once(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    config.write_text(config.read_text() + '[tcp]\ntokn_file = "t"\n', encoding="utf-8")
    for command in (["compose", "x"], ["providers"]):
        done = run_hostd("--config", str(config), *command, "--connect", "--wait", "0")
        assert done.returncode == 3, done.stderr
        # The no-daemon line names the error; no note of the same error before it.
        (said,) = _human(done.stderr)
        assert said.startswith(f"hostd: no daemon at {tmp_path}/run/s.sock ("), said
        assert "config has an error" in said and "did you mean token_file?" in said, said
        assert done.stdout == ""


def test_an_edit_that_breaks_the_config_does_not_lock_status_and_stop_out(
    tmp_path: Path,
) -> None:
    config, child = _serving_one(tmp_path)
    try:
        assert child.proc is not None
        pid = child.proc.pid
        # Edited under the running daemon: the file no longer loads.
        config.write_text(config.read_text() + "bogus_key = 1\n", encoding="utf-8")
        assert run_hostd("--config", str(config), "providers").returncode == 2
        shown = run_hostd("--config", str(config), "status")
        assert shown.returncode == 0, shown.stderr
        assert f"(pid {pid})" in shown.stdout
        (note,) = _human(shown.stderr)
        assert note.startswith("hostd: note: ") and "bogus_key" in note
        assert note.endswith("; using its socket only")
        # Not TOML at all (an editor mid-save): its `socket =` line still says where.
        config.write_text(config.read_text() + "[host\ntimeout_ms = \n", encoding="utf-8")
        broken = run_hostd("--config", str(config), "status")
        assert broken.returncode == 0, broken.stderr
        assert f"(pid {pid})" in broken.stdout and "not valid TOML" in broken.stderr
        stopped = run_hostd("--config", str(config), "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.startswith(f"stopped hostd (pid {pid})")
    finally:
        code = child.stop()
    assert code == 0


def test_reload_of_a_broken_config_says_its_error_once(tmp_path: Path) -> None:
    config, child = _serving_one(tmp_path)
    try:
        config.write_text(config.read_text() + '[tcp]\ntokn_file = "t"\n', encoding="utf-8")
        done = run_hostd("--config", str(config), "reload")
    finally:
        code = child.stop()
    assert code == 0
    assert done.returncode == 2, done.stderr
    # The daemon's refusal alone, with its hint; no note of the same error before it.
    (said,) = _human(done.stderr)
    assert said.startswith("hostd: config not reloaded"), said
    assert "tcp.tokn_file: unknown key (did you mean token_file?)" in said, said
    # With no daemon there, the line that says so names the error, once too.
    gone = run_hostd("--config", str(config), "reload")
    assert gone.returncode == 3, gone.stderr
    (said,) = _human(gone.stderr)
    assert said.startswith("hostd: no daemon at ") and "did you mean token_file?" in said, said


def test_an_edit_that_breaks_the_config_does_not_lock_connected_clients_out(
    tmp_path: Path,
) -> None:
    config, child = _serving_one(tmp_path)
    socket = str(tmp_path / "run" / "s.sock")
    try:
        config.write_text(config.read_text() + "bogus_key = 1\n", encoding="utf-8")
        for connect in (["--connect"], ["--connect", socket]):
            done = run_hostd("--config", str(config), "compose", "x", "--json", *connect)
            assert done.returncode in (0, 1), done.stderr  # the daemon's answer, not exit 2
            assert json.loads(done.stdout)["request_id"]
            (note, *_) = _human(done.stderr)
            assert "bogus_key" in note and note.endswith("; using its socket only"), note
        listed = run_hostd("--config", str(config), "providers", "--json", "--connect", socket)
        assert listed.returncode == 0, listed.stderr
        assert [p["id"] for p in json.loads(listed.stdout)["providers"]] == ["alpha"]
    finally:
        code = child.stop()
    assert code == 0
    # Nothing at the socket the broken file was read for: its error is why, named.
    gone = run_hostd("--config", str(config), "compose", "x", "--connect", "--wait", "0")
    assert gone.returncode == 3, gone.stderr
    line = _human(gone.stderr)[-1]
    assert line.startswith(f"hostd: no daemon at {socket} (")
    assert "cannot be found while the config has an error" in line and "bogus_key" in line


def test_log_file_is_the_daemons_a_one_shot_command_logs_to_stderr(tmp_path: Path) -> None:
    config = _config(tmp_path)
    log = tmp_path / "hostd.log"
    config.write_text(config.read_text() + f'[log]\nfile = "{log}"\nlevel = "info"\n')
    done = run_hostd("--config", str(config), "--log-level", "info", "compose", "anything")
    assert done.returncode in (0, 1), done.stderr
    assert not log.exists()  # never opened, so never rotated under a daemon
    assert '"request.done"' in done.stderr  # its log went to stderr
    with Client.spawn(config, cwd=ROOT) as daemon:  # hostd serve --stdio
        daemon.call("host/status", {})
    assert '"host.serving"' in log.read_text()  # the daemon's log is the file


def test_a_connect_that_waits_for_a_daemon_says_so_first(tmp_path: Path) -> None:
    config = _config(tmp_path)
    done = run_hostd("--config", str(config), "compose", "x", "--connect", "--wait", "0.5")
    assert done.returncode == 3
    waiting, gone = _human(done.stderr)
    assert waiting == (
        f"hostd: waiting up to 0.5 s for a daemon at {tmp_path}/run/s.sock (--wait 0: do not wait)"
    )
    assert gone.startswith("hostd: no daemon at ") and "waited 0.5 s" in gone
    at_once = run_hostd("--config", str(config), "compose", "x", "--connect", "--wait", "0")
    assert "waiting" not in at_once.stderr


def test_status_says_why_a_provider_is_down_and_since_when(tmp_path: Path) -> None:
    """A provider that dies at every start is parked ``failed``: ``status`` shows its
    last failure, how long ago it was and how to start it again; ``providers`` the age
    of that failure too."""
    config = _config(tmp_path)
    crash = ["python", "-m", "tests.fixtures.echoing_provider", "start_crash"]
    text = config.read_text(encoding="utf-8").replace(
        # Its 5 failed starts 10 ms apart, doubling (the default's 7.5 s is for users).
        "[host]\n",
        "[host]\nretry_failed_after_s = 0\nrestart_backoff_s = 0.01\n",
    )
    text += (
        f'[[provider]]\nid = "broken"\ncommand = {json.dumps(crash)}\ncwd = "{ROOT}"\n'
        '[provider.env]\nAPI_TOKEN = "tok-123"\n'
    )
    config.write_text(text, encoding="utf-8")
    child = ServeChild(config)
    assert child.start(60)
    try:
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            # A crashed provider starts again on a request once its backoff is over;
            # its restart attempts spent, it is parked.
            while _state(client.providers(), "broken") != "failed":
                client.call("context/query", {"goal": "anything", "budget": 100})
        shown = run_hostd("--config", str(config), "status")
        # Serving, with a provider down: exit 4, for a monitor's `hostd status || alert`.
        assert shown.returncode == 4, shown.stderr
        assert run_hostd("--config", str(config), "status", "--json").returncode == 4
        (line,) = [x for x in shown.stdout.splitlines() if x.startswith("provider broken:")]
        assert re.fullmatch(
            r"provider broken: failed \d+ s ago: .*exited with status 3.*; "
            r"`hostd providers restart broken --connect` starts it now",
            line,
        ), line
        assert "tok-123" not in shown.stdout  # what it wrote is scrubbed
        assert "provider alpha: ready" in shown.stdout.splitlines()
        listed = run_hostd("--config", str(config), "providers", "--connect")
        assert re.search(r"hostd: broken: .*\(\d+ s ago\)\n", listed.stderr), listed.stderr
        # A restart, even without --connect, is of the daemon's provider: not a copy's.
        again = run_hostd("--config", str(config), "providers", "restart", "broken")
        assert "a daemon is serving this config at" in again.stderr, again.stderr
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            row = next(r for r in client.providers() if r["id"] == "broken")
        assert row["health"]["restarts_requested"] == 1, row
    finally:
        assert child.stop() == 0


#: A provider that writes 40 lines on its stderr, its error last, and exits at its start.
NOISY = ["python", "-m", "tests.fixtures.adversarial_provider", "noisy_start_crash"]


def test_status_shows_what_a_down_providers_stderr_ended_with(tmp_path: Path) -> None:
    """Under a down provider's line, the last lines its process wrote on its stderr
    (its health's ``stderr_tail``), one a line, in the words ``hostd providers`` uses."""
    config = _config(tmp_path)
    text = config.read_text(encoding="utf-8").replace(
        "[host]\n", "[host]\nretry_failed_after_s = 0\nrestart_backoff_s = 0.01\n"
    )
    text += f'[[provider]]\nid = "noisy"\ncommand = {json.dumps(NOISY)}\ncwd = "{ROOT}"\n'
    config.write_text(text, encoding="utf-8")
    child = ServeChild(config)
    assert child.start(60)
    try:
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            while _state(client.providers(), "noisy") != "failed":  # parked: it stays so
                client.call("context/query", {"goal": "anything", "budget": 100})
            row = next(r for r in client.providers() if r["id"] == "noisy")
        shown = run_hostd("--config", str(config), "status")
        as_json = run_hostd("--config", str(config), "status", "--json")
        listed = run_hostd("--config", str(config), "providers", "--connect")
    finally:
        assert child.stop() == 0
    tail = row["health"]["stderr_tail"]
    assert tail.endswith(" | IndexLocked: the index is locked"), tail
    said = ["noisy: its stderr ended with:", *(f"    {line}" for line in tail.split(" | "))]
    assert said[1] == "    …" and len(said) <= 21  # bounded: its earliest lines left out
    lines = shown.stdout.splitlines()
    at = lines.index("  noisy: its stderr ended with:")
    assert lines[at - 1].startswith("provider noisy: failed "), shown.stdout
    assert lines[at : at + len(said)] == [f"  {line}" for line in said], shown.stdout
    assert lines[at + len(said) :] == []  # the last provider's: nothing after it
    assert "its stderr ended with" not in shown.stderr
    # Each of its lines once: its failure's line no longer quotes what is shown under it.
    assert "index is locked" not in lines[at - 1] and "loading part" not in lines[at - 1]
    assert "exited with status 1" in lines[at - 1], lines[at - 1]
    # --json carries the lines the text shows, joined as on the wire, beside its detail.
    (down,) = [p for p in json.loads(as_json.stdout)["providers"] if p["id"] == "noisy"]
    assert down["stderr_tail"] == tail, down
    ago = re.compile(r" failed [0-9]+ s ago: ")  # read apart: its seconds may differ
    assert ago.split(f"provider noisy: {down['detail']}") == ago.split(lines[at - 1])
    # The same lines `hostd providers` shows under its failure (one rendering).
    rows = listed.stderr.splitlines()
    at = rows.index("hostd: noisy: its stderr ended with:")
    assert rows[at : at + len(said)] == [f"hostd: {line}" for line in said], listed.stderr
    assert "exited with status 1" in rows[at - 1] and "index is locked" not in rows[at - 1]


def _state(rows: list[dict[str, object]], pid: str) -> object:
    return next(row["state"] for row in rows if row["id"] == pid)


def test_one_config_is_served_by_one_daemon_whatever_its_socket(tmp_path: Path) -> None:
    """A second ``hostd serve`` of one config with another runtime directory (so another
    default socket) is refused, naming the first; ``status`` from there finds the
    config's daemon where it is, and says so. Two would share the config's state and
    memories."""
    config = tmp_path / "hostd.toml"
    command = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "alpha"]
    config.write_text(  # no host.socket: the default, under $XDG_RUNTIME_DIR
        f'[host]\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "alpha"\ncommand = {json.dumps(command)}\ncwd = "{ROOT}"\n',
        encoding="utf-8",
    )
    first_env, second_env = ({**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / r)} for r in "ab")
    for env in (first_env, second_env):
        Path(env["XDG_RUNTIME_DIR"]).mkdir(mode=0o700)
    child = ServeChild(config, env=first_env)
    assert child.start(60)
    try:
        assert child.proc is not None
        first = next((tmp_path / "a" / "hostd").glob("*.sock"))
        second = run_hostd("--config", str(config), "serve", env=second_env)
        assert second.returncode == 2, second.stderr
        (said,) = _human(second.stderr)
        assert said == (
            f"hostd: another hostd (pid {child.proc.pid}) is already serving this config "
            f"at {first}; `hostd stop {first}` stops it [listener_failed]"
        )
        status = run_hostd("--config", str(config), "status", env=second_env)
        assert status.returncode == 0, status.stderr
        assert f"socket: {first}" in status.stdout.splitlines(), status.stdout
        assert f"daemon (pid {child.proc.pid}) serves at {first}, not at " in status.stderr
    finally:
        assert child.stop() == 0
    # Its lock went with it: the next daemon of the config starts.
    again = ServeChild(config, env=second_env)
    assert again.start(60)
    assert again.stop() == 0


def _serving_one(
    tmp_path: Path, pid: str = "alpha", command: list[str] = HEALTHY, state: Path | None = None
) -> tuple[Path, ServeChild]:
    """``_config``'s one provider, and its daemon serving."""
    config = _config(tmp_path, pid, command, state)
    # The bundled providers of this checkout, whichever hostd is installed.
    child = ServeChild(config, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.start(60)
    return config, child


def test_status_says_what_a_ready_provider_holds_and_what_it_left_out(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.md").write_text("# Notes\n\nDeploys happen on Tuesdays.\n")
    (project / ".env").write_text("API_TOKEN=not-for-a-model\n")
    (project / "secrets.yaml").write_text("password: not-for-a-model\n")
    (project / "logo.ico").write_bytes(b"\0\0\1\0 an icon")
    # The daemon's state kept in the project, with a record of an earlier run: its own
    # files are no evidence, and no file the walk skipped for that is counted.
    state = project / ".hostd"
    (state / "handshakes").mkdir(parents=True, mode=0o700)
    (state / "handshakes" / "files.json").write_text('{"name": "hostd-files"}\n')
    files = ["python", "-m", "providers.files", "--root", str(project), "--no-cache"]
    config, child = _serving_one(tmp_path, "files", files, state)
    try:
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            while _state(client.providers(), "files") != "ready":  # its build: events
                client.call("host/status")
        shown = run_hostd("--config", str(config), "status")
        (line,) = [x for x in shown.stdout.splitlines() if x.startswith("provider files:")]
        assert line.startswith("provider files: ready (1 chunk from 1 of 4 files under "), line
        # Named, whole: the host keeps a ready message long enough for that.
        assert line.endswith(
            "; not indexed: 2 secret files (.env, secrets.yaml), 1 binary file (logo.ico))"
        ), line
    finally:
        assert child.stop() == 0


def test_a_ready_provider_that_lacks_consent_says_what_to_grant() -> None:
    from hostd.cli._daemon import provider_state

    row = {"id": "cloud", "state": "ready", "health": {}, "consent_missing": ["egress"]}
    assert provider_state(row) == (
        "ready; not asked: it needs consent for egress (hostd consent grant cloud egress)"
    )
    assert provider_state({**row, "consent_missing": []}) == "ready"


def test_status_speaks_of_a_remote_providers_checks_and_failed_requests() -> None:
    """A remote provider has no process: its starts after the first are checks of its
    server, its crashes requests whose exchange broke; a local one's stay a process's."""
    from hostd.cli._daemon import _provider_line

    health = {"restarts": 3, "crashes": 1, "last_failure_s_ago": 5.0}
    local = {"id": "notes", "state": "ready", "health": health}
    assert _provider_line(local) == (
        "ready; restarted 3 times, crashed during 1 query, last failure 5 s ago"
    )
    remote = {**local, "id": "team", "remote": {"url": "https://search.example/cgp"}}
    assert _provider_line(remote) == (
        "ready; checked again 3 times, 1 failed request, last failure 5 s ago"
    )
    once = {**remote, "health": {"restarts": 1, "crashes": 2, "last_failure_s_ago": 5.0}}
    assert _provider_line(once) == (
        "ready; checked again 1 time, 2 failed requests, last failure 5 s ago"
    )


def test_status_calls_a_provider_degraded_when_no_request_gets_its_evidence() -> None:
    from hostd.cli._daemon import _degraded

    ready = {"id": "p", "state": "ready", "health": {}}
    assert not _degraded(ready)
    assert _degraded({**ready, "consent_missing": ["egress"]})
    for state, down in [
        ("warming", False),
        ("starting", False),
        ("idle", False),
        ("crashed", True),
        ("failed", True),
    ]:
        assert _degraded({**ready, "state": state}) is down, state


def test_a_provider_whose_warm_up_failed_is_failed_with_why(tmp_path: Path) -> None:
    """It runs and refuses every query: status and providers say failed, and why."""
    cold = ["python", "-m", "tests.fixtures.warming_provider", "--fail-warm", "no db at x.db"]
    config, child = _serving_one(tmp_path, "tickets", cold)
    try:
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            while _state(client.providers(), "tickets") in ("idle", "starting", "warming"):
                client.call("host/status")  # its warm-up's end: an event the row shows
            assert _state(client.providers(), "tickets") == "failed"
        shown = run_hostd("--config", str(config), "status")
        assert shown.returncode == 4, shown.stderr
        (line,) = [x for x in shown.stdout.splitlines() if x.startswith("provider tickets:")]
        assert line == (
            "provider tickets: failed: its warm-up failed: RuntimeError: no db at x.db; "
            "it refuses every query until `hostd providers restart tickets`"
        )
        listed = run_hostd("--config", str(config), "providers", "--connect")
        assert "hostd: tickets: its warm-up failed: RuntimeError: no db at x.db" in listed.stderr
    finally:
        assert child.stop() == 0


def test_status_says_a_ready_provider_fails_its_queries_and_exits_4_at_three() -> None:
    from hostd.cli._daemon import FAILING_LEGS, _degraded, provider_state

    health = {"failing_legs": 1, "last_error": "error: KeyError: 'TCK-999'"}
    row = {"id": "tickets", "state": "ready", "health": health}
    assert provider_state(row) == "ready; its last query failed: error: KeyError: 'TCK-999'"
    assert not _degraded(row)  # one failure is a moment, not an outage
    row["health"] = {**health, "failing_legs": FAILING_LEGS}
    assert provider_state(row).endswith(
        f"its last {FAILING_LEGS} queries failed: error: KeyError: 'TCK-999'"
    )
    assert _degraded(row)


def test_status_says_a_ready_providers_frames_are_all_refused_and_exits_4_at_three() -> None:
    from hostd.cli._daemon import FAILING_LEGS, _degraded, provider_state

    why = "invalid_frame 2 of 2 (schema frames[0].title: missing)"
    health: dict[str, Any] = {"invalid_legs": 1, "last_error": why}
    row: dict[str, Any] = {"id": "adr", "state": "ready", "health": health}
    assert provider_state(row) == f"ready; its last answer's frames were all refused: {why}"
    assert not _degraded(row)
    health["invalid_legs"] = FAILING_LEGS
    assert provider_state(row) == (
        f"ready; its last {FAILING_LEGS} answers' frames were all refused: {why}"
    )
    assert _degraded(row)


def test_status_exits_4_for_a_provider_whose_every_frame_is_refused_until_one_is_not(
    tmp_path: Path,
) -> None:
    """A real daemon, a provider whose frames lack their title: three answers with every
    frame refused make ``status`` say so and exit 4; an answer with usable frames ends it."""
    untitled = ["python", "-m", "tests.fixtures.adversarial_provider", "untitled"]
    config, child = _serving_one(tmp_path, "adr", untitled)
    try:
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            for _ in range(3):
                client.compose("rejection policy for the io pool", budget=400)
        shown = run_hostd("--config", str(config), "status")
        assert shown.returncode == 4, shown.stdout
        (line,) = [x for x in shown.stdout.splitlines() if x.startswith("provider adr:")]
        assert line == (
            "provider adr: ready; its last 3 answers' frames were all refused: "
            "invalid_frame 2 of 2 (schema frames[0].title: missing)"
        )
        with Client.connect(tmp_path / "run" / "s.sock") as client:
            client.compose("titled: rejection policy for the io pool", budget=400)
        shown = run_hostd("--config", str(config), "status")
        assert shown.returncode == 0, shown.stdout
        assert "provider adr: ready\n" in shown.stdout
    finally:
        assert child.stop() == 0


def test_a_one_shot_compose_beside_a_running_daemon_says_connect_asks_it(
    tmp_path: Path,
) -> None:
    config, child = _serving_one(tmp_path)
    try:
        note = f"hostd: a daemon is serving this config at {tmp_path}/run/s.sock: this answer"
        one_shot = run_hostd("--config", str(config), "compose", "anything", "--budget", "300")
        assert one_shot.returncode == 0, one_shot.stderr
        assert note in one_shot.stderr and "`hostd compose --connect`" in one_shot.stderr
        asked = run_hostd("--config", str(config), "compose", "x", "--budget", "300", "--connect")
        assert asked.returncode == 0 and note not in asked.stderr, asked.stderr
    finally:
        assert child.stop() == 0
    alone = run_hostd("--config", str(config), "compose", "anything", "--budget", "300")
    assert alone.returncode == 0 and "a daemon is serving" not in alone.stderr


def test_a_down_providers_line_names_its_state_once() -> None:
    from hostd.cli._daemon import provider_state

    row = {
        "id": "files",
        "state": "crashed",
        "health": {
            "last_failure": "crashed: provider 'files' cannot start rg-provider: No such file",
            "last_failure_s_ago": 3,
        },
    }
    assert provider_state(row) == (
        "crashed 3 s ago: provider 'files' cannot start rg-provider: No such file"
    )


def test_status_calls_the_reranker_degraded_when_no_composition_gets_its_verdict() -> None:
    from hostd.cli._daemon import FAILING_LEGS, reranker_degraded, reranker_state

    process = {"kind": "process", "state": "ready", "health": {}, "asks": 2, "fallbacks": 0}
    assert not reranker_degraded(process)
    assert reranker_state(process) == "ready; asks 2, fallbacks 0"
    killed = "crashed: reranker process exited between asks; killed by SIGKILL"
    down = {
        **process,
        "state": "crashed",
        "health": {"last_failure": killed, "last_failure_s_ago": 4, "retry_in_s": 2.5},
    }
    assert reranker_degraded(down) and reranker_degraded({**process, "state": "failed"})
    assert reranker_state(down) == (
        "crashed 4 s ago: reranker process exited between asks; killed by SIGKILL; "
        "next start in 2 s; asks 2, fallbacks 0"
    )
    # A server one failure short of its cool-down is a slow moment; cooling down, it is
    # asked by no composition.
    server = {**process, "kind": "url", "state": "crashed"}
    assert not reranker_degraded(server)
    # Said as what it is: no connection, not a process that crashed.
    refused_at = "unavailable: ConnectError: connection refused at 127.0.0.1:7997"
    unreachable = {**server, "health": {"last_failure": refused_at, "last_failure_s_ago": 1}}
    assert reranker_state(unreachable) == (
        "unreachable 1 s ago: ConnectError: connection refused at 127.0.0.1:7997; "
        "asks 2, fallbacks 0"
    )
    assert reranker_degraded({**server, "state": "failed"})
    # Up, its asks refused: a line from the first, exit 4 at the third in a row.
    refused = {
        **server,
        "state": "ready",
        "health": {"failing_legs": 1},
        "last_fallback": "error: HTTP 400: the server refused the request",
    }
    assert not reranker_degraded(refused)
    assert reranker_state(refused) == (
        "ready; its last ask failed: error: HTTP 400: the server refused the request; "
        "asks 2, fallbacks 0"
    )
    assert reranker_degraded({**refused, "health": {"failing_legs": FAILING_LEGS}})


def test_a_rerank_server_that_answered_after_no_connection_is_shown_reachable() -> None:
    from hostd.cli._daemon import reranker_state
    from hostd.engine import CoolDownPolicy, Health, record_answer, record_down

    refused = "error: HTTP 400: the server refused the request"
    health = record_down(
        Health(),
        "crashed",
        now=0.0,
        error="unavailable: ConnectError: connection refused at 127.0.0.1:7997",
        policy=CoolDownPolicy(),
    )
    health = record_answer(health, "error", error=refused)
    row = {
        "kind": "url",
        "state": health.state.value,
        "health": health.to_wire(90.0),
        "asks": 2,
        "fallbacks": 2,
        "last_fallback": refused,
    }
    # Its newest state: the answer, not the connection that failed before it.
    assert reranker_state(row) == (f"ready; its last 2 asks failed: {refused}; asks 2, fallbacks 2")


def test_status_names_a_warming_step_with_no_count_and_how_long_it_has_run() -> None:
    from hostd.cli._daemon import provider_state

    def row(progress: dict[str, Any]) -> dict[str, Any]:
        return {"id": "semantic", "state": "warming", "health": {"progress": progress}}

    assert provider_state(row({"state": "warming", "phase": "start", "done": 0})) == "warming"
    loading = {"state": "warming", "phase": "load model", "done": 0}
    assert provider_state(row(loading)) == "warming (load model)"
    # Said again with ``elapsed_s`` while the step lasts: a long step is not a stuck one.
    assert provider_state(row({**loading, "elapsed_s": 95})) == (
        "warming (load model, 1 min 35 s so far)"
    )


def test_status_says_a_warming_builds_time_left_in_hostd_warms_words() -> None:
    from hostd.cli._daemon import provider_state

    progress = {"state": "warming", "phase": "embed", "done": 576, "total": 120060}
    health: dict[str, Any] = {"progress": progress}
    row = {"id": "semantic", "state": "warming", "health": health}
    assert provider_state(row) == "warming (embed 576/120060)"  # its rate not measured yet
    health["left_s"] = 4 * 3600 + 17 * 60 + 10
    assert provider_state(row) == "warming (embed 576/120060, about 4 h 17 min left)"
