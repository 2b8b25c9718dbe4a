"""Progress bars on a terminal for providers that warm up, and ``hostd warm``.

Fed with ``(provider_id, progress)`` as the engine hears each provider's
``context/progress`` (or, over ``--connect``, the ``$/progress`` notes the
daemon forwards): one tqdm bar per provider on stderr, its description the
phase, its total the provider's figure when it gives one. tqdm rather than
hand-drawn bars: it sizes, rate-limits and clears itself on any terminal.
Off unless stderr is a terminal, so pipes and logs stay clean; there ``hostd warm``
writes plain lines instead (``ProgressLines``), few enough for a log. Either way a
provider's own word on its warm-up (``message``: how many chunks it embeds) is written
once, and Ctrl-C ends ``hostd warm`` saying where each warm-up stood
(``interrupted_line``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.abc

from hostd._hints import RESTARTING, restarting_advice, restarting_last

from ._common import ProgressListener, connect_arg, session, time_left
from ._daemon import provider_state
from ._outcome import config_hint

if TYPE_CHECKING:
    from tqdm import tqdm

    from hostd.config import Config

__all__ = [
    "PROGRESS_LINE_INTERVAL_S",
    "ProgressBars",
    "ProgressLines",
    "add_warm_command",
    "forward_progress",
    "interrupted_line",
    "warm_command",
]

#: How often, at most, a warming provider's progress line is written without bars: a
#: log of a long build (thousands of chunks to embed) shows it alive, and stays short.
PROGRESS_LINE_INTERVAL_S = 30.0


def _tqdm() -> type[tqdm[Any]]:
    """tqdm, imported when a bar is drawn: only on a terminal, while a provider warms."""
    from tqdm import tqdm

    return tqdm


class ProgressBars:
    """``bars(provider_id, progress)`` draws; ``bars.close()`` clears every bar."""

    def __init__(self, enabled: bool | None = None, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._bars: dict[str, tqdm[Any]] = {}
        self._phase: dict[str, str] = {}
        self._told: dict[str, str] = {}

    def __call__(self, provider_id: str, progress: dict[str, Any]) -> None:
        if not self.enabled:
            return
        state = progress.get("state", "warming")
        if state != "warming":
            bar = self._bars.pop(provider_id, None)
            if bar is not None:
                bar.close()
            said = " ".join(str(progress.get("message") or "").split())
            if state == "ready":  # what it holds, as `hostd status` says it
                word = f"ready ({said})" if said else "ready"
            else:
                word = f"failed: {said}"
            _tqdm().write(f"hostd: {provider_id} {word}", file=self.stream)
            return
        phase = str(progress.get("phase", "warming"))
        total, done = progress.get("total"), progress.get("done") or 0
        said = " ".join(str(progress.get("message") or "").split())
        if said and said != self._told.get(provider_id):  # its own word, once, above the bar
            self._told[provider_id] = said
            _tqdm().write(f"hostd: {provider_id}: {said}", file=self.stream)
        bar = self._bars.get(provider_id)
        if bar is not None and (self._phase.get(provider_id) != phase or bar.total != total):
            # A new phase, or a new total (a .hostdignore edited while it embeds: what
            # left the tree left its work), a new bar: its own total and rate.
            bar.close()
            bar = None
        if bar is None:
            # Starting from where the phase is (a build resumed from its cache): the rate
            # and the time left count what is done from now on, not the cached part.
            bar = self._bars[provider_id] = _tqdm()(
                total=total,
                initial=int(done),
                desc=f"{provider_id}: {phase}",
                file=self.stream,
                leave=False,
                dynamic_ncols=True,
            )
        self._phase[provider_id] = phase
        bar.n = int(done)
        bar.refresh()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()


class ProgressLines:
    """``hostd warm`` without bars (stderr not a terminal, ``--progress never``): each
    provider's ready line as soon as it is ready, not when the slowest is, and while
    it warms its phase and how far it got, at most every ``PROGRESS_LINE_INTERVAL_S``
    per provider, with the time left once the phase's rate is measured (as a bar's
    ETA); a new phase, or a new ``message`` of the provider's, is written at once, with
    its figure.
    ``settle`` writes a provider's final state unless it is the ready line already
    written, so each says it once."""

    def __init__(
        self, stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream or sys.stderr
        self._clock = clock
        self._last_line_at: dict[str, float] = {}
        self._said: dict[str, str] = {}
        self._told: dict[str, str] = {}
        #: Per provider, its phase's first note: (phase, total, when, done). The rate
        #: counts from there, so a build resumed from its cache is not credited its cached
        #: part, nor one whose total changed (what left the tree may have been done) the
        #: done it lost.
        self._since: dict[str, tuple[str, Any, float, int]] = {}

    def __call__(self, provider_id: str, progress: dict[str, Any]) -> None:
        state = progress.get("state", "warming")
        if state == "ready":  # what it holds, in `hostd status`'s words (provider_state)
            said = " ".join(str(progress.get("message") or "").split())
            self.settle(provider_id, f"ready ({said})" if said else "ready")
            return
        if state != "warming":  # a failure is said by `settle`, with what to do about it
            return
        now = self._clock()
        phase = str(progress.get("phase", "warming"))
        done, total = progress.get("done") or 0, progress.get("total")
        since = self._since.get(provider_id)
        new_phase = since is None or since[0] != phase
        if since is None or new_phase or since[1] != total:
            since = self._since[provider_id] = (phase, total, now, done)
        said = " ".join(str(progress.get("message") or "").split())
        news = bool(said) and said != self._told.get(provider_id)
        last = self._last_line_at.get(provider_id)
        if not (news or new_phase) and last is not None and now - last < PROGRESS_LINE_INTERVAL_S:
            return
        self._last_line_at[provider_id] = now
        figure = f" {done}/{total}" if total is not None else (f" {done}" if done else "")
        _, _, began, first = since
        # Imported here: the transport (its process and remote carriers) is the daemon's
        # and the one-shot engine's, and every other command imports this module.
        from hostd.transport import seconds_left

        left = seconds_left(first, began, done, now, total)  # as the daemon's `hostd status`
        if left is not None:
            figure += f", {time_left(left)}"
        line = f"warming ({phase}{figure})"
        if news:
            self._told[provider_id] = said
            line += f": {said}"
        self._write(provider_id, line)

    def settle(self, provider_id: str, state: str) -> None:
        """Say a provider's state (``provider_state``'s words) unless already said."""
        if self._said.get(provider_id) != state:
            self._said[provider_id] = state
            self._write(provider_id, state)

    def close(self) -> None:
        """Nothing drawn to clear: what was written stays, as in a log."""

    def _write(self, provider_id: str, state: str) -> None:
        self.stream.write(f"hostd: {provider_id}: {state}\n")
        self.stream.flush()  # a log tailed meanwhile sees it now, not at exit


def interrupted_line(
    standing: dict[str, dict[str, Any]], *, hint: str = "", daemon: Path | None = None
) -> str:
    """What ``hostd warm`` says when Ctrl-C stops it: where each warm-up not yet ready
    stood (``standing``: its last progress) and what to do. One shot, the providers stop
    with it and keep what they cached (``semantic``: its chunks and every batch embedded,
    counted in its ``done``), so the next ``hostd warm`` goes on from there;
    a daemon's (``daemon``: its socket) go on warming without it."""
    where = [
        f"{pid} at {progress.get('phase', 'start')}{_figure(progress)}"
        for pid, progress in standing.items()
        if progress.get("state", "warming") == "warming"
    ]
    if daemon is not None:
        what = ", ".join(where) if where else "its providers"
        return (
            f"hostd: warm interrupted: the daemon at {daemon} goes on warming {what}; "
            f"`hostd status{hint}` shows how far"
        )
    if not where:
        return f"hostd: warm interrupted; run `hostd warm{hint}` again to finish"
    return (
        f"hostd: warm interrupted: {', '.join(where)} (what was done is kept); "
        f"run `hostd warm{hint}` again to go on"
    )


