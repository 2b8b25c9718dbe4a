"""The words of a refused param, one form for every face: ``invalid params: FIELD: got
WHAT; expected WHAT``. The client API words a pydantic refusal with them
(``hostd.errors.params_refused``, from the method's model schema) and ``hostd mcp``
a tool's arguments (from the tool's input schema), so a client and a model read one
form whichever side refused. Pure, over JSON Schema dicts; imports nothing of hostd.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["QUOTED", "expected", "field_name", "given", "quoted", "refusal"]

#: How many characters of a string that was sent an error quotes: a longer one is only
#: counted, so the one line stays short whatever was sent (and never repeats a peer's
#: text unbounded).
QUOTED = 40


def refusal(field: str, what: str, wanted: str) -> str:
    """``invalid params: budget: got 0; expected an integer from 1 to 10,000,000``."""
    return f"invalid params: {field}: {what}; expected {wanted}"


def field_name(path: Iterable[Any], whole: str = "params") -> str:
    """``kinds[0]`` for the path ``kinds/0``, as the client API names fields; ``whole``
    for the empty path (the params themselves)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or whole


def quoted(text: str, what: str) -> str:
    """A short string as ``what`` and its repr (one line), a longer one by its length."""
    if len(text) <= QUOTED:
        return f"{what} {text!r}"
    return f"{what} of {len(text)} characters (not quoted)"


def given(value: Any) -> str:
    """What was sent, in a few words: a scalar shown, an array or object counted."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return quoted(value, "a string") if value else "an empty string"
    if isinstance(value, int | float):
        number = json.dumps(value)
        return number if len(number) <= QUOTED else f"a number of {len(number)} digits"
    if isinstance(value, list):
        return f"an array of {len(value)} item(s)"
    return f"an object of {len(value)} member(s)" if isinstance(value, dict) else "a value"


def expected(schema: dict[str, Any]) -> str:
    """What a schema's member asks for, in words (``an integer from 1 to 10,000``).
    ``null`` is left out of a choice: sending nothing is the way to leave it unset."""
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        return " or ".join(expected(b) for b in branches) or "a value"
    if "$ref" in schema:
        return "an object"  # the client API's nested models (a floor, a FrameId)
    kinds = schema.get("type")
    words = []
    for kind in [kinds] if isinstance(kinds, str) else kinds or []:
        if kind in ("integer", "number"):
            words.append(_number(kind, schema))
        elif kind == "string":
            word = "a non-empty string" if schema.get("minLength", 0) >= 1 else "a string"
            most = schema.get("maxLength")
            words.append(word + (f" of at most {most} characters" if most else ""))
        elif kind == "array":
            most, items = schema.get("maxItems"), schema.get("items")
            word = "an array" + (f" of at most {most} items" if most else "")
            words.append(word + (f", each {expected(items)}" if items else ""))
        elif kind == "boolean":
            words.append("true or false")
        elif kind != "null":
            words.append(f"an {kind}" if kind[0] in "aeiou" else f"a {kind}")
    return " or ".join(words) or "a value"


def _number(kind: str, schema: dict[str, Any]) -> str:
    """``an integer from 1 to 10,000``, ``a number ≥ 1``, ``a number > 0``: an integer's
    exclusive bound is the next integer in (pydantic writes ``gt=0`` as
    ``exclusiveMinimum: 0``, the MCP schema ``minimum: 1``: one range, one wording)."""
    word = "an integer" if kind == "integer" else "a number"
    low = _bound(schema, "minimum", kind == "integer")
    high = _bound(schema, "maximum", kind == "integer")
    if low is not None and high is not None and low[0] == "≥" and high[0] == "≤":
        return f"{word} from {low[1]} to {high[1]}"
    said = [f"{end[0]} {end[1]}" for end in (low, high) if end is not None]
    return f"{word} {' and '.join(said)}" if said else word


def _bound(schema: dict[str, Any], end: str, integer: bool) -> tuple[str, str] | None:
    """One end of a range (``minimum`` or ``maximum``) as ``(sign, figure)``."""
    low = end == "minimum"
    exclusive = "exclusiveMinimum" if low else "exclusiveMaximum"
    if end in schema:
        return ("≥" if low else "≤"), _figure(schema[end])
    if exclusive not in schema:
        return None
    if integer:  # the integer next to it, inclusive
        return ("≥" if low else "≤"), _figure(schema[exclusive] + (1 if low else -1))
    return (">" if low else "<"), _figure(schema[exclusive])


def _figure(value: float) -> str:
    """``10,000`` for ``10000`` and ``10000.0``; a fraction as it is."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"
