"""The published schemas of ``hostd mcp``'s tools and the structured results they return.

Plain JSON Schema dicts and pure functions over the client API's results: no
SDK, no I/O. Also the words a result carries (why a composition holds no evidence,
what consent the operator has to grant) and the progress values of one call.
``compose_context``'s ``structuredContent`` is the ComposedPrompt
wire form (protocol.md §4) with the audit summarised (the per-frame entries can
run to thousands; ``hostd compose --json`` has them all), plus the consent the
composition lacked, by provider and scope, and the ``degraded`` flag with its reasons.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, TypeGuard

from hostd._citations import ranked_citations
from hostd._hints import (
    absorbed_words,
    budget_advice,
    dropped_words,
    refused_legs,
    restarting_advice,
    restarting_failures,
    warming_advice,
    warming_phases,
    warming_starts,
    warming_state,
    warming_step,
)

__all__ = [
    "COMPOSE_INPUT_SCHEMA",
    "COMPOSE_OUTPUT_SCHEMA",
    "PROVIDERS_INPUT_SCHEMA",
    "PROVIDERS_OUTPUT_SCHEMA",
    "FORGET_INPUT_SCHEMA",
    "FORGET_OUTPUT_SCHEMA",
    "REMEMBER_INPUT_SCHEMA",
    "REMEMBER_OUTPUT_SCHEMA",
    "REPORT_INPUT_SCHEMA",
    "REPORT_OUTPUT_SCHEMA",
    "ProgressTrack",
    "compose_params",
    "consent_hints",
    "consent_needed",
    "feedback_params",
    "forget_params",
    "remember_params",
    "no_evidence",
    "structured_compose",
    "warming_hints",
    "failed_hints",
]

# Each bound is the client API's own (``hostd.server`` ``ComposeParams``,
# ``FeedbackParams``; a test holds them equal), so a value the schema lets through is
# never refused in other words behind it.
_MAX_TEXT = 64 * 1024

COMPOSE_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {
            "type": "string",
            "minLength": 1,
            "maxLength": _MAX_TEXT,
            "description": "what the agent is trying to do",
        },
        "budget": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000_000,
            "description": "global token budget (default: the config's host.default_budget)",
        },
        "strategy": {
            "description": "score | round_robin | quota:K | rrf[:k=N,PROVIDER=W] | "
            "margin[:k=N,PROVIDER=W] | mmr[:lambda=L], or the JSON object form (docs/cli.md); "
            "default: the config's host.strategy, else score",
            "type": ["string", "object"],
        },
        "placement": {
            "type": "string",
            "enum": ["edges", "ranked", "grouped", "canonical"],
            "description": "the order of the evidence in the prompt: edges (default) puts the "
            "best first and the next best last, the weakest in the middle; ranked best first; "
            "grouped by provider; canonical by frame id. Each citation's rank says how it "
            "ranked (0: the best), whatever the order",
        },
        "kinds": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 64},
            "description": "frame kinds (empty: any)",
        },
        "providers": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": "provider ids to ask (default, or empty: all)",
        },
        "session": {
            "type": "string",
            "minLength": 1,
            "maxLength": 256,
            "description": "reuse across turns",
        },
        "query_text": {
            "type": "string",
            "maxLength": _MAX_TEXT,
            "description": "search text (default: the goal)",
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": 600_000,
            "description": "how long each provider may take (a provider still starting or "
            "building its index past it is reported warming, not waited for)",
        },
        "ready_wait_ms": {
            "type": "integer",
            "minimum": 0,
            "maximum": 600_000,
            "description": "how long to wait for a provider still starting or building its "
            "index (default: a few seconds); one not ready by then is reported warming and "
            "the call returns with what the others gave: call again later for its evidence",
        },
        "max_frames": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000,
            "default": 64,
            "description": "the most frames each provider may offer (default 64); 1 asks "
            "each provider for its best one only",
        },
        "anchors": {
            "type": "array",
            "items": {"type": "string", "maxLength": 4096},
            "description": "what you are working on: the URIs of the files in focus "
            "(file:///...) or symbol names, handed to every provider as the query's anchors "
            "(its focal points); each provider decides how it uses them (empty: none)",
        },
        "as_of": {
            "type": "string",
            "description": "a UTC time, YYYY-MM-DDTHH:MM:SSZ (a fraction allowed; a date "
            "is its midnight UTC, an offset time its UTC instant): only "
            "evidence valid then, from providers whose frames carry a validity window (a "
            "memory of facts later superseded); a frame without one always is. Default: none",
        },
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

#: One leg's report (``LegReport.to_wire``), every member it may carry declared.
_PROVIDER_REPORT = {
    "type": "object",
    "properties": {
        "provider_id": {"type": "string"},
        "status": {"type": "string"},
        "frames_offered": {"type": "integer"},
        "frames_accepted": {"type": "integer"},
        "tokens_accepted": {"type": "integer"},
        "latency_ms": {"type": "number"},
        "max_tokens": {"type": "integer", "description": "the tokens it was asked for (B1)"},
        "share": {"type": "integer", "description": "its share of the budget"},
        "share_apart": {
            "type": "string",
            "description": "why its share was kept out of the split the providers expected "
            "to answer shared (warming, starting, no_consent, restarting, failed, down): "
            "share is then its nominal one, and the others were asked for more",
        },
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "phase": {
                    "type": "string",
                    "description": "a warming leg's: the warm-up phase its provider last "
                    "reported (load, load model, embed …)",
                },
                "stderr_tail": {
                    "type": "string",
                    "description": "when its process failed: the last lines it wrote on "
                    "its stderr, joined by ' | ', bounded",
                },
            },
            "required": ["code", "message"],
        },
        "violations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "rule": {"type": "string"},
                    "field": {"type": "string"},
                    "message": {"type": "string"},
                    "severity": {"type": "string"},
                },
                "required": ["rule", "field", "message"],
            },
        },
        "missing_scopes": {"type": "array", "items": {"type": "string"}},
        "note": {
            "type": "string",
            "description": "why an ok leg gave nothing, when hostd can tell (nothing fit), "
            "or what it lost of its answer (an MCP tool or resource that gave no results)",
        },
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
                    "rank": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "its place in the ranking, 0 the best; the citations "
                        "are in prompt order, which the placement decides (edges: the best "
                        "first, the next best last)",
                    },
                    "frame": _FRAME_ID,
                    "provenance": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "type": {
                                    "type": "string",
                                    "description": "file, derivation, … (an open vocabulary)",
                                },
                                "uri": {"type": "string"},
                                "range": {
                                    "type": "string",
                                    "description": "the lines cited, L<start>-<end> (1-based, "
                                    "inclusive), of a file source",
                                },
                                "digest": {
                                    "type": "string",
                                    "description": "sha256:<hex> of the cited lines' bytes as "
                                    "the file held them",
                                },
                                "method": {"type": "string"},
                                "by": {"type": "string"},
                            },
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
                "policy": {
                    "type": "object",
                    "description": "how it was ranked and placed",
                    "properties": {
                        "strategy": {"type": "string"},
                        "placement": {"type": "string"},
                        "strategy_params": {
                            "type": ["string", "object"],
                            "description": "the strategy's own form, as the strategy "
                            "argument's JSON object form (docs/cli.md): its parameters, "
                            "a calibration's file, a reranker's verdict",
                        },
                        "overfetch": {"type": "number"},
                        "asked": {
                            "type": "object",
                            "additionalProperties": {"type": "integer"},
                            "description": "the tokens each provider was asked for",
                        },
                        "tokenizer": {"type": "string"},
                    },
                },
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
        "degraded": {"type": "boolean"},
        "degraded_reasons": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "reason": {"type": "string"},
                    "provider": {"type": "string"},
                    "detail": {"type": "string"},
                    "message": {"type": "string"},
                },
                "required": ["reason"],
            },
        },
    },
    "required": [
        "prompt",
        "citations",
        "audit",
        "providers",
        "consent_required",
        "request_id",
        "degraded",
        "degraded_reasons",
    ],
}

#: A handshake's ``provider`` (``ProviderInfo``): its name, version and data flow (C1).
_INFO = {
    "type": ["object", "null"],
    "description": "the provider's name and version from its handshake (no version when an "
    "MCP server's initialize named none); null before one",
    "properties": {
        "name": {"type": "string"},
        "version": {"type": "string"},
        "data_flow": {
            "type": "object",
            "properties": {
                "reads": {"type": "boolean"},
                "writes": {"type": "boolean"},
                "egress": {"type": "boolean"},
                "egress_scopes": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}

_KINDS = {"type": "object", "properties": {"kinds": {"type": "array", "items": {"type": "string"}}}}

#: A handshake's ``capabilities`` (``Capabilities``).
_CAPABILITIES = {
    "type": ["object", "null"],
    "description": "what its handshake declared (query kinds, verify …); null before one",
    "properties": {
        "query": _KINDS,
        "correlation": {"type": "boolean"},
        "graph": {"type": "boolean"},
        "embeddings_fingerprint": {"type": "string"},
        "verify": {"type": "boolean"},
        "representations": {"type": "array", "items": {"type": "string"}},
        "resolve": {"type": "boolean"},
        "remember": {**_KINDS, "description": "the entry kinds it stores (memory/remember)"},
    },
}

_COUNT = {"type": "integer", "minimum": 0}
_TEXT_OR_NULL = {"type": ["string", "null"]}

#: A row's ``health`` (``Health.to_wire`` and what the pool, the verify stage and a rerank
#: server add: docs/api.md, providers/list), every member it may carry declared.
_HEALTH = {
    "type": "object",
    "description": "its counters (starts, restarts, legs, ok, timeouts, crashes …), "
    "last_error, last_failure, stderr_tail and, while it warms, readiness and progress "
    "(docs/api.md, providers/list)",
    "properties": {
        "state": {"type": "string"},
        **dict.fromkeys(
            (
                "starts",
                "restarts",
                "consecutive_failures",
                "legs",
                "ok",
                "timeouts",
                "crashes",
                "errors",
                "quarantines",
                "no_consent",
                "consecutive_timeouts",
                "late_replies",
                "warming",
                "retries",
                "restarts_requested",
                "failing_legs",
                "partial_legs",
                "invalid_legs",
                "failed_retries",
            ),
            _COUNT,
        ),
        "last_error": _TEXT_OR_NULL,
        "last_failure": _TEXT_OR_NULL,
        "last_failure_s_ago": {"type": ["number", "null"]},
        "stderr_tail": _TEXT_OR_NULL,
        "start_timed_out": {"type": "boolean"},
        "found_nothing": _TEXT_OR_NULL,
        "readiness": {"type": "string", "description": "warming, ready or failed"},
        "progress": {
            "type": "object",
            "description": "its last warm-up note: state, phase, done of total …",
            "properties": {
                "state": {"type": "string"},
                "phase": {"type": "string"},
                "message": {"type": "string"},
                "done": _COUNT,
                "total": _COUNT,
                "elapsed_s": _COUNT,
                "answering": {"type": "boolean"},
            },
        },
        "left_s": {"type": "integer", "description": "a warm-up phase's seconds left"},
        "retry_in_s": {
            "type": "number",
            "description": "a crashed or parked one's next try",
        },
        "next_check_in_s": {
            "type": "number",
            "description": "a remote one whose server was not reached: its next check",
        },
        "pid": {"type": ["integer", "null"]},
        "stderr_lines": _COUNT,
        "stderr_suppressed": _COUNT,
        "skipped": {
            **_COUNT,
            "description": "a rerank server's: asks skipped while it cooled down",
        },
        "verification": {
            "type": "object",
            "description": "frames of its refused or unconfirmed by verification, by why",
            "properties": dict.fromkeys(
                (
                    "digest_mismatch",
                    "source_mismatch",
                    "rubber_stamp",
                    "verify_failed",
                    "verify_missing",
                    "verify_unrequested",
                    "verify_conflicting",
                ),
                _COUNT,
            ),
        },
    },
}

#: The members a ``providers/list`` row and the reranker's row share (docs/api.md).
_ROW = {
    "id": {"type": "string"},
    "binding": {"type": "string"},
    "state": {"type": "string"},
    "info": _INFO,
    "capabilities": _CAPABILITIES,
    "health": _HEALTH,
    "remote": {
        "type": "object",
        "description": 'a remote provider\'s: its url and credential ("<redacted>" or null, '
        "never the secret), exchanges",
        "properties": {
            "url": {"type": "string"},
            "credential": _TEXT_OR_NULL,
            "exchanges": _COUNT,
        },
    },
}

PROVIDERS_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "providers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    **_ROW,
                    "consent_missing": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "scopes its handshake requires with no live consent "
                        "receipt: no request asks it until the operator grants them",
                    },
                },
                "required": ["id", "binding", "state"],
            },
        },
        # The [reranker] (strategy "rerank"), null without one: its kind, its state and
        # what became of its verdicts (docs/api.md, the reranker in providers/list).
        "reranker": {
            "type": ["object", "null"],
            "properties": {
                **_ROW,
                "kind": {"type": "string", "enum": ["process", "url"]},
                "asks": {"type": "integer", "minimum": 0},
                "fallbacks": {"type": "integer", "minimum": 0},
                "last_fallback": {
                    "type": ["string", "null"],
                    "description": "why its last verdict was not used, hostd's words",
                },
                "api": {"type": "string", "description": "a rerank server's API (cohere, tei)"},
                "model": {"type": ["string", "null"]},
            },
            "required": ["kind", "state"],
        },
    },
    "required": ["providers"],
}

REPORT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "request_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 256,
            "description": "the request_id of the compose_context result the answer drew on",
        },
        "used": {
            "type": "array",
            "maxItems": 1024,
            "items": {"type": "string", "minLength": 1, "maxLength": 4096},
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


#: F4, as ``as_of``.
_TIME = (
    "a UTC time, YYYY-MM-DDTHH:MM:SSZ (a fraction allowed; a date is its midnight UTC, "
    "an offset time its UTC instant)"
)
_ENTRY_ID = {"type": "string", "minLength": 1, "maxLength": 256}
_WRITER = {
    "type": "string",
    "minLength": 1,
    "description": "the provider that stores it (default: the one configured provider "
    "that stores memories)",
}

REMEMBER_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "description": "fact (something true about the project or the world), memory "
            "(something learnt, a preference) or episode (something that happened)",
        },
        "title": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": "a short name for it, shown in the prompt's fence",
        },
        "content": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4 * 1024 * 1024,
            "description": "the text to remember, as later compositions will quote it",
        },
        "valid_from": {
            "type": "string",
            "maxLength": 64,
            "description": f"when it became true, {_TIME} (default: now)",
        },
        "valid_to": {
            "type": "string",
            "maxLength": 64,
            "description": f"when it stopped being true, {_TIME} (default: still true)",
        },
        "supersedes": {
            **_ENTRY_ID,
            "description": "the id of an entry this one replaces (mem-3: a frame id "
            "compose_context cited): it stays true only until this one's valid_from",
        },
        "provider": _WRITER,
    },
    "required": ["kind", "title", "content"],
    "additionalProperties": False,
}

REMEMBER_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "provider": {"type": "string"},
        "id": {"type": "string"},
        "recorded_at": {"type": "string"},
        "valid_from": {"type": "string"},
        "valid_to": {"type": "string"},
        "supersedes": {"type": "string"},
        "request_id": {"type": "string"},
    },
    "required": ["provider", "id", "recorded_at", "valid_from"],
}

FORGET_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {**_ENTRY_ID, "description": "the id of the entry to delete (mem-3)"},
        "provider": _WRITER,
    },
    "required": ["id"],
    "additionalProperties": False,
}

FORGET_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "provider": {"type": "string"},
        "forgotten": {"type": "string"},
        "reopened": {"type": "string"},
        "already": {"type": "boolean"},
        "request_id": {"type": "string"},
    },
    "required": ["provider", "forgotten"],
}


def remember_params(arguments: dict[str, Any]) -> dict[str, Any]:
    """``memory/remember`` params from ``remember``'s (schema-checked) arguments."""
    keys = ("kind", "title", "content", "valid_from", "valid_to", "supersedes", "provider")
    return {k: arguments[k] for k in keys if arguments.get(k) is not None}


