"""The authoring-strict profile: find members a model does not define.

Live wire input ignores unknown members (U1). This check is for what hostd
*emits* and for the protocol's strict digest profile, which must reject them.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from ._models import ContextFrame, ContextQuery, WireModel

__all__ = ["unknown_members"]

_TARGETS: dict[str, type[WireModel]] = {"frame": ContextFrame, "query": ContextQuery}


def _nested_model(annotation: Any) -> tuple[type[WireModel] | None, bool]:
    """(model class inside the annotation, whether it is a list of them)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found, is_list = _nested_model(arg)
            if found is not None:
                return found, is_list
        return None, False
    if origin is list:
        (arg,) = typing.get_args(annotation) or (None,)
        found, _ = _nested_model(arg)
        return found, True
    if isinstance(annotation, type) and issubclass(annotation, WireModel):
        return annotation, False
    return None, False


def _walk(data: Any, model: type[WireModel], path: str, out: list[str]) -> None:
    if not isinstance(data, dict):
        return
    fields = model.model_fields
    for key, value in data.items():
        info = fields.get(key)
        if info is None:
            out.append(f"{path}.{key}")
            continue
        nested, is_list = _nested_model(info.annotation)
        if nested is None:
            continue
        if is_list and isinstance(value, list):
            for i, item in enumerate(value):
                _walk(item, nested, f"{path}.{key}[{i}]", out)
        else:
            _walk(value, nested, f"{path}.{key}", out)


def unknown_members(data: Any, target: str = "frame") -> list[str]:
    """Paths (``frame.provenance[0].future_field``) of members the model does not define."""
    model = _TARGETS[target]
    out: list[str] = []
    _walk(data, model, target, out)
    return out
