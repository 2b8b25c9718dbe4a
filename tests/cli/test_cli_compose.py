"""``hostd compose`` policy options (--overfetch, --caps, --floors), the note for an
overfetch that cannot change what is asked, and ``context/query``'s rank order."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from hostd.cli._common import anchors_arg
from hostd.cli._quality import caps_arg, floors_arg
from hostd.client import Client
from hostd.compose import budget_split
from tests.fixtures.cli import run_hostd as _hostd

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, *providers: tuple[str, int]) -> Path:
    text = f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
    for name, frames in providers:
        words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", name]
        words += ["--frames", str(frames), "--size", "200"]
        text += (
            f'\n[[provider]]\nid = "{name}"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
            "timeout_ms = 60000\n"  # generous: child start-up is slow on a loaded machine
        )
    path = tmp_path / "hostd.toml"
    path.write_text(text)
    return path


def test_caps_and_floors_spellings() -> None:
    assert caps_arg("files=0.5, *=0.25") == {"files": 0.5, "*": 0.25}
    assert caps_arg('{"files": 1}') == {"files": 1}
    with pytest.raises(ValueError, match="expected provider=share"):
        caps_arg("files")
    with pytest.raises(ValueError, match="not a number"):
        caps_arg("files=half")
    assert floors_arg('[{"label": "a", "content": "b"}]') == [{"label": "a", "content": "b"}]
    with pytest.raises(ValueError, match="cannot read"):
        floors_arg("/no/such/file")


def test_compose_passes_overfetch_caps_and_floors(tmp_path: Path) -> None:
    config = _config(tmp_path, ("alpha", 8), ("beta", 8))
    pinned = tmp_path / "pinned.txt"
    pinned.write_text("p" * 400)  # 100 tokens
    done = _hostd(
        "--config", str(config), "compose", "goal", "--budget", "500", "--json",
        "--overfetch", "1.5", "--caps", "alpha=0.3", "--floors", str(pinned),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    audit = result["audit"]
    assert audit["policy"]["overfetch"] == 1.5
    assert [f["label"] for f in audit["floors"]] == [str(pinned)]
    # The providers split what the fenced floor leaves (priced once, as composition
    # prices it), each asked for its share × 1.5.
    contested = 500 - audit["floors"][0]["tokens"]
    shares = budget_split(contested, 2)
    assert audit["policy"]["asked"] == {
        "alpha": math.ceil(shares[0] * 1.5),
        "beta": math.ceil(shares[1] * 1.5),
    }
    alpha = [e for e in audit["entries"] if e["frame"]["provider_id"] == "alpha"]
    # The budget bounds the prompt: the preamble and the fenced floor leave about
    # 290 tokens, of which alpha may fill 30%: one fenced 50-token frame, not two.
    assert sum(1 for e in alpha if e["disposition"] == "included") == 1
    assert any(e.get("reason") == "provider_cap" for e in alpha)
    # Each excluded frame is named by its label, as the citations name the included.
    for e in audit["entries"]:
        if e["disposition"] == "excluded":
            pid, _, n = e["frame"]["frame_id"].partition(":")
            assert e["label"] == f"{pid}-{n}", e
    assert "overfetch" not in done.stderr


def test_an_overfetch_that_changes_nothing_is_reported(tmp_path: Path) -> None:
    config = _config(tmp_path, ("alpha", 4))
    done = _hostd("--config", str(config), "compose", "goal", "--budget", "300", "--overfetch", "4")
    assert done.returncode == 0, done.stderr
    assert "overfetch 4 cannot change what is asked" in done.stderr
    assert "alpha 300 tokens" in done.stderr
    # Only an --overfetch asked for is reported: the config's own is not the user's doing.
    done = _hostd("--config", str(config), "compose", "goal", "--budget", "300")
    assert done.returncode == 0, done.stderr
    assert "overfetch" not in done.stderr


def test_a_bad_caps_value_is_one_line(tmp_path: Path) -> None:
    config = _config(tmp_path, ("alpha", 4))
    done = _hostd("--config", str(config), "compose", "goal", "--caps", "alpha")
    assert done.returncode == 1
    assert "--caps: expected provider=share" in done.stderr and "Traceback" not in done.stderr


def test_context_query_returns_each_providers_rank_order(tmp_path: Path) -> None:
    config = _config(tmp_path, ("alpha", 12), ("beta", 2))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        result = client.call("context/query", {"goal": "g", "budget": 100_000})
    listed = [f["id"] for f in result["frames"]["alpha"]]
    assert listed[:3] == ["alpha:0", "alpha:1", "alpha:10"]  # by FrameId
    assert result["rank"]["alpha"] == [f"alpha:{i}" for i in range(12)]  # by its own score
    assert result["rank"]["beta"] == ["beta:0", "beta:1"]


@pytest.mark.parametrize(
    ("strategy", "said"),
    [
        ("rerank", "policy: rerank fell back to round_robin (not_configured: no [reranker]"),
        ("calibrated", "policy: calibrated fell back to round_robin (no calibration file"),
        ("score", None),
    ],
)
def test_the_summary_names_a_policy_fallback_and_its_reason(
    tmp_path: Path, strategy: str, said: str | None
) -> None:
    config = _config(tmp_path, ("alpha", 2))
    done = _hostd("--config", str(config), "compose", "x", "--strategy", strategy)
    assert done.returncode == 0, done.stderr
    (summary,) = [line for line in done.stderr.splitlines() if line.startswith("audit: ")]
    if said is None:
        assert "policy:" not in summary, summary
    else:
        assert said in summary, summary


def test_an_anchor_puts_the_file_it_names_first(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src" / "http").mkdir(parents=True)
    # net.py matches the goal best; client.py, the file the agent works on, barely.
    (tree / "src" / "net.py").write_text(
        "def retry_loop(attempts):\n    # the retry loop gives up: retry loop, retry loop\n"
        "    return attempts\n"
    )
    (tree / "src" / "http" / "client.py").write_text(
        "def fetch(url):\n    # sends the request once; the caller owns the retry loop\n"
        "    return open_connection(url, timeout=30, headers=default_headers())\n"
    )
    words = ["python", "-m", "providers.files", "--root", str(tree), "--no-cache"]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"
    )

    def lead(*anchors: str) -> list[str]:
        done = _hostd(
            "--config", str(config), "compose", "why does the retry loop give up",
            "--json", "--placement", "ranked", *anchors,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [c["label"] for c in json.loads(done.stdout)["citations"]]

    assert lead() == ["src/net.py L1-3", "src/http/client.py L1-3"]
    assert lead("--anchor", "src/http/client.py") == ["src/http/client.py L1-3", "src/net.py L1-3"]


def test_an_anchor_path_is_read_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src" / "http").mkdir(parents=True)
    (tmp_path / "src" / "http" / "client.py").write_text("def fetch(): ...\n")
    monkeypatch.chdir(tmp_path / "src")
    given = [
        "http/client.py",  # from here: made absolute, whatever the provider's root
        "../src/http",  # a directory, its ".." folded
        "src/http/client.py",  # nothing here: left for the provider's root
        "file:///elsewhere/a.py",
        "Config.load",
        "/abs/b.py",
        "x" * 5000,  # no path (too long for one): as given
    ]
    assert anchors_arg(given) == [
        str(tmp_path / "src" / "http" / "client.py"),
        str(tmp_path / "src" / "http"),
        *given[2:],
    ]
    assert anchors_arg(None) is None


def test_ready_wait_ms_answers_with_the_ready_providers_and_names_the_warming_one(
    tmp_path: Path,
) -> None:
    """``--ready-wait-ms`` is the request's ``ready_wait_ms``: with 0, the one-shot
    answers from the provider that is ready and reports the one whose warm-up the test
    holds (its gate never opens, its start deadline an hour) ``warming`` within that
    wait, instead of waiting for it."""
    config = _config(tmp_path, ("alpha", 2))
    gate = tmp_path / "warm.gate"
    words = ["python", "-m", "tests.fixtures.warming_provider", "--warm-gate", str(gate)]
    with config.open("a") as fh:
        fh.write(
            f'\n[[provider]]\nid = "cold"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
            "timeout_ms = 60000\nstart_timeout_s = 3600\n"
        )
    done = _hostd("--config", str(config), "compose", "goal", "--json", "--ready-wait-ms", "0")
    assert done.returncode == 0, done.stderr
    legs = {p["provider_id"]: p for p in json.loads(done.stdout)["providers"]}
    assert legs["alpha"]["status"] == "ok", legs
    assert legs["cold"]["status"] == "warming", legs
    assert "not ready within 0 ms" in legs["cold"]["error"]["message"], legs
    refused = _hostd("--config", str(config), "compose", "goal", "--ready-wait-ms", "-1")
    assert refused.returncode == 2 and "--ready-wait-ms" in refused.stderr, refused.stderr


def test_compose_as_of_answers_with_what_was_true_then(tmp_path: Path) -> None:
    from providers.memory import MemoryStore

    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        old = store.add(
            "fact", "staging DB", "staging port 5432", valid_from="2026-01-01T00:00:00Z"
        )
        store.supersede(old.id, "staging port 6543", at="2026-06-01T00:00:00Z")
    words = ["python", "-m", "providers.memory", "--db", str(db)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'\n[[provider]]\nid = "memory"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"
    )
    then = _hostd("--config", str(config), "compose", "staging port", "--as-of", "2026-03-01")
    assert then.returncode == 0, then.stderr
    assert "port 5432" in then.stdout and "6543" not in then.stdout
    assert 'title="staging DB" valid="2026-01-01..2026-06-01">' in then.stdout
    now = _hostd("--config", str(config), "compose", "staging port")
    assert now.returncode == 0, now.stderr
    assert "port 6543" in now.stdout and "5432" not in now.stdout
    assert 'valid="2026-06-01..">' in now.stdout


def test_a_failed_legs_line_is_followed_by_what_its_stderr_ended_with(tmp_path: Path) -> None:
    """A leg whose provider's process failed: under its line in the summary, the last
    lines it wrote on its stderr (the leg's ``error.stderr_tail``), bounded, one a line,
    as ``hostd providers`` shows them."""
    config = _config(tmp_path, ("alpha", 2))
    words = ["python", "-m", "tests.fixtures.adversarial_provider", "noisy_start_crash"]
    with config.open("a") as fh:
        fh.write(f'\n[[provider]]\nid = "noisy"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n')
    done = _hostd("--config", str(config), "compose", "anything")
    assert done.returncode == 0, done.stderr  # alpha's evidence
    lines = done.stderr.splitlines()
    at = lines.index("hostd:   noisy: its stderr ended with:")
    assert lines[at - 1].startswith("hostd:   noisy: crashed: "), done.stderr
    # Each line once: its error's own excerpt of its stderr leaves out what is shown under it.
    assert lines[at - 1].endswith("; exited with status 1"), lines[at - 1]
    end = lines.index("hostd:       IndexLocked: the index is locked", at)
    said = lines[at + 1 : end]
    # Its last lines, the earliest left out (marked), within a failure's bound.
    assert said[0] == "hostd:       …" and 2 <= len(said) <= 19, done.stderr
    parts = [int(line.split()[3]) for line in said[1:]]
    assert parts == list(range(40 - len(parts), 40)), done.stderr
    assert all(line.endswith(" of the index " + "." * 60) for line in said[1:])


def test_a_one_shot_compose_starts_only_the_providers_it_names(tmp_path: Path) -> None:
    # "beta" marks its start in a file and never answers: `--providers alpha` must
    # neither start it nor wait for it (an MCP server, a slow index, is seconds).
    marker = tmp_path / "beta-started"
    config = _config(tmp_path, ("alpha", 2))
    starts = ["python", "-c", f"import pathlib; pathlib.Path({str(marker)!r}).touch()"]
    with config.open("a") as f:
        f.write(f'\n[[provider]]\nid = "beta"\ncommand = {json.dumps(starts)}\n')
    done = _hostd("--config", str(config), "compose", "goal", "--providers", "alpha", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["provider_id"] for p in result["providers"]] == ["alpha"]
    assert result["providers"][0]["status"] == "ok"
    assert not marker.exists(), "beta was started though the request did not name it"
    assert "beta" not in done.stderr


@pytest.mark.parametrize(
    ("default", "args", "started"),
    [
        (None, ["--strategy", "rrf"], False),
        (None, [], False),  # the default, score
        ("rerank", ["--strategy", "rrf"], False),  # the request's strategy decides
        (None, ["--strategy", "rerank"], True),
        ("rerank", [], True),  # the config's default, for a request that names none
    ],
)
def test_a_one_shot_compose_starts_the_reranker_only_when_it_ranks(
    tmp_path: Path, default: str | None, args: list[str], started: bool
) -> None:
    # The fixture reranker writes a line to `starts` as it starts: a composition ranked
    # otherwise must neither start it nor wait for it (a model to load is seconds).
    starts = tmp_path / "reranker-starts"
    config = _config(tmp_path, ("alpha", 3))
    words = ["python", "-m", "tests.fixtures.reranker", "reverse", "--starts", str(starts)]
    text = config.read_text()
    if default is not None:
        text = text.replace("[host]\n", f'[host]\nstrategy = "{default}"\n', 1)
    text += f'\n[reranker]\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\ntimeout_ms = 60000\n'
    config.write_text(text)
    done = _hostd("--config", str(config), "compose", "goal", "--json", *args)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert starts.exists() is started, done.stderr
    fell_back = [d for d in result["degraded_reasons"] if d["reason"] == "rerank_fallback"]
    assert fell_back == [], fell_back  # ranked as asked: by its verdict, or not by it
    if started:
        assert starts.read_text() == "start\n"  # started once, up front
