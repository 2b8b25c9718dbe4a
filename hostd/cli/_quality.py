"""The evidence-quality parts of the ``hostd`` CLI: ``eval``, ``shadow replay``,
``calibrate`` (each a face of ``hostd.quality``, imported when the command runs, never
to build the parser) and the policy options of ``compose`` (``--caps``, ``--floors``,
the overfetch note).

``eval`` and ``shadow replay`` print a
table, or JSON with ``--json``; both spell policies as ``--strategy`` does. Both replay
a record composed with ``[host] tokenizer`` in that tokenizer's tokens when the
``[host] tokenizer`` here is the same file (``_RecordedTokenizers``), and say on stderr
which records they replayed in canonical tokens instead, and why.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ._common import EXIT_OK, connect_arg, csv_arg, print_json, session, strategy_arg

if TYPE_CHECKING:
    from hostd.config import Config
    from hostd.quality import Recorded

__all__ = [
    "add_quality_commands",
    "caps_arg",
    "eval_command",
    "floors_arg",
    "overfetch_note",
    "shadow_command",
]


def caps_arg(value: str | None) -> dict[str, float] | None:
    """``files=0.5,*=0.3`` (or a JSON object) → the ``caps`` param."""
    if value is None:
        return None
    if value.lstrip().startswith("{"):
        caps = orjson.loads(value)
        if not isinstance(caps, dict):
            raise ValueError("--caps: a JSON value must be an object of provider: share")
        return caps
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        provider, sep, share = part.partition("=")
        if not sep or not provider.strip():
            raise ValueError(f"--caps: expected provider=share, got {part!r}")
        try:
            out[provider.strip()] = float(share)
        except ValueError:
            raise ValueError(f"--caps: the share of {provider.strip()!r} is not a number") from None
    return out


def floors_arg(value: str | None) -> list[dict[str, Any]] | None:
    """Comma-separated files, each a floor labelled by its path (or a JSON array of floors)."""
    if value is None:
        return None
    if value.lstrip().startswith("["):
        floors = orjson.loads(value)
        if not isinstance(floors, list):
            raise ValueError("--floors: a JSON value must be an array of {label, content}")
        return floors
    out: list[dict[str, Any]] = []
    for path in filter(None, (p.strip() for p in value.split(","))):
        try:
            content = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--floors: cannot read {path}: {exc}") from None
        out.append({"label": path, "content": content})
    return out


def overfetch_note(result: dict[str, Any]) -> str | None:
    """Why the overfetch of a composition changed nothing, or ``None`` when it did.

    A provider is asked for ``min(budget, ceil(share × overfetch))``: when that is its
    share for every provider (one provider, whose share is the whole budget, say; or
    a budget so small the shares are 1 and 0), the factor is inert.
    """
    overfetch = ((result.get("audit") or {}).get("policy") or {}).get("overfetch")
    if not isinstance(overfetch, int | float) or overfetch <= 1:
        return None
    legs = [
        p
        for p in result.get("providers") or ()
        if p.get("share") is not None and p.get("max_tokens") is not None
    ]
    if not legs or any(p["max_tokens"] > p["share"] for p in legs):
        return None
    asked = ", ".join(f"{p['provider_id']} {p['max_tokens']}" for p in legs)
    return (
        f"overfetch {overfetch:g} cannot change what is asked: no provider's share times "
        f"{overfetch:g} fits under the budget, so each is asked for just its share "
        f"({asked} tokens)"
    )


def add_quality_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``eval`` and ``shadow replay`` on the CLI's subparsers."""
    ev = sub.add_parser(
        "eval",
        parents=[common],
        help="recall of each ranking policy on a question set",
        description="Ask every question of a JSONL set ({id, question, gold: [{file, phrase}], "
        "style}) through the configured providers, compose it under each policy and budget "
        "and under each provider alone, and print how often a gold passage reached the prompt, "
        "per style and policy (docs/eval.md). --from-shadow asks the recorded requests with "
        "feedback instead: the used frames are the gold, the recorded candidates the set.",
    )
    source = ev.add_mutually_exclusive_group(required=True)
    source.add_argument("--questions", metavar="PATH", help="the question set")
    source.add_argument(
        "--from-shadow",
        action="store_true",
        help="the recorded requests with feedback (state_dir/shadow.db), at their budgets",
    )
    ev.add_argument(
        "--budget",
        type=int,
        action="append",
        metavar="N",
        help="global token budget (repeatable; default: the config's default_budget)",
    )
    ev.add_argument(
        "--policy",
        action="append",
        metavar="S",
        help="a strategy as --strategy spells it (repeatable; default: every registered one)",
    )
    ev.add_argument("--providers", metavar="IDS", help="comma-separated provider subset")
    ev.add_argument(
        "--pool-budget",
        type=int,
        metavar="N",
        help="ask the fan-out for N tokens and pack each --budget from that pool "
        "(default: the budget itself)",
    )
    ev.add_argument(
        "--trim-oracle",
        action="store_true",
        help="add the (trim-oracle) row: every candidate cut to its gold lines, composed at "
        "the budget (the ceiling a line judge is measured against)",
    )
    ev.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="with --from-shadow: only the newest N requests with feedback",
    )
    ev.add_argument(
        "--since-calibration",
        action="store_true",
        help="with --from-shadow: only requests whose feedback came after "
        "state_dir/calibration.json was written (what calibrated's fit never saw)",
    )
    ev.add_argument("--json", action="store_true", help="print the table and outcomes as JSON")
    connect_arg(ev)
    ev.set_defaults(run=eval_command)

    shadow = sub.add_parser(
        "shadow",
        parents=[common],
        help="replay recorded compositions under another policy",
        description="Shadow ranking: with [shadow] enabled the daemon records a sample of "
        "compositions (state_dir/shadow.db); replay composes them again under a policy.",
    )
    shadow.set_defaults(run=shadow_command)
    ssub = shadow.add_subparsers(dest="shadow_command", metavar="ACTION", required=True)
    replay = ssub.add_parser(
        "replay",
        parents=[common],
        help="compare a policy with the live one on the recorded requests",
        description="Compose every recorded candidate set under each --policy and print what "
        "it would have admitted against what the live policy did: overlap, provider mix, the "
        "newly excluded and included frames, tokens; one report per policy, in order.",
    )
    replay.add_argument(
        "--policy",
        required=True,
        action="append",
        metavar="S",
        help="a strategy, as --strategy spells it (repeatable: one report each)",
    )
    replay.add_argument("--limit", type=int, metavar="N", help="only the newest N requests")
    replay.add_argument("--json", action="store_true", help="print JSON")

    cal = sub.add_parser(
        "calibrate",
        parents=[common],
        help="fit the calibrated policy's maps on recorded feedback",
        description="Fit, per provider, an isotonic map from its own score to the chance a "
        "shown frame is used (and one pooled map from rank), on the recorded requests with "
        "feedback, and write state_dir/calibration.json for the calibrated policy.",
    )
    cal.add_argument(
        "--min-samples",
        type=int,
        metavar="N",
        # The defaults are hostd.quality's MIN_REQUESTS and MIN_FRAMES (a test holds them
        # equal), spelt here so that building the parser imports no quality code.
        help="requests with feedback below which the fit is called thin: a warning on "
        "stderr and in the file (default 50)",
    )
    cal.add_argument(
        "--min-frames",
        type=int,
        metavar="N",
        help="shown frames a provider needs for a map of its own (default 20)",
    )
    cal.add_argument("--json", action="store_true", help="print the file written")
    cal.set_defaults(run=shadow_command)


