"""The provider runtime (hostd.provider): in memory and as a real child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.protocol import (
    PROTOCOL_VERSION,
    CgpErrorCode,
    ContextQuery,
    UnverifiableRange,
    address_line_range,
    check_frame,
    parse_frame,
    sha256_digest,
)
from hostd.provider import ProviderServer, file_provenance, make_frame, serve_stdio
from tests.fixtures.healthy_provider import HealthyProvider

ROOT = Path(__file__).resolve().parents[2]


def _req(method: str, params: Any = None, id: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if id is not None:
        msg["id"] = id
    return json.dumps(msg).encode() + b"\n"


async def _ask(server: ProviderServer, line: bytes) -> Any:
    """The decoded reply to a request line (a request always gets one)."""
    raw = await server.handle_line(line)
    assert raw is not None
    return json.loads(raw)


HANDSHAKE = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "t", "version": "0"}}
QUERY = {"query": {"goal": "g", "max_frames": 5, "max_tokens": 1000}}


class Child:
    """The healthy provider fixture as a real child process over real pipes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fixtures.healthy_provider", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None:
                    f.close()


@pytest.fixture
def child() -> Any:
    c = Child()
    yield c
    if c.proc.poll() is None:
        c.proc.kill()
    c.close()


def test_handshake_acks_with_info_and_capabilities(child: Child) -> None:
    child.send(_req("context/handshake", HANDSHAKE, 1))
    reply = child.recv()
    assert reply["id"] == 1
    assert reply["result"]["provider"]["name"] == "healthy"
    assert reply["result"]["capabilities"]["correlation"] is True


def test_incompatible_family_is_a_named_error(child: Child) -> None:
    child.send(_req("context/handshake", {**HANDSHAKE, "protocol_version": "contextgraph/2.0"}, 1))
    reply = child.recv()
    assert reply["error"]["data"]["cgp_code"] == "incompatible_version"


def test_malformed_lines_get_bad_request_and_the_provider_keeps_serving(child: Child) -> None:
    child.send(b"this is not json\n")
    assert child.recv()["error"]["data"]["cgp_code"] == "bad_request"
    child.send(_req("context/query", {"query": {"goal": "g"}}, 2))  # no budget: bad params
    reply = child.recv()
    assert reply["id"] == 2 and reply["error"]["data"]["cgp_code"] == "bad_request"
    child.send(_req("no/such/method", {}, 3))
    assert child.recv()["error"]["data"]["cgp_code"] == "bad_request"
    child.send(_req("context/query", QUERY, 4))
    reply = child.recv()
    assert reply["id"] == 4 and len(reply["result"]["frames"]) == 3


def test_an_over_long_line_is_refused_and_serving_continues(child: Child) -> None:
    child.send(b'{"x": "' + b"a" * (8 * 1024 * 1024 + 10) + b'"}\n')
    assert child.recv()["error"]["data"]["cgp_code"] == "bad_request"
    child.send(_req("context/query", QUERY, 5))
    assert child.recv()["id"] == 5


def test_a_refusal_carries_its_cgp_code(child: Child) -> None:
    child.send(_req("context/query", {"query": {**QUERY["query"], "goal": "refuse"}}, 6))
    reply = child.recv()
    assert reply["id"] == 6
    assert reply["error"]["data"]["cgp_code"] == "bad_request"
    assert reply["error"]["code"] == -32602


def test_pipelined_requests_are_each_answered_once_by_id() -> None:
    c = Child("--delay-ms", "20")
    try:
        c.send(b"".join(_req("context/query", QUERY, i) for i in range(20)))
        ids = sorted(c.recv()["id"] for _ in range(20))
        assert ids == list(range(20))
        c.send(_req("context/shutdown"))
        assert c.close() == 0
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
            c.close()


def test_a_flood_past_the_in_flight_bound_is_answered_whole_then_eof_ends_it() -> None:
    # 300 requests: reading pauses at 64 in flight and resumes below 16; EOF comes while
    # replies are still in flight, and each one is written before the provider exits (R2).
    c = Child("--delay-ms", "5")
    try:
        for start in range(0, 300, 100):
            c.send(b"".join(_req("context/query", QUERY, i) for i in range(start, start + 100)))
        assert c.proc.stdin is not None
        c.proc.stdin.close()
        replies = [c.recv() for _ in range(300)]
        assert sorted(r["id"] for r in replies) == list(range(300))
        assert all(r["result"]["frames"] for r in replies)  # answers, not errors
        assert c.close() == 0
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
            c.close()


def test_exits_cleanly_on_shutdown_notification(child: Child) -> None:
    child.send(_req("context/handshake", HANDSHAKE, 1))
    child.recv()
    child.send(_req("context/shutdown"))  # stdin stays open: the notification alone ends it
    assert child.close() == 0


