"""``evals/analyse.py``: the AUC, the signals, the logistic fit, the calibrated order and
the held-out list are right on hand-made inputs, and a run over a tiny corpus prints the
same recall as ``hostd eval``."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from hostd.compose import CandidateSet
from hostd.quality import parse_questions
from tests.fixtures.file_frames import file_frame

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "evals" / "analyse.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("evals_analyse", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


an = _load()


def test_auc_is_one_for_perfect_separation_zero_reversed_and_half_for_ties() -> None:
    assert an.roc_auc([0.9, 0.8, 0.7], [0.1, 0.2]) == 1.0
    assert an.roc_auc([0.1, 0.2], [0.9, 0.8, 0.7]) == 0.0
    assert an.roc_auc([0.5, 0.5], [0.5, 0.5, 0.5]) == 0.5
    # of four pairs, two wins and one tie: (2 + 0.5) / 4
    assert an.roc_auc([0.5, 0.7], [0.5, 0.6]) == pytest.approx(2.5 / 4)
    assert math.isnan(an.roc_auc([], [0.1]))


def test_signals_of_a_list_and_short_lists_skipped() -> None:
    s = an.list_signals([0.1, 0.9, 0.5])
    sigma = math.sqrt((0.4**2 + 0 + 0.4**2) / 3)  # population sigma around the mean 0.5
    assert s["top"] == 0.9
    assert s["top/mean"] == pytest.approx(0.9 / 0.5)
    assert s["head z"] == pytest.approx(0.4 / sigma)
    assert s["gap/sigma"] == pytest.approx(0.4 / sigma)
    assert an.list_signals([0.9, 0.5]) is None
    flat = an.list_signals([0.3, 0.3, 0.3])
    assert flat["top"] == 0.3 and math.isnan(flat["head z"]) and math.isnan(flat["gap/sigma"])


def _chance(a: float, b: float, x: float) -> float:
    return 1 / (1 + math.exp(-(a * x + b)))


def test_the_logistic_fit_orders_a_separable_sample_and_zeroes_the_gradient() -> None:
    xs = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
    a, b = an.fit_logistic(xs, [0, 0, 0, 1, 1, 1])
    assert a > 0 and math.isfinite(a) and math.isfinite(b)
    assert _chance(a, b, 0.1) < 0.5 < _chance(a, b, 0.9)
    a, b = an.fit_logistic(xs, [1, 1, 1, 0, 0, 0])
    assert a < 0 and _chance(a, b, 0.1) > _chance(a, b, 0.9)
    # not separable: at the optimum the predicted chances sum to the positives
    xs, ys = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 1, 0, 0, 1, 1]
    a, b = an.fit_logistic(xs, ys)
    assert sum(_chance(a, b, x) for x in xs) == pytest.approx(sum(ys), abs=1e-3)


def test_the_calibrated_order_reads_each_providers_own_map() -> None:
    frames = [
        ("lexical", file_frame("a.md", "alpha text", 0.9)),
        ("lexical", file_frame("b.md", "beta text", 0.5)),
        ("dense", file_frame("c.md", "gamma text", 0.3)),
    ]
    # dense's 0.3 is a better chance than lexical's 0.5, not than its 0.9
    fits = {"lexical": (10.0, -6.0), "dense": (10.0, -2.0)}
    order = an.CalibratedChance(fits, "max").order(CandidateSet.of(frames))
    assert [frames[i][1].id for i in order] == ["a.md#L1-2", "c.md#L1-2", "b.md#L1-2"]
    # one evidence both served (after dedup: one candidate, two supporters): noisy-or
    # adds their chances (a, d, c, b), max keeps the better one (a, c, d, b)
    shared = [*frames, ("lexical", file_frame("d.md", "delta text", 0.55))]
    pool = replace(CandidateSet.of(shared), support={3: (("dense", 0.25), ("lexical", 0.55))})
    names = ["a", "b", "c", "d"]
    noisy = an.CalibratedChance(fits, "noisy-or").order(pool)
    assert [names[i] for i in noisy] == ["a", "d", "c", "b"]
    assert [names[i] for i in an.CalibratedChance(fits, "max").order(pool)] == ["a", "c", "d", "b"]


def test_the_held_out_list_ignores_comments_and_names_unknown_ids(tmp_path: Path) -> None:
    listed = tmp_path / "held.txt"
    listed.write_text("# held out\nq2\n\n  q3  # a note\nq2\nnope\n")
    assert an.read_held_out(listed) == ["q2", "q3", "nope"]
    line = {"question": "x", "gold": [{"file": "f", "phrase": "p"}], "style": "lexical"}
    questions = parse_questions(
        "\n".join(json.dumps({**line, "id": i}) for i in ("q1", "q2", "q3"))
    )
    held, unknown = an.split_held_out(an.read_held_out(listed), questions)
    assert held == {"q2", "q3"} and unknown == ["nope"]
    with pytest.raises(an.AnalysisError, match="cannot read"):
        an.read_held_out(tmp_path / "missing.txt")
    with pytest.raises(an.AnalysisError, match="CONFIG:QUESTIONS"):
        an.parse_calibrate_on("evals/repo.toml")
    assert an.parse_calibrate_on("c.toml:q.jsonl") == (Path("c.toml"), Path("q.jsonl"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=90
    )


@pytest.mark.slow
def test_a_run_over_a_tiny_corpus_matches_hostd_eval(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "notes.md").write_text("# Retries\n\nThe retry loop gives up after three attempts.\n")
    (tree / "palette.md").write_text("# Palette\n\nThe theme uses teal and orange accents.\n")
    (tree / "loops.md").write_text("# Loops\n\nA loop retries; the theme is orange.\n")
    command = ["python", "-m", "providers.files", "--root", str(tree)]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n\n'
        f'[log]\nlevel = "warning"\n\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(command)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 60000\n"  # generous: the leg's deadline includes a lazy start
    )
    gold_notes = [{"file": "notes.md", "phrase": "gives up after three attempts"}]
    gold_palette = [{"file": "palette.md", "phrase": "teal and orange"}]
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps(q)
            for q in (
                {
                    "id": "q1",
                    "question": "retry loop gives up",
                    "gold": gold_notes,
                    "style": "lexical",
                },
                {
                    "id": "q2",
                    "question": "which colours decorate the interface",
                    "gold": gold_palette,
                    "style": "paraphrase",
                },
                {
                    "id": "q3",
                    "question": "teal orange accents theme",
                    "gold": gold_palette,
                    "style": "lexical",
                },
                {
                    "id": "q4",
                    "question": "when does the loop stop trying",
                    "gold": gold_notes,
                    "style": "paraphrase",
                },
            )
        )
        + "\n"
    )
    held = tmp_path / "held.txt"
    held.write_text("q3\nq4\nelsewhere\n")
    common = ["--config", str(config), "--questions", str(questions), "--budget", "300"]
    done = _run(
        str(SCRIPT),
        *common,
        "--held-out",
        str(held),
        "--calibrate-on",
        f"{config}:{questions}",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert "1 id(s)" in done.stderr and "elsewhere" in done.stderr
    result = json.loads(done.stdout)
    expected = _run("-m", "hostd", "--config", str(config), "eval", *common[2:], "--json")
    assert expected.returncode == 0, expected.stderr
    table = {(r["budget"], r["policy"]): r["recall"] for r in result["table"]}
    for row in json.loads(expected.stdout)["table"]:
        assert table[row["budget"], row["policy"]] == row["recall"]
    assert {"calibrated max", "calibrated noisy-or"} <= {p for _, p in table}
    split = result["split"]["files alone"]
    assert set(split) == {"design", "held-out"} and set(split["held-out"]) == {"300"}
    assert set(result["calibration"]) == {"files"}
    [signals] = result["signals"]
    assert signals["provider"] == "files" and signals["budget"] == 300
    assert signals["used"]["lexical"] + signals["used"]["paraphrase"] + signals["skipped"] == 4

    done = _run(str(SCRIPT), *common, "--held-out", str(tmp_path / "none.txt"))
    assert done.returncode == 1 and "cannot read" in done.stderr
    assert "Traceback" not in done.stderr
