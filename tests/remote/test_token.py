"""A remote provider's token file is read again when it changes, without a restart (C8).

Against the real loopback HTTPS server: a rotated file (a new inode, or new bytes
and mtime) is used by the very next request; a rewrite the file's stat cannot show
is read again after the server's 401, and the request sent once more; a removed file
fails the leg with a typed error naming the file, before any byte is sent; each
(re)start reads the file again whatever its stat says. An unchanged stat costs no
read (the hot path's one extra step is the stat).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog

from hostd.engine import Host, LegStatus
from hostd.errors import CredentialUnavailable
from hostd.transport import Credential, TokenSource
from tests.engine._helpers import query
from tests.remote._servers import (
    App,
    Scope,
    consented,
    make_tls,
    provider_app,
    remote_spec,
    serving,
)

pytestmark = pytest.mark.anyio

OLD = "old-token-5d1e0a"
NEW = "new-token-9c2f7b"  # as long as OLD: an in-place rewrite keeps the file's size


def _gated(accepted: set[str]) -> App:
    """The provider app behind a bearer check against ``accepted``, changed by the test."""
    inner = provider_app(token=None)

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if auth.removeprefix("Bearer ") not in accepted:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await inner(scope, receive, send)

    return app


def _rewrite_unseen(path: Path, token: str) -> None:
    """New bytes in place, with the size, inode and mtime the file had: a rewrite within
    one tick of a coarse clock, which no stat can tell from no change at all."""
    before = path.stat()
    with path.open("r+", encoding="utf-8") as f:
        f.write(token)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


def _tokens(rec: Any) -> list[str]:
    return [s.headers.get("authorization", "").removeprefix("Bearer ") for s in rec.seen]


async def test_a_rotated_token_file_is_used_by_the_next_request(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    token = tmp_path / "remote.token"
    token.write_text(OLD + "\n")
    accepted = {OLD}
    async with serving(_gated(accepted), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=None, token_file=token)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            first = await host.query_all(query(), 1000)
            fresh = tmp_path / "remote.token.new"
            fresh.write_text(NEW + "\n")
            fresh.replace(token)  # the usual rotation: a new file renamed over the old
            accepted.clear()
            accepted.add(NEW)
            with structlog.testing.capture_logs() as logs:
                second = await host.query_all(query(), 1000)
    assert first.reports["remote"].status is LegStatus.OK
    assert second.reports["remote"].status is LegStatus.OK, second.reports["remote"]
    # The stat saw the change: the second query went with the new token at once.
    assert rec.kinds() == ["handshake", "query", "query"]
    assert _tokens(rec) == [OLD, OLD, NEW]
    renewed = [e for e in logs if e["event"] == "provider.remote.credential.renewed"]
    assert [e["provider"] for e in renewed] == ["remote"]
    assert OLD not in repr(logs) and NEW not in repr(logs)


async def _rewritten_unseen(
    tmp_path: Path, file_has: str, server_takes: set[str], *, restart: bool = False
) -> tuple[Any, Any, Any]:
    """One query with OLD in the file and at the server; then the file rewritten in place
    (unseen by its stat) to ``file_has``, the server taking ``server_takes`` only, a
    restart if asked, and a second query: its fan-out, the server's recorder and the
    provider's health."""
    tls = make_tls(tmp_path)
    token = tmp_path / "remote.token"
    token.write_text(OLD)
    accepted = {OLD}
    async with serving(_gated(accepted), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=None, token_file=token)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            assert (await host.query_all(query(), 1000)).reports["remote"].status is LegStatus.OK
            _rewrite_unseen(token, file_has)
            accepted.clear()
            accepted.update(server_takes)
            if restart:
                await host.restart_provider("remote")
            second = await host.query_all(query(), 1000)
            health = host.health("remote")
    return second, rec, health


async def test_a_rewrite_the_stat_cannot_show_is_read_after_a_401_and_sent_once_more(
    tmp_path: Path,
) -> None:
    second, rec, health = await _rewritten_unseen(tmp_path, NEW, {NEW})
    assert second.reports["remote"].status is LegStatus.OK, second.reports["remote"]
    assert health.consecutive_failures == 0
    assert rec.kinds() == ["handshake", "query", "query", "query"]
    assert _tokens(rec) == [OLD, OLD, OLD, NEW]


@pytest.mark.parametrize("file_has", [OLD, "wrong-token-0000"])
async def test_a_401_the_file_cannot_cure_fails_the_leg_after_at_most_one_retry(
    tmp_path: Path, file_has: str
) -> None:
    # The server moved on to NEW; the file holds no token it takes.
    refused, rec, _ = await _rewritten_unseen(tmp_path, file_has, {NEW})
    report = refused.reports["remote"]
    assert report.status is LegStatus.UNAUTHORIZED
    assert report.error_code == "unauthorized"
    assert "401" in (report.error_message or "")
    # Sent again only when the file gave a different token, and then only once.
    retried = [file_has] if file_has != OLD else []
    assert _tokens(rec) == [OLD, OLD, OLD, *retried]


