"""No frame carries a credential of the host's config into a prompt, whoever served it:
a ``files`` provider over a directory that holds another provider's secret (its
``env``, a remote one's ``token_file``) is the case (real provider children)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hostd.config import parse_config
from hostd.engine import LegReply, judge_leg
from hostd.protocol import canonical_token_cost, sha256_digest
from hostd.server import Daemon
from tests.engine.test_fanout_plan import _plan, raw
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio

SECRET = "tok-9f8e7d6c5b4a"


def _holding(pid: str, i: int, text: str) -> dict[str, object]:
    return raw(
        pid,
        i,
        content=text,
        token_cost=canonical_token_cost(text),
        content_digest=sha256_digest(text.encode()),
    )


def test_a_frame_holding_a_credential_is_dropped_and_the_audit_says_where() -> None:
    leg = _plan("a").legs[0]
    frames = [
        raw("a", 0),
        _holding("a", 1, f"deploy with {SECRET} please"),
        raw("a", 2, citation_label=f"see {SECRET}"),
    ]
    judged = judge_leg(leg, LegReply("a", leg.query, frames=frames), re.compile(SECRET))
    assert judged.audit is not None
    assert [f.id for f in judged.audit.accepted] == ["a:0"]
    assert judged.audit.accepted_cost == judged.audit.accepted[0].token_cost
    dropped = {fid.frame_id: (why, detail) for fid, why, detail in judged.audit.excluded}
    assert dropped == {
        "a:1": ("credential", {"field": "content"}),
        "a:2": ("credential", {"field": "citation_label"}),
    }
    assert SECRET not in json.dumps([d for _, _, d in judged.audit.excluded])
    assert judged.report.frames_accepted == 1
    # Without credentials, the same reply keeps all three.
    plain = judge_leg(leg, LegReply("a", leg.query, frames=frames))
    assert plain.audit is not None and len(plain.audit.accepted) == 3


def _inline(table: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


async def test_a_composition_never_quotes_another_providers_secret(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text(f"# Deploy\n\nThe deploy token is {SECRET} for now.\n")
    (docs / "steps.md").write_text("# Deploy steps\n\nRun the deploy script, then check.\n")
    env = {**marked_env(), "API_TOKEN": SECRET}  # a secret by its name: the host scrubs it
    files = ["python", "-m", "providers.files", "--root", str(docs), "--no-cache"]
    text = (
        f'[host]\nstate_dir = "{tmp_path / "state"}"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\ncwd = "{ROOT}"\n'
        f'trusted_roots = ["{docs}"]\n'
        f'[[provider]]\nid = "alpha"\n'
        f"command = {json.dumps(python('tests.fixtures.healthy_provider', '--name', 'alpha'))}\n"
        f'cwd = "{ROOT}"\nenv = {_inline(env)}\n'
    )
    cfg = parse_config(text, source="<test>", base=tmp_path)
    async with Daemon(cfg).local() as session:
        result = await session.call("context/compose", {"goal": "deploy token", "budget": 4000})
    assert SECRET not in json.dumps(result)
    dropped = [e for e in result["audit"]["entries"] if e.get("reason") == "credential"]
    assert [e["frame"]["provider_id"] for e in dropped] == ["files"]
    assert "Run the deploy script" in result["prompt"]  # the rest of it still served
