"""``hostd consent grant|revoke|list``: durable consent receipts (C1, C2, C6), checked
against the scopes each provider declares, without starting the providers.

A provider's declared scopes come from its last handshake, recorded under the state
directory (``hostd.engine.HandshakeRecords``); only when none is recorded for the
one provider named is that provider started, once, to read them. With
``--connect`` the running daemon's ``providers/list`` says what each declared. A
scope the provider did not declare is refused (a typo such as ``egres`` would
otherwise sit in the ledger unused while the real scope stays missing); ``--force``
records it anyway. ``list`` shows the receipts and, per provider whose declaration
is known, the scopes it needs and which of them have no live receipt.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hostd.errors import HostdError, UnknownProvider

from ._common import EXIT_OK, connect_arg, print_json, session

if TYPE_CHECKING:  # the models load with the config a command reads, not with --help
    from hostd.config import Config

__all__ = ["add_consent_command", "declared_scopes"]


class UndeclaredScope(HostdError):
    """A scope the provider did not declare (``--force`` records it anyway)."""

    reason = "undeclared_scope"


class NotStarted(HostdError):
    """The provider named could not be started to read the scopes it declares."""

    reason = "provider_not_started"


def add_consent_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``consent grant|revoke|list``."""
    consent = sub.add_parser(
        "consent",
        parents=[common],
        help="grant, revoke or list consent receipts (C1, C2, C6)",
        description="Durable consent receipts for providers that send data off the machine, "
        "checked against the scopes each provider declared at its last handshake.",
    )
    consent.set_defaults(run=_consent)
    csub = consent.add_subparsers(dest="consent_command", metavar="ACTION", required=True)
    for action, text in (("grant", "record consent"), ("revoke", "revoke consent")):
        p = csub.add_parser(
            action,
            help=text,
            description=f"{text.capitalize()} for a scope the provider declared.",
            parents=[common],
        )
        p.add_argument("provider", help="provider id")
        p.add_argument("scope", help="a scope the provider declared, e.g. egress or a host name")
        p.add_argument("--grantor", default="cli", help="who grants (default: cli)")
        p.add_argument(
            "--force", action="store_true", help="record a scope the provider did not declare"
        )
        p.add_argument("--json", action="store_true", help="print the daemon's answer as JSON")
        connect_arg(p)
    lst = csub.add_parser(
        "list",
        help="list receipts and the scopes each provider needs",
        description="List consent receipts, and the scopes each provider declared at its "
        "last handshake with those that have no live receipt.",
        parents=[common],
    )
    lst.add_argument("provider", nargs="?", help="only this provider")
    lst.add_argument("--json", action="store_true", help="print JSON")
    connect_arg(lst)


