"""Every benchmark script keeps running: each one at tiny sizes, its JSON read back.

Figures are not judged here (benchmarks are not tests, and a loaded machine moves
them); that each script starts, drives what it measures to the end and prints the
figures it promises is. A script that an interface change broke fails here, not on
the day someone measures with it. A new ``scripts/bench_*.py`` must get a row below
(``test_every_bench_script_has_a_smoke_run``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# Among the suite's longest: run first (tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

#: Scripts smoke-run by a test file of their own (which checks more of their output).
ELSEWHERE = {
    "bench_fanout": "tests/test_bench_fanout.py",
    "bench_rerank": "tests/test_bench_rerank.py",
    "bench_stderr": "tests/transport/test_bench_stderr.py",
}

#: script -> (tiny arguments, top-level keys its JSON must hold).
RUNS: dict[str, tuple[list[str], set[str]]] = {
    "bench_ab": (
        [str(ROOT), "--rounds", "2", "--warmup", "0", "--providers", "1", "--frames", "2"]
        + ["--delay-ms", "1"],
        {"this", "other", "this_minus_other_ms"},
    ),
    "bench_audit": (
        ["--frames", "3", "--repeat", "4"],
        {"accept_us", "exact_us", "accept_over_exact", "same_audit"},
    ),
    "bench_chunks": (
        ["--bounds", "64,128", "--budgets", "300,600"],
        {"project", "questions", "budgets", "bounds"},
    ),
    "bench_compose": (
        ["--repeat", "1", "--sizes", "50", "--lists-repeat", "2", "--labels-repeat", "2"],
        {"median_ms", "vs_langchain", "shared_labels"},
    ),
    "bench_daemon": (
        ["--seconds", "1", "--clients", "1,2", "--frames", "3"],
        {"levels", "daemon_peak_rss_mb", "daemon_exit_code"},
    ),
    "bench_feedback": (["--requests", "3"], {"compose_ms", "feedback_ms", "errors"}),
    # --corpus DIR is added by its test: a tiny tree, not the checkout's whole docs/ and hostd/.
    "bench_fence": (["--goals", "1"], {"budget", "docs", "hostd"}),
    "bench_import": (
        # One entry point (the cheapest): the others run the same loop, a fresh interpreter each.
        ["--samples", "1", "--base", str(ROOT), "--entry", "hostd.cli"],
        {"this", "base", "ratio"},
    ),
    # Without valgrind here (the plumbing, CPU from /proc, against a second daemon);
    # counted by callgrind below. The docs set-up: the smaller index for files to build.
    "bench_instructions": (
        ["--no-valgrind", "--warmup", "0", "--compositions", "1", "--memory-entries", "10"]
        + ["--corpus", "docs", "--budget", "2000", "--against", str(ROOT)],
        {"this", "against", "ratio"},
    ),
    "bench_integrations": (
        ["--queries", "3", "--k", "2"],
        {"retriever_ms", "served_ms", "frames_with_file_provenance"},
    ),
    "bench_logs": (
        ["--providers", "1", "--frames", "3", "--compositions", "2", "--rounds", "1"],
        {"modes"},
    ),
    "bench_mcp": (["--rounds", "3", "--frames", "2"], {"connect", "local"}),
    "bench_mcp_cold": ([str(ROOT), "--runs", "1"], {"mode", "runs", "medians", "ratio"}),
    # One scenario (a daemon and an MCP server each): the other differs in its timeout_ms only.
    "bench_mcp_provider": (
        ["--count", "2", "--mib", "0.01", "--rounds", "1", "--scenario", "deadline"],
        {"deadline", "in_process"},
    ),
    "bench_providers": (
        ["--repeat", "1", "--memory-entries", "10", "--skip-semantic-cold"],
        {"files", "memory", "semantic"},
    ),
    "bench_rerank_down": (
        ["--compositions", "5", "--timeout-ms", "50", "--cool-down-ms", "60000"],
        {"hang", "refused", "compositions"},
    ),
    "bench_remote": (
        ["--rounds", "3", "--warmup", "1", "--frames", "2", "--concurrent", "2"]
        + ["--requests", "4"],
        {"leg_ms", "plain_post_ms", "paired_ratio_median"},
    ),
    "bench_report": (
        ["--frames", "6", "--budget", "300", "--repeat", "2", "--rounds", "1"],
        {"report_us", "ranked_entries_us", "unranked_entries_us"},
    ),
    "bench_results": (
        ["--frames", "8", "--budget", "500", "--repeat", "3"],
        {"reply_bytes", "server_cpu_ms", "client_cpu_ms"},
    ),
    "bench_serve": (
        ["--requests", "3", "--warmup", "1", "--memory-entries", "10"],
        {"serve_median_ms", "direct_median_ms", "daemon_cpu_ms_per_composition"},
    ),
    # One budget, this checkout against itself.
    "bench_share": ([str(ROOT), "--budgets", "300"], {"before", "after"}),
    "bench_soak": (
        ["--compositions", "16", "--sample-every", "4", "--warmup", "4", "--mix-every", "1"]
        + ["--reconnect-every", "5", "--memory-entries", "10"],
        {"calls", "summary", "samples", "daemon_exit_code"},
    ),
    "bench_spans": (["--repeat", "1"], {"candidates", "spans (a: merged, b: apart)"}),
    "bench_start_cpu": (
        ["--samples", "1", "--base", str(ROOT), "--only", "healthy_provider"],
        {"this", "base", "ratio", "load_before"},
    ),
    "bench_verify": (
        ["--providers", "2", "--frames", "3", "--lines", "2", "--rounds", "2", "--warmup", "1"]
        + ["--delay-ms", "1"],
        {"compose_latency_ms", "turn2_reused_frames", "evidence_block_identical"},
    ),
}


def _run(script: str, args: list[str]) -> dict[str, Any]:
    # One torch thread: its pool of one per core spins against the suite's other
    # workers, and a single query embedding then takes seconds of CPU, not milliseconds.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / f"{script}.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,  # a hang guard: a tiny run takes seconds
        check=False,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.stem for p in (ROOT / "scripts").glob("bench_*.py")}
    assert scripts == set(RUNS) | set(ELSEWHERE)
    for test_file in ELSEWHERE.values():
        assert (ROOT / test_file).is_file(), test_file


@pytest.mark.timeout(450)
@pytest.mark.parametrize(
    "script",
    sorted(
        set(RUNS) - {"bench_chunks", "bench_fence", "bench_providers", "bench_serve", "bench_soak"}
    ),
)
def test_bench_script_runs_at_tiny_sizes(script: str) -> None:
    args, keys = RUNS[script]
    out = _run(script, args)
    assert keys <= set(out), sorted(out)


@pytest.mark.timeout(450)
def test_bench_providers_on_a_tiny_tree(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "budget.md").write_text(
        "# Budget\n\nThe budget split across providers.\n\nRetry loop gives up.\n",
        encoding="utf-8",
    )
    (tmp_path / "tool.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    args, keys = RUNS["bench_providers"]
    out = _run("bench_providers", [*args, "--root", str(tmp_path)])
    assert keys <= set(out), sorted(out)
    assert out["files"]["files"] == 2 and out["memory"]["entries"] == 10


@pytest.mark.timeout(450)
def test_bench_fence_on_a_tiny_corpus(tmp_path: Path) -> None:
    """Each part's index is built and its goal composed into a prompt with fence lines."""
    texts = {
        "docs": "# Budget\n\nThe budget counts the fenced blocks of the prompt.\n",
        "hostd": "def render_fence(frame):\n    # render a frame inside a fence, escape its "
        "attributes\n    return frame\n",
    }
    for part, name in (("docs", "budget.md"), ("hostd", "render.py")):
        (tmp_path / part).mkdir()
        (tmp_path / part / name).write_text(texts[part], encoding="utf-8")
    args, keys = RUNS["bench_fence"]
    out = _run("bench_fence", [*args, "--corpus", str(tmp_path)])
    assert keys <= set(out), sorted(out)
    for part in ("docs", "hostd"):
        assert out[part]["goals"] == 1 and out[part]["bytes_per_fence_line"], out[part]
        # Each file is one chunk, shown whole but for its last newline: the fence writes
        # the one before ``</frame>``, which is no content.
        assert out[part]["frames_per_prompt"] == 1, out[part]
        assert out[part]["content_bytes_mean"] == len(texts[part]) - 1, out[part]


