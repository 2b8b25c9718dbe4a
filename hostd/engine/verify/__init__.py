"""The verification and reuse stage between fan-out and composition (D2–D4, F5, F17, V1–V4).

``VerifyStage`` (``_stage``) runs a turn in three steps: ``plan`` which held
frames to revalidate with whom, ``ask`` (``context/verify``, concurrent with the
fresh legs, each ended by its provider's deadline) and ``finish`` (judge the
verdicts, check inline digests and re-read sources, merge reused and fresh
frames, hold this turn's frames). The decisions are pure functions in
``_rules``; ``_source`` re-reads files under trusted roots; ``_reuse`` is the
session cache. Nothing here talks to a transport (``send_verify`` is given).
"""

from ._reuse import DEFAULT_MAX_FRAMES_PER_SESSION, DEFAULT_MAX_FRAMES_TOTAL, HeldFrame, ReuseCache
from ._rules import (
    UNTRUSTED_CHOICES,
    Decision,
    Exclusion,
    InlineCheck,
    InlineOutcome,
    VerdictJudgement,
    VerificationState,
    VerifyPlanEntry,
    build_verify_requests,
    check_inline_digest,
    decide_frame,
    judge_verdicts,
    merge_candidates,
)
from ._source import (
    DEFAULT_MAX_SOURCE_BYTES,
    SourceCheck,
    SourceOutcome,
    SourceReader,
    Unverifiable,
    file_uri_path,
)
from ._stage import VerifyStage, verify_stage
from ._turn import (
    DEFAULT_VERIFY_TIMEOUT_MS,
    SendVerify,
    StageResult,
    VerifyPlan,
    VerifyReply,
    ask_one,
)

__all__ = [
    "UNTRUSTED_CHOICES",
    "DEFAULT_MAX_FRAMES_PER_SESSION",
    "DEFAULT_MAX_FRAMES_TOTAL",
    "DEFAULT_MAX_SOURCE_BYTES",
    "DEFAULT_VERIFY_TIMEOUT_MS",
    "Decision",
    "Exclusion",
    "HeldFrame",
    "InlineCheck",
    "InlineOutcome",
    "ReuseCache",
    "SendVerify",
    "SourceCheck",
    "SourceOutcome",
    "SourceReader",
    "StageResult",
    "Unverifiable",
    "VerdictJudgement",
    "VerificationState",
    "VerifyPlan",
    "VerifyPlanEntry",
    "VerifyReply",
    "VerifyStage",
    "ask_one",
    "build_verify_requests",
    "check_inline_digest",
    "decide_frame",
    "file_uri_path",
    "judge_verdicts",
    "merge_candidates",
    "verify_stage",
]
