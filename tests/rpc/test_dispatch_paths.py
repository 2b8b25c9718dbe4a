"""A single request is answered without jsonrpcserver, in the caller's task; the reply is
the library's, byte for byte: for any request, ``dispatch(request)`` must encode to the
same bytes as the same dispatcher's answer with every request sent through the library.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonrpcserver import JsonRpcError
from pydantic import BaseModel, ConfigDict

from hostd.errors import ProviderError, ShuttingDown
from hostd.rpc import Dispatcher, Method, encode

pytestmark = pytest.mark.anyio


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = 0
    s: str | None = None


async def _body(ctx: list[str], p: _Params) -> Any:
    """Answers by ``n``: a result, each kind of failure the boundary meets."""
    ctx.append(asyncio.current_task().get_name())  # type: ignore[union-attr]  # run in a task
    if p.n == 1:
        raise ShuttingDown("stopping")
    if p.n == 2:
        raise RuntimeError("a crash")
    if p.n == 3:
        raise JsonRpcError(-32050, "library error")
    if p.n == 4:
        raise JsonRpcError(-32051, "library error with data", {"why": p.s})
    if p.n == 5:
        raise ProviderError("provider said no")
    return {"n": p.n, "s": p.s}


_METHODS = {"m": Method(_Params, _body), "other": Method(_Params, _body)}


def _dispatcher() -> Dispatcher:
    return Dispatcher(_METHODS)


class _ThroughTheLibrary(Dispatcher):
    """The same dispatcher with nothing answered directly: the oracle."""

    def _direct(self, request: dict[str, Any]) -> None:
        return None


_ids = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-9, 9) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
_params = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"n": st.integers(0, 6) | st.text(max_size=2), "s": st.text(max_size=3)}
    ),
    st.dictionaries(st.sampled_from(["n", "s", "context", "x"]), _json, max_size=3),
    st.lists(_json, max_size=2),
    _json,
)


#: A well-formed request (the direct path), with every answer the body gives.
_well_formed = st.builds(
    lambda id_, method, n, s: {
        "jsonrpc": "2.0",
        "method": method,
        "params": {"n": n} if s is None else {"n": n, "s": s},
        "id": id_,
    },
    st.integers(-5, 5) | st.text(max_size=3) | st.none(),
    st.sampled_from(["m", "other"]),
    st.integers(0, 6),
    st.none() | st.text(max_size=3),
)


@st.composite
def _any_request(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {"id": draw(_ids)}
    if draw(st.booleans()) or draw(st.booleans()):
        request["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0", 2]))
    if draw(st.integers(0, 9)):
        request["method"] = draw(st.sampled_from(["m", "other", "missing", "", 3, None]))
    if draw(st.booleans()):
        request["params"] = draw(_params)
    if not draw(st.integers(0, 7)):
        request["extra"] = 1
    return request


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=st.one_of(_well_formed, _any_request()))
async def test_a_single_request_gets_the_librarys_reply(request: dict[str, Any]) -> None:
    ran: list[str] = []
    direct = await _dispatcher().dispatch(dict(request), ran)
    through = await _ThroughTheLibrary(_METHODS).dispatch(dict(request), [])
    assert encode(direct) == encode(through)


async def test_the_common_request_runs_in_the_callers_task() -> None:
    d = _dispatcher()
    ran_in: list[str] = []
    me = asyncio.current_task()
    assert me is not None
    reply = await d.dispatch({"jsonrpc": "2.0", "method": "m", "params": {"n": 7}, "id": 1}, ran_in)
    assert reply == {"jsonrpc": "2.0", "result": {"n": 7, "s": None}, "id": 1}
    assert ran_in == [me.get_name()]  # no task of the library's in between
