"""Quality: what a composition was worth, measured on recorded traffic and question sets.

One package for everything that judges ranking after the fact; a library of the
CLI (``hostd shadow replay``, ``hostd eval``, ``hostd calibrate``) and of the
pipeline (which records into it), never of the engine, the transport or the
composition library (``tests/test_layers.py``).

Shadow records (opt-in, ``[shadow]`` in the config). ``ShadowRecorder``
(``_recorder``) samples compositions in the daemon and writes each one's full
candidate set with every provider's own scores (``_record``, built once per
composition by ``_held``) to ``shadow.db`` under the state directory
(``_store``). Requests can carry feedback, the frames the answer used
(``_feedback``), credited to every copy dedup folded into a used frame
(``_credit``).

Replay. ``hostd shadow replay --policy P`` composes every recorded set again
under ``P`` (``_replay``, from the frames ``_frames`` rebuilds) and prints how it
differs from what the live policy admitted (``_replay_report``).

Calibration. ``hostd calibrate`` fits the ``calibrated`` policy's per-provider
maps on the feedback (``_calibrate``); the pipeline binds them when a request
asks for that policy.

Eval. ``hostd eval --config C --questions Q.jsonl`` reads a question set
(``_questions``), asks each question through the configured providers and
composes it under every named policy and budget, and under each provider alone
(``_run``), with the daemon's verification states and span merges
(``_sources``), judging gold by file and phrase (``_gold``), then prints recall
per style and policy, prompt tokens per question recalled and the median frames
in the prompt (``_eval_report``). ``--from-shadow`` draws the questions from
recorded traffic with feedback instead (``_traffic``), scored the same way. It
uses the client API (a running daemon or one in-process) and the composition
library; it never ranks by itself.

Each name loads its module with the name's first use (``_LAZY``): a daemon records,
takes feedback and binds calibrations only when its config or a request asks, and the
CLI's faces are the commands', so a daemon's start loads none of this package but the
calibration file's name (``_paths``).
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from ._calibrate import (
        MIN_FRAMES,
        MIN_REQUESTS,
        bind_calibration,
        fit_calibration,
        isotonic,
        load_calibration,
        parse_calibration,
        write_calibration,
    )
    from ._credit import credited, members_of
    from ._eval_report import (
        Paired,
        Row,
        degraded_note,
        paired,
        render_paired,
        render_table,
        summarise,
        to_json,
    )
    from ._feedback import Feedback, resolve_used
    from ._frames import recorded_frames
    from ._gold import holds_gold, trim_to_gold
    from ._held import Composition, Held, build_record, hold
    from ._paths import calibration_path, shadow_path
    from ._questions import (
        STYLES,
        Gold,
        Question,
        QuestionSetError,
        load_questions,
        parse_questions,
    )
    from ._record import Candidate, Recorded
    from ._recorder import ShadowRecorder
    from ._replay import (
        Replayed,
        live_strategy,
        recorded_verdict,
        replay,
        replay_all,
    )
    from ._replay_report import render_replay, replay_json, used_summary
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
    from ._sources import spans_unmerged
    from ._store import ShadowStore
    from ._traffic import TRAFFIC, TrafficQuestion, asked_from_shadow, run_from_shadow

#: Each name's module, loaded by the first use of the name: a daemon records, takes
#: feedback and binds calibrations only when its config or a request asks (``[shadow]``,
#: the ``calibrated`` policy), and the CLI's faces (replay, eval, their question sets,
#: reports and traffic) are the commands'; a daemon's start loads none of them.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "MIN_FRAMES",
            "MIN_REQUESTS",
            "bind_calibration",
            "fit_calibration",
            "isotonic",
            "load_calibration",
            "parse_calibration",
            "write_calibration",
        ),
        "._calibrate",
    ),
    **dict.fromkeys(("credited", "members_of"), "._credit"),
    **dict.fromkeys(("Feedback", "resolve_used"), "._feedback"),
    "recorded_frames": "._frames",
    **dict.fromkeys(("Composition", "Held", "build_record", "hold"), "._held"),
    **dict.fromkeys(("Candidate", "Recorded"), "._record"),
    **dict.fromkeys(("calibration_path", "shadow_path"), "._paths"),
    "ShadowRecorder": "._recorder",
    "spans_unmerged": "._sources",
    "ShadowStore": "._store",
    **dict.fromkeys(
        (
            "Paired",
            "Row",
            "degraded_note",
            "paired",
            "render_paired",
            "render_table",
            "summarise",
            "to_json",
        ),
        "._eval_report",
    ),
    **dict.fromkeys(("holds_gold", "trim_to_gold"), "._gold"),
    **dict.fromkeys(
        ("STYLES", "Gold", "Question", "QuestionSetError", "load_questions", "parse_questions"),
        "._questions",
    ),
    **dict.fromkeys(
        ("Replayed", "live_strategy", "recorded_verdict", "replay", "replay_all"), "._replay"
    ),
    **dict.fromkeys(("render_replay", "replay_json", "used_summary"), "._replay_report"),
    **dict.fromkeys(
        (
            "DEFAULT_POLICIES",
            "OFFERED",
            "TRIM_ORACLE",
            "Asked",
            "Outcome",
            "Policy",
            "Session",
            "Verified",
            "alone",
            "run_eval",
            "score_asked",
        ),
        "._run",
    ),
    **dict.fromkeys(
        ("TRAFFIC", "TrafficQuestion", "asked_from_shadow", "run_from_shadow"), "._traffic"
    ),
}

__all__ = [
    "DEFAULT_POLICIES",
    "MIN_FRAMES",
    "MIN_REQUESTS",
    "OFFERED",
    "STYLES",
    "TRAFFIC",
    "TRIM_ORACLE",
    "Asked",
    "Candidate",
    "Composition",
    "Feedback",
    "Gold",
    "Held",
    "Outcome",
    "Paired",
    "Policy",
    "Question",
    "QuestionSetError",
    "Recorded",
    "Replayed",
    "Row",
    "Session",
    "ShadowRecorder",
    "ShadowStore",
    "TrafficQuestion",
    "Verified",
    "alone",
    "asked_from_shadow",
    "bind_calibration",
    "build_record",
    "calibration_path",
    "credited",
    "degraded_note",
    "fit_calibration",
    "hold",
    "holds_gold",
    "isotonic",
    "live_strategy",
    "load_calibration",
    "load_questions",
    "members_of",
    "paired",
    "parse_calibration",
    "parse_questions",
    "recorded_frames",
    "recorded_verdict",
    "render_paired",
    "render_replay",
    "render_table",
    "replay",
    "replay_all",
    "replay_json",
    "resolve_used",
    "run_eval",
    "run_from_shadow",
    "score_asked",
    "shadow_path",
    "spans_unmerged",
    "summarise",
    "to_json",
    "trim_to_gold",
    "used_summary",
    "write_calibration",
]


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once: the next lookup is the module's own
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
