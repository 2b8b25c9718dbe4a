"""The demo's driver (run by ``scripts/demo``): start the daemon, compose twice, compare.

Starts ``hostd serve`` with ``config/demo.toml`` (files, memory and semantic
providers over this repository), asks it for one real question with
``strategy=score`` and then with ``strategy=rrf``, and prints for each the
prompt head, how many included frames each provider got, where each provider's
frames ranked, and the audit summary.

The daemon splits the budget across providers and then over-fetches: with
``overfetch = 3.0`` in the demo config each of the three providers is asked for
up to the whole budget, so together they offer more than fits and the budget is
contested. The ranking policy then decides who gets in: raw-score ranking fills
the budget with the provider whose scores sit in the highest band; rank fusion
lets every provider's best frames in.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostd.client import Client  # noqa: E402 - after the path set-up above

QUESTION = "How does hostd check that a file frame's digest still matches the bytes on disk?"
STRATEGIES: list[tuple[str, Any]] = [("score", "score"), ("rrf", {"rrf": {"k": 60}})]
PROVIDERS = ("files", "memory", "semantic")
PAST = "2026-03-01T00:00:00Z"  # before the seeded fact was superseded (scripts/demo)


def _rule(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * max(4, 70 - len(title))}")


def _head(prompt: str, lines: int) -> None:
    print(f"prompt head ({lines} of {prompt.count(chr(10)) + 1} lines):")
    for line in prompt.splitlines()[:lines]:
        print(f"  │ {line[:97]}…" if len(line) > 98 else f"  │ {line}".rstrip())


def _summary(audit: dict[str, Any], providers: list[dict[str, Any]] | None = None) -> None:
    entries = audit.get("entries", [])
    included = [e for e in entries if e.get("disposition") == "included"]
    per_provider = Counter(e["provider"] for e in included)
    offered = Counter(e["provider"] for e in entries)
    print(
        "included frames per provider: "
        + ", ".join(f"{p} {per_provider.get(p, 0)}/{offered.get(p, 0)}" for p in PROVIDERS)
        + "  (included/offered)"
    )
    ranked = sorted(included, key=lambda e: e.get("rank", 0))
    print("ranking of included frames:  " + " ".join(e["provider"][0].upper() for e in ranked))
    reasons = Counter(e.get("reason", "?") for e in entries if e.get("disposition") != "included")
    verified = Counter((e.get("verification") or {}).get("state", "unchecked") for e in included)
    policy = audit.get("policy", {})
    print(
        f"audit: {len(entries)} offered, {len(included)} included, "
        f"{len(entries) - len(included)} excluded"
        + (f" ({', '.join(f'{r}: {n}' for r, n in sorted(reasons.items()))})" if reasons else "")
        + f"; tokens {audit.get('tokens_used')}/{audit.get('global_budget')}"
        + f"; policy {policy.get('strategy')}/{policy.get('placement')}"
    )
    if policy.get("asked"):
        print(
            f"over-fetch x{policy.get('overfetch')}: providers asked for "
            + ", ".join(f"{p} {n}" for p, n in sorted(policy["asked"].items()))
            + " tokens"
        )
    print("verification of included frames: " + ", ".join(f"{s} {n}" for s, n in verified.items()))
    if providers:
        print(
            "legs: "
            + ", ".join(
                f"{r['provider_id']} {r['status']} {r.get('frames_accepted', 0)} frames "
                f"{r.get('latency_ms', 0):.0f} ms"
                for r in providers
            )
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "demo.toml")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--head-lines", type=int, default=14)
    args = parser.parse_args()
    args.config = args.config.resolve()

    print(f"question: {args.question}\nbudget:   {args.budget} tokens")
    print(f"daemon:   hostd --config {args.config.relative_to(ROOT)} serve --stdio")
    with Client.spawn(args.config) as client:
        for name, strategy in STRATEGIES:
            _rule(f"hostd context/compose, strategy={name}")
            composed = client.compose(
                args.question,
                budget=args.budget,
                strategy=strategy,
                placement="ranked",
                timeout_ms=120_000,
            )
            _head(composed.prompt, args.head_lines)
            wire = composed.to_wire()
            _summary(wire["audit"], wire["providers"])

        _rule("memory is bitemporal: what it held true then and now")
        for as_of in (PAST, None):
            fan = client.query(
                args.question, budget=600, providers=["memory"], as_of=as_of, kinds=["fact"]
            )
            print(f"as_of {as_of or 'now (absent)'}:")
            for f in fan["frames"].get("memory", []):
                window = f"[{f.get('valid_from')}, {f.get('valid_to') or '…'})"
                print(f"  {f['citation_label']} {window}: {textwrap.shorten(f['content'], 90)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
