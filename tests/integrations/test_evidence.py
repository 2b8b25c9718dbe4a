"""What the forward adapters read from a compose result (``hostd.integrations._evidence``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.client import ComposeResult
from hostd.integrations._evidence import compose_params, evidence_metadata

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
    meta = evidence_metadata(item, composition)
    for key in ("provider_id", "frame_id", "uri", "range", "verification", "content_digest"):
        assert meta[key] == ITEM[key]
    assert meta["citation_label"] == ITEM["label"] and meta["request_id"] == "r7"
    assert (meta["rank"], meta["provider_score"]) == (2, 0.25)
    assert (meta["degraded"], meta["degraded_reasons"]) == (True, reasons)
    meta["degraded_reasons"][0]["reason"] = "changed"  # each document gets its own copy
    assert evidence_metadata(item, composition)["degraded_reasons"] == reasons
    # A daemon that does not report degradation: nothing is claimed either way.
    quiet = _result(r7=False)
    (item,) = quiet.evidence
    assert (evidence_metadata(item, quiet)["degraded"], quiet.degraded_reasons) == (None, [])


def test_no_daemon_names_the_socket_discovery_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hostd.integrations._session import DaemonSession

    socket = tmp_path / "nobody.sock"
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{socket}"\n')
    monkeypatch.setenv("HOSTD_CONFIG", str(config))
    session = DaemonSession(connect=None, config=None)
    try:
        with pytest.raises(ConnectionError, match=f"no hostd answers at {socket}"):
            session.compose("g", compose_params(50, None, {}))
    finally:
        session.close()
