"""The log module: its name, the audit events per setting, rotation and file modes."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hostd.logs as logs
from hostd.config import LogSettings
from tests.fixtures.logging_state import restored_logging

ROOT = Path(__file__).resolve().parent.parent / "hostd"


def test_no_hostd_module_is_named_like_a_stdlib_module() -> None:
    # A ``hostd/logging.py`` is ``logging`` to anything run with hostd/ on sys.path.
    names = {p.stem for p in ROOT.rglob("*.py")} | {p.name for p in ROOT.rglob("*") if p.is_dir()}
    assert sorted(names & sys.stdlib_module_names) == []


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with restored_logging(monkeypatch):
        yield
        if logs._FILE is not None:  # a file a test configured: closed before it is let go
            logs._FILE.close()


def _entries(n: int, excluded_every: int = 3) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        pid = ("alpha", "beta")[i % 2]
        entry: dict[str, Any] = {
            "frame": {"provider_id": pid, "frame_id": f"{pid}:{i}", "content_digest": None},
            "provider": pid,
            "rank": i,
            "score": 0.5,
            "tokens": 10,
        }
        if i % excluded_every == 0:
            entry.update(disposition="excluded", reason=("over_budget", "duplicate")[i % 2])
        else:
            entry.update(disposition="included", position=i)
        out.append(entry)
    return out


def _compose_log(
    entries: list[dict[str, Any]],
    request_id: str = "r-1",
    legs: tuple[dict[str, Any], ...] = (),
    **settings: Any,
) -> list[dict[str, Any]]:
    out = io.StringIO()
    cfg = LogSettings(**settings)
    logs.configure_logging(settings=cfg, stream=out)
    logs.bind_request(request_id)
    try:
        logs.log_audit(logs.get_logger("t"), entries, legs)
    finally:
        logs.unbind_request()
    logs.flush_logs()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _named(events: list[dict[str, Any]], name: str, level: str | None = None) -> list[Any]:
    return [e for e in events if e["event"] == name and level in (None, e["level"])]


def test_summary_is_one_event_with_counts_and_no_entry_at_info() -> None:
    events = _compose_log(_entries(30))
    assert [e["event"] for e in events] == ["compose.audit.summary"]
    (summary,) = events
    assert summary["request_id"] == "r-1" and summary["level"] == "info"
    assert summary["entries"] == 30
    assert summary["dispositions"] == {"excluded": 10, "included": 20}
    assert summary["reasons"] == {"duplicate": 5, "over_budget": 5}
    assert summary["providers"] == {
        "alpha": {"excluded": 5, "included": 10},
        "beta": {"excluded": 5, "included": 10},
    }
    assert summary["logged"] == 0
    assert summary["warming"] == []


def test_the_summary_names_the_legs_that_were_warming() -> None:
    # A warming leg offers no entry: only the summary can say why its provider is absent.
    legs = (
        {"provider_id": "semantic", "status": "warming"},
        {"provider_id": "alpha", "status": "ok"},
        {"provider_id": "files", "status": "warming"},
        {"provider_id": "beta", "status": "timeout"},
    )
    (summary,) = _compose_log(_entries(4), legs=legs)
    assert summary["warming"] == ["files", "semantic"]
    assert set(summary["providers"]) == {"alpha", "beta"}


def test_summary_mode_writes_every_entry_at_debug_level() -> None:
    events = _compose_log(_entries(30), level="debug")
    assert len(_named(events, "compose.audit", "debug")) == 30
    assert _named(events, "compose.audit", "info") == []
    assert len(_named(events, "compose.audit.summary")) == 1


def test_entries_mode_writes_one_event_per_entry_at_info() -> None:
    entries = _entries(30)
    events = _compose_log(entries, audit="entries")
    audits = _named(events, "compose.audit", "info")
    assert [a["frame"] for a in audits] == [e["frame"] for e in entries]
    assert all(a["request_id"] == "r-1" for a in audits)
    assert {a.get("reason") for a in audits} == {None, "over_budget", "duplicate"}
    assert _named(events, "compose.audit.summary")[0]["logged"] == 30


def test_sample_mode_writes_the_rounded_up_share_the_same_for_any_order() -> None:
    entries = _entries(40)
    events = _compose_log(entries, audit="sample", audit_sample=0.25)
    picked = [e["frame"]["frame_id"] for e in _named(events, "compose.audit", "info")]
    assert len(picked) == 10 and len(set(picked)) == 10
    assert _named(events, "compose.audit.summary")[0]["logged"] == 10
    again = _compose_log(list(reversed(entries)), audit="sample", audit_sample=0.25)
    assert sorted(e["frame"]["frame_id"] for e in _named(again, "compose.audit")) == sorted(picked)
    other = _compose_log(entries, "r-2", audit="sample", audit_sample=0.25)
    assert len(_named(other, "compose.audit")) == 10
    one = _compose_log(entries, audit="sample", audit_sample=0.001)
    assert len(_named(one, "compose.audit")) == 1
    none = _compose_log(entries, audit="sample", audit_sample=0.0)
    assert [e["event"] for e in none] == ["compose.audit.summary"]


def test_nothing_is_written_above_info() -> None:
    assert _compose_log(_entries(5), level="warning") == []


def test_the_log_file_is_private_and_rotated_by_size(tmp_path: Path) -> None:
    path = tmp_path / "hostd.log"
    old = os.umask(0o022)
    try:
        logs.configure_logging(
            "info", settings=LogSettings(file=path, max_bytes=4096, backups=2, audit="entries")
        )
    finally:
        os.umask(old)
    log = logs.get_logger("t")
    for i in range(60):
        logs.bind_request(f"r-{i}")
        logs.log_audit(log, _entries(4))
        log.info("request.done", n=i)
        logs.flush_logs()
    logging.getLogger("third.party").warning("a stdlib record")
    logs.flush_logs()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["hostd.log", "hostd.log.1", "hostd.log.2"]
    lines = []
    for name in files:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
        assert (tmp_path / name).stat().st_size < 4096 + 8192  # rotated at the flush past it
        lines += (tmp_path / name).read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line whole: none cut by a rollover
    assert {"compose.audit", "compose.audit.summary", "request.done"} <= {
        e["event"] for e in events
    }
    # The newest lines are in hostd.log; the oldest were dropped with the third backup.
    newest = (tmp_path / "hostd.log").read_text().splitlines()
    assert json.loads(newest[-1])["event"] == "stdlib.third.party"
    assert '"r-59"' in "".join(newest) + (tmp_path / "hostd.log.1").read_text()
    assert 'r-0"' not in "".join(lines)


def test_the_log_files_missing_directories_are_made_private(tmp_path: Path) -> None:
    path = tmp_path / "var" / "log" / "hostd" / "hostd.log"
    logs.configure_logging("info", settings=LogSettings(file=path))
    logs.get_logger("t").info("request.done")
    logs.flush_logs()
    assert json.loads(path.read_text())["event"] == "request.done"
    for folder in (tmp_path / "var", path.parent.parent, path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_max_bytes_zero_never_rotates(tmp_path: Path) -> None:
    path = tmp_path / "hostd.log"
    logs.configure_logging(settings=LogSettings(file=path, max_bytes=0, audit="entries"))
    for _ in range(40):
        logs.log_audit(logs.get_logger("t"), _entries(10))
        logs.flush_logs()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostd.log"]
    assert path.stat().st_size > 4096


def test_jsonrpcservers_own_log_comes_through_ours_at_its_level() -> None:
    # Not silenced: what fails inside the library is an error event of ours, with the
    # request id bound and the exception's type; never the record's arguments.
    out = io.StringIO()
    logs.configure_logging(settings=LogSettings(), stream=out)
    library = logging.getLogger("jsonrpcserver.async_dispatcher")
    sent = "what a peer sent"
    logs.bind_request("r-9")
    try:
        try:
            raise KeyError(sent)
        except KeyError as exc:
            library.exception(exc)
        library.debug("below the configured level")
    finally:
        logs.unbind_request()
    logs.flush_logs()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    (event,) = events
    assert event["event"] == "rpc.library.failed" and event["level"] == "error"
    assert (event["logger"], event["error"]) == ("jsonrpcserver.async_dispatcher", "KeyError")
    assert event["request_id"] == "r-9" and "raise KeyError" in event["traceback"]
    assert sent not in out.getvalue()


@pytest.mark.parametrize(
    ("level", "shown"),
    [
        ("error", ["error"]),
        ("warning", ["warning", "error"]),
        ("info", ["warning", "error"]),  # their info is chatter: warning at least
        ("debug", ["debug", "info", "warning", "error"]),
    ],
)
def test_third_party_loggers_obey_the_log_level(level: str, shown: list[str]) -> None:
    import bm25s  # sets its own logger to DEBUG on import: the case that leaked

    out = io.StringIO()
    logs.configure_logging(level, stream=out)
    chatty = logging.getLogger("bm25s")
    assert chatty.level == logging.DEBUG
    for name in ("debug", "info", "warning", "error"):
        getattr(chatty, name)(f"a {name} line")
    index = bm25s.BM25()
    index.index(
        bm25s.tokenize(["the frobnicator spins", "a second document"], show_progress=False),
        show_progress=False,
    )  # logs "Building index from IDs" at debug
    logs.flush_logs()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["level"] for e in events if e["message"].startswith("a ")] == shown
    built = [e for e in events if "Building index" in e["message"]]
    assert bool(built) == (level == "debug")


def test_a_librarys_line_has_a_timestamp_and_never_a_urls_query() -> None:
    out = io.StringIO()
    logs.configure_logging("debug", stream=out)
    url = "https://teamnotes.example:8443/cgp?api_key=QSECRET-999&x=1"
    logging.getLogger("httpx").info('HTTP Request: POST %s "HTTP/1.1 200 OK"', url)
    logs.flush_logs()
    (event,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert "QSECRET" not in out.getvalue()
    assert event["message"] == (
        'HTTP Request: POST https://teamnotes.example:8443/cgp?<redacted> "HTTP/1.1 200 OK"'
    )
    # The same form as ours: ISO 8601, UTC, "Z".
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", event["timestamp"])


class _Counting:
    """A logger that keeps each event it is handed (and is never filtered)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


