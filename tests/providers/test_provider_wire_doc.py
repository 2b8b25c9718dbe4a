"""docs/providers.md's "The wire, for a provider in any language" holds to the code.

Its JSON examples are read from the doc and judged by hostd's own pieces: each request is
the line hostd's JSON-RPC codec writes, each reply is read by that codec and passes
what the daemon applies to it (the handshake checks, the leg audit with its strict frame
schema, the inline digest check, the verdict matcher), and every member is one the wire
models define (an unknown member would be ignored on the wire, U1, so a misspelled
field name would pass unnoticed otherwise). The Node.js provider in the doc is run
as written through ``hostd check-provider`` and fed the doc's requests, answering the
doc's replies; a stdlib-only Python provider that answers with the doc's own replies
passes ``hostd check-provider`` too, so the examples are exercised without Node.js. The
rule-id table covers every id hostd's messages cite, the CGP code table matches the
codes, and the README names the real version and links the section.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hostd.engine import QUARANTINE_RULES, audit_leg
from hostd.engine.verify import InlineOutcome, check_inline_digest, judge_verdicts
from hostd.errors import ProviderError
from hostd.protocol import (
    PROTOCOL_VERSION,
    CgpErrorCode,
    ContextFrame,
    ContextQuery,
    FrameId,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    VerdictStatus,
    VerifyResponse,
    WireModel,
    accept_reply,
    canonical_token_cost,
    is_version_string,
    unknown_members,
)
from hostd.transport.bindings import JsonRpcCodec, Refusal, Reply, check_ack

from ._stdio import REPO, child_env

DOC = REPO / "docs" / "providers.md"
README = REPO / "README.md"
HEADING = "## The wire, for a provider in any language"
#: What a ``hostd check-provider`` run may take at most: a hang guard, never the verdict.
HANG_GUARD_S = 110
#: A call's deadline asked of check-provider: generous, so a busy machine never fails it.
TIMEOUT_MS = "100000"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert HEADING + "\n" in text, f"{DOC.name} has no {HEADING!r} section"
    after = text.split(HEADING + "\n", 1)[1]
    return re.split(r"\n## ", after, maxsplit=1)[0]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _section(), re.S)


@dataclass(frozen=True, slots=True)
class Line:
    """One example: the bytes of its line (without the newline) and its value."""

    raw: bytes
    value: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Wire:
    """The section's examples, in the order it shows them."""

    handshake: Line
    handshake_result: Line
    query: Line
    query_result: Line
    verify: Line
    verify_result: Line
    shutdown: Line
    bad_query: Line
    error: Line

    def requests(self) -> list[Line]:
        return [self.handshake, self.query, self.verify, self.bad_query, self.shutdown]

    def replies(self) -> list[Line]:
        return [self.handshake_result, self.query_result, self.verify_result, self.error]


def _wire() -> Wire:
    lines = []
    for block in _blocks("json"):
        assert block.count("\n") == 1, f"an example is one line as on the wire: {block!r}"
        raw = block.rstrip("\n").encode("utf-8")
        lines.append(Line(raw, json.loads(raw)))
    assert len(lines) == 9, f"expected the nine messages of the section, got {len(lines)}"
    return Wire(*lines)


def _host(wire: Wire) -> HostInfo:
    """The host the doc's handshake request names."""
    return HostInfo.model_validate(wire.handshake.value["params"]["host"])


def _unknown(model: type[BaseModel], data: Any, path: str = "") -> list[str]:
    """Members of ``data`` (nested ones too) that ``model`` does not define."""
    if not isinstance(data, dict):
        return []
    out: list[str] = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            out.append(f"{path}{key}")
            continue
        inner = _model_in(field.annotation)
        if inner is None:
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            out.extend(_unknown(inner, item, f"{path}{key}."))
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, WireModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _request_keys(line: Line) -> None:
    keys = set(line.value)
    assert keys in ({"jsonrpc", "method", "params", "id"}, {"jsonrpc", "method"}), keys
    assert line.value["jsonrpc"] == "2.0"