def _not_ready_note(states: dict[str, str]) -> str:
    """A line naming the providers not ready once the warm-up settled (their legs fail
    or warm through the run, so their rows say little), or nothing."""
    late = [f"{pid} ({state})" for pid, state in sorted(states.items()) if state != "ready"]
    if not late:
        return ""
    return f"not ready before the questions: {', '.join(late)}; their rows lack them\n"


async def eval_command(cfg: Config, args: argparse.Namespace) -> int:
    from hostd import quality
    from hostd.compose import DEFAULT_STRATEGY, strategy_text

    # strategy_arg checks each spelling, so a misspelt policy fails before any provider starts
    policies = [
        quality.Policy(p, _bound(cfg, strategy_arg(p, "--policy")))
        for p in args.policy or quality.DEFAULT_POLICIES
    ]
    if args.pool_budget is not None and args.pool_budget <= 0:
        raise ValueError(f"--pool-budget must be a positive token count, got {args.pool_budget}")
    questions: Sequence[Any]
    if args.from_shadow:
        if args.budget or args.providers or args.pool_budget or args.connect is not None:
            raise ValueError(
                "--from-shadow composes each recorded candidate set at its recorded budget: "
                "--budget, --providers, --pool-budget and --connect do not apply"
            )
        if args.trim_oracle:
            raise ValueError(
                "--trim-oracle cuts frames to the lines holding a gold phrase: recorded "
                "traffic names used frames, not phrases"
            )
        records = _traffic(cfg, args)
        tokenizers = _RecordedTokenizers(cfg.host.tokenizer)
        questions, outcomes = quality.run_from_shadow(records, policies, tokenizers)
        sys.stderr.write(tokenizers.note(len(records)) + _unmerged_note(records))
        if not questions:
            sys.stderr.write("no recorded request has feedback naming used evidence\n")
        else:
            fitted = [p.label for p in policies if _fallback(p.strategy) is None]
            sys.stderr.write(_traffic_notes(cfg, args, records, fitted))
    else:
        if args.limit is not None or args.since_calibration:
            raise ValueError(
                "--limit and --since-calibration choose recorded requests: they go with "
                "--from-shadow"
            )
        questions = quality.load_questions(args.questions)
        budgets = args.budget or [cfg.host.default_budget]
        async with session(cfg, args.connect, wait=args.wait, token_file=args.token_file) as s:
            # Every index whole before the first question: a provider answering from
            # what it has built so far (semantic while it embeds) would make the figures
            # depend on how far its build got, not on the policies compared.
            warmed = await s.call("providers/warm", {})
            sys.stderr.write(_not_ready_note(warmed.get("providers") or {}))
            outcomes = await quality.run_eval(
                s,
                questions,
                budgets,
                policies,
                providers=csv_arg(args.providers),
                pool_budget=args.pool_budget,
                trim_oracle=args.trim_oracle,
                merge_max_ratio=cfg.host.merge_max_ratio,
            )
    # Each policy is also set against the default, question by question.
    baseline = strategy_text(DEFAULT_STRATEGY)
    if args.json:
        print_json(quality.to_json(questions, outcomes, baseline))
    else:
        sys.stdout.write(quality.render_table(questions, quality.summarise(outcomes)))
        pairs = quality.render_paired(quality.paired(outcomes, baseline))
        if pairs:
            sys.stdout.write("\n" + pairs)
        elif baseline not in {o.policy for o in outcomes}:  # nothing to pair against
            sys.stderr.write(
                f"hostd: note: the +gained -lost table (question by question) sets each policy "
                f"against {baseline}, which was not run: add --policy {baseline} to see it\n"
            )
    sys.stderr.write(quality.degraded_note(outcomes))
    sys.stderr.write(_fallback_notes([(p.label, p.strategy) for p in policies], outcomes))
    if not args.from_shadow:
        sys.stderr.write(_unreachable_gold(outcomes))
    return EXIT_OK


