"""Every member a tool's structured result carries is declared by its ``outputSchema``.

A client that generates its types from ``outputSchema`` (zod, json-schema-to-ts) sees
only what it declares: a member left out (a citation's ``range``) is a member such a
client cannot read. Real results of every tool, from a real ``hostd mcp`` child driven
by the MCP SDK client, are validated against their schema closed at every level that
declares its members, so a member added to a result and not to its schema fails here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from tests.server.conftest import ROOT
from tests.server.test_rerank import reranker_table

from ._harness import hostd_mcp, write_config

pytestmark = pytest.mark.anyio


def closed(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that declares its
    ``properties`` and says nothing of others (an open map, such as ``excluded``, keeps
    its own ``additionalProperties``)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in schema:
        # The member names under "properties" are names, not schemas: closed one by one.
        out["properties"] = {k: closed(v) for k, v in schema["properties"].items()}
        out.setdefault("additionalProperties", False)
    return out


def test_closing_a_schema_refuses_a_member_it_does_not_declare() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}
    Draft202012Validator(closed(schema)).validate({"a": {}})
    with pytest.raises(Exception, match="'b' was unexpected"):
        Draft202012Validator(closed(schema)).validate({"a": {"b": 1}})


def _new_member_fails(tool: types.Tool, structured: dict[str, Any], *path: str | int) -> None:
    """The guard sees a member added inside the object at ``path`` of a real result: it
    is closed there (its members declared, none left open)."""
    assert tool.output_schema is not None
    grown = copy.deepcopy(structured)
    inside: Any = grown
    for step in path:
        inside = inside[step]
    assert isinstance(inside, dict), path
    inside["a_new_member"] = 1
    errors = Draft202012Validator(closed(tool.output_schema)).iter_errors(grown)
    said = [(list(e.absolute_path), e.message) for e in errors]
    assert said == [
        (list(path), "Additional properties are not allowed ('a_new_member' was unexpected)")
    ], (tool.name, path, said)


def _fits(tool: types.Tool, result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, result.content
    structured = result.structured_content
    assert structured is not None and tool.output_schema is not None
    Draft202012Validator.check_schema(tool.output_schema)  # the SDK validates against it
    # Every member left out at once, each where it is.
    errors = Draft202012Validator(closed(tool.output_schema)).iter_errors(structured)
    said = sorted(f"{tool.name} {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
    assert not said, "\n".join(said)
    return structured


async def test_every_member_of_every_tools_result_is_in_its_output_schema(
    workdir: Path, marker: str, corpus: Path
) -> None:
    # files cites file ranges (range, digest); noisy crashes at its query, with a stderr
    # (error.stderr_tail); adv's frames are all invalid (violations); memory stores.
    noisy = ["python", "-m", "tests.fixtures.adversarial_provider", "noisy_crash", marker]
    untitled = ["python", "-m", "tests.fixtures.adversarial_provider", "untitled", marker]
    extra = (
        f'[[provider]]\nid = "files"\n'
        f'command = ["python", "-m", "providers.files", "--root", "{corpus}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\ntrusted_roots = ["{corpus}"]\n'
        f'[[provider]]\nid = "noisy"\ncommand = {json.dumps(noisy)}\ncwd = "{ROOT}"\n'
        f'[[provider]]\nid = "adv"\ncommand = {json.dumps(untitled)}\ncwd = "{ROOT}"\n'
        # A remote provider no server answers (a refused connection): its row's remote.
        '[[provider]]\nid = "far"\nurl = "http://127.0.0.1:9/"\n'
        f'[[provider]]\nid = "memory"\n'
        f'command = ["python", "-m", "providers.memory", "--db", "{workdir / "m.db"}"]\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
        "\n[shadow]\nenabled = true\nsample = 0.0\n" + reranker_table("reverse", marker)
    )
    config = write_config(workdir, marker, {"alpha": {}}, extra=extra)
    fact = {"kind": "fact", "title": "Deploys", "content": "Deploys happen on Tuesdays."}
    with anyio.fail_after(180):
        async with Client(hostd_mcp(config), mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            first = await client.call_tool("remember", fact)
            mem = first.structured_content["id"]
            again = await client.call_tool(
                "remember", {**fact, "content": "Deploys happen on Mondays.", "supersedes": mem}
            )
            composed = await client.call_tool(
                "compose_context", {"goal": "how does the cache evict entries", "budget": 4000}
            )
            listed = await client.call_tool("list_providers", {})
            rid = composed.structured_content["request_id"]
            label = composed.structured_content["citations"][0]["label"]
            reported = await client.call_tool(
                "report_used_evidence", {"request_id": rid, "used": [label], "helpful": True}
            )
            forgot = await client.call_tool("forget_memory", {"id": again.structured_content["id"]})
            forgot_again = await client.call_tool(
                "forget_memory", {"id": again.structured_content["id"]}
            )
    _fits(tools["remember"], first)
    assert "supersedes" in _fits(tools["remember"], again)
    structured = _fits(tools["compose_context"], composed)
    # What a client needs to locate code, declared: each file citation's range and digest.
    cited = [p for c in structured["citations"] for p in c["provenance"] if p["type"] == "file"]
    assert cited and all({"uri", "range", "digest"} <= set(p) for p in cited), cited
    legs = {p["provider_id"]: p for p in structured["providers"]}
    assert legs["noisy"]["error"]["stderr_tail"], legs["noisy"]
    assert legs["adv"]["violations"], legs["adv"]
    assert _fits(tools["list_providers"], listed)["reranker"] is not None
    # Each object a row or the audit carries is closed: a member added inside it fails.
    rows = {row["id"]: i for i, row in enumerate(listed.structured_content["providers"])}
    providers, shown = tools["list_providers"], listed.structured_content
    files = ("providers", rows["files"])
    for inside in [("info",), ("info", "data_flow"), ("capabilities",), ("health",)]:
        _new_member_fails(providers, shown, *files, *inside)
    _new_member_fails(providers, shown, *files, "capabilities", "query")
    _new_member_fails(providers, shown, *files, "health", "progress")
    _new_member_fails(providers, shown, *files, "health", "verification")
    _new_member_fails(providers, shown, "providers", rows["far"], "remote")
    _new_member_fails(providers, shown, "reranker", "health")
    _new_member_fails(tools["compose_context"], structured, "audit", "policy")
    _fits(tools["report_used_evidence"], reported)
    _fits(tools["forget_memory"], forgot)
    assert _fits(tools["forget_memory"], forgot_again)["already"] is True
