"""Damaged state files degrade, never crash: a ``calibration.json`` of any shape leaves
``calibrated`` ranking as ``round_robin`` with the reason in its audit, and a damaged
``shadow.db`` is one line naming the file and what to do (the CLI) or a typed
``shadow_unavailable`` refusal (the daemon), never a traceback or ``overloaded``."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from hostd.client import Client, RpcError
from hostd.compose import Calibrated, compose_for_prompt
from hostd.errors import ShadowUnavailable
from hostd.quality import (
    Composition,
    ShadowRecorder,
    ShadowStore,
    bind_calibration,
    calibration_path,
)
from hostd.quality._calibrate import FORMAT
from tests.fixtures.cli import run_hostd

from .test_shadow import BUDGET, ROOT, _config, _frames, _record

# -- calibration.json of any shape -----------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_MAP = st.fixed_dictionaries(
    {"x": st.lists(st.floats(-5, 5), max_size=4), "p": st.lists(st.floats(-0.5, 1.5), max_size=4)}
)
#: Files close to the real shape, where a reader is most likely to trust a member.
_NEAR = st.fixed_dictionaries(
    {"format": st.just(FORMAT)},
    optional={
        "version": _JSON | st.text(max_size=8),
        "providers": _JSON | st.dictionaries(st.sampled_from(["alpha", "beta"]), _MAP | _JSON),
        "pooled": _JSON | _MAP,
    },
)


def _bound(path: Path) -> Calibrated:
    """``calibrated`` bound to the file at ``path`` (bind_calibration keeps its kind)."""
    bound = bind_calibration(Calibrated(), path)
    assert isinstance(bound, Calibrated)
    return bound


def _valid_file() -> bytes:
    return orjson.dumps(
        {
            "format": FORMAT,
            "version": "v1",
            "providers": {"beta": {"x": [0.0, 1.0], "p": [0.1, 0.9]}},
            "pooled": {"x": [-3.0, -1.0], "p": [0.2, 0.5]},
        }
    )


_FILES = (
    _JSON.map(orjson.dumps)
    | _NEAR.map(orjson.dumps)
    | st.integers(0, len(_valid_file()) - 1).map(lambda n: _valid_file()[:n])  # truncated
    | st.binary(max_size=64)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_FILES)
def test_a_calibration_of_any_shape_falls_back_to_round_robin_saying_why(content: bytes) -> None:
    frames = _frames()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "calibration.json"
        path.write_bytes(content)
        strategy = bind_calibration(Calibrated(), path)
        composed = compose_for_prompt(frames, BUDGET, strategy=strategy)
    params = composed.audit.policy["strategy_params"]["calibrated"]
    if "fallback" in params:
        assert params["fallback"] == "round_robin"
        # The reason names the file (or, read but empty, says so) and quotes none of it.
        assert str(path) in params["reason"] or "without feedback" in params["reason"]
        assert "\n" not in params["reason"]
    else:
        assert params["file"] == str(path) and composed.citations


@pytest.mark.parametrize(
    ("providers", "problem"),
    [([], "providers: Input should be a valid dictionary"), ("alpha", "providers: Input")],
)
def test_the_two_shapes_that_failed_compositions_fall_back_with_the_reason(
    tmp_path: Path, providers: Any, problem: str
) -> None:
    path = tmp_path / "calibration.json"
    path.write_bytes(orjson.dumps({"format": FORMAT, "version": "v", "providers": providers}))
    params = _bound(path).to_wire()["calibrated"]
    assert params["fallback"] == "round_robin"
    assert params["reason"].startswith(f"{path}: not a readable calibration: {problem}")


def test_a_daemon_with_a_damaged_calibration_composes_by_round_robin(tmp_path: Path) -> None:
    config = _config(tmp_path, sample=0.0)
    path = calibration_path(tmp_path / "state")
    path.parent.mkdir(parents=True)
    path.write_bytes(orjson.dumps({"format": FORMAT, "version": "v", "providers": []}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        result = client.compose("x", budget=BUDGET, strategy="calibrated")
    params = result.audit.policy["strategy_params"]["calibrated"]
    assert params["fallback"] == "round_robin" and str(path) in params["reason"]
    assert len(result.citations) == 4


# -- a damaged shadow.db -----------------------------------------------------------------------


def _garbage(db: Path) -> None:
    db.write_bytes(b"this is not a database, it only sits where one should be\n" * 100)


def _truncated(db: Path) -> None:
    store = ShadowStore(db)
    store.write_many([_record(f"r-{i}") for i in range(40)])
    store.close()  # checkpointed: every page is in the main file
    size = db.stat().st_size
    assert size > 3 * 4096
    with db.open("r+b") as fh:
        fh.truncate(2 * 4096)


def _bad_row(db: Path) -> None:
    store = ShadowStore(db)
    store.write_many([_record("r-1"), _record("r-2")])
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE requests SET body = '[1, 2' WHERE request_id = 'r-2'")
    conn.close()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbage": _garbage,
    "truncated": _truncated,
    "bad_row": _bad_row,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_store_is_one_line_naming_the_file_for_every_command(
    tmp_path: Path, damage: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    db = state / "shadow.db"
    DAMAGE[damage](db)
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nstate_dir = "{state}"\n[shadow]\nenabled = true\n')
    for command in (
        ["shadow", "replay", "--policy", "round_robin"],
        ["eval", "--from-shadow"],
        ["calibrate"],
    ):
        done = run_hostd("--config", str(config), *command)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1, (command, done.stderr)
        assert lines[0].startswith(f"hostd: {db}: ") and "Traceback" not in done.stderr
        assert "move the file aside" in lines[0] and lines[0].endswith("[shadow_unavailable]")
        assert done.stdout == ""
    assert not calibration_path(state).exists()  # nothing was fitted on a damaged store


def test_feedback_on_a_damaged_store_is_refused_shadow_unavailable_not_overloaded(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, sample=0.0)
    db = tmp_path / "state" / "shadow.db"
    db.parent.mkdir(parents=True)
    _garbage(db)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Client.spawn(config, env=env, cwd=ROOT) as client:
        result = client.compose("x", budget=BUDGET)
        with pytest.raises(RpcError) as refused:
            client.feedback(result, used=[result.citations[0].label])
        # Older requests are looked up in the store: the same refusal, not unknown_request.
        with pytest.raises(RpcError) as older:
            client.feedback("gone-1", used=[])
        kept = client.call("context/compose", {"goal": "y", "budget": BUDGET, "record": True})
    for err in (refused.value, older.value):
        assert err.remote_reason == "shadow_unavailable"
        assert err.rpc_code == -32005
        assert isinstance(err.rpc_data, dict) and err.rpc_data["file"] == str(db)
        assert "move the file aside" in err.message
    assert kept["recorded"] is False and len(kept["citations"]) == 4
    assert json.loads(json.dumps(kept["audit"]))  # the composition itself was served whole


def test_a_damaged_store_costs_one_warning_and_a_new_file_is_used_at_once(
    tmp_path: Path,
) -> None:
    frames = _frames()
    composed = compose_for_prompt(frames, BUDGET, strategy="score")
    db = tmp_path / "shadow.db"
    _garbage(db)
    recorder = ShadowRecorder(ShadowStore(db), sample=1.0)

    async def main() -> list[bool]:
        drawn = [
            await recorder.record(Composition(f"r-{i}", "goal", BUDGET, None, frames, composed))
            for i in range(5)
        ]
        with pytest.raises(ShadowUnavailable):
            await recorder.feedback("r-4", [composed.citations[0].label])
        db.rename(tmp_path / "shadow.db.damaged")  # what the message says to do
        drawn.append(
            await recorder.record(Composition("r-5", "goal", BUDGET, None, frames, composed))
        )
        await recorder.aclose()
        return drawn

    with capture_logs() as logs:
        drawn = anyio.run(main)
    assert drawn == [False] * 5 + [True]
    failed = [e for e in logs if e["event"] == "shadow.record_failed"]
    assert len(failed) == 1 and failed[0]["path"] == str(db)
    assert [r.request_id for r in ShadowStore(db).load()] == ["r-5"]


def test_a_provider_key_the_file_chose_is_not_quoted_in_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    key = "\nsecret-provider-key"
    path.write_bytes(orjson.dumps({"format": FORMAT, "version": "v", "providers": {key: []}}))
    reason = _bound(path).to_wire()["calibrated"]["reason"]
    assert "secret-provider-key" not in reason and "\n" not in reason
    assert reason.startswith(f"{path}: not a readable calibration: providers.<key>: ")
