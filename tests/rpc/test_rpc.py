"""``hostd.rpc``: the strict envelope (orjson both ways) and the one error boundary."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from hostd.errors import ParseError, RpcError, ShuttingDown
from hostd.protocol import ProviderInfo
from hostd.rpc import (
    DirectDispatcher,
    Dispatcher,
    Method,
    decode,
    encode,
    is_mcp_id,
    request_problem,
    tag_request,
)

ROOT = Path(__file__).resolve().parents[2]

# JSON values as replies hold them: finite floats, 64-bit integers, Unicode text.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(_values)
def test_json_values_round_trip(value: Any) -> None:
    out = encode(value)
    assert b"\n" not in out
    assert decode(out) == value == json.loads(out)


def test_a_reply_with_unicode_is_compact_utf8() -> None:
    out = encode({"a": "é ✓ \u2028", "b": [1, 2.5, None]})
    assert out == '{"a":"é ✓ \u2028","b":[1,2.5,null]}'.encode()


def test_models_and_integer_keys_encode_as_their_wire_form() -> None:
    info = ProviderInfo(name="p", version="1")
    assert decode(encode({"info": info, 1: "x"})) == {"info": info.to_wire(), "1": "x"}


@pytest.mark.parametrize("value", [{"big": 2**70}, {"x": object()}, {"s": "\ud800"}])
def test_what_has_no_json_form_raises(value: Any) -> None:
    with pytest.raises(TypeError):
        encode(value)


@pytest.mark.parametrize(
    "line",
    [b"NaN", b'{"id": Infinity}', b'{"id": 1e400}', b'{"a": "\xff"}', b'"\\ud800"', b"[" * 5000],
)
def test_what_is_not_strict_json_is_a_parse_error(line: bytes) -> None:
    with pytest.raises(ParseError):
        decode(line)


class _Echo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int


async def _echo(ctx: list[BaseException], p: _Echo) -> Any:
    if p.n == 0:
        raise ShuttingDown("stopping")
    if p.n == 1:
        raise RuntimeError("secret detail")
    if p.n == 2:
        return {"huge": 2**70}
    return {"n": p.n}


def _dispatcher(seen: list[tuple[str, BaseException]]) -> Dispatcher:
    return Dispatcher(
        {"echo": Method(_Echo, _echo)}, on_error=lambda name, exc: seen.append((name, exc))
    )


def _req(params: Any, id_: Any = 7) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "echo", "params": params, "id": id_}).encode()


@pytest.mark.anyio
async def test_each_failure_leaves_through_the_one_boundary() -> None:
    seen: list[tuple[str, BaseException]] = []
    d = _dispatcher(seen)

    async def ask(line: bytes) -> Any:
        out = await d.answer_line(line, None)
        return None if out is None else json.loads(out)

    assert (await ask(_req({"n": 5}))) == {"jsonrpc": "2.0", "result": {"n": 5}, "id": 7}
    bad = (await ask(_req({"n": "x"})))["error"]
    assert bad["code"] == -32602 and bad["data"]["field"] == "n"
    typo = (await ask(_req({"n": 5, "m": 1})))["error"]
    assert typo["data"] == {**typo["data"], "reason": "invalid_params", "field": "m"}
    assert (await ask(_req([5])))["error"]["data"]["field"] == "params"
    stopping = (await ask(_req({"n": 0})))["error"]
    assert stopping["code"] == -32006 and stopping["data"]["reason"] == "shutting_down"
    crash = (await ask(_req({"n": 1})))["error"]
    assert crash["code"] == -32007 and "secret" not in json.dumps(crash)
    # A result with no JSON form is still answered, as an internal error of its id.
    unencodable = await ask(_req({"n": 2}))
    assert unencodable["id"] == 7 and unencodable["error"]["data"]["reason"] == "internal"
    assert [type(e).__name__ for _, e in seen] == [
        "InvalidParam",
        "InvalidParam",
        "InvalidParam",
        "ShuttingDown",
        "RuntimeError",
        "TypeError",
    ]


@pytest.mark.anyio
async def test_the_librarys_own_errors_carry_reason_and_cgp_code() -> None:
    d = _dispatcher([])
    unknown = json.loads(
        await d.answer_line(b'{"jsonrpc":"2.0","method":"nope","id":1}', None) or b""
    )
    assert unknown["error"]["code"] == -32601
    assert unknown["error"]["data"]["reason"] == "method_not_found"
    assert unknown["error"]["data"]["cgp_code"] == "bad_request"
    for line, reason in (
        (b'{"jsonrpc":"2.0","method":"echo","id":true}', "invalid_request"),
        (b"[]", "empty_batch"),
        (b"3", "invalid_request"),
    ):
        reply = json.loads(await d.answer_line(line, None) or b"")
        assert reply["error"]["code"] == -32600 and reply["id"] is None
        assert reply["error"]["data"]["reason"] == reason
    parse = json.loads(await d.answer_line(b'{"id": NaN}', None) or b"")
    assert parse["error"]["code"] == -32700 and parse["id"] is None
    assert await d.answer_line(b'{"jsonrpc":"2.0","method":"echo","params":{"n":3}}', None) is None


@pytest.mark.anyio
async def test_the_direct_dispatcher_answers_as_the_wire_does_without_an_envelope() -> None:
    # In-process callers get the same methods and the same error contract, as RpcError.
    seen: list[tuple[str, BaseException]] = []
    wire = _dispatcher(seen)
    methods = {"echo": Method(_Echo, _echo)}
    direct = DirectDispatcher(methods, on_error=lambda name, exc: seen.append((name, exc)))
    assert await direct.call("echo", {"n": 5}, None) == {"n": 5}
    for params, name in (({"n": "x"}, "n"), ({"n": 0}, None), ({"n": 1}, None), (None, "n")):
        with pytest.raises(RpcError) as raised:
            await direct.call("echo", params, None)
        line = await wire.answer_line(_req(params if params is not None else {}), None)
        error = json.loads(line or b"")["error"]
        assert (raised.value.rpc_code, raised.value.message) == (error["code"], error["message"])
        assert raised.value.rpc_data == error["data"]
        if name is not None:
            assert raised.value.rpc_data["field"] == name
    with pytest.raises(RpcError) as unknown:
        await direct.call("nope", {}, None)
    assert unknown.value.rpc_code == -32601
    assert unknown.value.remote_reason == "method_not_found"
    # Each failure was told to on_error once per dispatcher (wire, then direct).
    assert [type(e).__name__ for _, e in seen] == [
        "InvalidParam",
        "InvalidParam",
        "ShuttingDown",
        "ShuttingDown",
        "RuntimeError",
        "RuntimeError",
        "InvalidParam",
        "InvalidParam",
    ]


_JSONRPC_LIBS = ("jsonrpcserver", "oslash", "returns")


def _uses_a_jsonrpc_lib(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        else:
            continue
        if any(n.split(".")[0] in _JSONRPC_LIBS for n in names):
            return True
    return False


def test_jsonrpcserver_is_used_through_its_public_api_only() -> None:
    """No private slot of jsonrpcserver's (or oslash's, returns') objects is read, and
    only names the package itself exports are imported (its ``__all__``)."""
    import jsonrpcserver

    exported = set(jsonrpcserver.__all__)
    users, private, deep = [], [], []
    for path in sorted((ROOT / "hostd").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not _uses_a_jsonrpc_lib(tree):
            continue
        users.append(path.name)
        for node in ast.walk(tree):
            # ``obj._slot`` on anything but self/cls: a library's private state.
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                private.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                if top in _JSONRPC_LIBS and (
                    node.module != "jsonrpcserver" or {a.name for a in node.names} - exported
                ):
                    deep.append(f"{path.name}:{node.lineno} from {node.module}")
    assert "_wire.py" in users  # the walk sees the dispatcher's library half
    assert (private, deep) == ([], [])


@pytest.mark.anyio
@pytest.mark.parametrize(
    "request_",
    [
        {"jsonrpc": "2.0", "method": "echo", "params": {"n": 5}, "id": 7},
        {"jsonrpc": "2.0", "method": "echo", "params": {"n": "x"}, "id": "a"},
        {"jsonrpc": "2.0", "method": "echo", "params": {"n": 2}, "id": 8},
        {"jsonrpc": "2.0", "method": "nope", "id": 9},
        {"jsonrpc": "2.0", "method": "echo", "params": {"n": 5}},
        [{"jsonrpc": "2.0", "method": "echo", "params": {"n": 5}, "id": 1}, {"bad": 1}],
    ],
)
async def test_answer_is_the_dispatchers_reply_and_its_line(request_: Any) -> None:
    """One call: the reply ``dispatch`` gives (the caller counts its error), an error's
    ``data`` naming the request id, and the line ``encode_reply`` makes of it, an
    unencodable result an internal error of its id."""
    d = _dispatcher([])
    reply, line = await d.answer(request_, None, "r-1")
    assert reply == tag_request(await d.dispatch(request_, None), "r-1")
    if isinstance(reply, dict) and "error" in reply:
        assert reply["error"]["data"]["request_id"] == "r-1"
    if reply is None:
        assert line is None
        return
    assert line == d.encode_reply(reply) and line.endswith(b"\n")
    out = json.loads(line)
    if isinstance(request_, dict) and request_.get("params") == {"n": 2}:
        assert out["error"]["data"]["reason"] == "internal" and out["id"] == 8
    else:
        assert out == reply


@pytest.mark.parametrize("value", ["", "a", 0, -7, 2**70])
def test_an_mcp_id_is_a_string_or_an_integer(value: Any) -> None:
    assert is_mcp_id(value)
    assert request_problem({"jsonrpc": "2.0", "method": "ping", "id": value}, mcp=True) is None


@pytest.mark.parametrize("value", [None, True, False, 1.5, [], {}])
def test_an_mcp_id_is_never_null_a_bool_a_float_or_a_structure(value: Any) -> None:
    # The same check refuses the request's shape and keeps hostd mcp's edge from echoing it.
    assert not is_mcp_id(value)
    problem = request_problem({"jsonrpc": "2.0", "method": "ping", "id": value}, mcp=True)
    assert problem is not None and "(MCP)" in problem.message