def test_exits_cleanly_on_stdin_eof_after_answering(child: Child) -> None:
    child.send(_req("context/query", QUERY, 9))
    assert child.proc.stdin is not None
    child.proc.stdin.close()
    assert child.recv()["id"] == 9
    assert child.close() == 0


@pytest.mark.anyio
async def test_in_memory_server_answers_verify_and_ignores_blank_lines() -> None:
    server = ProviderServer(HealthyProvider())
    assert await server.handle_line(b"   \n") is None
    frames = [{"provider_id": "healthy", "frame_id": "healthy:0"}]
    reply = await _ask(server, _req("context/verify", {"frames": frames}, 1))
    assert reply["result"]["verdicts"][0]["status"] == "valid"
    assert await server.handle_line(_req("context/shutdown")) is None
    assert server.shutdown_requested.is_set()


@pytest.mark.anyio
async def test_honest_provider_frames_pass_every_frame_rule() -> None:
    result = await HealthyProvider(frames=4).query(
        ContextQuery(goal="g", max_frames=10, max_tokens=1000)
    )
    assert len(result.frames) == 4
    for raw in result.frames:
        frame, violations = parse_frame(raw)
        assert frame is not None and violations == []


def test_make_frame_computes_cost_and_digest() -> None:
    frame = make_frame(id="a", kind="doc", title="t", content="héllo wörld", citation_label="a")
    assert frame.token_cost == 4  # 13 UTF-8 bytes -> ceil(13/4)
    assert frame.content_digest == sha256_digest("héllo wörld".encode())
    assert check_frame(frame) == []


def test_file_provenance_digests_exactly_the_addressed_lines() -> None:
    data = b"one\ntwo\nthree\n"
    prov = file_provenance("file:///x", data, "L2-3")
    assert prov.digest == sha256_digest(address_line_range(data, "L2-3"))
    assert prov.digest == sha256_digest(b"two\nthree\n")


def test_helpers_reject_an_unaddressable_range() -> None:
    with pytest.raises(UnverifiableRange):
        file_provenance("file:///x", b"one\n", "L5")


class _Unencodable(HealthyProvider):
    async def query(self, query: ContextQuery) -> Any:
        from hostd.protocol import ContextQueryResult

        return ContextQueryResult(frames=[{"id": "x", "weird": object()}])


@pytest.mark.anyio
async def test_a_reply_that_cannot_be_encoded_becomes_an_internal_error() -> None:
    server = ProviderServer(_Unencodable())
    line = _req("context/query", QUERY, 7)
    reply = await _ask(server, line)
    assert reply["id"] == 7 and reply["error"]["data"]["cgp_code"] == "internal"


@pytest.mark.anyio
async def test_an_answer_that_fails_unexpectedly_ends_the_provider_loudly() -> None:
    # Provider errors are answered as errors; anything else escaping an answer is a bug
    # in the runtime's surroundings (here: a stdout that raises) and must not be lost.
    class BrokenOut:
        def write(self, data: bytes) -> int:
            raise RuntimeError("stdout exploded")

        def flush(self) -> None:
            pass

    read_end, write_end = os.pipe()
    try:
        os.write(write_end, _req("context/query", QUERY, 1))
        with pytest.raises(RuntimeError, match="stdout exploded"):
            with anyio.fail_after(10):
                await serve_stdio(HealthyProvider(), stdin=read_end, stdout=BrokenOut())
    finally:
        os.close(write_end)
        os.close(read_end)