def forget_params(arguments: dict[str, Any]) -> dict[str, Any]:
    """``memory/forget`` params from ``forget_memory``'s (schema-checked) arguments."""
    return {k: arguments[k] for k in ("id", "provider") if arguments.get(k) is not None}


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
    "timeout_ms",
    "ready_wait_ms",
    "max_frames",
    "anchors",
    "as_of",
)
#: The integer arguments: JSON Schema counts ``3.0`` an integer and lets it through, the
#: client API takes JSON integers only (``_Count``), so the mapping passes it as ``3``.
_INTEGERS = frozenset(
    k for k, v in COMPOSE_INPUT_SCHEMA["properties"].items() if v.get("type") == "integer"
)


def compose_params(arguments: dict[str, Any], ready_wait_ms: int | None = None) -> dict[str, Any]:
    """``context/compose`` params from the tool's (schema-checked) arguments. An empty
    ``providers`` is left out, so it means all, as an empty ``kinds`` means any: models
    fill an optional array with ``[]``, and the API would refuse it (none selected).
    An integer sent as ``3.0`` goes on as ``3``: the schema let it through, so the API
    must not refuse it in pydantic's words. ``ready_wait_ms``: ``hostd mcp``'s own wait
    for providers that are not ready, sent when the call names neither it nor
    ``timeout_ms`` (a ``timeout_ms`` alone bounds their start, as the API has it)."""
    params = {
        k: int(arguments[k]) if k in _INTEGERS else arguments[k]
        for k in _ARGUMENTS
        if arguments.get(k) is not None and (k != "providers" or arguments[k])
    }
    if ready_wait_ms is not None and "ready_wait_ms" not in params and "timeout_ms" not in params:
        params["ready_wait_ms"] = ready_wait_ms
    return params


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
        "citations": ranked_citations(result),
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
        "degraded": bool(result.get("degraded", False)),
        "degraded_reasons": result.get("degraded_reasons") or [],
    }