def _reply(codec: JsonRpcCodec, line: Line, key: int) -> Any:
    """The doc's reply read by the daemon's codec, answering request ``key``."""
    assert set(line.value) == {"jsonrpc", "id", "result"}, line.value
    msg = codec.read(line.raw)
    assert isinstance(msg, Reply), msg
    assert msg.key == key
    return msg.payload


# -- (a) each example, judged by the code ------------------------------------------------


def test_the_section_shows_each_message_in_the_order_hostd_sends_them() -> None:
    wire = _wire()
    methods = [r.value.get("method") for r in wire.requests()]
    assert methods == [
        "context/handshake",
        "context/query",
        "context/verify",
        "context/query",
        "context/shutdown",
    ]
    ids = [r.value.get("id") for r in wire.requests()]
    assert ids == [reply.value["id"] for reply in wire.replies()] + [None]
    for request in wire.requests():
        _request_keys(request)


def test_the_handshake_request_is_the_line_the_daemon_writes() -> None:
    wire = _wire()
    assert _host(wire).name == "hostd"
    sent = JsonRpcCodec("notes").handshake(_host(wire))
    assert sent.line == wire.handshake.raw + b"\n"
    assert wire.handshake.value["params"]["protocol_version"] == PROTOCOL_VERSION


def test_the_handshake_result_passes_the_daemons_handshake_checks() -> None:
    wire = _wire()
    codec = JsonRpcCodec("notes")
    codec.handshake(_host(wire))
    payload = _reply(codec, wire.handshake_result, 1)
    assert _unknown(HandshakeAck, payload) == []
    ack = codec.handshake_ack(payload)
    check_ack(ack)  # raises the daemon's typed error on H1–H3, H2, C5
    assert ack.protocol_version == PROTOCOL_VERSION


def _query(wire: Wire) -> ContextQuery:
    return ContextQuery.model_validate(wire.query.value["params"]["query"])


def test_the_query_request_is_the_line_the_daemon_writes() -> None:
    wire = _wire()
    codec = JsonRpcCodec("notes")
    codec.handshake(_host(wire))
    assert codec.query(_query(wire)).line == wire.query.raw + b"\n"


def _accepted(wire: Wire) -> tuple[ContextFrame, ...]:
    """The doc's query result through the daemon's codec and leg audit."""
    codec = JsonRpcCodec("notes")
    codec.handshake(_host(wire))
    ack = codec.handshake_ack(_reply(codec, wire.handshake_result, 1))
    codec.query(_query(wire))
    result = codec.query_result(_reply(codec, wire.query_result, 2))
    assert _unknown(type(result), wire.query_result.value["result"]) == []
    assert result.frames, "the example answers with a frame"
    for raw in result.frames:
        assert unknown_members(raw) == []
    # The strict, accept-only schema the daemon tries first (every frame rule, B1, B4) …
    assert accept_reply(result.frames, _query(wire), "notes") is not None
    # … and the leg audit's verdict: every frame kept, nothing reported.
    audit = audit_leg(
        "notes", _query(wire), result.frames, declared_kinds=ack.capabilities.query.kinds
    )
    assert audit.violations == ()
    assert not audit.quarantined
    assert len(audit.accepted) == len(result.frames)
    return audit.accepted


def test_the_query_result_passes_the_daemons_leg_audit() -> None:
    for frame in _accepted(_wire()):
        assert frame.token_cost == canonical_token_cost(frame.content)
        # D4: the verify stage hashes the inline content against the digest.
        assert check_inline_digest(frame).outcome is InlineOutcome.CHECKED


def test_the_token_cost_figures_in_the_section_are_the_daemons() -> None:
    figures = re.findall(r'`"([^"`]+)"` is (\d+)\s+bytes, so (\d+)', _section())
    assert len(figures) >= 2
    for text, size, cost in figures:
        assert len(text.encode("utf-8")) == int(size), text
        assert canonical_token_cost(text) == int(cost), text


