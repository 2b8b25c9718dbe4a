"""What the forward adapters read from a compose result (``hostd.integrations._evidence``)."""

from __future__ import annotations

import pytest

from hostd.integrations._evidence import compose_params, evidence_metadata, read_composition

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


def test_a_result_without_evidence_is_refused_not_read_as_no_evidence() -> None:
    with pytest.raises(ValueError, match="include_content"):
        read_composition({"prompt": "", "citations": [], "request_id": "r1"})
    empty = read_composition({"evidence": [], "request_id": "r1"})
    assert empty.evidence == () and empty.request_id == "r1"


def test_metadata_names_the_source_the_check_and_the_request() -> None:
    reasons = [{"reason": "provider_failed", "provider": "memory"}]
    result = {
        "evidence": [ITEM],
        "request_id": "r7",
        "degraded": True,
        "degraded_reasons": reasons,
        "providers": [{"provider_id": "files", "status": "ok"}],
    }
    composition = read_composition(result)
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
    quiet = read_composition({"evidence": [ITEM], "request_id": "r8"})
    assert (quiet.degraded, quiet.degraded_reasons) == (None, ())