def _why(report: dict[str, Any], excluded: Counter[str], absorbed: Mapping[str, str]) -> str:
    """Why one provider's leg put nothing in the prompt, from its report and the
    exclusion reasons of its frames (hostd's own words and figures only)."""
    status = str(report.get("status"))
    if report.get("missing_scopes"):
        return f"{status}: needs consent for {', '.join(report['missing_scopes'])}"
    warming = warming_state(report)
    if warming is not None:  # what it is doing, not the refusal it answered
        return f"{status}: {warming}"
    if status != "ok":
        error = report.get("error") or {}
        detail = error.get("message") or error.get("code")
        return f"{status}: {detail}" if detail else status
    if report.get("note"):  # nothing fit its share, part lost, an old index (hostd's words)
        return f"ok: {report['note']}"
    offered = int(report.get("frames_offered") or 0)
    if not offered:
        return "ok, no frames matched"
    # Frames another provider's block took in name that block (``absorbed_words``).
    reasons = ", ".join(
        f"{reason} x{n}" + (f" {absorbed[reason]}" if reason in absorbed else "")
        for reason, n in sorted(excluded.items())
    )
    return f"ok, {offered} frames offered, none included" + (f" ({reasons})" if reasons else "")


def no_evidence(
    result: dict[str, Any], config: str | None = None, connect: str | None = None
) -> str | None:
    """The tool error text for a composition with nothing cited: each provider and
    why it gave nothing, then what to do about those still warming up (``config``:
    the config hostd was started with, named in the commands; ``connect``: the
    daemon's socket under ``--connect``); ``None`` when the prompt cites evidence."""
    if result.get("citations"):
        return None
    excluded: dict[str, Counter[str]] = {}
    for entry in (result.get("audit") or {}).get("entries") or []:
        if entry.get("disposition") != "included":
            pid = str((entry.get("frame") or {}).get("provider_id"))
            excluded.setdefault(pid, Counter())[str(entry.get("reason"))] += 1
    reports = result.get("providers") or []
    lines = [
        f"- {pid}: {_why(p, excluded.get(pid, Counter()), absorbed_words(result, pid))}"
        for p in reports
        for pid in [str(p.get("provider_id"))]
    ]
    head = "hostd: no evidence for this goal [no_evidence]"
    advice = budget_advice(result)
    if advice is not None:  # there was evidence: none of it fit the budget
        head = "hostd: no evidence fit the budget [no_evidence]"
    return "\n".join(
        [
            head + (":" if lines else "; no provider was asked"),
            *lines,
            *([f"hostd: {advice}: pass a larger budget"] if advice else []),
            *warming_hints(result, config, connect),
        ]
    )


