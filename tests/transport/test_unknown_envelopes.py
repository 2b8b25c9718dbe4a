"""A CGP peer from a later ``1.x``: an envelope type hostd does not implement is ignored.

SPEC §2.1: a receiver must not reject an envelope solely because its ``type`` is one it
does not implement; it ignores an unrecognised notification. hostd sends the requests,
so whatever such an envelope carries (an ``id`` included) answers nothing it asked. A
line that is no envelope, and a known type of the wrong shape, still break the wire.
The codec is fed recorded lines; then real children (``tests.fixtures.cgp_newer_peer``)
send such envelopes before and after their handshake and inside a query, over the
transport's connection and through a daemon, whose legs stay ``ok`` with no restart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from structlog.testing import capture_logs

from hostd.client import spawn
from hostd.errors import ProviderCrashed
from hostd.protocol import ContextQuery
from hostd.transport import ProviderConnection
from hostd.transport.bindings import UNKEYED, CgpCodec, Fault, Reply
from tests.fixtures.cgp_newer_peer import INVALIDATED, MARKER, MODES, PROGRESS
from tests.fixtures.procs import MARK, MARK_VAR, ROOT, marked_env, python

pytestmark = pytest.mark.anyio

ACK = {
    "type": "handshake_ack",
    "protocol_version": "contextgraph/1.0",
    "provider": {"name": "newer", "version": "1"},
    "capabilities": {"correlation": True},
}
FRAMES = {"type": "frames", "result": {"frames": []}}
QUERY = ContextQuery(goal="g", max_frames=5, max_tokens=400)


def _line(msg: Any) -> bytes:
    return orjson.dumps(msg)


#: Envelopes of types outside the vocabulary, as a newer peer may write them.
UNKNOWN = [
    INVALIDATED,
    PROGRESS,
    {**INVALIDATED, "id": "q1"},  # the id of the query in flight: still no reply
    {**INVALIDATED, "id": 7, "result": {"frames": []}, "error": None},
    {"type": "Free text of the peer's, SECRET"},
    {"type": ""},
    {"type": "frames_v2", "result": "anything"},
]


# -- the codec, on recorded lines ----------------------------------------------------------


@pytest.mark.parametrize("correlation", [True, False])
@pytest.mark.parametrize("envelope", UNKNOWN)
def test_an_envelope_of_a_type_hostd_does_not_implement_is_ignored(
    envelope: dict[str, Any], correlation: bool
) -> None:
    codec = CgpCodec("newer")
    assert codec.read(_line(envelope)) is None  # before the handshake_ack
    ack = codec.read(_line({**ACK, "capabilities": {"correlation": correlation}}))
    assert isinstance(ack, Reply)
    codec.handshake_ack(ack.payload)
    request = codec.query(QUERY)
    assert codec.read(_line(envelope)) is None  # between the query and its frames
    frames = codec.read(_line({**FRAMES, "id": "q1"}))
    assert isinstance(frames, Reply) and frames.label == "frames"
    assert frames.key == request.key == ("q1" if correlation else UNKEYED)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"frames": []}', "not an envelope: <root>"),  # no type
        (b'{"type": 5, "frames": []}', "not an envelope: <root>"),
        (b'{"type": null}', "not an envelope: <root>"),
        (b'["invalidated"]', "not an envelope: <root>"),
        (b'"invalidated"', "not an envelope: <root>"),
        (b'{"type": "invalidated"', "not JSON"),
        # A frames envelope that cannot name its request (its result is read per call).
        (b'{"type": "frames", "id": ["SECRET"], "result": {"frames": []}}', "not an envelope: id"),
        (b'{"type": "frames", "id": "q1"}', "not an envelope: result is missing"),
        (b'{"type": "handshake_ack", "protocol_version": "contextgraph/1.0"}', "handshake_ack"),
        (b'{"type": "error"}', "not an envelope: error.message"),
    ],
)
def test_a_line_that_is_no_envelope_or_a_known_type_misshapen_still_breaks_the_wire(
    line: bytes, why: str
) -> None:
    fault = CgpCodec("newer").read(line)
    assert isinstance(fault, Fault), fault
    assert why in (fault.detail or ""), fault.detail
    assert "SECRET" not in fault.error.message and "invalidated" not in fault.error.message


def test_a_host_envelope_sent_by_a_provider_is_still_a_fault() -> None:
    fault = CgpCodec("newer").read(_line({"type": "query", "query": QUERY.to_wire()}))
    assert isinstance(fault, Fault) and "may not send 'query'" in fault.error.message


def test_an_ignored_type_is_logged_once_per_type_and_free_text_never_quoted() -> None:
    codec = CgpCodec("newer")
    with capture_logs() as logs:
        for envelope in [INVALIDATED, INVALIDATED, PROGRESS, {**INVALIDATED, "id": "x"}]:
            assert codec.read(_line(envelope)) is None
        for text in ("Free text SECRET", "Other free text, SECRET too"):
            assert codec.read(_line({"type": text})) is None
    noted = [e for e in logs if e["event"] == "provider.envelope.ignored"]
    assert [(e["log_level"], e["provider"]) for e in noted] == [("info", "newer")] * 3
    assert [e.get("type") for e in noted] == ["invalidated", "progress", None]
    assert noted[2]["type_chars"] == len("Free text SECRET")
    assert MARKER not in json.dumps(logs)


def test_a_peer_inventing_types_costs_a_bounded_log() -> None:
    codec = CgpCodec("newer")
    with capture_logs() as logs:
        for i in range(200):
            assert codec.read(_line({"type": f"made_up_{i}"})) is None
    assert len([e for e in logs if e["event"] == "provider.envelope.ignored"]) == 16
    # and another codec (another provider) notes its own
    with capture_logs() as logs:
        assert CgpCodec("other").read(_line(INVALIDATED)) is None
    assert [e["provider"] for e in logs] == ["other"]


# -- real children, over the transport's connection ----------------------------------------

#: (mode, whether the provider declares correlation)
SERVING = [m for m in MODES if m != "exit_before_ack"]
CASES = [(mode, False) for mode in SERVING] + [("with_id", True), ("mid_query", True)]


@pytest.mark.parametrize(("mode", "correlation"), CASES)
async def test_a_newer_peer_s_unknown_envelopes_leave_the_connection_serving(
    mode: str, correlation: bool
) -> None:
    flag = ["--correlation"] if correlation else []
    with anyio.fail_after(60):  # a hang guard: each step is one exchange
        async with anyio.create_task_group() as tg:
            conn = await ProviderConnection.open(
                "newer",
                python("tests.fixtures.cgp_newer_peer", mode, *flag),
                binding="cgp",
                task_group=tg,
                env=marked_env(),
                cwd=ROOT,
                handshake_timeout=30,
            )
            try:
                assert conn.ack is not None and conn.ack.provider.name == "newer"
                for _ in range(3):
                    result = await conn.query(QUERY)
                    assert [f["id"] for f in result.frames] == ["adv:0"]
                assert conn.alive and conn.client.failure is None
            finally:
                code = await conn.aclose()
    assert code == 0  # it read its shutdown: the wire stayed in step to the end


async def test_a_handshake_with_only_unknown_envelopes_ends_as_the_stream_does() -> None:
    # The envelopes before the (missing) ack are ignored: what ends the handshake is the
    # provider's exit, as for any provider that exits before its ack, not a fault.
    with anyio.fail_after(60), capture_logs() as logs:  # a hang guard
        async with anyio.create_task_group() as tg:
            with pytest.raises(ProviderCrashed) as caught:
                await ProviderConnection.open(
                    "newer",
                    python("tests.fixtures.cgp_newer_peer", "exit_before_ack"),
                    binding="cgp",
                    task_group=tg,
                    env=marked_env(),
                    cwd=ROOT,
                    handshake_timeout=30,
                )
    assert "garbage" not in caught.value.message and MARKER not in caught.value.message
    noted = [e.get("type") for e in logs if e["event"] == "provider.envelope.ignored"]
    assert noted == ["progress", "invalidated"]


# -- real children, through a daemon -------------------------------------------------------


#: The daemon's provider ids, one per case.
PIDS = [f"{m}-{'keyed' if c else 'lockstep'}".replace("_", "-") for m, c in CASES]


def _config(tmp_path: Path) -> Path:
    text = (
        f'[host]\nstate_dir = "{tmp_path / "state"}"\nsocket = "{tmp_path / "h.sock"}"\n'
        f'\n[log]\nfile = "{tmp_path / "hostd.log"}"\nlevel = "info"\n'
    )
    for pid, (mode, correlation) in zip(PIDS, CASES, strict=True):
        command = [sys.executable, "-m", "tests.fixtures.cgp_newer_peer", mode]
        command += ["--correlation"] if correlation else []
        text += (
            f'\n[[provider]]\nid = "{pid}"\nbinding = "cgp"\n'
            f"command = {json.dumps(command)}\ntimeout_ms = 30000\n"
            f'cwd = "{ROOT}"\nenv = {{ {MARK_VAR} = "{MARK}" }}\n'
        )
    path = tmp_path / "hostd.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_daemon_serves_a_newer_peer_s_frames_without_a_restart(tmp_path: Path) -> None:
    with anyio.fail_after(120):  # a hang guard
        async with spawn(_config(tmp_path), cwd=ROOT) as client:
            results = [await client.call("context/compose", {"goal": "g", "budget": 400})]
            results += [await client.call("context/compose", {"goal": "g", "budget": 400})]
            results += [await client.call("context/compose", {"goal": "g", "budget": 400})]
            listed = await client.providers()
    for result in results:
        legs = {p["provider_id"]: (p["status"], p["frames_accepted"]) for p in result["providers"]}
        assert legs == dict.fromkeys(PIDS, ("ok", 1)), legs
    health = {p["id"]: (p["health"]["starts"], p["health"]["restarts"]) for p in listed}
    assert health == dict.fromkeys(PIDS, (1, 0)), health  # one start each, no restart
    events = [json.loads(line) for line in (tmp_path / "hostd.log").read_text().splitlines()]
    noted = [
        (e["provider"], e["type"]) for e in events if e["event"] == "provider.envelope.ignored"
    ]
    ignored = set(noted)
    assert len(noted) == len(ignored)  # once per provider per type
    assert ("before-ack-lockstep", "progress") in ignored
    assert ("after-ack-lockstep", "invalidated") in ignored
    assert ("with-id-keyed", "invalidated") in ignored
    assert not [e for e in events if e["event"] == "provider.leg.failed"]
    assert MARKER not in json.dumps(events) + json.dumps(results)
