"""An error reply with a code hostd does not know: read as ``internal`` (X1), and said so.

The provider did not answer ``internal``: the report says it answered a code hostd does
not know, by its size (the code is the peer's own text, never quoted), and that it was
read as ``internal``. Known codes, and an absent one (X2), keep their wording. Both
bindings: JSON-RPC's ``data.cgp_code`` and a CGP ``error`` envelope's ``code``.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from hostd.errors import ProviderError
from hostd.protocol import CgpErrorCode
from hostd.transport.bindings import CgpCodec, JsonRpcCodec, Refusal

MESSAGE = "nope: SECRET"  # 12 chars
HINT = "; its stderr, logged as provider.stderr, may say why"


def _jsonrpc(code: Any, *, absent: bool = False) -> ProviderError:
    error: dict[str, Any] = {"code": -32000, "message": MESSAGE}
    if not absent:
        error["data"] = {"cgp_code": code}
    line = orjson.dumps({"jsonrpc": "2.0", "id": 1, "error": error})
    refusal = JsonRpcCodec("p").read(line)
    assert isinstance(refusal, Refusal) and isinstance(refusal.error, ProviderError)
    return refusal.error


def _cgp(code: Any, *, absent: bool = False) -> ProviderError:
    envelope: dict[str, Any] = {"type": "error", "message": MESSAGE}
    if not absent:
        envelope["code"] = code
    refusal = CgpCodec("p").read(orjson.dumps(envelope))
    assert isinstance(refusal, Refusal) and isinstance(refusal.error, ProviderError)
    return refusal.error


READ = {"jsonrpc": _jsonrpc, "cgp": _cgp}


@pytest.mark.parametrize("binding", sorted(READ))
@pytest.mark.parametrize("code", ["vendor:overheated", "brand_new_code", "Internal", ""])
def test_an_unknown_code_is_named_unknown_read_as_internal_and_not_quoted(
    binding: str, code: str
) -> None:
    error = READ[binding](code)
    assert error.cgp_code is CgpErrorCode.INTERNAL  # X1
    assert error.message == (
        f"provider answered an unknown error code ({len(code)} chars, not quoted), "
        f"read as internal; message: {len(MESSAGE)} chars, not quoted{HINT}"
    )
    assert "SECRET" not in error.message
    assert not code or code not in error.message


@pytest.mark.parametrize(("code", "kind"), [(7, "number"), (["x"], "array"), (True, "boolean")])
def test_a_code_that_is_not_a_string_is_named_by_its_json_type(code: Any, kind: str) -> None:
    error = _jsonrpc(code)  # the envelope schema types code as a string: a bad shape there
    assert error.cgp_code is CgpErrorCode.INTERNAL
    assert error.message.startswith(
        f"provider answered an unknown error code (a JSON {kind}), read as internal; "
    )


@pytest.mark.parametrize("binding", sorted(READ))
def test_a_known_or_absent_code_keeps_its_wording(binding: str) -> None:
    read = READ[binding]
    size = f"message: {len(MESSAGE)} chars, not quoted"
    assert read("bad_request").message == f"provider answered bad_request ({size})"
    assert read("internal").message == f"provider answered internal ({size}{HINT})"
    absent = read(None, absent=True)  # X2
    assert absent.cgp_code is CgpErrorCode.INTERNAL
    assert absent.message == f"provider answered internal ({size}{HINT})"


def test_a_json_rpc_null_code_is_an_absent_one() -> None:
    error = _jsonrpc(None)
    assert error.message.startswith("provider answered internal (")
