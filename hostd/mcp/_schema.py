"""The published schemas of ``hostd mcp``'s tools and the structured results they return.

Plain JSON Schema dicts and pure functions over the client API's results: no
SDK, no I/O. ``compose_context``'s ``structuredContent`` is the ComposedPrompt
wire form (protocol.md §4) with the audit summarised (the per-frame entries can
run to thousands; ``hostd compose --json`` has them all), plus the consent the
composition lacked, by provider and scope.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = [
    "COMPOSE_INPUT_SCHEMA",
    "COMPOSE_OUTPUT_SCHEMA",
    "PROVIDERS_INPUT_SCHEMA",
    "PROVIDERS_OUTPUT_SCHEMA",
    "REPORT_INPUT_SCHEMA",
    "REPORT_OUTPUT_SCHEMA",
    "compose_params",
    "feedback_params",
    "consent_needed",
    "structured_compose",
]

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}

COMPOSE_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string", "minLength": 1, "description": "what the agent is trying to do"},
        "budget": {"type": "integer", "minimum": 1, "description": "global token budget"},
        "strategy": {
            "description": "score | round_robin | quota:K | rrf[:k=N,PROVIDER=W] | "
            "margin[:k=N,PROVIDER=W] | mmr[:lambda=L], or the JSON object form (docs/cli.md)",
            "type": ["string", "object"],
        },
        "placement": {"type": "string", "enum": ["edges", "ranked", "grouped", "canonical"]},
        "kinds": {**_STRINGS, "description": "frame kinds (empty: any)"},
        "providers": {**_STRINGS, "description": "provider subset (default: all)"},
        "session": {"type": "string", "minLength": 1, "description": "reuse across turns"},
        "query_text": {"type": "string", "description": "search text (default: the goal)"},
    },
    "required": ["goal"],
    "additionalProperties": False,
}

PROVIDERS_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}

_FRAME_ID = {
    "type": "object",
    "properties": {
        "provider_id": {"type": "string"},
        "frame_id": {"type": "string"},
        "content_digest": {"type": ["string", "null"]},
    },
    "required": ["provider_id", "frame_id"],
}

_PROVIDER_REPORT = {
    "type": "object",
    "properties": {
        "provider_id": {"type": "string"},
        "status": {"type": "string"},
        "frames_offered": {"type": "integer"},
        "frames_accepted": {"type": "integer"},
        "tokens_accepted": {"type": "integer"},
        "latency_ms": {"type": "number"},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
        "missing_scopes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["provider_id", "status", "frames_offered", "frames_accepted"],
}

COMPOSE_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string"},
        "citations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "frame": _FRAME_ID,
                    "provenance": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"type": {"type": "string"}, "uri": {"type": "string"}},
                            "required": ["type"],
                        },
                    },
                },
                "required": ["label", "frame", "provenance"],
            },
        },
        "audit": {
            "type": "object",
            "properties": {
                "global_budget": {"type": "integer"},
                "tokens_used": {"type": "integer"},
                "offered": {"type": "integer"},
                "included": {"type": "integer"},
                "excluded": {"type": "object", "additionalProperties": {"type": "integer"}},
                "policy": {"type": "object"},
            },
            "required": ["global_budget", "tokens_used", "offered", "included", "excluded"],
        },
        "providers": {"type": "array", "items": _PROVIDER_REPORT},
        "consent_required": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "provider": {"type": "string"},
                    "scopes": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["provider", "scopes"],
            },
        },
        "request_id": {"type": "string"},
    },
    "required": ["prompt", "citations", "audit", "providers", "consent_required", "request_id"],
}

PROVIDERS_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "providers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "binding": {"type": "string"},
                    "state": {"type": "string"},
                },
                "required": ["id", "binding", "state"],
            },
        }
    },
    "required": ["providers"],
}

REPORT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "request_id": {
            "type": "string",
            "minLength": 1,
            "description": "the request_id of the compose_context result the answer drew on",
        },
        "used": {
            "type": "array",
            "maxItems": 1024,
            "items": {"type": "string", "minLength": 1},
            "description": "the citation labels ([label] in the prompt) the answer actually "
            "used; empty if it used none",
        },
        "helpful": {"type": "boolean", "description": "whether the evidence helped"},
        "note": {"type": "string", "maxLength": 4096},
    },
    "required": ["request_id", "used"],
    "additionalProperties": False,
}

REPORT_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "request_id": {"type": "string"},
        "used": {"type": "array", "items": _FRAME_ID},
        "helpful": {"type": ["boolean", "null"]},
    },
    "required": ["request_id", "used", "helpful"],
}


def feedback_params(arguments: dict[str, Any]) -> dict[str, Any]:
    """``usage/feedback`` params from ``report_used_evidence``'s (schema-checked) arguments."""
    keys = ("request_id", "used", "helpful", "note")
    return {k: arguments[k] for k in keys if arguments.get(k) is not None}


_ARGUMENTS = (
    "goal",
    "budget",
    "strategy",
    "placement",
    "kinds",
    "providers",
    "session",
    "query_text",
)


def compose_params(arguments: dict[str, Any]) -> dict[str, Any]:
    """``context/compose`` params from the tool's (schema-checked) arguments."""
    return {k: arguments[k] for k in _ARGUMENTS if arguments.get(k) is not None}


def consent_needed(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Providers whose leg was refused for want of consent, with the scopes (C1, C6)."""
    return [
        {"provider": p["provider_id"], "scopes": list(p["missing_scopes"])}
        for p in result.get("providers") or []
        if p.get("missing_scopes")
    ]


def structured_compose(result: dict[str, Any]) -> dict[str, Any]:
    """The ``structuredContent`` of ``compose_context`` from a ``context/compose`` result."""
    audit = result.get("audit") or {}
    entries = audit.get("entries") or []
    excluded = Counter(str(e.get("reason")) for e in entries if e.get("disposition") != "included")
    return {
        "prompt": result["prompt"],
        "citations": result.get("citations") or [],
        "audit": {
            "global_budget": audit.get("global_budget", 0),
            "tokens_used": audit.get("tokens_used", 0),
            "offered": len(entries),
            "included": sum(1 for e in entries if e.get("disposition") == "included"),
            "excluded": dict(sorted(excluded.items())),
            "policy": audit.get("policy") or {},
        },
        "providers": result.get("providers") or [],
        "consent_required": consent_needed(result),
        "request_id": result.get("request_id", ""),
    }
