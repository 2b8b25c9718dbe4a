"""The evidence-quality harness: does a policy put the gold passage in the prompt?

``hostd eval --config C --questions Q.jsonl`` reads a question set
(``_questions``), asks each question through the configured providers and
composes it under every named policy and budget, and under each provider
alone (``_run``), with the daemon's verification states and span merges
(``_sources``), then prints recall per style and policy, prompt tokens per
question recalled and the median frames in the prompt (``_report``). It
uses the client API (a running daemon or one in-process) and the composition
library; it never ranks by itself. ``--from-shadow`` draws the questions from
recorded traffic with feedback instead (``_shadow``), scored the same way.
"""

from ._gold import holds_gold, trim_to_gold
from ._questions import STYLES, Gold, Question, QuestionSetError, load_questions, parse_questions
from ._report import (
    Paired,
    Row,
    degraded_note,
    paired,
    render_paired,
    render_table,
    summarise,
    to_json,
)
from ._run import (
    DEFAULT_POLICIES,
    OFFERED,
    TRIM_ORACLE,
    Asked,
    Outcome,
    Policy,
    Session,
    Verified,
    alone,
    run_eval,
    score_asked,
)
from ._shadow import TRAFFIC, TrafficQuestion, asked_from_shadow, run_from_shadow

__all__ = [
    "DEFAULT_POLICIES",
    "OFFERED",
    "STYLES",
    "TRAFFIC",
    "TRIM_ORACLE",
    "Asked",
    "Gold",
    "Outcome",
    "Paired",
    "Policy",
    "Question",
    "QuestionSetError",
    "Row",
    "Session",
    "TrafficQuestion",
    "Verified",
    "alone",
    "asked_from_shadow",
    "degraded_note",
    "holds_gold",
    "load_questions",
    "parse_questions",
    "paired",
    "render_paired",
    "render_table",
    "run_eval",
    "run_from_shadow",
    "score_asked",
    "summarise",
    "to_json",
    "trim_to_gold",
]