@pytest.mark.timeout(450)
def test_bench_chunks_on_a_tiny_project(tmp_path: Path) -> None:
    """Each chunk bound builds its own index and composes each question at each budget;
    a question whose gold lines the prompt quotes has a rank, one it does not a reason."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "net.py").write_text(
        "def retry_loop(attempts):\n    # the retry loop gives up after attempts\n"
        "    return attempts\n",
        encoding="utf-8",
    )
    (project / "notes.md").write_text("# Notes\n\nNothing about it.\n", encoding="utf-8")
    questions = tmp_path / "questions.json"
    gold = [{"path": "net.py", "lines": [1, 3]}]
    elsewhere = [{"path": "absent.py", "lines": [1, 1]}]
    questions.write_text(
        json.dumps(
            [
                {"id": "Q1", "question": "when does the retry loop give up", "gold": gold},
                {"id": "Q2", "question": "retry loop", "gold": elsewhere},
            ]
        ),
        encoding="utf-8",
    )
    args, keys = RUNS["bench_chunks"]
    out = _run("bench_chunks", [str(project), str(questions), *args])
    assert keys <= set(out), sorted(out)
    assert set(out["bounds"]) == {"64", "128"}
    for figures in out["bounds"].values():
        assert figures["chunks"] == 2 and figures["build_s"] is not None
        for budget in ("300", "600"):
            at = figures["budgets"][budget]
            assert (at["found"], at["ranks"]) == (1, "0,-")
            assert at["questions"]["Q2"] == {"rank": None, "why": "not offered"}


def _serve_set_up(out: dict[str, Any], corpus: str, budget: int) -> None:
    """``out`` composed over ``corpus`` at ``budget``, every leg ``ok`` (both providers
    asked), and its daemon stopped cleanly."""
    assert RUNS["bench_serve"][1] <= set(out), sorted(out)
    assert (out["corpus"], out["budget"], out["requests"]) == (corpus, budget, 3)
    assert set(out["asked"]) == {"files", "memory"}
    assert out["daemon_exit_code"] == 0


@pytest.mark.timeout(450)
def test_bench_serve_the_large_set_up_through_warming_providers() -> None:
    """The files provider answers ``warming`` (with progress notifications) after its
    handshake: both sides wait for it, and the large set-up composes with every leg
    ``ok`` at the budget asked (the docs one, with trusted roots: the next test)."""
    args, _ = RUNS["bench_serve"]
    _serve_set_up(
        _run("bench_serve", [*args, "--corpus", "large", "--budget", "4000"]), "large", 4000
    )


@pytest.mark.timeout(450)
@pytest.mark.skipif(
    not (shutil.which("valgrind") and shutil.which("callgrind_control")),
    reason="valgrind (callgrind) is not installed",
)
def test_bench_instructions_counts_the_daemon_under_callgrind() -> None:
    """The daemon runs under callgrind, its count switched on after the warm-up and
    dumped after the counted compositions: a whole number of instructions each, with
    the frames those compositions offered and included."""
    out = _run(
        "bench_instructions",
        ["--warmup", "0", "--compositions", "1", "--memory-entries", "10"]
        + ["--corpus", "docs", "--budget", "2000"],
    )
    this = out["this"]
    assert (out["corpus"], out["budget"], out["compositions"]) == ("docs", 2000, 1)
    assert this["instructions_per_composition"] > 0, this
    assert this["frames_included"] > 0 and this["frames_offered"] >= this["frames_included"]
    assert this["daemon_exit_code"] == 0


@pytest.mark.timeout(450)
def test_bench_soak_samples_the_daemon_and_each_provider() -> None:
    """Every kind of call the soak mixes in is made, and each sample has the RSS of the
    daemon, both providers and their shims; the summary has the three points."""
    args, keys = RUNS["bench_soak"]
    out = _run("bench_soak", args)
    assert keys <= set(out), sorted(out)
    assert out["calls"]["compose"] == 16
    assert all(out["calls"][kind] > 0 for kind in out["calls"]), out["calls"]
    assert [row["compositions"] for row in out["samples"]] == [0, 4, 8, 12, 16]
    names = {"daemon", "files", "memory", "files_reaper", "memory_reaper", "total"}
    for row in out["samples"]:
        assert names <= set(row) and all(row[name] for name in names), row
    assert set(out["summary"]["daemon"]) >= {"start_mb", "after_warmup_mb", "end_mb"}
    assert out["daemon_exit_code"] == 0


@pytest.mark.timeout(450)
def test_bench_soak_traces_what_grew_in_the_daemon() -> None:
    """``--trace``: the daemon writes a snapshot at each sample, and the JSON names the
    allocation sites and object types that grew from the warm-up sample to the end."""
    out = _run(
        "bench_soak",
        ["--compositions", "4", "--sample-every", "2", "--warmup", "2", "--trace", "2"]
        + ["--memory-entries", "10"],
    )
    trace = out["trace"]
    assert trace["snapshots"] == [1, 2]
    assert len(trace["traced_mb"]) == 2 and trace["sites"] and trace["types"]
    assert all(site["where"] for site in trace["sites"])
    assert out["daemon_exit_code"] == 0


@pytest.mark.timeout(450)
def test_bench_serve_the_docs_set_up_against_a_second_checkout() -> None:
    """``--against`` runs a second daemon beside this one over the same providers: both
    are measured request by request and compared (here the same checkout twice), with
    a fresh goal every request; ``--runs 2`` prints the two runs' medians, each run's
    figures under ``each_run``. The docs set-up (trusted roots: sources re-read) waits
    for its warming files provider and composes with every leg ``ok``, as the large
    one does."""
    args, _ = RUNS["bench_serve"]
    out = _run(
        "bench_serve",
        [*args, "--corpus", "docs", "--budget", "2000", "--against", str(ROOT)]
        + ["--goals", "fresh", "--runs", "2"],
    )
    runs = out.pop("each_run")
    assert len(runs) == 2 and all(set(run) == set(out) for run in runs)
    for run in runs:
        _serve_set_up(run, "docs", 2000)
    for key in ("serve_median_ms", "direct_median_ms", "daemon_cpu_ms_per_composition"):
        assert out[key] == statistics.median(run[key] for run in runs), key
    assert out["against"]["serve_median_ms"] == statistics.median(
        run["against"]["serve_median_ms"] for run in runs
    )
    assert out["goals"] == "fresh"
    assert out["against"]["checkout"] == str(ROOT)
    assert {"serve_median_ms", "daemon_cpu_ms_per_composition"} <= set(out["against"])
    assert "cpu_ratio_to_against" in out
    assert out["daemon_exit_code"] == 0


@pytest.mark.timeout(450)
def test_bench_providers_measures_memory_against_a_base_checkout() -> None:
    # The base is this checkout itself: both sides run, interleaved, and a ratio comes out.
    out = _run(
        "bench_providers",
        ["--base", str(ROOT), "--rounds", "1", "--memory-entries", "10", "--repeat", "1"],
    )
    memory = out["memory"]
    assert len(memory["query_p50_ms"]["this"]) == len(memory["query_p50_ms"]["base"]) == 1
    assert memory["ratio"] > 0


@pytest.mark.timeout(450)
def test_bench_providers_measures_a_files_start_against_a_base_checkout(tmp_path: Path) -> None:
    # The base is this checkout itself: each side builds its cache, then starts from it.
    (tmp_path / "notes.md").write_text("# Notes\n\nThe retry loop gives up after three.\n")
    out = _run(
        "bench_providers",
        ["--base", str(ROOT), "--only", "files", "--root", str(tmp_path), "--rounds", "1"],
    )
    files = out["files"]
    assert not files["cold"]["this"]["from_cache"]
    for side in ("this", "base"):
        (start,) = files["starts"][side]
        assert start["from_cache"] and start["reads"] == 0 and start["chunks"] > 0
    assert files["ratio"] > 0


@pytest.mark.timeout(450)
def test_bench_mcp_cold_connected_to_one_daemon() -> None:
    """``--connect``: both sides' ``hostd mcp --connect`` compose through one daemon."""
    out = _run("bench_mcp_cold", [str(ROOT), "--runs", "1", "--connect"])
    assert out["mode"] == "connect"
    assert [len(runs) for runs in out["runs"].values()] == [1, 1]
    assert set(out["ratio"]) == {"initialize_ms", "first_compose_ms"}


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (``/proc``'s children lists, recursively)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = (task / "children").read_text().split()
            except OSError:  # the task ended as we read
                continue
            for kid in map(int, kids):
                if kid not in found:
                    found.add(kid)
                    todo.append(kid)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended: only its parent's wait is owed


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.timeout(300)
def test_bench_soak_stopped_by_sigterm_leaves_no_process(tmp_path: Path) -> None:
    """A soak stopped with SIGTERM stops the daemon and providers it started."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    args = ["--compositions", "1000000", "--warmup", "1", "--memory-entries", "10"]
    with (tmp_path / "stderr").open("wb") as err:
        soak = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "bench_soak.py"), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        started: set[int] = set()
        # The daemon and both providers (each under its reaper shim) are running.
        while len(started) < 5 and soak.poll() is None:
            time.sleep(0.05)  # a wait for processes to appear, not a measure of time
            started = _descendants(soak.pid)
        assert soak.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
        soak.send_signal(signal.SIGTERM)
        code = soak.wait(120)
    finally:
        if soak.poll() is None:
            soak.kill()
            soak.wait()
    assert code == 128 + signal.SIGTERM, (tmp_path / "stderr").read_text()[-3000:]
    left = {pid for pid in started if _alive(pid)}
    assert not left, f"still running after the soak's exit: {sorted(left)}"