def warming_hints(
    result: dict[str, Any], config: str | None, connect: str | None = None
) -> list[str]:
    """One text naming the providers still warming up (they go on building while
    ``hostd mcp`` or its daemon runs) and what to do; none when no leg was warming.
    Another naming those in a crash loop (``restarting_advice``), when one was. In
    process (no ``connect``) it also says that each ``hostd mcp`` process loads the
    models anew, and how a daemon keeps them loaded."""
    option = f" --config {config}" if config else ""
    where = "mcp" if connect is None else "mcp_connect"
    # The model reads no leg line: each one is named with what it is doing.
    phases = warming_phases(result)
    starting = warming_starts(result)
    advice = warming_advice(
        list(phases), where=where, config=option, phases=phases, starting=starting
    )
    # A crash loop's leg (not warming up: calling again will not help) has its own text.
    looping = restarting_advice(restarting_failures(result), where=where, config=option)
    return [f"hostd: {line}" for line in (advice, looping) if line is not None]


#: Leg statuses that gave the composition nothing for a reason the model should hear
#: (warming, consent and a crash loop's ``crashed``, code ``restarting``, have hints of
#: their own; ``skipped`` was not asked).
_FAILED_LEGS = ("timeout", "crashed", "error", "quarantined")
#: A partial leg's note shown in its hint, at most (hostd's words, yet one per lost tool
#: of a config that may name many: the text reaches the model's prompt).
_SHOWN_NOTE = 300


