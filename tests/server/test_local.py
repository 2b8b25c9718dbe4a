"""The in-process session (``Daemon.local``, what ``hostd mcp`` and the CLI's one-shot
commands use): it calls the methods directly, over real provider children.

One dispatcher per request: no JSON-RPC envelope is built and jsonrpcserver never
runs; the errors are the ``RpcError`` a socket client gets; progress notes go
straight to the caller's callback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.config import parse_config
from hostd.errors import RpcError
from hostd.server import Daemon
from hostd.server import _api as api
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path) -> Any:
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in marked_env().items()) + " }"
    lines = ["[host]", f'state_dir = "{tmp_path / "state"}"', ""]
    for pid in ("alpha", "beta"):
        command = python("tests.fixtures.healthy_provider", "--name", pid)
        lines += [
            "[[provider]]",
            f'id = "{pid}"',
            f"command = {json.dumps(command)}",
            "timeout_ms = 60000",
            f'cwd = "{ROOT}"',
            f"env = {env}",
            "",
        ]
    return parse_config("\n".join(lines), source="<test>", base=tmp_path)


async def test_an_in_process_call_crosses_one_dispatcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_wire(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an in-process call went through the wire's dispatcher")

    monkeypatch.setattr(api.DISPATCHER, "dispatch", no_wire)
    notes: list[dict[str, Any]] = []
    daemon = Daemon(_config(tmp_path))
    with anyio.fail_after(120):  # a hang guard
        async with daemon.local() as session:
            result = await session.call(
                "context/compose", {"goal": "in process", "budget": 300}, on_progress=notes.append
            )
            listed = await session.call("providers/list")
            with pytest.raises(RpcError) as bad:
                await session.call("context/compose", {"goal": "x", "budget": "300"})
            with pytest.raises(RpcError) as unknown:
                await session.call("no/such", {})
            with pytest.raises(RpcError) as nobody:
                await session.call("context/compose", {"goal": "x", "providers": ["gamma"]})
    assert sorted(p["provider_id"] for p in result["providers"]) == ["alpha", "beta"]
    assert result["citations"] and (result["degraded"], result["degraded_reasons"]) == (False, [])
    assert [r["id"] for r in listed["providers"]] == ["alpha", "beta"]
    # The wire's error contract: code, reason and the field at fault.
    assert (bad.value.rpc_code, bad.value.remote_reason) == (-32602, "invalid_params")
    assert bad.value.rpc_data["field"] == "budget"
    assert (unknown.value.rpc_code, unknown.value.remote_reason) == (-32601, "method_not_found")
    assert nobody.value.remote_reason == "unknown_provider"
    # One note per finished leg, straight to the callback (no token, no envelope).
    legs = sorted((n["provider"], n["done"], n["total"]) for n in notes if "done" in n)
    assert [(p, t) for p, _, t in legs] == [("alpha", 2), ("beta", 2)]
    assert sorted(d for _, d, _ in legs) == [1, 2]
    assert daemon.counters["requests_total"] == 5
    assert daemon.counters["requests_failed"] == 3