def declared_scopes(info: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(every scope a provider declares, the ones that need a receipt) from its wire
    ``ProviderInfo``: its ``egress_scopes``, and ``egress`` when it declares egress."""
    from hostd.engine import required_scopes
    from hostd.protocol import ProviderInfo

    parsed = ProviderInfo.model_validate(info)
    required = required_scopes(parsed)
    return list(dict.fromkeys([*parsed.data_flow.egress_scopes, *required])), required


async def _declared_here(cfg: Config, ids: list[str], start: bool) -> dict[str, dict[str, Any]]:
    """Each provider's info from its recorded handshake; with ``start``, one start of a
    provider that has none (it records itself), or the failure that kept it from it."""
    from hostd.engine import HandshakeRecords

    records = HandshakeRecords(cfg.state_path)
    specs = {s.id: s for s in cfg.provider_specs()}
    found: dict[str, dict[str, Any]] = {}
    for pid in ids:
        info = records.read(specs[pid])
        if info is None and start:
            one = cfg.model_copy(
                update={
                    "provider": [p for p in cfg.provider if p.id == pid],
                    "shadow": cfg.shadow.model_copy(update={"enabled": False}),
                    "reranker": cfg.reranker.model_copy(update={"command": None, "url": None}),
                }
            )
            async with session(one, None) as s:
                (row,) = (await s.call("providers/list", {}))["providers"]
            info = records.read(specs[pid])
            if info is None:
                failure = (row.get("health") or {}).get("last_failure") or row.get("state")
                raise NotStarted(
                    f"provider {pid!r} did not start, so its declared scopes are unknown: "
                    f"{failure}; `--force` records (or revokes) the scope without them",
                    provider=pid,
                )
        if info is not None:
            found[pid] = info.to_wire()
    return found


def destinations(cfg: Config) -> dict[str, str]:
    """Each remote provider's destination as its receipts name it (its URL's origin)."""
    from hostd.engine import consent_destination

    return {p.id: consent_destination(p.url) for p in cfg.provider if p.url}


def _ids(cfg: Config) -> list[str]:
    return [p.id for p in cfg.provider]


def _known(ids: list[str], pid: str | None, where: str) -> list[str]:
    if pid is None:
        return ids
    if pid not in ids:
        raise UnknownProvider(
            f"unknown provider {pid!r} (configured in {where}: {', '.join(ids) or 'none'})",
            provider=pid,
        )
    return [pid]


def _check_scope(pid: str, scope: str, info: dict[str, Any] | None, held: bool) -> None:
    if held:  # a receipt on record: its scope was recorded once, declared or forced
        return
    if info is None:
        raise UndeclaredScope(
            f"provider {pid!r} has no recorded handshake, so its declared scopes are "
            "unknown; query it once, or `--force` records the scope anyway"
        )
    declared, _ = declared_scopes(info)
    if scope in declared:
        return
    says = ", ".join(declared) if declared else "none: it sends nothing off the machine"
    raise UndeclaredScope(
        f"provider {pid!r} did not declare scope {scope!r} (it declares: {says}); "
        "`--force` records it anyway"
    )


async def _consent(cfg: Config, args: argparse.Namespace) -> int:
    action = args.consent_command
    if args.connect is not None:
        async with session(cfg, args.connect, wait=args.wait, token_file=args.token_file) as s:
            rows = (await s.call("providers/list", {}))["providers"]
            ids = _known([str(r.get("id")) for r in rows], args.provider, "the daemon")
            infos = {r["id"]: r["info"] for r in rows if r.get("id") in ids and r.get("info")}
            where = _daemon_destinations(rows)
            # One the daemon has not started yet: its last handshake recorded here, if any.
            here = [pid for pid in ids if pid not in infos and pid in _ids(cfg)]
            if here:
                infos.update(await _declared_here(cfg, here, start=False))
            result = await _apply(action, args, infos, s)
    else:
        ids = _known(_ids(cfg), args.provider, cfg.source)
        where = destinations(cfg)
        from hostd.server import private_state_dir

        private_state_dir(cfg.state_path, cfg.source)  # as the daemon: refused before use
        ledger = _Ledger(cfg)
        start = args.provider is not None and await _needs_declared(action, args, ledger)
        try:
            infos = await _declared_here(cfg, ids, start=start)
        except NotStarted as exc:
            if action != "list":
                raise
            # The receipts are listed all the same; its scopes are told unknown.
            sys.stderr.write(f"hostd: {exc.message}\n")
            infos = await _declared_here(cfg, ids, start=False)
        result = await _apply(action, args, infos, ledger)
    _print(action, args, result, infos, ids, where)
    return EXIT_OK


def _daemon_destinations(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each remote provider's destination, from the daemon's ``providers/list``."""
    from hostd.engine import consent_destination

    found: dict[str, str] = {}
    for row in rows:
        url = (row.get("remote") or {}).get("url")
        if isinstance(url, str) and url:
            found[str(row.get("id"))] = consent_destination(url)
    return found


async def _held(s: Any, pid: str, scope: str) -> bool:
    """Whether a live receipt for ``scope`` of ``pid`` is on record."""
    receipts = (await s.call("consent/list", {"provider": pid}))["receipts"]
    return any(r["scope"] == scope and r["active"] for r in receipts)


async def _needs_declared(action: str, args: argparse.Namespace, s: Any) -> bool:
    """Whether the named provider's declared scopes are needed, so it may be started
    to read them: not for ``--force``, nor to revoke a receipt on record."""
    if action == "list":
        return True
    if args.force:
        return False
    return action == "grant" or not await _held(s, args.provider, args.scope)


async def _apply(action: str, args: argparse.Namespace, infos: dict[str, Any], s: Any) -> Any:
    if action == "list":
        return await s.call("consent/list", {"provider": args.provider} if args.provider else {})
    if not args.force:
        # A receipt on record can always be revoked, declared or not.
        held = action == "revoke" and await _held(s, args.provider, args.scope)
        _check_scope(args.provider, args.scope, infos.get(args.provider), held)
    params = {"provider": args.provider, "scope": args.scope, "grantor": args.grantor}
    return await s.call(f"consent/{action}", params)