def test_the_composition_done_event_follows_its_summary_and_neither_is_made_below_info() -> None:
    done = {"frames_offered": 3, "citations": 2, "degraded": []}
    out = io.StringIO()
    logs.configure_logging("info", stream=out)
    logs.bind_request("r-1")
    try:
        logs.log_audit(logs.get_logger("t"), _entries(3), done=done)
    finally:
        logs.unbind_request()
    logs.flush_logs()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["compose.audit.summary", "compose.done"]
    assert {k: events[1][k] for k in done} == done and events[1]["request_id"] == "r-1"
    # Below info neither event is written, nor is the logger asked for one.
    quiet = io.StringIO()
    logs.configure_logging("warning", stream=quiet)
    counting = _Counting()
    logs.log_audit(counting, _entries(3), done=done)
    logs.flush_logs()
    assert (quiet.getvalue(), counting.events) == ("", [])
    logs.configure_logging("info", stream=quiet)
    logs.log_audit(counting, _entries(3), done=done)
    assert counting.events == [("compose.done", done)]


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error"])
def test_a_requests_end_is_one_request_done_at_info_and_nothing_above(level: str) -> None:
    out = io.StringIO()
    logs.configure_logging(level, stream=out)
    logs.bind_request("r-7")
    # The server reads the clock only at info or below (``_begin``): the end reads either.
    started = time.perf_counter() if level in ("debug", "info") else 0.0
    try:
        logs.get_logger("t").warning("inside.warned")
        logs.end_request(logs.get_logger("t"), started, "m/x", "unix#1", -32001, "bad")
        logs.end_request(None, started, "$/cancel", "unix#1", None, None)  # no event
    finally:
        logs.unbind_request()
    events = [json.loads(line) for line in out.getvalue().splitlines()]  # written out
    if level == "error":
        assert events == []
        return
    assert events[0]["event"] == "inside.warned" and events[0]["request_id"] == "r-7"
    done = [e for e in events if e["event"] == "request.done"]
    if level == "warning":
        assert done == []  # not built
        return
    (event,) = done
    assert event["request_id"] == "r-7" and event["level"] == "info"
    assert event["duration_ms"] >= 0 and started > 0
    keys = ["method", "connection", "duration_ms", "error_code", "error_reason"]
    assert [k for k in event if k in keys] == keys
    assert (event["method"], event["connection"]) == ("m/x", "unix#1")
    assert (event["error_code"], event["error_reason"]) == (-32001, "bad")


def test_a_request_id_set_in_a_task_is_on_its_events_and_ends_with_the_task() -> None:
    # Each request runs in its own task (its own copy of the context): the id it sets
    # is on every event it logs, on no other task's, and needs no undo at its end.
    out = io.StringIO()
    logs.configure_logging("info", stream=out)
    log = logs.get_logger("t")

    async def request(request_id: str, turns: int) -> None:
        logs.REQUEST_ID.set(request_id)
        for _ in range(turns):  # the two requests' events interleave
            log.info("inside")
            await anyio.lowlevel.checkpoint()
        log.info("named", request_id="another")  # an event naming one keeps its own

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(request, "r-1", 2)
            tg.start_soon(request, "r-2", 3)
        log.info("after")

    anyio.run(main)
    logs.flush_logs()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    inside = [e["request_id"] for e in events if e["event"] == "inside"]
    assert sorted(inside) == ["r-1", "r-1", "r-2", "r-2", "r-2"]
    assert [e["request_id"] for e in events if e["event"] == "named"] == ["another"] * 2
    (after,) = [e for e in events if e["event"] == "after"]
    assert "request_id" not in after and logs.REQUEST_ID.get() is None
