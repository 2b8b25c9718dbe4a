"""The verification and reuse stage between fan-out and composition (D2–D4, F5, F17, V1–V4).

``VerifyStage`` (``_stage``) runs a turn as ``plan`` (which held frames to
revalidate with whom; the fan-out sends each ``context/verify`` with ``ask_one``
beside the fresh legs, ended by its provider's deadline), ``check`` (the one I/O
step: the verdicts judged by ``judge_held``, then inline digests and sources
read), ``merge`` (pure: each frame decided once, reused and fresh merged) and
``record`` (evictions, this turn's frames held, counters). The decisions are
pure functions in ``_rules`` and ``_judge``; ``_source`` re-reads files under
trusted roots, keeping files across passes while their ``stat`` identity holds
(``_files``); ``_reuse`` is the session cache. Nothing here talks to a transport.
"""

from ._files import DEFAULT_CACHE_BYTES, SETTLE_NS, SourceCache, SourceFile
from ._judge import Checked, HeldJudgement, judge_held, merge
from ._reuse import DEFAULT_MAX_FRAMES_PER_SESSION, DEFAULT_MAX_FRAMES_TOTAL, HeldFrame, ReuseCache
from ._rules import (
    UNTRUSTED_CHOICES,
    Decision,
    Exclusion,
    InlineCheck,
    InlineMemo,
    InlineOutcome,
    VerdictJudgement,
    VerificationState,
    VerifyPlanEntry,
    build_verify_requests,
    check_inline_digest,
    decide_frame,
    judge_verdicts,
)
from ._source import (
    DEFAULT_MAX_SOURCE_BYTES,
    SourceCheck,
    SourceOutcome,
    SourceReader,
    Unverifiable,
    file_uri_path,
)
from ._stage import VerifyStage
from ._turn import (
    SendVerify,
    StageResult,
    VerifyPlan,
    VerifyReply,
    ask_one,
)

__all__ = [
    "UNTRUSTED_CHOICES",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_MAX_FRAMES_PER_SESSION",
    "DEFAULT_MAX_FRAMES_TOTAL",
    "DEFAULT_MAX_SOURCE_BYTES",
    "Checked",
    "Decision",
    "Exclusion",
    "HeldFrame",
    "HeldJudgement",
    "InlineCheck",
    "InlineMemo",
    "InlineOutcome",
    "ReuseCache",
    "SETTLE_NS",
    "SendVerify",
    "SourceCache",
    "SourceCheck",
    "SourceFile",
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
    "judge_held",
    "judge_verdicts",
    "merge",
]
