"""The words of a tool's bad arguments, in the client API's form (docs/mcp.md): the
field, what was sent (bounded) and what the input schema expects."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from hostd._param_words import QUOTED
from hostd.errors import RpcError
from hostd.mcp._schema import compose_params
from hostd.mcp._server import TOOLS, _problem
from hostd.server._params import ComposeParams, FeedbackParams, ForgetParams, RememberParams
from tests.server.conftest import ROOT

from ._harness import INITIALIZE, INITIALIZED, serve_lines

_DOC = " ".join((ROOT / "docs" / "mcp.md").read_text(encoding="utf-8").split())


def test_arguments_that_fit_have_no_problem() -> None:
    assert _problem("compose_context", {"goal": "x", "budget": 300, "kinds": ["doc"]}) is None


def test_an_item_is_named_by_its_place_in_the_array() -> None:
    assert _problem("compose_context", {"goal": "x", "kinds": ["doc", ""]}) == (
        "invalid params: kinds[1]: got an empty string; "
        "expected a non-empty string of at most 64 characters"
    )


def test_what_was_sent_is_quoted_only_when_short() -> None:
    short = "b" * QUOTED
    said = _problem("compose_context", {"goal": "x", short: 1})
    assert said is not None and f"unknown argument {short!r};" in said
    long = "b" * (QUOTED + 1)
    said = _problem("compose_context", {"goal": "x", long: 1})
    assert said is not None and long not in said
    assert said.startswith(
        f"invalid params: arguments: unknown argument of {QUOTED + 1} characters (not quoted)"
    )
    said = _problem("report_used_evidence", {"request_id": "r", "used": [], "note": "n" * 5000})
    assert said == (
        "invalid params: note: got a string of 5000 characters (not quoted); "
        "expected a string of at most 4096 characters"
    )
    assert f"quoted up to {QUOTED} characters" in _DOC


def test_a_budget_past_the_ceiling_is_refused_in_the_words_of_every_other() -> None:
    assert _problem("compose_context", {"goal": "x", "budget": 1_000_000_000}) == (
        "invalid params: budget: got 1000000000; expected an integer from 1 to 10,000,000"
    )
    assert _problem("compose_context", {"goal": "x", "budget": 10_000_000}) is None


#: A value for each of compose_context's arguments, as a model would send it.
_EVERY_ARGUMENT: dict[str, Any] = {
    "goal": "why does the cache evict",
    "budget": 2000,
    "strategy": "rrf:k=60",
    "placement": "ranked",
    "kinds": ["snippet"],
    "providers": ["files"],
    "session": "s1",
    "query_text": "cache eviction",
    "timeout_ms": 5000,
    "ready_wait_ms": 2000,
    "max_frames": 1,
    "anchors": ["file:///src/cache.py", "LruCache.evict"],
    "as_of": "2024-05-01T12:00:00Z",
}


def test_every_argument_reaches_the_client_api_as_given() -> None:
    properties = next(t for t in TOOLS if t.name == "compose_context").input_schema["properties"]
    assert set(_EVERY_ARGUMENT) == set(properties), "give each argument a value here"
    assert _problem("compose_context", _EVERY_ARGUMENT) is None
    params = compose_params(_EVERY_ARGUMENT)
    assert params == _EVERY_ARGUMENT
    ComposeParams.model_validate(params)  # the API takes it as it is


def test_hostd_mcps_ready_wait_is_sent_unless_the_call_bounds_its_waits_itself() -> None:
    assert compose_params({"goal": "x"}, 3000) == {"goal": "x", "ready_wait_ms": 3000}
    # The call's own: its ready_wait_ms, or a timeout_ms, which bounds the start too.
    assert compose_params({"goal": "x", "ready_wait_ms": 0}, 3000)["ready_wait_ms"] == 0
    assert compose_params({"goal": "x", "timeout_ms": 500}, 3000) == {
        "goal": "x",
        "timeout_ms": 500,
    }
    assert compose_params({"goal": "x"}) == {"goal": "x"}  # none: the API's own wait


def test_an_integer_sent_with_a_point_zero_is_passed_as_an_integer() -> None:
    # JSON Schema counts 1.0 an integer, so the schema lets it through; the API's counts
    # take JSON integers only and would refuse it in pydantic's words.
    sent = {"goal": "x", "budget": 300.0, "timeout_ms": 5e3, "max_frames": 1.0}
    assert _problem("compose_context", sent) is None
    params = compose_params(sent)
    assert {k: (v, type(v)) for k, v in params.items() if k != "goal"} == {
        "budget": (300, int),
        "timeout_ms": (5000, int),
        "max_frames": (1, int),
    }
    ComposeParams.model_validate(params)
    assert _problem("compose_context", {"goal": "x", "max_frames": 1.5}) == (
        "invalid params: max_frames: got 1.5; expected an integer from 1 to 10,000"
    )


def test_an_empty_providers_list_asks_every_provider() -> None:
    # Models fill an optional array with []: it means all, as an empty kinds means any.
    assert compose_params({"goal": "x", "providers": [], "kinds": []}) == {"goal": "x", "kinds": []}
    assert compose_params({"goal": "x", "providers": ["a"]})["providers"] == ["a"]


#: The bounds a JSON Schema states; an integer's exclusiveMinimum N is minimum N + 1.
_BOUNDS = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types an argument may have, ``null`` left out (the tool omits it instead)."""
    named: set[str] = set()
    for branch in schema.get("anyOf", [schema]):
        kind = branch.get("type", [])  # none: a $ref, whose object report_used_evidence refuses
        named.update([kind] if isinstance(kind, str) else kind)
    return named - {"null"}


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """One argument's types and bounds (its items' too), its ``null`` branch left out."""
    branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
    # A label or a FrameId (report_used_evidence takes labels only): the string's bounds.
    branch = next(b for b in branches if "$ref" not in b)
    bounds: dict[str, Any] = {"types": _types(schema)}
    bounds.update({k: branch[k] for k in _BOUNDS if k in branch})
    if "exclusiveMinimum" in branch:
        bounds["minimum"] = branch["exclusiveMinimum"] + 1
    if "items" in branch:
        bounds["items"] = _bounds(branch["items"])
    return bounds