class _Returns(HealthyProvider):
    """A query that returns what it is given: ``None`` is a forgotten ``return``."""

    def __init__(self, out: Any) -> None:
        super().__init__()
        self.out = out

    async def query(self, query: ContextQuery) -> Any:
        return self.out


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("out", "said"),
    [
        (None, "query() returned None"),
        ({"frames": []}, "query() returned a dict"),
        ("frames", "query() returned a str"),
        (
            make_frame(id="a", kind="doc", title="t", content="c", citation_label="a"),
            "query() returned a ContextFrame",
        ),
        ([None], "query()'s frame [0] is None"),
    ],
    ids=["none", "dict", "str", "one-frame", "none-in-list"],
)
async def test_a_query_returning_no_frames_is_answered_internal_saying_what_to_return(
    out: Any, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The author's mistake is said on stderr in one line with its fix, not as a
    ``TypeError`` traceback inside the runtime."""
    reply = await _ask(ProviderServer(_Returns(out)), _req("context/query", QUERY, 7))
    assert reply["id"] == 7 and reply["error"]["data"]["cgp_code"] == "internal", reply
    err = capsys.readouterr().err
    assert err == (
        f"provider: context/query failed: {said}: return a list of frames or a ContextQueryResult\n"
    )


@pytest.mark.anyio
async def test_a_query_returning_a_tuple_or_a_generator_of_frames_is_answered() -> None:
    frames = [make_frame(id="a", kind="doc", title="t", content="c", citation_label="a")]
    for out in (tuple(frames), (f for f in frames)):
        reply = await _ask(ProviderServer(_Returns(out)), _req("context/query", QUERY, 7))
        assert [f["id"] for f in reply["result"]["frames"]] == ["a"], reply


class _Mixed(HealthyProvider):
    """Answers, refuses or fails by the query's goal."""

    async def query(self, query: ContextQuery) -> Any:
        from hostd.provider import ProviderRefusal

        if query.goal == "refuse":
            raise ProviderRefusal("not here", CgpErrorCode.UNAVAILABLE)
        if query.goal == "fail":
            raise RuntimeError("index went away")
        if query.goal == "rpc-error":
            from jsonrpcserver import JsonRpcError

            raise JsonRpcError(-32050, "custom", {"cgp_code": "unavailable"})
        if query.goal == "rpc-error-bare":
            from jsonrpcserver import JsonRpcError

            raise JsonRpcError(-32051, "no data")
        return await super().query(query)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "params",
    [
        QUERY,
        {"query": {"goal": "refuse", "max_frames": 5, "max_tokens": 1000}},
        {"query": {"goal": "fail", "max_frames": 5, "max_tokens": 1000}},
        {"query": {"goal": "rpc-error", "max_frames": 5, "max_tokens": 1000}},
        {"query": {"goal": "rpc-error-bare", "max_frames": 5, "max_tokens": 1000}},
        {"query": {"goal": "g", "max_frames": -1, "max_tokens": 1000}},  # bad query
        {"query": "not an object"},
        {},
    ],
    ids=[
        "answer",
        "refusal",
        "failure",
        "rpc-error",
        "rpc-error-no-data",
        "bad-query",
        "not-object",
        "no-query",
    ],
)
async def test_a_query_alone_and_in_a_batch_of_one_get_the_same_reply(params: Any) -> None:
    # One dispatcher answers both; the boundary codes every failure (R1, X1).
    server = ProviderServer(_Mixed())
    single = await server.handle_line(_req("context/query", params, 7))
    batch = await server.handle_line(b"[" + _req("context/query", params, 7).strip() + b"]")
    assert single is not None and batch is not None
    reply = json.loads(single)
    assert [reply] == json.loads(batch)
    assert reply["id"] == 7
    if "error" in reply:
        assert reply["error"]["data"]["cgp_code"] in {"bad_request", "unavailable", "internal"}


class _BuildsABadResult(HealthyProvider):
    """A query that builds its result without ``frames`` (which the wire requires)."""

    async def query(self, query: ContextQuery) -> Any:
        from hostd.protocol import ContextQueryResult

        return ContextQueryResult(truncated=True)  # type: ignore[call-arg]


@pytest.mark.anyio
async def test_a_model_the_query_builds_wrong_is_its_bug_not_a_malformed_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Answered internal, with the traceback to the author's line: not bad_request and
    # "refused a request with malformed params", which sends them to the host's side.
    reply = await _ask(ProviderServer(_BuildsABadResult()), _req("context/query", QUERY, 3))
    assert reply["error"]["data"]["cgp_code"] == "internal", reply
    err = capsys.readouterr().err
    assert "query() built an invalid ContextQueryResult" in err and "frames" in err, err
    assert "malformed params" not in err, err
    assert "return ContextQueryResult(truncated=True)" in err, err  # the author's line


class _OneAtATime(HealthyProvider):
    """Queries one at a time; the first held until ``release``; what it is told of the
    queries waiting their turn in ``told``."""

    queries_at_once = 1

    def __init__(self) -> None:
        super().__init__()
        self.release = anyio.Event()
        self.told: list[int] = []

    def queries_waiting(self, count: int) -> None:
        self.told.append(count)

    async def query(self, query: ContextQuery) -> Any:
        if not self.told:  # the first, before any waits behind it
            await self.release.wait()
        return []


@pytest.mark.anyio
async def test_a_provider_running_one_query_at_a_time_is_told_how_many_wait_their_turn() -> None:
    provider = _OneAtATime()
    server = ProviderServer(provider)
    with anyio.fail_after(60):  # a hang guard
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(_ask, server, _req("context/query", QUERY, i))
                await anyio.wait_all_tasks_blocked()  # each request in before the next
            assert provider.told == [1, 2]  # the second and third wait behind the first
            provider.release.set()
    assert provider.told == [1, 2, 1, 0]  # each told again as it takes its turn
