"""The fan-out engine: ``Host`` runs one request's query across every provider.

Owns provider lifecycle and restart policy (``_pool``, ``_health``; a start's I/O:
``_launch``), the provider spec (``_spec``: its binding checked against the transport's
binding registry), the fan-out as plan → run → judge (``_plan``, ``_run``, ``_judge``):
the consent gate before any payload (``_gate``, ``consent``: C1, C2, C6), the concurrent
legs with one deadline per provider, the leg audit (``_leg_audit``: B1–B4, Q1, Q2, frame
rules; quarantine, B2), the usage report (``_report``, UR1), a memory write to one
provider (``_write``), the verification stage (``verify``) and the reranker: a process
(``_rerank``) or a standard rerank server (``_rerank_http`` over ``_rerank_api``). It
talks to providers only through ``hostd.transport`` (whose registry brings each
binding's client: the engine names no binding module and imports no face, not
``hostd.mcp``), imports ``budget_split`` and the reranker's request and verdict
(``rerank_request``: ``rerank_order`` asks for a verdict in one call) from
``hostd.compose``, and never renders.
"""

from ._declared import HandshakeRecords, spec_digest
from ._engine import Engine
from ._gate import ConsentGate, missing_consent
from ._health import (
    MAX_ERROR_CHARS,
    CoolDownPolicy,
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    StartDecision,
    ask_cool_down_s,
    awaits_start,
    backoff_delay,
    bounded_error,
    check_delay,
    check_due,
    cool_down_s,
    decide_ask,
    decide_parked,
    decide_start,
    failure_text,
    idle_restart_in,
    is_hung,
    is_parked,
    is_warming_leg,
    record_answer,
    record_down,
    record_failure,
    record_leg,
    record_refusals,
    record_refused,
    record_restart_requested,
    record_retry,
    record_started,
    record_untrusted,
    restart_due,
    restarts_behind,
    retry_cool_down_s,
    retry_due,
)
from ._host import Host, LegDone, ProgressDone
from ._judge import JudgedLeg, judge, judge_leg
from ._launch import Launcher, PoolSettings
from ._leg_audit import QUARANTINE_RULES, LegAudit, audit_leg, looks_like_instructions
from ._plan import (
    Expect,
    FanOutPlan,
    LegAction,
    LegPlan,
    ProviderView,
    asked_at,
    gate,
    least_budget,
    plan_fan_out,
)
from ._pool import ProviderPool, Reconfigured
from ._report import Excluded, FanOut, LegReport, LegStatus, honest_cost
from ._rerank import RERANKER_ID, Reranker, RerankOutcome, RerankService, rerank_order
from ._rerank_api import RerankApi, rerank_url
from ._rerank_http import HttpReranker, RerankServer
from ._run import LegReply, run_fan_out
from ._spec import ProviderSpec
from ._write import WRITE_TIMEOUT_MS, choose_writer, refusal_words
from .consent import ConsentStore, consent_destination, required_scopes

__all__ = [
    "MAX_ERROR_CHARS",
    "QUARANTINE_RULES",
    "RERANKER_ID",
    "WRITE_TIMEOUT_MS",
    "ConsentGate",
    "ConsentStore",
    "CoolDownPolicy",
    "Engine",
    "Excluded",
    "FanOut",
    "Expect",
    "FanOutPlan",
    "HandshakeRecords",
    "Health",
    "Host",
    "HttpReranker",
    "JudgedLeg",
    "Launcher",
    "LegAction",
    "LegAudit",
    "LegDone",
    "LegPlan",
    "LegReply",
    "LegReport",
    "LegStatus",
    "PoolSettings",
    "ProgressDone",
    "ProviderPool",
    "Reconfigured",
    "ProviderSpec",
    "ProviderState",
    "ProviderView",
    "RerankApi",
    "RerankOutcome",
    "RerankServer",
    "RerankService",
    "rerank_order",
    "Reranker",
    "RestartPolicy",
    "StartAction",
    "StartDecision",
    "asked_at",
    "ask_cool_down_s",
    "audit_leg",
    "awaits_start",
    "backoff_delay",
    "bounded_error",
    "check_delay",
    "check_due",
    "choose_writer",
    "consent_destination",
    "cool_down_s",
    "decide_ask",
    "decide_parked",
    "decide_start",
    "failure_text",
    "idle_restart_in",
    "gate",
    "honest_cost",
    "is_hung",
    "is_warming_leg",
    "is_parked",
    "judge",
    "judge_leg",
    "least_budget",
    "looks_like_instructions",
    "missing_consent",
    "plan_fan_out",
    "record_answer",
    "record_down",
    "record_failure",
    "record_leg",
    "record_refused",
    "record_refusals",
    "record_restart_requested",
    "record_retry",
    "record_started",
    "record_untrusted",
    "restart_due",
    "restarts_behind",
    "rerank_url",
    "retry_cool_down_s",
    "retry_due",
    "required_scopes",
    "run_fan_out",
    "spec_digest",
    "refusal_words",
]
