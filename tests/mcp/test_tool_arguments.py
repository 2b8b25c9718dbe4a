"""The words of a tool's bad arguments, in the client API's form (docs/mcp.md): the
field, what was sent (bounded) and what the input schema expects."""

from __future__ import annotations

from hostd.mcp._server import _QUOTED, _problem
from tests.server.conftest import ROOT

_DOC = " ".join((ROOT / "docs" / "mcp.md").read_text(encoding="utf-8").split())


def test_arguments_that_fit_have_no_problem() -> None:
    assert _problem("compose_context", {"goal": "x", "budget": 300, "kinds": ["doc"]}) is None


def test_an_item_is_named_by_its_place_in_the_array() -> None:
    assert _problem("compose_context", {"goal": "x", "kinds": ["doc", ""]}) == (
        "invalid params: kinds[1]: got an empty string; expected a non-empty string"
    )


def test_what_was_sent_is_quoted_only_when_short() -> None:
    short = "b" * _QUOTED
    said = _problem("compose_context", {"goal": "x", short: 1})
    assert said is not None and f"unknown argument {short!r};" in said
    long = "b" * (_QUOTED + 1)
    said = _problem("compose_context", {"goal": "x", long: 1})
    assert said is not None and long not in said
    assert said.startswith(
        f"invalid params: arguments: unknown argument of {_QUOTED + 1} characters (not quoted)"
    )
    said = _problem("report_used_evidence", {"request_id": "r", "used": [], "note": "n" * 5000})
    assert said == (
        "invalid params: note: got a string of 5000 characters (not quoted); "
        "expected a string of at most 4096 characters"
    )
    assert f"quoted up to {_QUOTED} characters" in _DOC