class _Ledger:
    """The consent ledger under the state directory, spoken to as the daemon's methods
    are (``consent/grant|revoke|list``), so ``_apply`` is the same with ``--connect``."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from hostd.engine import ConsentStore
        from hostd.logs import get_logger

        log = get_logger("hostd.cli")
        with ConsentStore(self.cfg.state_path, destinations=destinations(self.cfg)) as store:
            if method == "consent/list":
                return {"receipts": [r.to_wire() for r in store.list(params.get("provider"))]}
            who = (params["provider"], params["scope"], params["grantor"])
            if method == "consent/grant":
                receipt = store.grant(*who)
                log.info("consent.granted", provider=who[0], scope=who[1], grantor=who[2])
                return {"receipt": receipt.to_wire()}
            revoked = store.revoke(*who)
            log.info("consent.revoked", provider=who[0], scope=who[1], grantor=who[2])
            return {"revoked": [r.to_wire() for r in revoked]}


def _print(
    action: str,
    args: argparse.Namespace,
    result: dict[str, Any],
    infos: dict[str, Any],
    ids: list[str],
    where: dict[str, str],
) -> None:
    if action != "list":
        _print_change(action, args, result)
        return
    receipts = result["receipts"]
    # A receipt counts for a provider at the destination it was granted for: a remote
    # provider's origin (``where``), none for a child process.
    active: dict[str, set[str]] = {}
    elsewhere: dict[str, set[str]] = {}
    for r in receipts:
        if r.get("active"):
            pid, made_for = str(r.get("provider_id")), r.get("destination") or ""
            if made_for == where.get(pid, ""):
                active.setdefault(pid, set()).add(str(r.get("scope")))
            else:
                elsewhere.setdefault(pid, set()).add(made_for)
    declared: dict[str, Any] = {}
    for pid in ids:
        info = infos.get(pid)
        if info is None:
            declared[pid] = {"recorded": False}
            continue
        scopes, required = declared_scopes(info)
        missing = [s for s in required if s not in active.get(pid, set())]
        declared[pid] = {
            "recorded": True,
            "scopes": scopes,
            "missing": missing,
            "destination": where.get(pid) or None,
        }
    if args.json:
        print_json({"receipts": receipts, "declared": declared})
        return
    if not receipts:
        sys.stdout.write("no consent receipts\n")
    for r in receipts:
        state = "active" if r.get("active") else f"revoked {r.get('revoked_at')}"
        made_for = f"\tfor {r['destination']}" if r.get("destination") else ""
        sys.stdout.write(
            f"{r.get('provider_id')}\t{r.get('scope')}\t{r.get('grantor')}\t"
            f"granted {r.get('granted_at')}{made_for}\t{state}\n"
        )
    for pid, d in declared.items():  # what each provider needs, on stderr beside the table
        if not d["recorded"]:
            words = "no handshake recorded yet (`hostd consent list ID` starts it once)"
        elif not d["scopes"]:
            words = "declares no egress scope: needs no consent"
        else:
            words = f"declares {', '.join(d['scopes'])}"
            if d["missing"]:
                words += f"; not granted: {', '.join(d['missing'])}"
                if pid in elsewhere and pid in where:
                    others = ", ".join(sorted(o or "no destination" for o in elsewhere[pid]))
                    words += (
                        f" (live receipts are for {others}, not {where[pid]}: a remote "
                        "provider needs consent for the origin it is sent to)"
                    )
        sys.stderr.write(f"hostd: {pid}: {words}\n")


def _print_change(action: str, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """One line per receipt granted or revoked (``--json``: the daemon's answer)."""
    if args.json:
        print_json(result)
        return
    changed = [result["receipt"]] if action == "grant" else result["revoked"]
    done = {"grant": "granted", "revoke": "revoked"}[action]
    if not changed:
        sys.stdout.write(f"no live receipt for {args.provider} {args.scope}: nothing revoked\n")
    for r in changed:
        made_for = f" for {r['destination']}" if r.get("destination") else ""
        sys.stdout.write(
            f"{done} {r.get('provider_id')} {r.get('scope')}{made_for} "
            f"(receipt {r.get('receipt')}, by {args.grantor})\n"
        )