async def test_a_removed_token_file_fails_the_leg_naming_the_file_before_any_byte(
    tmp_path: Path,
) -> None:
    tls = make_tls(tmp_path)
    token = tmp_path / "remote.token"
    token.write_text(OLD)
    async with serving(_gated({OLD}), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=None, token_file=token)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            assert (await host.query_all(query(), 1000)).reports["remote"].status is LegStatus.OK
            token.unlink()
            gone = await host.query_all(query(), 1000)
            rows = host.providers_list()
            token.write_text(OLD)  # put back: the next request is served, no restart
            back = await host.query_all(query(), 1000)
    report = gone.reports["remote"]
    assert report.status is LegStatus.UNAUTHORIZED
    assert report.error_code == "credential"
    assert str(token) in (report.error_message or "")
    assert OLD not in repr(report) + orjson.dumps(rows).decode()
    assert rows[0]["state"] == "failed"  # parked until the file is back
    assert back.reports["remote"].status is LegStatus.OK, back.reports["remote"]
    # Nothing sent without it; once it is back, the provider starts again at once.
    assert rec.kinds() == ["handshake", "query", "handshake", "query"]


async def test_a_restart_reads_the_token_file_again(tmp_path: Path) -> None:
    # Both tokens are taken: no 401 prompts a re-read, only the restart.
    after, rec, _ = await _rewritten_unseen(tmp_path, NEW, {OLD, NEW}, restart=True)
    assert after.reports["remote"].status is LegStatus.OK
    assert rec.kinds() == ["handshake", "query", "handshake", "query"]
    assert _tokens(rec) == [OLD, OLD, NEW, NEW]


async def test_a_token_file_missing_at_the_first_start_names_the_file(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    token = tmp_path / "absent.token"
    async with serving(_gated({OLD}), tls) as (url, rec):
        spec = remote_spec(url, tls, token_env=None, token_file=token)
        async with Host([spec], consent=consented(tmp_path, "remote")) as host:
            fan = await host.query_all(query(), 1000)
    report = fan.reports["remote"]
    assert report.status is LegStatus.UNAUTHORIZED
    assert report.error_code == "credential"
    assert str(token) in (report.error_message or "")
    assert rec.seen == []


def test_an_unchanged_stat_costs_no_read_and_a_reload_reads_whatever_it_says(
    tmp_path: Path,
) -> None:
    token = tmp_path / "remote.token"
    token.write_text(OLD)
    tokens = TokenSource(token)
    first = tokens.current()
    _rewrite_unseen(token, NEW)
    # Same stat, so the file was not read again: still the old token, the same object.
    assert tokens.current() is first
    renewed = tokens.reload()
    assert renewed is not None and renewed.authorization() == f"Bearer {NEW}"
    assert tokens.current() is renewed
    assert OLD not in repr(tokens) and NEW not in repr(tokens)


def test_a_variable_is_read_at_reload_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_ROTATED", OLD)
    tokens = TokenSource(token_env="HOSTD_TEST_ROTATED")
    first = tokens.current()
    monkeypatch.setenv("HOSTD_TEST_ROTATED", NEW)
    assert tokens.current() is first
    assert tokens.reload() == Credential(NEW)
    monkeypatch.delenv("HOSTD_TEST_ROTATED")
    with pytest.raises(CredentialUnavailable, match="HOSTD_TEST_ROTATED"):
        tokens.reload()


@pytest.mark.parametrize("inside", ["\r", "\x00", "\x1b", "\x7f", "\r\n"])
def test_a_token_with_a_control_character_inside_is_unavailable_naming_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: str
) -> None:
    token = tmp_path / "remote.token"
    token.write_text(f"{OLD}{inside}{NEW}\n")
    with pytest.raises(CredentialUnavailable, match="token_file .*remote.token") as from_file:
        TokenSource(token).current()
    caught = [from_file]
    if inside != "\x00":  # an environment cannot hold a NUL
        monkeypatch.setenv("HOSTD_TEST_BROKEN", f"{OLD}{inside}{NEW}")
        with pytest.raises(CredentialUnavailable, match="token_env HOSTD_TEST_BROKEN") as env:
            TokenSource(token_env="HOSTD_TEST_BROKEN").current()
        caught.append(env)
    for one in caught:
        assert OLD not in one.value.message and NEW not in one.value.message
