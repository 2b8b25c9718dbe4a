"""The fan-out engine: ``Host`` runs one request's query across every provider.

Owns provider lifecycle and restart policy (``_health``), the consent gate
before any payload (C1, C2, C6), the concurrent legs with per-leg timeouts,
the leg audit (B1–B4, Q1, Q2, frame rules; quarantine, B2), the usage report
(UR1) and the hand-off to the verification stage. It talks to providers only
through ``hostd.transport`` and imports ``budget_split`` (nothing else) from
``hostd.compose``.
"""

from ._audit import QUARANTINE_RULES, LegAudit, audit_leg, looks_like_instructions
from ._gate import ConsentGate, missing_consent
from ._health import (
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    StartDecision,
    backoff_delay,
    decide_start,
    record_failure,
    record_leg,
    record_started,
)
from ._host import Host, LegDone
from ._report import Excluded, FanOut, LegReport, LegStatus, honest_cost
from ._spec import ProviderSpec
from .consent import ConsentStore, required_scopes

__all__ = [
    "QUARANTINE_RULES",
    "ConsentGate",
    "ConsentStore",
    "Excluded",
    "FanOut",
    "Health",
    "Host",
    "LegAudit",
    "LegDone",
    "LegReport",
    "LegStatus",
    "ProviderSpec",
    "ProviderState",
    "RestartPolicy",
    "StartAction",
    "StartDecision",
    "audit_leg",
    "backoff_delay",
    "decide_start",
    "honest_cost",
    "looks_like_instructions",
    "missing_consent",
    "record_failure",
    "record_leg",
    "record_started",
    "required_scopes",
]
