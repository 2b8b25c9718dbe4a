"""A daemon runs the config it was started from, and says so: ``host/status`` names
the file and its digest at start, a ``--connect`` command says once when the file has
changed since, and an unknown provider id is answered with the configured ids (and the
close one). Real ``hostd serve`` and ``hostd`` CLI children; every wait is an event (a
log line, a process exit), deadlines are hang guards only."""

from __future__ import annotations

import hashlib
from typing import Any

import anyio
import pytest

from hostd.client import RpcError, connect
from tests.server.conftest import ROOT, DaemonProc, daemon_command, provider_table

pytestmark = pytest.mark.anyio

HANG_GUARD_S = 120
STALE = "was started from an older"


async def _cli(daemon: DaemonProc, *args: str) -> tuple[int, str, str]:
    """``hostd --config <the daemon's file> ARGS --connect``: status, stdout, stderr."""
    with anyio.fail_after(HANG_GUARD_S):
        done = await anyio.run_process(
            [*daemon_command(daemon.config, *args), "--connect", "--wait", "60"],
            cwd=ROOT,
            check=False,
        )
    assert done.returncode is not None
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _human(stderr: str) -> list[str]:
    """The CLI's own lines (the JSON log lines are the log's)."""
    return [line for line in stderr.splitlines() if not line.startswith("{")]


def _add_provider(daemon: DaemonProc, pid: str) -> None:
    with daemon.config.open("a", encoding="utf-8") as fh:
        fh.write(provider_table(pid, daemon.marker))


async def _status(daemon: DaemonProc) -> dict[str, Any]:
    async with connect(daemon.socket) as client:
        status: dict[str, Any] = await client.status()
    return status


async def test_host_status_names_the_file_it_was_started_from_as_it_was(start_daemon) -> None:
    daemon = await start_daemon(providers={"alpha": {}})
    started = daemon.config.read_bytes()
    config = (await _status(daemon))["config"]
    assert config["file"] == str(daemon.config.resolve())
    assert config["digest"] == "sha256:" + hashlib.sha256(started).hexdigest()
    assert config["loaded_at"].endswith("Z") and config["mtime"].endswith("Z")
    # Read once, at start: an edit since does not change what it says it runs.
    _add_provider(daemon, "facts")
    assert (await _status(daemon))["config"] == config
    assert await daemon.stop() == 0


async def test_an_edited_config_is_said_once_by_each_connected_command(start_daemon) -> None:
    daemon = await start_daemon(providers={"alpha": {}, "beta": {}})
    _add_provider(daemon, "facts")  # the user's edit, after the daemon started
    line = (
        f"hostd: the daemon at {daemon.socket} was started from an older {daemon.config} "
        "(changed since "
    )

    code, out, err = await _cli(daemon, "providers")
    assert code == 0, err
    assert [row.split("\t")[0] for row in out.splitlines()] == ["alpha", "beta"]
    said = [x for x in _human(err) if STALE in x]
    assert len(said) == 1 and said[0].startswith(line), err
    assert said[0].endswith(f"): `hostd reload --config {daemon.config}` applies the edits")

    # The provider added is unknown to it: the refusal, and the line that says why.
    code, out, err = await _cli(daemon, "compose", "x", "--providers", "facts")
    assert code == 1 and out == ""
    human = _human(err)
    assert sum(STALE in x for x in human) == 1, err
    assert any(
        x.startswith(
            "hostd: invalid params: providers: unknown provider 'facts' (configured: alpha, "
            "beta) (code -32602, reason unknown_provider, request "
        )
        for x in human
    ), err
    # And a composition over every provider, which silently leaves it out, says it too.
    code, out, err = await _cli(daemon, "compose", "x")
    assert code == 0, err
    assert "<frame " in out and sum(STALE in x for x in _human(err)) == 1, err
    assert await daemon.stop() == 0


async def test_an_unchanged_config_says_nothing(start_daemon) -> None:
    daemon = await start_daemon(providers={"alpha": {}})
    for args in (("providers",), ("compose", "x")):
        code, _, err = await _cli(daemon, *args)
        assert code == 0, err
        assert STALE not in err
    assert await daemon.stop() == 0


async def test_a_misspelt_provider_is_told_with_the_configured_ids_and_the_close_one(
    start_daemon,
) -> None:
    daemon = await start_daemon(providers={"facts": {}, "notes": {}})
    code, _, err = await _cli(daemon, "compose", "x", "--providers", "fact")
    assert code == 1
    (line,) = [x for x in _human(err) if "unknown provider" in x]
    head, _, tail = line.partition(" (code -32602, reason unknown_provider, request ")
    assert head == (
        "hostd: invalid params: providers: unknown provider 'fact' (configured: facts, notes); "
        "did you mean 'facts'?"
    ), err
    # The id the error names is the one of the daemon's log line saying why, with the
    # field and the provider the error names.
    request_id = tail.removesuffix(")")
    failed = await daemon.logged("request.failed", request_id=request_id)
    assert (failed["level"], failed["method"], failed["reason"]) == (
        "info",
        "context/compose",
        "unknown_provider",
    )
    assert (failed["field"], failed["provider"]) == ("providers", "fact")
    async with connect(daemon.socket) as client:
        # The reason and the code are as before; a request's param is named as every
        # refused param is (its field first, and in data.field).
        providers = {"provider": "fact", "field": "providers"}
        asked: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
            (
                "context/compose",
                {"goal": "x", "providers": ["fact"]},
                providers,
                "invalid params: providers: ",
            ),
            (
                "context/query",
                {"goal": "x", "providers": ["fact"]},
                providers,
                "invalid params: providers: ",
            ),
            (
                "context/compose",
                {"goal": "x", "caps": {"fact": 0.5}},
                {"provider": "fact", "field": "caps"},
                "invalid params: caps: ",
            ),
            (
                "providers/restart",
                {"provider": "fact"},
                # ``providers``: what its refusal said first, kept for the clients that read it.
                {"provider": "fact", "field": "provider", "providers": ["fact"]},
                "invalid params: provider: ",
            ),
            (
                "consent/grant",
                {"provider": "fact", "scope": "s"},
                {"provider": "fact", "field": "provider"},
                "invalid params: provider: ",
            ),
        ]
        for method, params, data, prefix in asked:
            with pytest.raises(RpcError) as refused:
                await client.call(method, params)
            error = refused.value
            assert error.rpc_code == -32602, method
            assert error.request_id, method  # the id of its log lines
            assert error.rpc_data == {
                "reason": "unknown_provider",
                "cgp_code": "bad_request",
                "request_id": error.request_id,
                **data,
            }, method
            logged = await daemon.logged("request.failed", request_id=error.request_id)
            assert logged["method"] == method
            assert error.message == (
                f"{prefix}unknown provider 'fact' (configured: facts, notes); did you mean 'facts'?"
            ), method
        # Nothing close: the configured ids alone.
        with pytest.raises(RpcError) as refused:
            await client.call("context/compose", {"goal": "x", "providers": ["zzz"]})
        assert refused.value.message == (
            "invalid params: providers: unknown provider 'zzz' (configured: facts, notes)"
        )
        assert refused.value.remote_reason == "unknown_provider"
    assert await daemon.stop() == 0
