"""Bounded, seeded fuzzing of the client wire against ONE real ``hostd serve --stdio``.

10,000+ generated lines (valid requests, notifications, malformed JSON, bad UTF-8,
wrong types, huge ids, batches, unknown methods, bad params for every method,
over-long lines) go to one daemon in chunks. Every line that deserves a reply must
get exactly one well-formed JSON-RPC response (strict JSON, standard or documented
code, the right id); lines that deserve none get none; the daemon never dies; and a
normal compose still succeeds at the end. The generator is ``random.Random(SEED)``:
the same lines every run.

``BIG_IDS`` are integer ids beyond 64 bits, which no double holds exactly:
``test_big_ids_are_echoed_exactly_or_refused`` asserts that each is either echoed as
sent or refused as an invalid request with id null, never echoed rounded.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.conftest import ROOT, daemon_command, marked_processes, write_config

pytestmark = pytest.mark.anyio

SEED = 20261201
LINES = 10_000
CHUNK = 48  # below max_in_flight (64): no input is answered `overloaded`
MAX_LINE = 131_072  # above the longest generated request (a 64 KiB goal)

#: JSON-RPC's own codes and the ones docs/api.md documents.
CODES = {-32700, -32600, -32601, -32602, -32603} | set(range(-32007, -32000))

#: Bad params for each method (beyond the generic ones below), all to be -32602.
BAD_PARAMS: dict[str, list[dict[str, Any]]] = {
    "context/compose": [
        {"goal": "x", "strategy": {"quota": -1}},
        {"goal": "x", "strategy": "no-such-policy"},
        {"goal": "x", "placement": "sideways"},
        {"goal": "x", "caps": {"alpha": "x"}},
        {"goal": "x", "caps": {"alpha": 2}},
        {"goal": "x", "floors": [{"label": "", "content": "c"}]},
        {"goal": "x", "floors": "f"},
        {"goal": "x", "overfetch": 0.5},
    ],
    "context/query": [{"goal": "x", "strategy": "score"}],
    "consent/grant": [{"provider": "alpha"}, {"provider": "alpha", "scope": ""}, {"scope": "s"}],
    "consent/revoke": [{"provider": "", "scope": "s"}, {"provider": "alpha", "scope": 5}],
    "consent/list": [{"provider": 5}, {"provider": ["alpha"]}],
    "usage/report": [{}, {"request_id": ""}, {"request_id": 5}],
    "providers/list": [{"x": 1}],
    "host/status": [{"verbose": True}],
}
QUERY_BAD: list[dict[str, Any]] = [
    {},
    {"goal": ""},
    {"goal": 5},
    {"goal": None},
    {"goal": "x" * (64 * 1024 + 1)},
    {"goal": "x", "budget": 0},
    {"goal": "x", "budget": -5},
    {"goal": "x", "budget": 10**12},
    {"goal": "x", "budget": "lots"},
    {"goal": "x", "budget": "5"},
    {"goal": "x", "budget": 5.0},
    {"goal": "x", "budget": True},
    {"goal": "   "},
    {"goal": "x", "max_frames": 0},
    {"goal": "x", "kinds": "doc"},
    {"goal": "x", "kinds": [""]},
    {"goal": "x", "providers": ["nobody"]},
    {"goal": "x", "providers": [""]},
    {"goal": "x", "timeout_ms": -1},
    {"goal": "x", "as_of": "yesterday"},
    {"goal": "x", "session": ""},
    {"goal": "x", "unknown_member": 1},
]
for _m in ("context/compose", "context/query"):
    BAD_PARAMS[_m] += QUERY_BAD

CHEAP = ["host/status", "providers/list", "consent/list"]
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]
#: Integer ids beyond 64 bits: a JSON reader that holds them as doubles would round them.
BIG_IDS = [2**64, 2**70 + 1, -(2**65)]


@dataclass(slots=True)
class Expect:
    """What one line deserves: ``None`` id for a null-id reply; ``batch`` for an array."""

    id: str | None  # the JSON text of the id the reply must carry
    codes: frozenset[int] | None  # allowed error codes; None: a result is required
    null_ok: bool = False  # an error with id null is also right (invalid request)
    batch: tuple[Expect, ...] | None = None
    lenient: bool = False  # a result is right too (the input is accepted today)


def _strict_loads(raw: bytes) -> Any:
    def no_constant(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(raw, parse_constant=no_constant)


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    def new_id(self) -> Any:
        self.n += 1
        pick = self.rng.random()
        if pick < 0.6:
            return self.n
        if pick < 0.85:
            return f"r{self.n}"
        if pick < 0.95:
            return 2**62 + self.n  # large, within 64 bits (beyond: BIG_IDS)
        return f"long-{self.n}-" + "i" * self.rng.randint(100, 2000)

    def request(self, method: str, params: Any = None, *, id_: Any = None) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id() if id_ is None else id_}
        msg["method"] = method
        if params is not None:
            msg["params"] = params
        return msg

    def valid_cheap(self) -> tuple[dict[str, Any], Expect]:
        method = self.rng.choice(CHEAP)
        params = {"provider": "alpha"} if method == "consent/list" else {}
        msg = self.request(method, params if self.rng.random() < 0.5 else None)
        return msg, Expect(json.dumps(msg["id"]), None)

    def one(self) -> tuple[bytes, Expect | None]:
        """One line and what it deserves (``None``: no reply)."""
        r = self.rng.random()
        rng = self.rng
        if r < 0.18:
            msg, exp = self.valid_cheap()
            return _dump(msg), exp
        if r < 0.20:
            method = rng.choice(["context/compose", "context/query"])
            msg = self.request(method, {"goal": f"fuzz {self.n}", "budget": rng.randint(50, 400)})
            return _dump(msg), Expect(json.dumps(msg["id"]), None)
        if r < 0.23:  # unknown-report and cancel of an unknown id: both answered
            if rng.random() < 0.5:
                msg = self.request("usage/report", {"request_id": f"none-{self.n}"})
                return _dump(msg), Expect(json.dumps(msg["id"]), frozenset({-32602}))
            msg = self.request("$/cancel", {"id": f"never-{self.n}"})
            return _dump(msg), Expect(json.dumps(msg["id"]), None)
        if r < 0.43:  # bad params for every method
            method = rng.choice(sorted(BAD_PARAMS))
            msg = self.request(method, rng.choice(BAD_PARAMS[method]))
            return _dump(msg), Expect(json.dumps(msg["id"]), frozenset({-32602}))
        if r < 0.48:  # params that are not an object
            msg = self.request(rng.choice(CHEAP), rng.choice([[], [1, 2], "x", 5, True]))
            codes = frozenset({-32600, -32602})
            return _dump(msg), Expect(json.dumps(msg["id"]), codes, null_ok=True, lenient=True)
        if r < 0.55:  # unknown methods
            method = rng.choice(["nope", "context/Compose", "", "host/status/", "$/x", "rpc.x"])
            msg = self.request(method, {})
            return _dump(msg), Expect(json.dumps(msg["id"]), frozenset({-32601}))
        if r < 0.62:  # notifications: never answered (host/shutdown would stop it)
            method = rng.choice([*CHEAP, "nope", "context/query", "usage/report"])
            note: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
            if rng.random() < 0.5:
                note["params"] = rng.choice([{}, {"goal": 5}, {"request_id": "x"}])
            if method == "context/query":
                note["params"] = {"goal": 5}  # invalid: no fan-out for nobody
            return _dump(note), None
        if r < 0.70:  # not a JSON-RPC request object
            bad = rng.choice(
                [
                    {"id": self.new_id(), "method": "host/status"},
                    {"jsonrpc": "1.0", "id": self.new_id(), "method": "host/status"},
                    {"jsonrpc": 2.0, "id": self.new_id(), "method": "host/status"},
                    {"jsonrpc": "2.0", "id": self.new_id(), "method": 5},
                    {"jsonrpc": "2.0", "id": self.new_id()},
                    {"jsonrpc": "2.0", "id": True, "method": "host/status"},
                    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "host/status"},
                    {"jsonrpc": "2.0", "id": [1], "method": "host/status"},
                    "a string",
                    rng.randint(-(10**30), 10**30),
                    None,
                    False,
                ]
            )
            id_ = bad.get("id") if isinstance(bad, dict) else None
            keyed = isinstance(id_, int | str) and not isinstance(id_, bool)
            exp = Expect(json.dumps(id_) if keyed else None, frozenset({-32600}), null_ok=True)
            return _dump(bad), exp
        if r < 0.78:  # malformed JSON and bad UTF-8
            return self.malformed(), Expect(None, frozenset({-32700}))
        if r < 0.80:  # numbers JSON cannot carry (NaN, ±Infinity) or no float holds (1e400)
            token = rng.choice(NON_FINITE).encode()
            if rng.random() < 0.5:  # as the id: nothing to echo, so id null
                line = b'{"jsonrpc":"2.0","id":' + token + b',"method":"host/status"}'
                return line, Expect(None, frozenset({-32700, -32600}))
            id_ = self.new_id()
            line = b'{"jsonrpc":"2.0","id":' + _dump(id_) + b',"method":"context/query",'
            line += b'"params":{"goal":"x","budget":' + token + b"}}"
            return line, Expect(json.dumps(id_), frozenset({-32700, -32602}), null_ok=True)
        if r < 0.97:
            return self.batch()
        if r < 0.975:  # over-long: answered line_too_long under its id, discarded
            id_ = self.new_id()
            if rng.random() < 0.5:  # the id first or last: read from the line's ends
                line = b'{"jsonrpc":"2.0","id":' + _dump(id_) + b',"x":"' + b"y" * MAX_LINE
                return line + b'"}', Expect(json.dumps(id_), frozenset({-32600}))
            line = b'{"jsonrpc":"2.0","x":"' + b"y" * MAX_LINE + b'","id":' + _dump(id_) + b"}"
            return line, Expect(json.dumps(id_), frozenset({-32600}))
        return rng.choice([b"", b"   ", b"\t"]), None  # blank: nothing to answer

    def malformed(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(4)
        if kind == 0:  # a valid request cut short
            line = _dump(self.request("host/status", {}))
            return line[: rng.randint(1, len(line) - 1)]
        if kind == 1:  # bad UTF-8 inside an otherwise valid request
            # Each is invalid wherever it stands: a lone continuation byte, an overlong
            # encoding, an encoded surrogate, bytes UTF-8 never uses.
            raw = rng.choice([b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff", b"\xfe\xfe"])
            return b'{"jsonrpc":"2.0","id":1,"method":"host/status","x":"' + raw + b'"}'
        if kind == 2:  # random bytes (no newline), prefixed so they cannot be JSON
            body = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
            return b"}" + body.replace(b"\n", b" ").replace(b"\r", b" ")
        text = "".join(rng.choice('{}[]":,.0-9eE+ tfnaul\\') for _ in range(rng.randint(1, 60)))
        try:
            json.loads(text)
        except ValueError:
            return text.encode()
        return b"{" + text.encode()

    def batch(self) -> tuple[bytes, Expect | None]:
        rng = self.rng
        if rng.random() < 0.05:
            return b"[]", Expect(None, frozenset({-32600}))
        items: list[Any] = []
        expects: list[Expect] = []
        for _ in range(rng.randint(1, 6)):
            pick = rng.random()
            if pick < 0.4:
                msg, exp = self.valid_cheap()
                items.append(msg)
                expects.append(exp)
            elif pick < 0.55:
                msg = self.request("nope")
                items.append(msg)
                expects.append(Expect(json.dumps(msg["id"]), frozenset({-32601})))
            elif pick < 0.7:
                method = rng.choice(sorted(BAD_PARAMS))
                msg = self.request(method, rng.choice(BAD_PARAMS[method]))
                items.append(msg)
                expects.append(Expect(json.dumps(msg["id"]), frozenset({-32602})))
            elif pick < 0.85:
                items.append({"jsonrpc": "2.0", "method": rng.choice(CHEAP)})
            else:
                items.append(rng.choice([5, "x", {}, [], None]))
                expects.append(Expect(None, frozenset({-32600})))
        if not expects:
            return _dump(items), None  # only notifications: no reply at all
        return _dump(items), Expect(None, None, batch=tuple(expects))

    def lines(self, count: int) -> Iterator[tuple[bytes, Expect | None]]:
        for _ in range(count):
            yield self.one()


def _check_reply(reply: Any, exp: Expect, where: str) -> None:
    assert isinstance(reply, dict) and reply.get("jsonrpc") == "2.0", (where, reply)
    assert "id" in reply and (("result" in reply) != ("error" in reply)), (where, reply)
    if "error" in reply:
        err = reply["error"]
        assert isinstance(err, dict), (where, reply)
        assert isinstance(err.get("code"), int) and isinstance(err.get("message"), str)
        assert err["code"] in CODES, (where, reply)
        assert exp.codes is not None and err["code"] in exp.codes, (where, exp, reply)
    elif not exp.lenient:
        assert exp.codes is None, (where, exp, reply)


def _resolve(replies: list[Any], expects: list[Expect], where: str) -> None:
    """Match replies to what their lines deserve: by id, then the null-id ones by code.

    A line's reply carries its id; a line whose id could not be read (not JSON, not a
    request) is answered with id null, and an invalid request may be too, so those are
    matched last, each to a line that may be answered so with that code.
    """
    assert len(replies) == len(expects), (where, len(replies), len(expects))
    arrays = [r for r in replies if isinstance(r, list)]
    batches = [e for e in expects if e.batch is not None]
    assert len(arrays) == len(batches), (where, arrays, batches)
    for array in arrays:
        keyed = {json.dumps(r.get("id")) for r in array if isinstance(r, dict)} - {"null"}
        exp = next(
            (
                e
                for e in batches
                if len(e.batch or ()) == len(array)
                and keyed <= {x.id for x in e.batch or ()}
                and (keyed or all(x.id is None for x in e.batch or ()))
            ),
            None,
        )
        assert exp is not None and exp.batch is not None, (where, "unexpected batch", array)
        batches.remove(exp)
        _resolve(array, list(exp.batch), where)
    singles = [e for e in expects if e.batch is None]
    by_id = {e.id: e for e in singles if e.id is not None}
    assert len(by_id) == sum(e.id is not None for e in singles), where
    nulls = []
    for reply in replies:
        if isinstance(reply, list):
            continue
        assert isinstance(reply, dict) and "id" in reply, (where, reply)
        if reply["id"] is None:
            nulls.append(reply)
            continue
        exp = by_id.pop(json.dumps(reply["id"]), None)
        assert exp is not None, (where, "a reply nobody asked for (or a second one)", reply)
        _check_reply(reply, exp, where)
    owed = [e for e in singles if e.id is None] + list(by_id.values())
    unanswered = [e for e in owed if e.id is not None and not e.null_ok]
    assert unanswered == [], (where, "no reply", unanswered)
    assert len(owed) == len(nulls), (where, owed, nulls)
    # Null-id replies to lines by code: a bipartite matching (augmenting paths), since
    # one line may allow codes that another needs.
    fits = [[j for j, r in enumerate(nulls) if _code(r) in (e.codes or ())] for e in owed]
    line_of: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in line_of or place(line_of[j], seen):
                    line_of[j] = i
                    return True
        return False

    for i, exp in enumerate(owed):
        assert place(i, set()), (where, "no null-id reply fits", exp, nulls)
    for j, i in line_of.items():
        _check_reply(nulls[j], owed[i], where)


def _code(reply: Any) -> Any:
    error = reply.get("error")
    return error.get("code") if isinstance(error, dict) else None


async def _serve(workdir: Path, marker: str) -> Any:
    config = workdir / "hostd.toml"
    text = write_config(workdir, marker, {"alpha": {"frames": 2}}, max_line_bytes=MAX_LINE)
    config.write_text(text.replace(f'socket = "{workdir / "run" / "hostd.sock"}"\n', ""))
    return await anyio.open_process(
        daemon_command(config, "serve", "--stdio"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )


class Wire:
    def __init__(self, process: Any) -> None:
        self.process = process
        self.buf = b""

    async def reply(self) -> Any:
        while b"\n" not in self.buf:
            chunk = await self.process.stdout.receive(1 << 16)
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        return _strict_loads(raw)

    async def rest(self) -> bytes:
        """Everything written until the daemon closes its stdout."""
        out = self.buf
        try:
            while True:
                out += await self.process.stdout.receive(1 << 16)
        except anyio.EndOfStream:
            return out


@pytest.mark.slow
async def test_ten_thousand_generated_lines_each_get_the_answer_they_deserve(
    workdir: Path, marker: str
) -> None:
    gen = Generator(SEED)
    lines = list(gen.lines(LINES))
    assert len(lines) >= 10_000
    kinds = Counter(
        "none" if e is None else "batch" if e.batch else "null" if e.id is None else "id"
        for _, e in lines
    )
    assert min(kinds.values()) >= 500, kinds  # every shape is well represented
    process = await _serve(workdir, marker)
    wire = Wire(process)
    try:
        for start in range(0, len(lines), CHUNK):
            chunk = lines[start : start + CHUNK]
            await process.stdin.send(b"".join(line + b"\n" for line, _ in chunk))
            expects = [e for _, e in chunk if e is not None]
            replies: list[Any] = []
            with anyio.fail_after(60):
                while len(replies) < len(expects):
                    replies.append(await wire.reply())
            _resolve(replies, expects, f"lines {start}..{start + len(chunk)}")
            assert process.returncode is None, "the daemon died"
        # A normal compose still succeeds after all of it.
        final: dict[str, object] = {"jsonrpc": "2.0", "id": "final", "method": "context/compose"}
        final["params"] = {"goal": "after the fuzz", "budget": 300}
        await process.stdin.send(_dump(final) + b"\n")
        with anyio.fail_after(60):
            reply = await wire.reply()
        assert reply["id"] == "final" and "<frame " in reply["result"]["prompt"], reply
        await process.stdin.aclose()
        with anyio.fail_after(60):
            rest = await wire.rest()
            code = await process.wait()
        assert rest == b"", f"replies nobody asked for: {rest[:500]!r}"
        assert code == 0
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
    assert not marked_processes(marker)


def test_the_generator_is_deterministic() -> None:
    first = [line for line, _ in Generator(SEED).lines(2000)]
    assert first == [line for line, _ in Generator(SEED).lines(2000)]
    assert first != [line for line, _ in Generator(SEED + 1).lines(2000)]


@pytest.mark.parametrize("id_", BIG_IDS)
async def test_big_ids_are_echoed_exactly_or_refused(workdir: Path, marker: str, id_: int) -> None:
    process = await _serve(workdir, marker)
    wire = Wire(process)
    try:
        await process.stdin.send(_dump({"jsonrpc": "2.0", "id": id_, "method": "nope"}) + b"\n")
        with anyio.fail_after(60):
            reply = await wire.reply()
        # The id sent, exactly; or, if such an id is refused, an invalid request with id null.
        if reply.get("id") is None:
            _check_reply(reply, Expect(None, frozenset({-32600})), "big id")
        else:
            assert type(reply["id"]) is int and reply["id"] == id_, reply
            _check_reply(reply, Expect(None, frozenset({-32601})), "big id")
    finally:
        await process.stdin.aclose()
        with anyio.CancelScope(shield=True), anyio.fail_after(60):
            await process.wait()
