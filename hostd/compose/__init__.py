"""Composition: turns the frames providers returned into what the agent pastes.

A pure library over ``hostd.protocol`` (and the ``hostd.errors`` tree): no I/O,
nothing from the engine, transport or server. The pipeline is
``dedup_cross_provider`` → rank (a named ``Strategy`` from ``ranking``) →
floors, caps and packing by canonical token cost → placement → fenced
rendering (R3), with an audit entry for every offered frame.
``budget_split`` is the one piece the engine uses, before fan-out.
"""

from hostd.errors import FloorsExceedBudget

from ._admit import AdmittedRequest, admit_request
from ._budget import budget_split
from ._calibrated import Calibration, MonotoneMap
from ._candidates import CandidateSet, frame_sort_key
from ._compose import compose_for_prompt
from ._dedup import DedupDrop, Deduped, dedup_cross_provider
from ._floors import AdmittedFloors, Floor, check_floors
from ._placement import PLACEMENTS, fold_to_edges, order_by, order_by_value, place
from ._render import (
    EVIDENCE_PREAMBLE,
    TITLE_SCAN,
    citation_label_for,
    compose_context,
    escape_attribute,
    neutralize_controls,
    neutralize_fences,
    render_frame,
    title_attribute,
)
from ._reply import compose_reply
from ._rerank import RerankRequest, rerank_request
from ._result import AuditEntry, Citation, ComposedPrompt, CompositionAudit, FloorRecord
from .ranking import (
    DEFAULT_STRATEGY,
    Calibrated,
    MarginFusion,
    MaximalMarginalRelevance,
    PerProviderQuota,
    PrecomputedOrder,
    ReciprocalRankFusion,
    RoundRobinByRank,
    ScoreDescending,
    Strategy,
    is_ranking_permutation,
    rank_with,
    strategy_from_wire,
    strategy_text,
)

__all__ = [
    "DEFAULT_STRATEGY",
    "EVIDENCE_PREAMBLE",
    "TITLE_SCAN",
    "PLACEMENTS",
    "AdmittedFloors",
    "AdmittedRequest",
    "AuditEntry",
    "Calibrated",
    "Calibration",
    "CandidateSet",
    "Citation",
    "ComposedPrompt",
    "CompositionAudit",
    "DedupDrop",
    "Deduped",
    "Floor",
    "FloorRecord",
    "FloorsExceedBudget",
    "MarginFusion",
    "MaximalMarginalRelevance",
    "MonotoneMap",
    "PerProviderQuota",
    "PrecomputedOrder",
    "ReciprocalRankFusion",
    "RerankRequest",
    "RoundRobinByRank",
    "ScoreDescending",
    "Strategy",
    "admit_request",
    "budget_split",
    "check_floors",
    "citation_label_for",
    "compose_context",
    "compose_for_prompt",
    "compose_reply",
    "dedup_cross_provider",
    "escape_attribute",
    "fold_to_edges",
    "frame_sort_key",
    "is_ranking_permutation",
    "neutralize_controls",
    "neutralize_fences",
    "order_by",
    "order_by_value",
    "place",
    "rank_with",
    "render_frame",
    "rerank_request",
    "strategy_from_wire",
    "strategy_text",
    "title_attribute",
]
