"""The evidence-quality harness: does a policy put the gold passage in the prompt?

``hostd eval --config C --questions Q.jsonl`` reads a question set
(``_questions``), asks each question through the configured providers and
composes it under every named policy and budget, and under each provider
alone (``_run``), then prints recall per style and policy (``_report``). It
uses the client API (a running daemon or one in-process) and the composition
library; it never ranks by itself.
"""

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
    Outcome,
    Policy,
    Session,
    alone,
    holds_gold,
    run_eval,
)

__all__ = [
    "DEFAULT_POLICIES",
    "OFFERED",
    "STYLES",
    "Gold",
    "Outcome",
    "Paired",
    "Policy",
    "Question",
    "QuestionSetError",
    "Row",
    "Session",
    "alone",
    "degraded_note",
    "holds_gold",
    "load_questions",
    "parse_questions",
    "paired",
    "render_paired",
    "render_table",
    "run_eval",
    "summarise",
    "to_json",
]