def _configured_id() -> str:
    (block,) = [b for b in _blocks("toml") if "[[provider]]" in b]
    (provider,) = tomllib.loads(block)["provider"]
    configured: str = provider["id"]
    return configured


def _held(wire: Wire) -> list[FrameId]:
    """The FrameIds the daemon holds for the served frames, under the configured id."""
    return [FrameId.of(_configured_id(), f) for f in _accepted(wire)]


def _after_a_turn(wire: Wire) -> JsonRpcCodec:
    """A codec that sent the handshake (1), a query (2) and a later turn's query (3)."""
    codec = JsonRpcCodec("notes")
    codec.handshake(_host(wire))
    codec.query(_query(wire))
    codec.query(_query(wire))
    return codec


def test_the_verify_request_is_the_line_the_daemon_writes_for_the_served_frame() -> None:
    wire = _wire()
    frames = wire.verify.value["params"]["frames"]
    identities = [FrameIdentity.model_validate(f) for f in frames]
    for raw in frames:
        assert _unknown(FrameIdentity, raw) == []
    # It asks about exactly the frame the query result served, under the configured id.
    assert [FrameId.from_wire(i) for i in identities] == _held(wire)
    assert _after_a_turn(wire).verify(identities).line == wire.verify.raw + b"\n"


def test_the_verify_result_is_matched_as_valid_by_the_daemon() -> None:
    wire = _wire()
    codec = _after_a_turn(wire)
    identities = [FrameIdentity.model_validate(f) for f in wire.verify.value["params"]["frames"]]
    codec.verify(identities)
    payload = _reply(codec, wire.verify_result, 4)
    assert _unknown(VerifyResponse, payload) == []
    response = codec.verify_response(payload)
    judged, anomalies = judge_verdicts(_held(wire), response.verdicts)
    assert {fid: j.status for fid, j in judged.items()} == dict.fromkeys(
        _held(wire), VerdictStatus.VALID
    )
    assert set(anomalies.values()) == {0}


def test_the_shutdown_is_the_notification_the_daemon_writes() -> None:
    wire = _wire()
    sent = JsonRpcCodec("notes").shutdown()
    assert sent.key is None  # nothing answers it
    assert sent.line == wire.shutdown.raw + b"\n"


def test_the_error_reply_is_read_as_its_cgp_code() -> None:
    wire = _wire()
    codec = JsonRpcCodec("notes")
    codec.handshake(_host(wire))
    for _ in range(4):  # check-provider's query, tight budget and two kinds queries
        codec.query(_query(wire))
    bad = wire.bad_query.value["params"]["query"]
    assert codec.query(bad).line == wire.bad_query.raw + b"\n"
    assert set(wire.error.value) == {"jsonrpc", "id", "error"}
    error = wire.error.value["error"]
    assert set(error) <= {"code", "message", "data"}
    msg = codec.read(wire.error.raw)
    assert isinstance(msg, Refusal)
    assert msg.key == wire.bad_query.value["id"]
    assert isinstance(msg.error, ProviderError)
    assert msg.error.cgp_code is CgpErrorCode.BAD_REQUEST
    assert error["code"] == CgpErrorCode.BAD_REQUEST.jsonrpc_code


def _table(header: str) -> list[list[str]]:
    """The body rows, as cells, of the section's table whose header row starts ``header``."""
    lines = _section().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:  # past the header and its rule
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_the_error_code_table_is_the_daemons() -> None:
    rows = _table("| `cgp_code` |")
    table = {name.strip("`"): int(code) for name, code, _ in rows}
    assert table == {code.value: code.jsonrpc_code for code in CgpErrorCode}


# -- the rule ids ----------------------------------------------------------------------

_RULE_ID = re.compile(r"\b(?:H|F|D|B|Q|C|V|R|P|G|U|X)[0-9]{1,2}\b")


