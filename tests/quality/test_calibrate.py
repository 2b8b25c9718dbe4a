"""``hostd calibrate`` and the ``calibrated`` policy: monotone, scale-invariant per provider,
deterministic, audited, and ``round_robin`` (saying so) when there is no feedback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.client import Client
from hostd.compose import (
    Calibrated,
    RoundRobinByRank,
    compose_for_prompt,
    rank_with,
    strategy_from_wire,
)
from hostd.quality import (
    Feedback,
    Recorded,
    bind_calibration,
    fit_calibration,
    isotonic,
    load_calibration,
    parse_calibration,
    recorded_frames,
    write_calibration,
)
from tests.fixtures.cli import run_hostd

from .test_shadow import BUDGET, ROOT, _config, _frames, _record


def _bound(path: Path) -> Calibrated:
    """``calibrated`` bound to the file at ``path`` (bind_calibration keeps its kind)."""
    bound = bind_calibration(Calibrated(), path)
    assert isinstance(bound, Calibrated)
    return bound


def _brute_isotonic(points: list[tuple[float, float]]) -> list[float]:
    """The fit at each distinct x by the min-max formula (exact, slow)."""
    xs = sorted({x for x, _ in points})
    mean = {}
    for x in xs:
        ys = [y for px, y in points if px == x]
        mean[x] = (sum(ys), len(ys))
    out = []
    for k in range(len(xs)):
        best = min(
            max(
                sum(mean[x][0] for x in xs[i : j + 1]) / sum(mean[x][1] for x in xs[i : j + 1])
                for i in range(k + 1)
            )
            for j in range(k, len(xs))
        )
        out.append(best)
    return out


_points = st.lists(
    st.tuples(st.integers(-20, 20).map(lambda v: v / 4), st.sampled_from([0.0, 1.0])),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_points)
def test_the_isotonic_fit_is_monotone_exact_and_order_free(
    points: list[tuple[float, float]],
) -> None:
    fitted = isotonic(points)
    assert list(fitted.x) == sorted({x for x, _ in points})
    assert all(a <= b for a, b in zip(fitted.p, fitted.p[1:], strict=False))
    assert fitted.p == pytest.approx(_brute_isotonic(points))
    assert isotonic(list(reversed(points))) == fitted  # deterministic, whatever the order


def test_the_isotonic_fit_matches_scikit_learn_where_it_is_installed() -> None:
    sklearn = pytest.importorskip("sklearn.isotonic")
    points = [(0.1, 0), (0.2, 1), (0.3, 0), (0.4, 0), (0.5, 1), (0.5, 0), (0.9, 1), (0.7, 1)]
    ours = isotonic([(x, float(y)) for x, y in points])
    theirs = sklearn.IsotonicRegression(out_of_bounds="clip").fit(
        [x for x, _ in points], [y for _, y in points]
    )
    assert list(ours.p) == pytest.approx(list(theirs.predict(list(ours.x))))
    for x in (0.0, 0.15, 0.45, 0.6, 0.8, 1.2):
        assert ours(x) == pytest.approx(float(theirs.predict([x])[0]))


def _scaled(record: Recorded, provider: str, factor: float) -> Recorded:
    return replace(
        record,
        candidates=tuple(
            replace(c, score=c.score * factor) if c.provider == provider else c
            for c in record.candidates
        ),
    )


def _traffic(used_per_request: list[list[str]]) -> list[Recorded]:
    out = []
    for n, ids in enumerate(used_per_request):
        record = _record(f"r-{n}")
        keys = tuple((p, i, d) for _, p, i, d in record.citations if i in ids)
        out.append(
            replace(
                record,
                feedback=Feedback.of(record.request_id, 1.0, keys, None, None, store_content=False),
            )
        )
    return out


# Known answers: beta's head is always used, alpha's frames rarely.
TRAFFIC = [["beta:0"], ["beta:0", "alpha:0"], ["beta:0"], ["alpha:1"], ["beta:0"], []]


def test_the_calibrated_policy_ranks_by_each_providers_chance_of_use() -> None:
    content = fit_calibration(_traffic(TRAFFIC), min_frames=3)
    assert sorted(content["providers"]) == ["alpha", "beta"]
    beta = content["providers"]["beta"]
    assert (beta["samples"], beta["used"], beta["p"]) == (6, 4, [4 / 6])
    cal = bind_calibration(Calibrated(), Path("/nonexistent"))
    # Nothing to read: the policy says so in what the audit records.
    assert isinstance(cal, Calibrated)
    assert cal.to_wire()["calibrated"]["fallback"] == "round_robin"
    policy = Calibrated(parse_calibration(content, "cal.json"))
    order = rank_with(policy, _frames())
    frames = _frames()
    assert frames[order[0]][1].id == "beta:0"  # 4/6 against alpha's best, 1/3 or less
    composed = compose_for_prompt(frames, BUDGET, strategy=policy)
    params = composed.audit.policy["strategy_params"]["calibrated"]
    assert params["file"] == "cal.json" and params["version"] == content["version"]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["alpha:0", "alpha:1", "alpha:2", "beta:0"]), max_size=3),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["alpha", "beta"]),
    st.floats(0.01, 100.0),
)
def test_scaling_one_providers_scores_leaves_the_calibrated_order_unchanged(
    used: list[list[str]], provider: str, factor: float
) -> None:
    records = _traffic(used)
    fitted = parse_calibration(fit_calibration(records, min_frames=1), "f")
    scaled_records = [_scaled(r, provider, factor) for r in records]
    scaled = parse_calibration(fit_calibration(scaled_records, min_frames=1), "f")
    base = rank_with(Calibrated(fitted), recorded_frames(records[0]))
    moved = rank_with(Calibrated(scaled), recorded_frames(scaled_records[0]))
    assert base == moved


def test_the_file_is_deterministic_versioned_and_private(tmp_path: Path) -> None:
    records = _traffic(TRAFFIC)
    first, second = tmp_path / "a" / "cal.json", tmp_path / "b" / "cal.json"
    write_calibration(first, fit_calibration(records, min_frames=3))
    write_calibration(second, fit_calibration(list(records), min_frames=3))
    assert first.read_bytes() == second.read_bytes()
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o600
    other = fit_calibration(_traffic(TRAFFIC[:-1]), min_frames=3)
    assert other["version"] != load_calibration(first).version
    assert json.loads(first.read_text())["format"] == "hostd-calibration/1"


def test_without_feedback_calibrated_is_round_robin_and_says_so(tmp_path: Path) -> None:
    frames = _frames()
    empty = tmp_path / "cal.json"
    write_calibration(empty, fit_calibration([_record()], min_frames=1))  # no feedback
    for policy in (
        strategy_from_wire("calibrated"),
        bind_calibration(Calibrated(), tmp_path / "missing.json"),
        bind_calibration(Calibrated(), empty),
    ):
        assert rank_with(policy, frames) == rank_with(RoundRobinByRank(), frames)
        audit = compose_for_prompt(frames, BUDGET, strategy=policy).audit.policy
        assert audit["strategy"] == "calibrated"
        assert audit["strategy_params"]["calibrated"]["fallback"] == "round_robin"
    missing = _bound(tmp_path / "missing.json").to_wire()
    assert "missing.json" in missing["calibrated"]["reason"]
    fitted_empty = _bound(empty).to_wire()["calibrated"]
    assert "without feedback" in fitted_empty["reason"] and fitted_empty["file"] == str(empty)


def test_calibrate_then_compose_names_the_file_and_version_in_the_audit(tmp_path: Path) -> None:
    config = _config(tmp_path, sample=0.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def hostd(*args: str) -> subprocess.CompletedProcess[str]:
        return run_hostd("--config", str(config), *args)

    with Client.spawn(config, env=env, cwd=ROOT) as client:
        before = client.compose("x", budget=BUDGET, strategy="calibrated")
        assert before.audit.policy["strategy_params"]["calibrated"]["fallback"] == "round_robin"
        for goal in ("a", "b", "c"):
            result = client.compose(goal, budget=BUDGET)
            beta = [c.label for c in result.citations if c.frame.provider_id == "beta"]
            client.feedback(result, used=beta)
    done = hostd("calibrate", "--min-frames", "1", "--min-samples", "3", "--json")
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    path = tmp_path / "state" / "calibration.json"
    assert json.loads(path.read_text()) == written
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        after = client.compose("x", budget=BUDGET, strategy="calibrated")
    params = after.audit.policy["strategy_params"]["calibrated"]
    assert params["file"] == str(path) and params["version"] == written["version"]
    assert after.citations[0].frame.provider_id == "beta"
    replayed = hostd("shadow", "replay", "--policy", "calibrated", "--json")
    assert replayed.returncode == 0, replayed.stderr
    (report,) = json.loads(replayed.stdout)
    assert report["used"]["requests"] == 3 and report["used"]["kept"] == report["used"]["used"]
    evaluated = hostd(
        "eval", "--from-shadow", "--json", "--policy", "score", "--policy", "calibrated"
    )
    assert evaluated.returncode == 0, evaluated.stderr
    rows = {r["policy"]: r["recall"]["all"] for r in json.loads(evaluated.stdout)["table"]}
    assert rows["calibrated"] == {"hits": 3, "total": 3}
