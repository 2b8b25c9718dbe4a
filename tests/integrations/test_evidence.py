"""What the forward adapters read from a compose result (``hostd.integrations._evidence``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.client import ComposeResult
from hostd.integrations._evidence import compose_params, evidence_metadata, shortfall

ITEM = {
    "label": "net.py L1-4",
    "provider_id": "files",
    "frame_id": "net.py#L1-4",
    "kind": "snippet",
    "title": "net.py L1-4",
    "uri": "file:///src/net.py",
    "range": "L1-4",
    "content": "def f():\n    pass\n",
    "content_digest": "sha256:" + "a" * 64,
    "score": 0.25,
    "rank": 2,
    "verification": {"state": "source_verified"},
}


def test_every_adapter_call_asks_for_the_evidence_and_only_for_what_is_set() -> None:
    params = compose_params(300, "rrf", {"providers": ["files"], "placement": None})
    assert params == {
        "providers": ["files"],
        "include_content": True,
        "budget": 300,
        "strategy": "rrf",
    }
    assert compose_params(None, None, {}) == {"include_content": True}


def _result(*, r7: bool, **extra: object) -> ComposeResult:
    """A compose result as the typed client validates it from the wire."""
    wire = {
        "prompt": "",
        "citations": [],
        "evidence": [ITEM],
        "audit": {"entries": [], "global_budget": 100, "tokens_used": 0, "policy": {}},
        "providers": [{"provider_id": "files", "status": "ok"}],
        "request_id": "r7" if r7 else "r8",
        **extra,
    }
    return ComposeResult.model_validate(wire)


def test_metadata_names_the_source_the_check_and_the_request() -> None:
    reasons = [{"reason": "provider_failed", "provider": "memory"}]
    composition = _result(r7=True, degraded=True, degraded_reasons=reasons)
    (item,) = composition.evidence
    assert item.content == ITEM["content"]
    meta = evidence_metadata(item, 0, composition)
    for key in ("provider_id", "frame_id", "uri", "range", "verification", "content_digest"):
        assert meta[key] == ITEM[key]
    assert meta["citation_label"] == ITEM["label"] and meta["request_id"] == "r7"
    assert (meta["rank"], meta["provider_score"]) == (2, 0.25)
    assert (meta["degraded"], meta["degraded_reasons"]) == (True, reasons)
    meta["degraded_reasons"][0]["reason"] = "changed"  # each document gets its own copy
    assert evidence_metadata(item, 0, composition)["degraded_reasons"] == reasons
    # A daemon that does not report degradation: nothing is claimed either way.
    quiet = _result(r7=False)
    (item,) = quiet.evidence
    assert (evidence_metadata(item, 0, quiet)["degraded"], quiet.degraded_reasons) == (None, [])


def test_metadata_names_every_provider_that_vouched_for_the_frame() -> None:
    # ``semantic``'s copy was kept; ``files`` served the same lines (a duplicate, D2).
    item = {**ITEM, "provider_id": "semantic"}
    frame = {k: item[k] for k in ("provider_id", "frame_id", "content_digest")}
    kept: dict[str, object] = {
        "frame": frame,
        "provider": "semantic",
        "disposition": "included",
        "rank": 0,
    }
    dup: dict[str, object] = {
        "frame": {**frame, "provider_id": "files"},
        "provider": "files",
        "disposition": "excluded",
        "reason": "duplicate",
        "vouched_by": ["memory"],  # an excluded entry's is not read
    }
    audit = {"entries": [], "global_budget": 100, "tokens_used": 0, "policy": {}}

    def vouched_by(entries: list[dict[str, object]]) -> list[str]:
        result = _result(r7=True, evidence=[item], audit={**audit, "entries": entries})
        (evidence,) = result.evidence
        by: list[str] = evidence_metadata(evidence, 0, result)["vouched_by"]
        return by

    assert vouched_by([{**kept, "vouched_by": ["files", "semantic"]}, dup]) == [
        "files",
        "semantic",
    ]
    # A daemon that does not name them, or no entry for the frame: its own provider.
    assert vouched_by([kept, dup]) == ["semantic"]
    assert vouched_by([]) == ["semantic"]
    # The frame's own provider is always among them.
    assert vouched_by([{**kept, "vouched_by": ["files"]}]) == ["files", "semantic"]
    # A span merged from both copies: its evidence's digest is the union's, its entry is
    # found at its place in the prompt (the client's ``Evidence.vouched_by``).
    union = {**kept, "position": 0, "vouched_by": ["files", "semantic"]}
    result = _result(
        r7=True,
        evidence=[{**item, "content_digest": "sha256:" + "b" * 64}],
        audit={**audit, "entries": [union, dup]},
    )
    (evidence,) = result.evidence
    assert evidence_metadata(evidence, 0, result)["vouched_by"] == ["files", "semantic"]


def test_an_empty_composition_is_news_only_when_something_was_missed() -> None:
    ok = [{"provider_id": "files", "status": "ok"}]
    # Every provider answered and had nothing for the query: nothing matched, no news.
    assert shortfall(_result(r7=True, evidence=[], providers=ok, degraded=False)) is None
    # A provider had nothing that fit: hostd's note on its leg says why.
    note = "nothing fit: no frame within its share of 12 tokens"
    unfit = [{"provider_id": "files", "status": "ok", "note": note}]
    said = shortfall(_result(r7=True, evidence=[], providers=unfit, degraded=False))
    assert said is not None and f"files: {note}" in said and "gave 0 document(s)" in said


def test_a_failed_provider_is_named_never_quoted() -> None:
    peer = "Traceback: secret-ish text the provider wrote"
    failed = [
        {"provider_id": "memory", "status": "crashed", "error": {"code": "x", "message": peer}}
    ]
    reasons = [{"reason": "provider_failed", "provider": "memory", "detail": "crashed"}]
    result = _result(r7=True, providers=failed, degraded=True, degraded_reasons=reasons)
    said = shortfall(result)
    assert said is not None and "provider_failed (memory: crashed)" in said
    assert "gave 1 document(s)" in said and peer not in said


def test_a_degraded_reasons_message_is_carried_from_the_reason_alone() -> None:
    said = "unavailable: ConnectError: connection refused at 127.0.0.1:1: is the server running?"
    reasons = [{"reason": "rerank_fallback", "detail": "unavailable", "message": said}]
    result = _result(r7=True, degraded=True, degraded_reasons=reasons)
    assert result.degraded_reasons[0].message == said  # the typed client has it
    (item,) = result.evidence
    (reason,) = evidence_metadata(item, 0, result)["degraded_reasons"]
    assert reason["message"] == said
    shown = shortfall(result)
    assert shown is not None and f"rerank_fallback ({said})" in shown
    # One source: the audit's account is not read again (a reason without a message has
    # none in the adapter either).
    rerank = {"fallback": "round_robin", "reason": "unavailable", "detail": "elsewhere"}
    policy = {"strategy_params": {"rerank": rerank}}
    audit = {"entries": [], "global_budget": 100, "tokens_used": 0, "policy": policy}
    bare = [{"reason": "rerank_fallback", "detail": "unavailable"}]
    result = _result(r7=True, audit=audit, degraded=True, degraded_reasons=bare)
    (item,) = result.evidence
    assert evidence_metadata(item, 0, result)["degraded_reasons"] == bare


def test_no_daemon_names_the_socket_discovery_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hostd.integrations._session import DaemonSession

    socket = tmp_path / "nobody.sock"
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{socket}"\n')
    monkeypatch.setenv("HOSTD_CONFIG", str(config))
    session = DaemonSession(connect=None, config=None, wait=0)
    try:
        with pytest.raises(ConnectionError, match=f"no hostd answers at {socket}"):
            session.compose("g", compose_params(50, None, {}))
    finally:
        session.close()