def _traffic(cfg: Config, args: argparse.Namespace) -> list[Any]:
    """The recorded requests ``eval --from-shadow`` asks: those whose feedback names used
    evidence, oldest first; after the calibration file's fit with ``--since-calibration``,
    the newest ``--limit`` of them."""
    from hostd import quality

    if args.limit is not None and args.limit <= 0:
        raise ValueError(f"--limit must be a positive number of requests, got {args.limit}")
    records = [
        r
        for r in quality.ShadowStore(quality.shadow_path(cfg.state_path)).load()
        if r.feedback is not None and r.feedback.used
    ]
    if args.since_calibration:
        fitted = _calibrated_at(cfg)
        if fitted is None:
            path = quality.calibration_path(cfg.state_path)
            raise ValueError(
                f"--since-calibration: no calibration file at {path} (run hostd calibrate)"
            )
        records = [r for r in records if r.feedback and r.feedback.recorded_at > fitted]
    return records[-args.limit :] if args.limit is not None else records


def _calibrated_at(cfg: Config) -> float | None:
    """When the calibration file was written (its mtime), or None without one."""
    from hostd import quality

    try:
        return quality.calibration_path(cfg.state_path).stat().st_mtime
    except OSError:
        return None


def _traffic_notes(
    cfg: Config, args: argparse.Namespace, records: Sequence[Any], policies: Sequence[str]
) -> str:
    """What the recorded-traffic table cannot say on its own: a live policy recalls
    every used frame by construction, a handful of requests cannot tell policies apart,
    and ``calibrated`` fitted on these same requests is judged in-sample. ``policies``:
    the labels of those that rank as themselves here (not a fallback)."""
    from hostd import quality

    n = len(records)  # each with feedback naming used evidence (``_traffic``)
    live = sorted({str(r.policy.get("strategy", "?")) for r in records})
    out = (
        f"hostd: note: the gold is what the answers used, and they could use only what the "
        f"live policy showed ({', '.join(live)}): that policy's row is at or near 100% by "
        "construction; read the others as how much of that evidence they keep, and at what "
        "tokens (docs/eval.md)\n"
    )
    if n < quality.MIN_REQUESTS:
        out += (
            f"hostd: note: {_count(n, 'request')} with feedback: one request moves a figure "
            f"by {100 / n:.0f} points, so with fewer than {quality.MIN_REQUESTS} the rows "
            "cannot tell policies apart; record more feedback\n"
        )
    fitted = _calibrated_at(cfg)
    if "calibrated" in policies and fitted is not None and not args.since_calibration:
        seen = sum(1 for r in records if r.feedback.recorded_at <= fitted)
        if seen:
            out += (
                f"hostd: note: calibrated was fitted on feedback that includes {seen} of "
                f"these {_count(n, 'request')}: on those its row is in-sample and reads high; "
                "--since-calibration asks only the requests after the fit\n"
            )
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _unreachable_gold(outcomes: Sequence[Any]) -> str:
    """A line naming the questions whose gold no provider offered at any budget (their
    ``(offered)`` row missed everywhere): no policy can recall them, and a gold phrase
    with a typo, or a gold file no provider reads, looks just like that."""
    from hostd import quality

    offered: dict[str, bool] = {}
    for o in outcomes:
        if o.policy == quality.OFFERED:
            offered[o.question] = offered.get(o.question, False) or o.hit
    missed = [q for q, hit in offered.items() if not hit]
    if not missed:
        return ""
    return (
        f"hostd: note: no provider offered the gold of {len(missed)} question(s) at any "
        f"budget ({', '.join(missed)}): no policy can recall them; check their gold file "
        "and phrase (its phrase must appear, case and whitespace aside, in a frame of that file)\n"
    )