def _partial(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``ok`` legs that lost part of their answer (``provider_partial``: an MCP tool
    or resource read that failed or ran out of time), in the order of ``providers``."""
    ids = {
        d.get("provider")
        for d in result.get("degraded_reasons") or []
        if d.get("reason") == "provider_partial"
    }
    return [
        p
        for p in result.get("providers") or []
        if p.get("status") == "ok" and p.get("provider_id") in ids
    ]


def failed_hints(
    result: dict[str, Any], config: str | None, connect: str | None = None
) -> list[str]:
    """One text naming the providers whose leg failed this time (a timeout, a crash, an
    error, a quarantined reply), those whose leg answered yet lost every frame it offered
    for what it sent (an invalid frame, a wrong digest: ``refused_legs``, with the counts
    by reason and the rule ids its frames broke, as the compose summary counts them), and
    those whose leg lost part of its answer (with its ``note``, hostd's words, bounded, or
    the counts and rule ids of the frames it lost of those it offered),
    so a model reading only the text knows the evidence lacks them; their own words are
    not quoted (``structuredContent.providers`` says more, and so does the command named:
    ``hostd status`` for a daemon's providers (``connect``), else ``hostd check-provider``,
    which runs the provider alone: no daemon serves a session's own providers, so
    ``status`` would find none)."""
    looping = restarting_failures(result)  # told by ``warming_hints``: keeps failing
    failed = [
        p
        for p in result.get("providers") or []
        if p.get("status") in _FAILED_LEGS and str(p.get("provider_id")) not in looping
    ]
    refused = refused_legs(result)
    partial = _partial(result)
    # Legs that lost some of their frames for what they sent, not all: named with the
    # same counts and rule ids, under "only part" (one also short of a tool: both said).
    lessened = refused_legs(result, partly=True)
    if not failed and not refused and not partial and not lessened:
        return []
    option = f" --config {config}" if config else ""
    named = []
    if failed or refused:
        gone = [f"{p.get('provider_id')} ({p.get('status')})" for p in failed]
        gone += [f"{p.get('provider_id')} (ok, but {_dropped(p, n)})" for p, n in refused]
        named.append(f"no evidence from {', '.join(gone)}")
    if partial or lessened:
        dropped = {str(p.get("provider_id")): _dropped(p, n) for p, n in lessened}
        part = []
        for p in partial:
            pid = str(p.get("provider_id"))
            also = f"; {dropped.pop(pid)}" if pid in dropped else ""
            part.append(f"{pid} ({_shown_note(p)}{also})")
        part += [f"{pid} (ok, but {words})" for pid, words in dropped.items()]
        named.append(f"only part of the evidence from {', '.join(part)}")
    told = [*failed, *(p for p, _ in refused), *partial]
    told += [p for p, _ in lessened if p not in partial]
    if connect is not None:
        how = f"`hostd{option} status` says why"
    else:
        checks = ", ".join(
            f"`hostd{option} check-provider --provider {p.get('provider_id')}`" for p in told
        )
        runs = "runs it alone and says" if len(told) == 1 else "run each alone and say"
        how = f"{checks} {runs} why"
    return [
        f"hostd: {', and '.join(named)} this time: the evidence above lacks "
        f"what {'it holds' if len(told) == 1 else 'they hold'}; {how}"
    ]


def _dropped(report: Mapping[str, Any], reasons: dict[str, int]) -> str:
    """``dropped_words`` of a leg that lost frames: an invalid frame's reason with
    the rule ids its frames broke (``schema, F2``), never a field or a message (a field
    path may hold a member a provider named)."""
    rules = sorted(
        {
            str(v.get("rule"))
            for v in report.get("violations") or []
            if v.get("severity", "error") == "error"
        }
    )
    return dropped_words(reasons, {"invalid_frame": ", ".join(rules)})


def _shown_note(report: dict[str, Any]) -> str:
    note = str(report.get("note") or "it lost part of its answer")
    return note if len(note) <= _SHOWN_NOTE else note[: _SHOWN_NOTE - 1] + "…"


def consent_hints(
    structured: dict[str, Any], config: str | None, connect: str | None = None
) -> list[str]:
    """One text per provider refused for want of consent (C1, C6): the scopes, and the
    command the operator runs for each, with the config hostd was started with (and
    the daemon's socket, when the consent lives in a running daemon)."""
    option = f" --config {config}" if config else ""
    via = f" --connect {connect}" if connect else ""
    hints = []
    for need in structured["consent_required"]:
        provider, scopes = need["provider"], need["scopes"]
        commands = "; ".join(f"hostd{option} consent grant {provider} {s}{via}" for s in scopes)
        hints.append(
            f"hostd: provider {provider} was not asked: it needs consent for "
            f"{', '.join(scopes)}; only the operator can grant it: {commands}"
        )
    return hints


class ProgressTrack:
    """The ``notifications/progress`` values of one call, strictly increasing (MCP
    progress: the value MUST increase with each notification).

    ``0`` when the fan-out starts; each finished leg moves to its count of legs done (a
    leg that ended warming says what its provider was doing, in its warm-up notes'
    words); a provider still warming up moves less than halfway towards the next leg, by
    halves, so its messages never reach or pass the next leg's value. Past
    ``max_notes`` warming notes between two legs, further ones are dropped (MCP:
    rate-limit progress)."""

    __slots__ = ("_base", "_last", "_notes", "max_notes", "total")

    def __init__(self, max_notes: int = 32) -> None:
        self.max_notes = max_notes
        self.total: float | None = None
        self._base = 0.0
        self._last = -math.inf
        self._notes = 0

    def start(self) -> tuple[float, float | None, str]:
        return self._sent(0.0), None, "asking the providers"

    def update(self, note: dict[str, Any]) -> tuple[float, float | None, str] | None:
        """The value, total and message for the API's ``$/progress`` ``note``, or
        ``None`` when none may be sent."""
        provider = note.get("provider")
        done = note.get("done")
        if _count(note.get("total")):  # a warm-up step's note carries it too
            self.total = float(note["total"])
        # A warm-up step has no leg count; a leg that finished still warming has one,
        # and moves the count as any finished leg does.
        if not _count(done):
            if self._notes >= self.max_notes:
                return None
            self._notes += 1
            warming = note.get("warming")
            figures: dict[str, Any] = warming if isinstance(warming, dict) else {}
            of = figures.get("done"), figures.get("total")
            where = f" {of[0]}/{of[1]}" if _count(of[0]) and _count(of[1]) else ""
            # The provider's own words are not quoted: its state only when it is one of ours.
            state = figures.get("state")
            if state not in _STATES:
                # The step with its count: 338/338 files, then 0/13430 chunks, a next step.
                state = f"warming, {warming_step(figures.get('phase'))}"
            # A long step said again (a model load): how long it has run, our words.
            elapsed = figures.get("elapsed_s")
            where += f" ({elapsed} s)" if _count(elapsed) else ""
            value = self._base + 0.5 * (1 - 0.5**self._notes)
            return self._sent(value), self.total, f"{provider}: {state}{where}"
        self._base = float(done)
        self._notes = 0
        status = note.get("status")
        if status == "warming" and note.get("phase") is not None:
            # In the words of its warm-up notes, so the last one agrees with the result.
            status = f"warming, {warming_step(note['phase'])}"
        message = f"{provider}: {status}, {note.get('frames_accepted', 0)} frames"
        return self._sent(self._base), self.total, message

    def _sent(self, value: float) -> float:
        # The daemon counts legs in order, so a leg's count is past every earlier value;
        # should one not be, it is moved just past the last value sent.
        if value <= self._last:
            value = math.nextafter(self._last, math.inf)
        self._last = value
        return value


#: A warm-up's states (hostd.provider._warmup): named in a note as they are; ``warming`` says
#: what it is doing (``warming_step``).
_STATES = frozenset({"ready", "failed"})


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