def _doc_rule_ids() -> set[str]:
    ids: set[str] = set()
    for row in _table("| id | what it requires |"):
        ids.update(part.strip().strip("`") for part in row[0].split(","))
    return ids


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _cited_rule_ids() -> set[str]:
    """Every rule id hostd's messages cite: the first argument of each ``Violation``, the
    quarantine rules, and each id in a message's text (not a docstring, not a comment)."""
    cited: set[str] = set(QUARANTINE_RULES)
    for path in (REPO / "hostd").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Violation"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                cited.add(str(node.args[0].value))
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docs:
                    cited.update(_RULE_ID.findall(node.value))
    return cited


def test_the_rule_table_defines_every_rule_id_hostds_messages_cite() -> None:
    cited = _cited_rule_ids()
    assert {"H1", "H3", "F3", "F5", "D1", "B1", "B3", "B4", "Q1", "schema"} <= cited
    assert sorted(cited - _doc_rule_ids()) == []


def test_the_rule_table_holds_only_ids_hostd_uses() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "hostd").rglob("*.py"))
    unused = [i for i in _doc_rule_ids() if not re.search(rf"\b{re.escape(i)}\b", source)]
    assert unused == []


# -- links and the README ----------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` dropped."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_every_anchor_the_section_links_to_is_a_heading_of_the_doc() -> None:
    anchors = _anchors(DOC.read_text(encoding="utf-8"))
    links = re.findall(r"\]\(#([^)]+)\)", _section())
    assert links
    assert [link for link in links if link not in anchors] == []


def test_the_readme_links_the_section_from_writing_a_provider() -> None:
    readme = README.read_text(encoding="utf-8")
    part = readme.split("### Writing a provider\n", 1)[1].split("\n## ", 1)[0]
    anchor = _slug(HEADING.lstrip("# "))
    assert anchor in _anchors(DOC.read_text(encoding="utf-8"))
    assert f"(docs/providers.md#{anchor})" in part


def test_every_protocol_version_the_readme_names_is_one_a_handshake_accepts() -> None:
    readme = README.read_text(encoding="utf-8")
    named = re.findall(r"`(contextgraph/[^`]*)`", readme)
    assert PROTOCOL_VERSION in named
    assert [v for v in named if not is_version_string(v)] == []


# -- (b) the Node.js provider, as written --------------------------------------------------


def _check_provider(command: list[str], cwd: Path) -> list[dict[str, Any]]:
    """``hostd check-provider --json -- COMMAND``: asserts it exits 0 with every check run
    and passed (read from its JSON, never from the table's text)."""
    r = subprocess.run(
        [sys.executable, "-m", "hostd", "check-provider", "--json"]
        + ["--timeout-ms", TIMEOUT_MS, "--", *command],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,  # a hang guard
        check=False,
    )
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    results: list[dict[str, Any]] = json.loads(r.stdout)
    assert results
    assert [x for x in results if x.get("passed") is not True or x.get("skipped")] == []
    return results


