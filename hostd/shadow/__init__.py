"""Shadow ranking: record real compositions, replay them under another policy.

Opt-in (``[shadow]`` in the config). ``ShadowRecorder`` samples compositions
in the daemon and writes each one's full candidate set with every
provider's own scores to ``shadow.db`` under the state directory
(``_store``); ``hostd shadow replay --policy P`` composes every recorded set
again under ``P`` (``_replay``) and prints how it differs from what the live
policy admitted (``_report``). Uses the composition library and the protocol
models; never the engine or the transport.
"""

from ._recorder import ShadowRecorder, shadow_path
from ._replay import Replayed, recorded_verdict, replay, replay_all
from ._report import render_replay, replay_json
from ._store import Candidate, Recorded, ShadowStore, build_record

__all__ = [
    "Candidate",
    "Recorded",
    "Replayed",
    "ShadowRecorder",
    "ShadowStore",
    "build_record",
    "recorded_verdict",
    "render_replay",
    "replay",
    "replay_all",
    "replay_json",
    "shadow_path",
]
