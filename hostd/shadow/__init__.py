"""Shadow ranking: record real compositions, replay them under another policy.

Opt-in (``[shadow]`` in the config). ``ShadowRecorder`` samples compositions
in the daemon and writes each one's full candidate set with every
provider's own scores to ``shadow.db`` under the state directory
(``_store``); ``hostd shadow replay --policy P`` composes every recorded set
again under ``P`` (``_replay``) and prints how it differs from what the live
policy admitted (``_report``). Requests can carry feedback, the frames the
answer used (``_feedback``), which replay measures and ``hostd calibrate``
fits the ``calibrated`` policy on (``_calibrate``). Uses the composition
library and the protocol models; never the engine or the transport.
"""

from ._calibrate import (
    MIN_FRAMES,
    MIN_REQUESTS,
    bind_calibration,
    calibration_path,
    fit_calibration,
    isotonic,
    load_calibration,
    parse_calibration,
    write_calibration,
)
from ._credit import credited, members_of
from ._feedback import Feedback, resolve_used
from ._frames import recorded_frames
from ._held import Composition, Held, build_record, hold
from ._record import Candidate, Recorded
from ._recorder import ShadowRecorder, shadow_path
from ._replay import (
    Replayed,
    live_strategy,
    recorded_verdict,
    replay,
    replay_all,
)
from ._report import render_replay, replay_json, used_summary
from ._store import ShadowStore

__all__ = [
    "MIN_FRAMES",
    "MIN_REQUESTS",
    "Candidate",
    "Composition",
    "Feedback",
    "Held",
    "Recorded",
    "Replayed",
    "ShadowRecorder",
    "ShadowStore",
    "bind_calibration",
    "build_record",
    "calibration_path",
    "credited",
    "fit_calibration",
    "hold",
    "isotonic",
    "live_strategy",
    "load_calibration",
    "members_of",
    "parse_calibration",
    "recorded_frames",
    "recorded_verdict",
    "render_replay",
    "replay",
    "replay_all",
    "replay_json",
    "resolve_used",
    "shadow_path",
    "used_summary",
    "write_calibration",
]