def _bound(cfg: Config, wire: Any) -> Any:
    """A policy with what the state directory holds for it (``calibrated``'s maps)."""
    from hostd import quality
    from hostd.compose import strategy_from_wire

    return quality.bind_calibration(
        strategy_from_wire(wire), quality.calibration_path(cfg.state_path)
    )


class _RecordedTokenizers:
    """The tokenizer each record is replayed in (``replay_all``'s ``tokenizer_of``).

    A record composed with ``[host] tokenizer`` names it in its policy as the daemon's
    loader does (``HfTokenizer.name``: the file's name and digest). It is replayed in
    that tokenizer when the ``[host] tokenizer`` here is that very file, loaded as the
    daemon loads it and once for all records (per name recorded). Otherwise it is
    replayed in canonical tokens, and ``note`` says so: which tokenizer, how many
    records, why. A record with no tokenizer is replayed in canonical tokens, as made.
    """

    __slots__ = ("_configured", "_fallen", "_found")

    def __init__(self, configured: Path | None) -> None:
        self._configured = configured
        #: Per recorded name: the loaded tokenizer, or why it cannot be used here.
        self._found: dict[str, Callable[[str], int] | str] = {}
        #: (name, why) -> the records replayed in canonical tokens for that reason
        #: (by identity: one record is counted once, however many policies replay it).
        self._fallen: dict[tuple[str, str], set[int]] = {}

    def __call__(self, record: Recorded) -> Callable[[str], int] | None:
        name = record.policy.get("tokenizer")
        if not name:
            return None
        name = str(name)
        if any(c.content is None and c.cost for c in record.candidates):
            # A stand-in (spaces of the same canonical cost, _frames) is priced right in
            # canonical tokens only: a tokenizer would count spaces, not the evidence.
            why = (
                "they keep no frame content ([shadow] store_content is off), and a "
                "tokenizer counts the content itself"
            )
        else:
            if name not in self._found:
                self._found[name] = self._load(name)
            found = self._found[name]
            if not isinstance(found, str):
                return found
            why = found
        self._fallen.setdefault((name, why), set()).add(id(record))
        return None

    def _load(self, name: str) -> Callable[[str], int] | str:
        """The ``[host] tokenizer`` here if it is the one ``name`` names, else why not."""
        if self._configured is None:
            return "no [host] tokenizer is set here (set it to that file to replay them in it)"
        from hostd._tokenizer import load_tokenizer
        from hostd.errors import ConfigError

        try:
            tokenizer = load_tokenizer(self._configured)
        except ConfigError as exc:
            problem = exc.data.get("problem") or "it cannot be read"
            return f"the [host] tokenizer here, {self._configured}, cannot be loaded: {problem}"
        if tokenizer.name != name:
            return f"the [host] tokenizer here is {tokenizer.name}, another file"
        return tokenizer

    def note(self, total: int) -> str:
        """A line per tokenizer (and reason) whose records were replayed in canonical
        tokens; ``""`` when every record was replayed in the tokens it was composed in."""
        return "".join(
            f"hostd: note: {len(records)} of {total} records were composed in {name}'s "
            "tokens and replayed in canonical tokens (UTF-8 bytes / 4), so their budgets and "
            f"token figures are not the live composition's: {why}\n"
            for (name, why), records in sorted(self._fallen.items())
        )