@pytest.mark.parametrize(
    ("tool", "model"),
    [
        ("compose_context", ComposeParams),
        ("report_used_evidence", FeedbackParams),
        ("remember", RememberParams),
        ("forget_memory", ForgetParams),
    ],
)
def test_the_input_schema_states_every_bound_the_client_api_holds(
    tool: str, model: type[BaseModel]
) -> None:
    # A value the schema lets through and the API refuses would be told in pydantic's
    # words, not the schema's; and a client reading the schema would not know the bound.
    schema = next(t.input_schema for t in TOOLS if t.name == tool)
    api = model.model_json_schema()["properties"]
    for name, argument in schema["properties"].items():
        assert _bounds(argument) == _bounds(api[name]), name
        if "default" in argument:  # what leaving it out means, as the API has it
            assert argument["default"] == api[name]["default"], name


def test_hostd_mcps_ready_wait_is_refused_at_start_outside_the_apis_bounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hostd.cli import build_parser

    assert build_parser().parse_args(["mcp"]).ready_wait_ms == 3000
    assert build_parser().parse_args(["mcp", "--ready-wait-ms", "0"]).ready_wait_ms == 0
    for value in ("-1", "600001", "3s"):
        with pytest.raises(SystemExit) as usage:
            build_parser().parse_args(["mcp", "--ready-wait-ms", value])
        assert usage.value.code == 2
        said = capsys.readouterr().err
        assert f"--ready-wait-ms: got {value!r}; expected an integer from 0 to 600,000" in said


class _OlderDaemon:
    """A daemon of an older hostd, behind ``--connect``: it knows no ``ready_wait_ms``
    (refused as an unknown member, as ``ComposeParams`` refuses one), and refuses every
    other call in words the test can tell apart."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any:
        assert params is not None
        self.sent.append(params)
        if "ready_wait_ms" in params:
            raise RpcError(
                -32602,
                "invalid params: ready_wait_ms: unknown member",
                {"reason": "invalid_params", "field": "ready_wait_ms"},
            )
        raise RpcError(-32005, "its own answer", {"reason": "unavailable"})


async def _tool_call(session: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "compose_context", "arguments": arguments},
    }
    lines = [json.dumps(m).encode() + b"\n" for m in (INITIALIZE, INITIALIZED, call)]
    out = await serve_lines(session, lines, ready_wait_ms=3000)
    return next(m for m in out if isinstance(m, dict) and m.get("id") == 1)


@pytest.mark.anyio
async def test_an_older_daemon_that_knows_no_ready_wait_gets_the_call_as_the_client_made_it() -> (
    None
):
    daemon = _OlderDaemon()
    answer = await _tool_call(daemon, {"goal": "x"})
    assert [("ready_wait_ms" in p) for p in daemon.sent] == [True, False]
    texts = [c["text"] for c in answer["result"]["content"] if c["type"] == "text"]
    assert any("its own answer" in t for t in texts), texts  # the second call's answer
    # A client that named it itself is told the daemon's refusal, not retried.
    named = _OlderDaemon()
    answer = await _tool_call(named, {"goal": "x", "ready_wait_ms": 100})
    assert len(named.sent) == 1
    texts = [c["text"] for c in answer["result"]["content"] if c["type"] == "text"]
    assert any("ready_wait_ms" in t for t in texts), texts