def _figure(progress: dict[str, Any]) -> str:
    done, total = progress.get("done") or 0, progress.get("total")
    if total is not None:
        return f" {done:,} of {total:,}"
    return f" {done:,}" if done else ""


def add_warm_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``hostd warm`` on the CLI's subparsers."""
    warm = sub.add_parser(
        "warm",
        parents=[common],
        help="start every provider and wait until each has built its index",
        description="Start the configured providers, show their progress (a bar per "
        "provider on a terminal) and wait until each is ready. What they build stays on "
        "disk for later starts, but every start (hostd serve's too) loads it again, and "
        "semantic its model. When a daemon serves this config (or with --connect), its own "
        "providers are warmed and waited for: no second set is started, and the first "
        "request after it is served warm. Exit 1 when a provider could not start within "
        "its start_timeout_s, failed its warm-up or exited.",
    )
    warm.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bars on stderr: on a terminal (auto), always, or never",
    )
    connect_arg(warm)
    warm.set_defaults(run=warm_command)


async def _stop_on_signal(
    scope: anyio.CancelScope,
    stopped_by: list[int],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Cancel ``scope`` at the first SIGINT or SIGTERM, noting which in ``stopped_by``;
    started once it listens (as the daemon's ``_watch_signals``)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            stopped_by.append(int(signum))
            scope.cancel()
            return


def forward_progress(bars: Callable[[str, dict[str, Any]], None]) -> Any:
    def forward(note: dict[str, Any]) -> None:
        if isinstance(note.get("warming"), dict):  # a provider's warm-up, not a leg's end
            bars(str(note.get("provider")), note["warming"])

    return forward


async def warm_command(cfg: Config, args: argparse.Namespace) -> int:
    """``hostd warm``: every provider started and waited for, with progress; through the
    daemon serving this config when there is one (its providers are the ones the next
    request meets; a second set beside them would build the same index twice)."""
    from hostd.errors import NoProviderAvailable
    from hostd.server import socket_is_live

    connect = args.connect
    if connect is None and socket_is_live(cfg.socket_path):
        connect = ""
        sys.stderr.write(
            f"hostd: a daemon is serving this config at {cfg.socket_path}: warming its providers\n"
        )
    if connect is None and not cfg.provider:  # nothing to warm: say where hostd looked
        raise NoProviderAvailable(cfg.no_providers())
    enabled = {"auto": None, "always": True, "never": False}[args.progress]
    bars = ProgressBars(enabled)
    lines = None if bars.enabled else ProgressLines()
    if connect is None:
        # Started by the warm-up itself, after the bars listen: they hear every note.
        host = cfg.host.model_copy(update={"start_providers": "lazy"})
        cfg = cfg.model_copy(update={"host": host})
    rows: list[dict[str, Any]] = []
    draw: ProgressListener = bars if lines is None else lines
    standing: dict[str, dict[str, Any]] = {}  # each provider's last note, for Ctrl-C

    def heard(provider_id: str, progress: dict[str, Any]) -> None:
        standing[provider_id] = progress
        draw(provider_id, progress)

    stopped_by: list[int] = []  # the signal that ended the warm-up, if one did
    result: dict[str, Any] = {}
    try:
        async with anyio.create_task_group() as tg:
            # Ctrl-C or SIGTERM cancels the warm-up's own scope (a cancel that stays
            # until the session has stopped, its providers with it), not the task from
            # outside (asyncio's default for Ctrl-C), which a scope inside may take for
            # its own. A second one, the handler gone, ends the process at once.
            await tg.start(_stop_on_signal, tg.cancel_scope, stopped_by)
            async with session(
                cfg, connect, boot=False, wait=args.wait, token_file=args.token_file
            ) as s:
                result = await s.call("providers/warm", {}, on_progress=forward_progress(heard))
                if lines is not None:  # the last word on each: what one ready before
                    # the warm-up listened holds, why one failed and what to do
                    rows = (await s.call("providers/list", {})).get("providers") or []
            tg.cancel_scope.cancel()
    finally:
        bars.close()
    if stopped_by:
        # Not silently: where each build stood, that it is kept, and what goes on with it.
        daemon = None if connect is None else Path(connect) if connect else cfg.socket_path
        sys.stderr.write(interrupted_line(standing, hint=config_hint(cfg), daemon=daemon) + "\n")
        return 128 + stopped_by[0]
    states: dict[str, str] = result["providers"]
    for pid, state in states.items():
        sys.stdout.write(f"{pid}\t{state}\n")
    for row in rows:  # `files: ready (0 chunks …; nothing to index under …)`, once
        if lines is not None and row.get("id") in states:
            if connect is None:  # its providers stop with this command: no next try
                health = {**(row.get("health") or {})}
                health.pop("retry_in_s", None)
                health.pop("next_check_in_s", None)
                row = {**row, "health": health}
            lines.settle(str(row.get("id")), provider_state(row))
    # A crash loop is not waited for (``restarting: …``): that it keeps failing, and
    # where to look, in the words ``hostd compose`` gives it.
    looping = {
        pid: restarting_last(state)
        for pid, state in states.items()
        if state.startswith(f"{RESTARTING}: ")
    }
    where = "one_shot" if connect is None else "daemon"
    advice = restarting_advice(looping, where=where, config=config_hint(cfg))
    if advice is not None:
        sys.stderr.write(f"hostd: {advice}\n")
    return 0 if all(s == "ready" for s in states.values()) else 1
