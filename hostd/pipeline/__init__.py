"""The request path: one compose pipeline between the wire and the engine.

``server -> pipeline -> engine -> transport -> protocol`` and
``pipeline -> compose -> protocol``. A ``Pipeline`` runs one request end to end
in named stages: price floors → fan out → prepare strategy → compose → record →
report. A strategy that needs state or I/O (``calibrated``, ``rerank``) is
prepared by a ``Preparer`` chosen by its type (``_prepare``); what is recorded
for shadow replay and feedback is one ``hostd.quality.Composition``; the report
stage computes the one ``degraded`` flag and its reasons (``_degraded``). The
server (``hostd.server``) is the wire in front of it; in-process callers
(``hostd mcp``, the CLI) call it without an envelope. It never speaks to a
provider itself (that is the engine) and never ranks or renders (the
composition library).
"""

from ._degraded import REASONS, Degraded, degradations, leg_degradation
from ._pipeline import USAGE_KEPT, Pipeline
from ._prepare import CalibratedPreparer, Prepared, Preparer, RerankPreparer, preparers
from ._request import ComposeRequest, FloorRequest, Progress, QueryRequest

__all__ = [
    "REASONS",
    "USAGE_KEPT",
    "CalibratedPreparer",
    "ComposeRequest",
    "Degraded",
    "FloorRequest",
    "Pipeline",
    "Prepared",
    "Preparer",
    "Progress",
    "QueryRequest",
    "RerankPreparer",
    "degradations",
    "leg_degradation",
    "preparers",
]