def _unmerged_note(records: Sequence[Any]) -> str:
    """A line when records kept without content quote overlapping or touching ranges of a
    file: their replays (the live policy's too) quote apart what the live prompt may have
    quoted as one, so their overlap and token figures differ from it; ``""`` otherwise."""
    from hostd import quality

    apart = sum(1 for r in records if quality.spans_unmerged(r))
    if not apart:
        return ""
    return (
        f"hostd: note: {apart} of {len(records)} records were kept without content "
        "([shadow] store_content = false) and quote overlapping or touching lines of a "
        "file: their replays merge no spans, so the live policy's replay may differ from "
        "the live prompt (newly included windows, more tokens); set store_content = true "
        "to replay new records as served (docs/eval.md)\n"
    )


def _fallback_notes(
    policies: Sequence[tuple[str, Any]], outcomes: Sequence[Any] | None = None
) -> str:
    """A line per policy that cannot rank as asked here (``calibrated`` before ``hostd
    calibrate``): what it ranked by instead, so its row is not read as the policy's.
    With ``outcomes`` (``eval``), the bare ``rerank`` says what happened, not what the
    policy was before any verdict was asked: its rows that fell back, by reason;
    nothing when the reranker ranked them all."""
    from hostd.compose import PrecomputedOrder

    out = ""
    for spelling, bound in policies:
        if outcomes is not None and isinstance(bound, PrecomputedOrder) and not bound.judged:
            rows = [o for o in outcomes if o.policy == spelling]
            out += _rerank_note(spelling, bound.to_wire()["rerank"]["fallback"], rows)
            continue
        body = _fallback(bound)
        if body is not None:
            why = body.get("reason")
            out += f"hostd: note: {spelling} ranks as {body['fallback']} here: {why}\n"
    return out


def _replay_fallback_notes(policies: Sequence[tuple[str, Any]], records: Sequence[Any]) -> str:
    """``_fallback_notes`` for ``shadow replay``, where the bare ``rerank`` replays each
    record's own recorded verdict: the note counts the records that hold none (their
    live policy was another) and so rank by its fallback; nothing when all hold one."""
    from hostd import quality
    from hostd.compose import PrecomputedOrder

    out = ""
    for spelling, bound in policies:
        if not (isinstance(bound, PrecomputedOrder) and not bound.judged):
            out += _fallback_notes([(spelling, bound)])
            continue
        missing = sum(1 for r in records if quality.recorded_verdict(r).reason == "not_recorded")
        if missing:
            fallback = bound.to_wire()["rerank"]["fallback"]
            out += (
                f"hostd: note: {spelling} replays each record's recorded verdict; {missing} "
                f"of {len(records)} records hold none (composed under another policy) and "
                f"rank as {fallback}\n"
            )
    return out