def _node_provider(tmp_path: Path) -> Path:
    source, _provenance = _blocks("js")  # the provider, then file provenance
    path = tmp_path / "notes.js"
    path.write_text(source, encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_node_provider_passes_check_provider(tmp_path: Path) -> None:
    assert "hostd check-provider -- node notes.js" in _section()
    path = _node_provider(tmp_path)
    _check_provider(["node", path.name], tmp_path)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_node_provider_answers_the_sections_requests_with_its_replies(
    tmp_path: Path,
) -> None:
    wire = _wire()
    path = _node_provider(tmp_path)
    r = subprocess.run(
        ["node", str(path)],
        input=b"".join(line.raw + b"\n" for line in wire.requests()),
        capture_output=True,
        timeout=HANG_GUARD_S,  # a hang guard
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]  # it exits on the shutdown (R2)
    replies = [json.loads(line) for line in r.stdout.splitlines()]
    assert replies == [line.value for line in wire.replies()]


# -- (c) the section's replies, served by a stdlib-only Python provider -------------------

_STDLIB_PROVIDER = '''\
"""A provider answering with docs/providers.md's own example replies (stdlib only)."""
import json
import sys

HANDSHAKE = json.loads({handshake!r})["result"]
FRAMES = json.loads({query!r})["result"]["frames"]
VERDICTS = json.loads({verify!r})["result"]["verdicts"]
ERROR = json.loads({error!r})["error"]
KNOWN = {{(v["frame"]["frame_id"], v["frame"]["content_digest"]): v["status"] for v in VERDICTS}}


def query(q):
    if not (isinstance(q, dict) and isinstance(q.get("goal"), str)
            and type(q.get("max_frames")) is int and type(q.get("max_tokens")) is int):
        raise LookupError
    kinds = q.get("kinds") or []
    out, cost = [], 0
    for frame in FRAMES:
        fits = len(out) < q["max_frames"] and cost + frame["token_cost"] <= q["max_tokens"]
        if fits and (not kinds or frame["kind"] in kinds):
            out.append(frame)
            cost += frame["token_cost"]
    return {{"frames": out, "truncated": False}}


def answer(method, params):
    if method == "context/handshake":
        return HANDSHAKE
    if method == "context/query":
        return query(params.get("query") if isinstance(params, dict) else None)
    if method == "context/verify":
        return {{"verdicts": [
            {{"frame": f, "status": KNOWN.get((f.get("frame_id"), f.get("content_digest")),
                                              "unknown")}}
            for f in params["frames"]
        ]}}
    raise LookupError


while line := sys.stdin.readline():
    try:
        msg = json.loads(line)
    except ValueError:
        continue  # R1: a line that is not JSON is ignored
    if not isinstance(msg, dict) or "id" not in msg:
        if isinstance(msg, dict) and msg.get("method") == "context/shutdown":
            break
        continue
    try:
        reply = {{"result": answer(msg.get("method"), msg.get("params"))}}
    except LookupError:
        reply = {{"error": ERROR}}
    sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], **reply}}) + "\\n")
    sys.stdout.flush()
'''


@pytest.mark.slow
def test_a_provider_answering_the_sections_replies_passes_check_provider(tmp_path: Path) -> None:
    wire = _wire()
    source = _STDLIB_PROVIDER.format(
        handshake=wire.handshake_result.raw.decode(),
        query=wire.query_result.raw.decode(),
        verify=wire.verify_result.raw.decode(),
        error=wire.error.raw.decode(),
    )
    path = tmp_path / "doc_provider.py"
    path.write_text(source, encoding="utf-8")
    names = {r.get("check") for r in _check_provider(["python", path.name], tmp_path)}
    assert {"handshake", "query", "verify honesty", "shutdown"} <= names


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_node_file_provenance_digests_what_hostd_re_reads(tmp_path: Path) -> None:
    """The section's Node.js ``fileProvenance`` gives the digest hostd's source check
    compares (F5, F17): each line with its final LF, a CR kept, a last line without one,
    bytes that are not ASCII, and a range past the end stopped there."""
    from hostd.provider import file_provenance

    _provider, source = _blocks("js")
    path = tmp_path / "data.txt"
    path.write_bytes("a\r\nb\u00e9\n\nlast line, no LF".encode())
    ranges = [(1, 1), (2, 2), (3, 3), (4, 4), (1, 4), (2, 9)]
    script = tmp_path / "provenance.js"
    script.write_text(
        source
        + f"\nfor (const [a, b] of {json.dumps(ranges)}) "
        + f"console.log(JSON.stringify(fileProvenance({json.dumps(str(path))}, a, b)));\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        ["node", str(script)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,  # a hang guard
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = path.read_bytes()
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert [g["range"] for g in got] == [f"L{a}-{b}" for a, b in ranges]
    for entry in got:
        assert entry["uri"] == path.as_uri()
        assert entry["digest"] == file_provenance(entry["uri"], data, entry["range"]).digest, entry
