"""``hostd warm`` and the progress bars (real child processes for the command)."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostd.cli._commands import audit_summary
from hostd.cli._outcome import leg_failures, warming_lines
from hostd.cli._warm import (
    PROGRESS_LINE_INTERVAL_S,
    ProgressBars,
    ProgressLines,
    interrupted_line,
)
from hostd.client import Client
from tests.fixtures.procs import ServeChild
from tests.providers._stdio import REPO, child_env


def _config(tmp_path: Path, *providers: tuple[str, list[str], str]) -> Path:
    text = f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
    for pid, args, extra in providers:
        command = ["python", "-m", "tests.fixtures.warming_provider", *args]
        text += (
            f'\n[[provider]]\nid = "{pid}"\ncommand = {json.dumps(command)}\n'
            f'cwd = "{REPO}"\n{extra}'
        )
    path = tmp_path / "hostd.toml"
    path.write_text(text)
    return path


def _warm(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(config), "warm", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=child_env(),
        timeout=300,  # a hang guard
    )


def test_warm_waits_until_every_provider_is_ready_and_draws_its_progress(tmp_path: Path) -> None:
    config = _config(tmp_path, ("a", ["--steps", "4"], ""), ("b", [], ""))
    out = _warm(config, "--progress", "always")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["a\tready", "b\tready"]
    assert "hostd: a ready" in out.stderr and "a: build" in out.stderr


def test_warm_exits_1_naming_a_provider_that_never_came_up(tmp_path: Path) -> None:
    stuck = ["--handshake-gate", str(tmp_path / "never")]
    config = _config(tmp_path, ("ok", [], ""), ("stuck", stuck, "start_timeout_s = 0.5\n"))
    out = _warm(config, "--progress", "never")
    assert out.returncode == 1
    lines = dict(line.split("\t", 1) for line in out.stdout.splitlines())
    assert lines["ok"] == "ready" and lines["stuck"].startswith("timeout")
    assert "it/s" not in out.stderr  # no bars when told so


def test_bars_are_off_when_stderr_is_not_a_terminal() -> None:
    stream = io.StringIO()
    bars = ProgressBars(stream=stream)
    bars("files", {"state": "warming", "phase": "read files", "done": 3, "total": 9})
    bars.close()
    assert stream.getvalue() == ""


def test_without_bars_each_ready_line_comes_as_it_is_ready_and_progress_now_and_then() -> None:
    stream, now = io.StringIO(), [0.0]
    lines = ProgressLines(stream, clock=lambda: now[0])

    def new_lines() -> list[str]:
        said = stream.getvalue().splitlines()
        stream.seek(0)
        stream.truncate()
        return said

    lines("files", {"state": "warming", "phase": "read files", "done": 3, "total": 9})
    lines("semantic", {"state": "warming", "phase": "load model", "done": 0, "total": None})
    assert new_lines() == [
        "hostd: files: warming (read files 3/9)",
        "hostd: semantic: warming (load model)",
    ]
    lines("files", {"state": "ready", "phase": "ready", "message": "12 chunks\nfrom 3 files"})
    assert new_lines() == ["hostd: files: ready (12 chunks from 3 files)"]
    now[0] = PROGRESS_LINE_INTERVAL_S - 0.1  # a new phase is said at once
    lines("semantic", {"state": "warming", "phase": "embed", "done": 64, "total": 4000})
    assert new_lines() == ["hostd: semantic: warming (embed 64/4000)"]
    now[0] = PROGRESS_LINE_INTERVAL_S  # then the embedding's notes, many a second
    lines("semantic", {"state": "warming", "phase": "embed", "done": 128, "total": 4000})
    assert new_lines() == []
    now[0] = 2 * PROGRESS_LINE_INTERVAL_S - 0.1  # 128 chunks in 30 s: 3,808 left
    lines("semantic", {"state": "warming", "phase": "embed", "done": 192, "total": 4000})
    assert new_lines() == ["hostd: semantic: warming (embed 192/4000, about 15 min left)"]
    lines("semantic", {"state": "failed", "phase": "failed", "message": "OSError: disk full"})
    assert new_lines() == []  # said by settle, with what to do
    # At the end, each provider's state: one already said ready is not said again.
    lines.settle("files", "ready (12 chunks from 3 files)")
    lines.settle("semantic", "failed: its warm-up failed: OSError: disk full; …")
    assert new_lines() == ["hostd: semantic: failed: its warm-up failed: OSError: disk full; …"]


def test_without_bars_a_build_says_its_size_at_once_and_then_its_time_left() -> None:
    """The provider's word on its build (how many chunks) is written as it comes, not
    up to 30 s later; later lines add the time left at the rate measured since the
    phase began, from where a resumed build stood, not from 0."""
    stream, now = io.StringIO(), [100.0]
    lines = ProgressLines(stream, clock=lambda: now[0])
    told = "embedding 16,639 of 20,991 chunks (4,352 cached)"
    lines("semantic", {"state": "warming", "phase": "load model", "done": 0})
    lines("semantic", {"state": "warming", "phase": "embed", "done": 4352, "total": 20991})
    now[0] += 1  # same note, its message now: said at once, within the interval
    note = {"state": "warming", "phase": "embed", "done": 4352, "total": 20991, "message": told}
    lines("semantic", note)
    lines("semantic", note)  # said once
    now[0] += PROGRESS_LINE_INTERVAL_S  # 31 s into embed: 640 done, 15,999 left: 775 s
    lines("semantic", {"state": "warming", "phase": "embed", "done": 4992, "total": 20991})
    now[0] = 100 + 1280  # 2426 done in 1280 s: 14,213 left take 7499 s
    lines("semantic", {"state": "warming", "phase": "embed", "done": 6778, "total": 20991})
    assert stream.getvalue().splitlines() == [
        "hostd: semantic: warming (load model)",
        "hostd: semantic: warming (embed 4352/20991)",  # a new phase: said at once
        f"hostd: semantic: warming (embed 4352/20991): {told}",
        "hostd: semantic: warming (embed 4992/20991, about 13 min left)",
        "hostd: semantic: warming (embed 6778/20991, about 2 h 5 min left)",
    ]


def test_bars_write_a_provider_s_word_on_its_build_once() -> None:
    stream = io.StringIO()
    bars = ProgressBars(enabled=True, stream=stream)
    told = "embedding 6,000 of 6,000 chunks; a .hostdignore … shortens it"
    for done in (0, 64):
        bars(
            "semantic",
            {"state": "warming", "phase": "embed", "done": done, "total": 6000, "message": told},
        )
    bars.close()
    assert stream.getvalue().count(f"hostd: semantic: {told}") == 1


def test_an_interrupted_warm_names_each_unfinished_build_and_where_it_goes_on() -> None:
    standing: dict[str, dict[str, Any]] = {
        "files": {"state": "ready", "phase": "ready"},
        "semantic": {"state": "warming", "phase": "embed", "done": 4352, "total": 20991},
        "memory": {"state": "warming", "phase": "load model", "done": 0},
    }
    hint = " --config /p/hostd.toml"
    assert interrupted_line(standing, hint=hint) == (
        "hostd: warm interrupted: semantic at embed 4,352 of 20,991, memory at load model "
        "(what was done is kept); run `hostd warm --config /p/hostd.toml` again to go on"
    )
    # Through a daemon, its providers go on warming: where to watch them, not a rerun.
    assert interrupted_line(standing, hint=hint, daemon=Path("/run/h.sock")) == (
        "hostd: warm interrupted: the daemon at /run/h.sock goes on warming semantic at "
        "embed 4,352 of 20,991, memory at load model; "
        "`hostd status --config /p/hostd.toml` shows how far"
    )
    assert interrupted_line({"files": standing["files"]}) == (
        "hostd: warm interrupted; run `hostd warm` again to finish"
    )


@contextlib.contextmanager
def _warm_without_bars(config: Path) -> Iterator[subprocess.Popen[str]]:
    """A ``hostd warm --progress never`` child on ``config``, killed if it outlives a
    hang guard (a line never written ends it)."""
    warm = subprocess.Popen(
        [sys.executable, "-m", "hostd", "--config", str(config), "warm", "--progress", "never"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=child_env(),
    )
    guard = threading.Timer(120, warm.kill)
    guard.start()
    try:
        yield warm
    finally:
        guard.cancel()


def _ready_before_the_gate(config: Path, gate: Path, first: str) -> tuple[list[str], str, str]:
    """``hostd warm --progress never`` on ``config``, read until ``first``'s ready line
    while ``gate`` holds the other provider; then the gate opens. The lines before it,
    the rest of stderr and stdout."""
    with _warm_without_bars(config) as warm:
        assert warm.stderr is not None
        before = []
        for line in warm.stderr:  # the gated one cannot be ready: its gate is not there yet
            before.append(line)
            if line.startswith(f"hostd: {first}: ready"):
                break
        gate.touch()
        out, err = warm.communicate()
    assert warm.returncode == 0, err
    return before, err, out


def test_warm_without_bars_says_a_provider_is_ready_while_another_still_warms(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    config = _config(tmp_path, ("fast", [], ""), ("slow", ["--warm-gate", str(gate)], ""))
    before, err, out = _ready_before_the_gate(config, gate, "fast")
    assert before[-1] == "hostd: fast: ready\n", "".join(before)
    assert out.splitlines() == ["fast\tready", "slow\tready"]
    said = "".join(before) + err
    assert said.count("hostd: fast: ready") == 1 and said.count("hostd: slow: ready") == 1


def test_warm_without_bars_says_a_provider_ready_at_its_handshake_at_once(
    tmp_path: Path,
) -> None:
    # A provider ready at its handshake sends no progress of its own: its line is still
    # written when it is ready, not once the slowest provider is.
    gate = tmp_path / "gate"
    config = _config(tmp_path, ("slow", ["--warm-gate", str(gate)], ""))
    plain = ["python", "-m", "tests.fixtures.healthy_provider", "--name", "plain"]
    with config.open("a") as f:
        f.write(f'\n[[provider]]\nid = "plain"\ncommand = {json.dumps(plain)}\ncwd = "{REPO}"\n')
    before, err, out = _ready_before_the_gate(config, gate, "plain")
    assert before[-1] == "hostd: plain: ready\n", "".join(before)
    assert not any(line.startswith("hostd: slow: ready") for line in before)
    assert out.splitlines() == ["plain\tready", "slow\tready"]
    said = "".join(before) + err
    assert said.count("hostd: plain: ready") == 1 and said.count("hostd: slow: ready") == 1


def test_a_resumed_build_s_bar_starts_where_it_stands() -> None:
    """A build resumed from its cache at 1408 of 20001: the bar's rate and time left
    count from there, not as if 1408 were done in the first instant."""
    bars = ProgressBars(enabled=True, stream=io.StringIO())
    bars("semantic", {"state": "warming", "phase": "embed", "done": 1408, "total": 20001})
    bar = bars._bars["semantic"]
    assert (bar.initial, bar.n) == (1408, 1408)
    bars.close()


def test_the_audit_summary_says_how_many_of_each_providers_frames_got_in() -> None:
    def entry(pid: str, disposition: str) -> dict[str, Any]:
        return {"frame": {"provider_id": pid}, "disposition": disposition, "reason": None}

    result = {
        "audit": {
            "entries": [entry("semantic", "included"), entry("files", "excluded")],
            "tokens_used": 10,
            "global_budget": 100,
        },
        "providers": [
            {"provider_id": "files", "status": "ok", "frames_offered": 3},
            {"provider_id": "semantic", "status": "ok", "frames_offered": 1},
        ],
        "request_id": "r1",
    }
    # Found three, none got in (another's copies outranked them): not "found nothing".
    assert "providers: files=ok(0 of 3), semantic=ok(1 of 1);" in audit_summary(result)


def test_the_audit_summary_names_a_warming_leg() -> None:
    result = {
        "audit": {"entries": [], "tokens_used": 0, "global_budget": 100},
        "providers": [{"provider_id": "semantic", "status": "warming"}],
        "request_id": "r1",
    }
    assert "semantic=warming(0)" in audit_summary(result)


def test_the_audit_summary_names_what_left_the_composition_short() -> None:
    result = {
        "audit": {"entries": [], "tokens_used": 0, "global_budget": 100},
        "providers": [{"provider_id": "files", "status": "crashed"}],
        "degraded": True,
        "degraded_reasons": [
            {"reason": "provider_failed", "provider": "files", "detail": "crashed"},
            {"reason": "rerank_fallback", "detail": "timeout"},
        ],
        "request_id": "r1",
    }
    line = audit_summary(result)
    assert "degraded: provider_failed(files), rerank_fallback;" in line
    whole = {**result, "degraded": False, "degraded_reasons": []}
    assert "degraded: no;" in audit_summary(whole)


def test_the_audit_summary_says_a_crash_loop_is_restarting() -> None:
    """A crash loop's leg is ``crashed`` as one crash is: the degraded reason's detail
    (``restarting``) is what tells them apart, so the line shows it."""
    result = {
        "audit": {"entries": [], "tokens_used": 0, "global_budget": 100},
        "providers": [{"provider_id": "notes", "status": "crashed"}],
        "degraded": True,
        "degraded_reasons": [
            {"reason": "provider_failed", "provider": "notes", "detail": "restarting"},
        ],
        "request_id": "r1",
    }
    line = audit_summary(result)
    assert "providers: notes=crashed(0); degraded: provider_failed(notes: restarting);" in line


def _compose(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(config), "compose", "q", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=child_env(),
        timeout=300,  # a hang guard
    )


def test_a_one_shot_compose_says_a_warming_provider_builds_its_index_and_what_to_do(
    tmp_path: Path,
) -> None:
    # Its warm-up never ends (the gate is never made): the leg is warming at its bound
    # whatever the machine's speed, still starting or already building.
    gate = ["--warm-gate", str(tmp_path / "never")]
    config = _config(tmp_path, ("semantic", gate, ""))
    out = _compose(config, "--timeout-ms", "500")
    assert out.returncode == 1, out.stderr  # no evidence
    lines = out.stderr.splitlines()
    leg = next(line for line in lines if line.startswith("hostd:   semantic: warming: "))
    assert "still building its index (" in leg or "still starting (" in leg
    assert "not quoted" not in out.stderr
    (advice,) = [line for line in lines if "still warming: semantic." in line]
    assert "this command stops its providers when it ends" in advice.lower()
    assert f"`hostd warm --config {config}` once" in advice
    assert f"`hostd serve --config {config}` running" in advice and "--connect" in advice


def test_the_advice_follows_where_the_provider_goes_on_building() -> None:
    result = {
        "providers": [
            {"provider_id": "files", "status": "ok"},
            {
                "provider_id": "semantic",
                "status": "warming",
                "error": {"code": "warming", "message": "provider warming, answered not ready"},
            },
        ]
    }
    assert leg_failures(result) == [
        "  semantic: warming: still building its index (provider warming, answered not ready)"
    ]
    one_shot = warming_lines(result, connected=False)
    daemon = warming_lines(result, connected=True, config=" --config /p/hostd.toml")
    assert len(one_shot) == len(daemon) == 1
    assert "`hostd warm` once" in one_shot[0] and "`hostd serve` running" in one_shot[0]
    assert "providers go on warming up in the background" in daemon[0]
    assert "`hostd providers --config /p/hostd.toml --connect`" in daemon[0]
    assert warming_lines({"providers": [{"provider_id": "files", "status": "ok"}]}) == []


def test_a_one_shots_advice_says_a_provider_still_starting_is_starting_not_to_warm_it() -> None:
    # An MCP server not handshaken yet: no index to build, so `hostd warm` cannot help
    # it; as the daemon's line and hostd mcp's hint, the one-shot's names it starting.
    git = {
        "provider_id": "git",
        "status": "warming",
        "error": {"code": "starting", "message": "provider starting, not ready within 3000 ms"},
    }
    config = " --config /p/hostd.toml"
    (alone,) = warming_lines({"providers": [git]}, connected=False, config=config)
    assert alone == (
        "still warming: git (starting its process and handshake). This command starts its "
        "providers anew and stops them when it ends, so each run waits for its start "
        "again: keep `hostd serve --config /p/hostd.toml` running and compose with "
        "--connect to keep it running across commands"
    )
    (daemon,) = warming_lines({"providers": [git]}, connected=True, config=config)
    assert daemon.startswith("still warming: git (starting its process and handshake). ")
    assert "hostd warm" not in daemon
    # Beside one building its index, `hostd warm` helps that one: said, as before.
    files = {"provider_id": "files", "status": "warming", "error": {"code": "warming"}}
    (both,) = warming_lines({"providers": [git, files]}, connected=False, config=config)
    assert both.startswith("still warming: git (starting its process and handshake), files. ")
    assert "`hostd warm --config /p/hostd.toml` once" in both


def test_warm_through_a_serving_daemon_warms_its_providers_not_a_second_set(
    tmp_path: Path,
) -> None:
    """With a daemon serving the config, ``hostd warm`` starts and waits for the
    daemon's own providers (``providers/warm``), its progress forwarded: the
    providers the next request meets, and no second set building the same index."""
    gate = tmp_path / "gate"
    config = _config(tmp_path, ("a", ["--warm-gate", str(gate), "--steps", "3"], ""))
    config.write_text(
        config.read_text().replace("[host]\n", '[host]\nstart_providers = "lazy"\n', 1)
    )
    child = ServeChild(config, env=child_env())
    assert child.start(60)
    try:
        warm = subprocess.Popen(
            [sys.executable, "-m", "hostd", "--config", str(config), "warm"]
            + ["--progress", "always"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=child_env(),
        )
        with Client.connect(tmp_path / "h.sock") as client:
            # Lazy: only the warm-up, asked of the daemon, starts it.
            while _row(client, "a")["state"] != "warming":
                assert warm.poll() is None, warm.communicate()
            gate.touch()
            out, err = warm.communicate(timeout=300)  # a hang guard
            assert warm.returncode == 0, err
            assert out.splitlines() == ["a\tready"]
            assert f"a daemon is serving this config at {tmp_path / 'h.sock'}" in err
            assert "a: build" in err  # the daemon's progress notes drew the bar
            row = _row(client, "a")
            assert row["state"] == "ready" and row["health"]["starts"] == 1
    finally:
        assert child.stop() == 0


#: A provider that exits at every start, saying why on its stderr.
_DIES = ["python", "-c", "import sys; print('no index here', file=sys.stderr); sys.exit(3)"]


def _dying_config(tmp_path: Path, host: str = "") -> Path:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f'{host}[[provider]]\nid = "dies"\ncommand = {json.dumps(_DIES)}\ncwd = "{REPO}"\n'
    )
    return config


def test_warm_through_a_daemon_says_a_provider_in_a_crash_loop_keeps_failing(
    tmp_path: Path,
) -> None:
    """A daemon's provider that exits at every start is not waited for (``restarting:
    …``); ``hostd warm`` says, as ``hostd compose`` does, that it keeps failing, its last
    failure, and where to look."""
    # Restarted every 0.5 s, never parked within the test: a crash loop.
    host = "restart_backoff_s = 0.5\nrestart_backoff_max_s = 0.5\nrestart_attempts = 1000\n"
    config = _dying_config(tmp_path, host)
    child = ServeChild(config, env=child_env())
    assert child.start(60)
    try:
        with Client.connect(tmp_path / "h.sock") as client:
            while _row(client, "dies")["health"]["consecutive_failures"] < 2:
                pass  # its boot start and a restart failed: the loop is on
        out = _warm(config, "--progress", "never")
        assert out.returncode == 1, out.stderr
        (state,) = out.stdout.splitlines()
        assert state.startswith("dies\trestarting: provider restarting after "), state
        (advice,) = [x for x in out.stderr.splitlines() if x.startswith("hostd: keeps failing")]
        assert advice.startswith("hostd: keeps failing: dies (last failure: "), advice
        assert "stderr: no index here" in advice
        assert f"`hostd providers --config {config} --connect`" in advice
    finally:
        assert child.stop() == 0


def test_a_one_shot_warm_promises_no_next_try_for_a_provider_that_failed(
    tmp_path: Path,
) -> None:
    """Its providers stop when it ends: a failed start is said without the next try a
    daemon would make."""
    out = _warm(_dying_config(tmp_path), "--progress", "never")
    assert out.returncode == 1
    assert out.stdout.startswith("dies\tcrashed: ")
    (said,) = [x for x in out.stderr.splitlines() if x.startswith("hostd: dies: crashed")]
    assert "exited with status 3" in said and "next try" not in said, said
    assert "keeps failing" not in out.stderr  # one failed start is no crash loop


def _row(client: Client, pid: str) -> dict[str, Any]:
    rows = client.call("providers/list")["providers"]
    return next(r for r in rows if r["id"] == pid)


def test_warm_says_what_each_provider_holds_once_ready(tmp_path: Path) -> None:
    # A root with nothing to index is ready all the same: warm says so, not only status.
    (tmp_path / "empty").mkdir()
    command = ["python", "-m", "providers.files", "--root", str(tmp_path / "empty")]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(command)}\ncwd = "{REPO}"\n'
    )
    out = _warm(config, "--progress", "never")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "files\tready\n"
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("hostd: files: ready")]
    assert line.startswith("hostd: files: ready (0 chunks from 0 files under ")
    assert f"nothing to index under {tmp_path / 'empty'}: is that the project's directory?" in line


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_warm_interrupted_says_where_each_build_stood_and_what_to_do(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """Ctrl-C (SIGINT), or a SIGTERM, while a provider warms: exit 128 + the signal with
    one line naming where its build stood, that it is kept, and the command that goes
    on, not silently."""
    gate = tmp_path / "never"  # its warm-up stands at build 0 of 1 until interrupted
    config = _config(tmp_path, ("slow", ["--warm-gate", str(gate), "--steps", "1"], ""))
    with _warm_without_bars(config) as warm:
        assert warm.stderr is not None
        for line in warm.stderr:  # its first progress line: hostd warm heard the build
            if line.startswith("hostd: slow: warming (build"):
                break
        warm.send_signal(signum)
        out, err = warm.communicate()
    assert warm.returncode == 128 + signum, err
    assert out == ""  # no provider settled: no state rows
    (said,) = [x for x in err.splitlines() if x.startswith("hostd: warm interrupted")]
    assert said == (
        f"hostd: warm interrupted: slow at build 0 of 1 (what was done is kept); "
        f"run `hostd warm --config {config}` again to go on"
    )
    assert "Traceback" not in err


def test_a_total_that_drops_mid_build_restarts_the_rate_and_the_bar() -> None:
    """A .hostdignore edited while semantic embeds drops chunks, some of them embedded
    already: the time left counts the rate since the new total, not the done it lost,
    and a bar shows the new total."""
    stream, now = io.StringIO(), [0.0]
    lines = ProgressLines(stream, clock=lambda: now[0])

    def note(done: int, total: int) -> dict[str, Any]:
        return {"state": "warming", "phase": "embed", "done": done, "total": total}

    lines("semantic", note(0, 30000))
    now[0] = 6000  # 2.5 chunks a second
    lines("semantic", note(15000, 30000))
    lines("semantic", note(5000, 15000))  # 10,000 embedded chunks left the tree
    now[0] = 7200  # 3000 more in 1200 s: 2.5 a second still, 7000 left take 2800 s
    lines("semantic", note(8000, 15000))
    assert stream.getvalue().splitlines()[-1] == (
        "hostd: semantic: warming (embed 8000/15000, about 47 min left)"
    )

    shown = io.StringIO()
    bars = ProgressBars(enabled=True, stream=shown)
    bars("semantic", note(64, 300))
    bars("semantic", note(100, 120))
    bars.close()
    assert "100/120" in shown.getvalue()