def _rerank_note(spelling: str, fallback: str, rows: Sequence[Any]) -> str:
    """``rerank ranked as round_robin in 3 of 14 compositions: timeout 2, error 1``: the
    rows whose verdict fell back, by reason; ``""`` when none did."""
    reasons: dict[str, int] = {}
    for row in rows:
        if row.fallback is not None:
            reasons[row.fallback] = reasons.get(row.fallback, 0) + 1
    if not reasons:
        return ""
    fell = sum(reasons.values())
    why = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items()))
    return (
        f"hostd: note: {spelling} ranked as {fallback} in {fell} of {len(rows)} "
        f"compositions: {why}\n"
    )


def _fallback(bound: Any) -> dict[str, Any] | None:
    """A stateful policy's own account when it ranks as another here, else None."""
    said = getattr(bound, "to_wire", lambda: None)()
    body = next(iter(said.values())) if isinstance(said, dict) and len(said) == 1 else None
    return body if isinstance(body, dict) and body.get("fallback") else None


def shadow_command(cfg: Config, args: argparse.Namespace) -> int:
    from hostd import quality

    if args.command == "calibrate":  # checked before the store is read
        _check_calibrate_args(args)
    else:  # every spelling checked before any work
        wires = [strategy_arg(policy, "--policy") for policy in args.policy]
    # A damaged store is ShadowUnavailable: one line naming the file and what to do.
    records = quality.ShadowStore(quality.shadow_path(cfg.state_path)).load(
        getattr(args, "limit", None)
    )
    if args.command == "calibrate":
        return _calibrate(cfg, args, records)
    path = quality.calibration_path(cfg.state_path)
    reports = []
    bound = [
        (spelling, _bound(cfg, wire)) for spelling, wire in zip(args.policy, wires, strict=True)
    ]
    tokenizers = _RecordedTokenizers(cfg.host.tokenizer)
    for (spelling, strategy), wire in zip(bound, wires, strict=True):
        replays = quality.replay_all(
            records,
            strategy,
            bind=lambda live: quality.bind_calibration(live, path),
            tokenizer_of=tokenizers,
        )
        reports.append((spelling, wire, replays))
    if args.json:  # one report per --policy, in order, always a list
        print_json([quality.replay_json(wire, replays) for _, wire, replays in reports])
    elif not records:
        sys.stdout.write(quality.render_replay(args.policy[0], []))
    else:
        sys.stdout.write(
            "\n".join(quality.render_replay(spelling, replays) for spelling, _, replays in reports)
        )
    sys.stderr.write(
        _replay_fallback_notes(bound, records)
        + tokenizers.note(len(records))
        + _unmerged_note(records)
    )
    return EXIT_OK


def _check_calibrate_args(args: argparse.Namespace) -> None:
    from hostd import quality

    if args.min_samples is None:
        args.min_samples = quality.MIN_REQUESTS
    if args.min_frames is None:
        args.min_frames = quality.MIN_FRAMES
    if args.min_samples < 1:
        raise ValueError("--min-samples must be at least 1")
    if args.min_frames < 1:
        raise ValueError("--min-frames must be at least 1")


def _calibrate(cfg: Config, args: argparse.Namespace, records: Sequence[Any]) -> int:
    from hostd import quality

    content = quality.fit_calibration(
        records, min_frames=args.min_frames, min_requests=args.min_samples
    )
    path = quality.calibration_path(cfg.state_path)
    quality.write_calibration(path, content)
    if "warning" in content:  # also with --json: stdout is the file, stderr the warning
        sys.stderr.write(f"hostd: warning: {content['warning']} (--min-samples)\n")
    if args.json:
        print_json(content)
        return EXIT_OK
    lines = [
        f"calibration {content['version']} written to {path}, fitted on "
        f"{_count(content['fitted_from']['requests'], 'request')} with feedback"
    ]
    for pid, m in content["providers"].items():
        lines.append(f"  {pid}: score -> P(used) on {m['samples']} shown frames, {m['used']} used")
    pooled = content["pooled"]
    if pooled:
        lines.append(f"  pooled: rank -> P(used) on {pooled['samples']} shown frames")
    if not content["providers"] and not pooled:
        lines.append(
            f"  no provider has {args.min_frames} shown frames with feedback yet: "
            "calibrated ranks as round_robin (and its audit says so)"
        )
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK
