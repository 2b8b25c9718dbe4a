"""One deadline per leg, through the daemon: a request's ``timeout_ms`` bounds the
leg's query *and* its ``context/verify`` (the daemon once built its own verify
stage, so a hung verify cost its own 2 s default whatever the request asked).

The daemon runs in-process (``Daemon.local``) over real provider children on real
pipes: the file provider of ``test_verify_e2e`` in its ``verify_hang`` mode answers
queries and never answers ``context/verify``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.config import parse_config
from hostd.server import Daemon
from tests.engine.test_verify_e2e import provider_command
from tests.fixtures.procs import ROOT, marked_env

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, root: Path, mode: str, timeout_ms: int) -> Any:
    env = marked_env()
    text = "\n".join(
        [
            "[host]",
            f'state_dir = "{tmp_path / "state"}"',
            'start_providers = "boot"',
            "",
            "[[provider]]",
            'id = "p"',
            f"command = {json.dumps(provider_command(root, mode))}",
            f"timeout_ms = {timeout_ms}",
            f'cwd = "{ROOT}"',
            f"trusted_roots = [{json.dumps(str(root))}]",
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
            "",
        ]
    )
    return parse_config(text, source="<test>", base=tmp_path)


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    for name in ("a.py", "b.py"):
        (root / name).write_text(f"def {name[0]}():\n    return {name!r}\n")
    return root


async def test_a_hung_verify_ends_at_the_request_deadline(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    daemon = Daemon(_config(tmp_path, root, "verify_hang", timeout_ms=60_000))
    params = {"goal": "what changed", "budget": 2000, "session": "s1"}
    with anyio.fail_after(60):  # a hang guard, not a timing assertion
        async with daemon.local() as session:
            first = await session.call("context/compose", params)
            # The request's deadline bounds the fresh query too, which must answer in
            # it: 3 s is generous for that on a busy machine (and the verify never
            # answers, so it is what the test waits out).
            second = await session.call("context/compose", {**params, "timeout_ms": 3000})
    assert first["providers"][0]["status"] == "ok"
    # The held frames were asked about; the provider never answered within the
    # request's 3 s, so each is dropped as ``verify_unknown`` and the pass says why.
    errors = second["verification"]["verify_errors"]
    assert errors == {"p": {"error": "timeout", "limit_ms": 3000}}
    # Whole the first time; the second is degraded, and says by whom and why.
    assert (first["degraded"], first["degraded_reasons"]) == (False, [])
    assert second["degraded_reasons"] == [
        {"reason": "verify_skipped", "provider": "p", "detail": "timeout"}
    ]
    # No verdict vouched for the held copies: the fresh copies stand, re-read from the files.
    states = {e["frame"]["frame_id"]: e["verification"] for e in second["audit"]["entries"]}
    assert states == {"a.py": {"state": "source_verified"}, "b.py": {"state": "source_verified"}}


def test_untrusted_is_read_from_config_per_host_and_provider(tmp_path: Path) -> None:
    from hostd.errors import ConfigError

    base = '[[provider]]\nid = "p"\ncommand = ["x"]\n'
    cfg = parse_config('[host]\nuntrusted = "include"\n' + base, base=tmp_path)
    assert cfg.host.untrusted == "include" and cfg.provider_specs()[0].untrusted is None
    cfg = parse_config(base + 'untrusted = "include"\n', base=tmp_path)
    assert cfg.host.untrusted == "exclude" and cfg.provider_specs()[0].untrusted == "include"
    with pytest.raises(ConfigError):
        parse_config('[host]\nuntrusted = "sometimes"\n', base=tmp_path)
