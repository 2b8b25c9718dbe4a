"""``providers.memory`` on the provider runtime, plus its CLI (serve, add, import,
supersede, list, forget). Serving uses ``--db`` or the global default; the editing
commands choose as ``_database`` says and name their choice on stderr."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import anyio.to_thread
import orjson

from hostd._stdout import emit, finish
from hostd.protocol import (
    Capabilities,
    CgpErrorCode,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    FrameVerdict,
    ProviderInfo,
    QueryCapability,
    RememberCapability,
    RememberRequest,
    RememberResult,
)
from hostd.provider import Provider, ProviderRefusal

from .._cli import http_arguments, serve
from .._frames import now_timestamp
from ._database import GLOBAL_DEFAULT, DatabaseChoiceError, choose_database, default_db_path
from ._store import (
    KEEP_FORGOTTEN,
    KINDS,
    NEW_ENTRY_KEYS,
    AlreadyForgotten,
    Entry,
    MemoryStore,
    NewEntry,
    TimestampError,
    checked_entry,
    entry_id,
    parse_keep_forgotten,
    timestamp_key,
)

__all__ = ["MemoryProvider", "main"]

VERSION = "0.1.0"


class MemoryProvider(Provider):
    """Serves ``fact``/``memory``/``episode`` frames from a ``MemoryStore``, and stores
    the entries a host sends (``memory/remember``, ``memory/forget``): each answered
    once its transaction has committed."""

    #: Another process's write (the CLI's) reaches ``hostd status`` within about this.
    recheck_every_s = 1.0

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        # Counting and keeping the count are one step: a count read earlier, in another
        # thread, never replaces a newer one (a recheck never sees this process's writes).
        self._counting = threading.Lock()
        self._seen = store.data_version()
        self._said = _holding(store)
        self.info = ProviderInfo(
            name="hostd-memory", version=VERSION, data_flow=DataFlow(reads=True, writes=True)
        )
        self.capabilities = Capabilities(
            query=QueryCapability(kinds=list(KINDS)),
            verify=True,
            remember=RememberCapability(kinds=list(KINDS)),
        )

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        return await anyio.to_thread.run_sync(self._answer, query)

    def _answer(self, query: ContextQuery) -> ContextQueryResult:
        result = self.store.answer(query).to_result()
        # Counted again in the query's own thread (one grouped count, cheap beside the
        # search), so writes since, this process's or another's, are said, and the event
        # loop never waits on SQLite for ``ready_message``.
        self._recount()
        return result

    def _recount(self) -> None:
        with self._counting:
            self._said = _holding(self.store)

    def recheck(self) -> None:
        """Counted again when another connection has committed since the last look
        (``data_version``: one pragma when nothing changed), so a write by the CLI or
        another process reaches ``hostd status`` with no query (runtime's worker thread)."""
        seen = self.store.data_version()  # read first: a commit after it is seen next time
        if seen != self._seen:
            self._seen = seen
            self._recount()

    def ready_message(self) -> str:
        """What it holds: said at its start, again after a query or a write of its own,
        and after another process's write (``recheck``), so ``hostd status`` names the
        database the daemon reads and what is in it."""
        return self._said

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        return await anyio.to_thread.run_sync(self.store.verify, frames)

    async def remember(self, request: RememberRequest) -> RememberResult:
        return await anyio.to_thread.run_sync(self._remember, request)

    async def forget(self, request: ForgetRequest) -> ForgetResult:
        return await anyio.to_thread.run_sync(self._forget, request)

    def _remember(self, request: RememberRequest) -> RememberResult:
        """Checked first, so each refusal names its field; then one transaction (``add``,
        or ``supersede``: the old window closed where the new one opens)."""
        if request.kind not in KINDS:
            raise _refused("kind", "unknown_kind", f"kind must be one of {', '.join(KINDS)}")
        for field in ("title", "content"):
            if not getattr(request, field).strip():
                raise _refused(field, "blank", f"{field} must not be blank")
        for field in ("valid_from", "valid_to"):
            value = getattr(request, field)
            if value is not None:
                try:
                    timestamp_key(value)
                except TimestampError as exc:
                    raise _refused(field, "not_a_timestamp", str(exc)) from exc
        if request.supersedes is None:
            try:
                entry = self.store.add(
                    request.kind,
                    request.title,
                    request.content,
                    valid_from=request.valid_from,
                    valid_to=request.valid_to,
                )
            except TimestampError as exc:  # the only one left: the window closes too soon
                raise _refused("valid_to", "not_after_valid_from", str(exc)) from exc
            self._recount()  # in the write's thread, as a query's
            return _remembered(entry)
        old = entry_id(request.supersedes)
        if old is None:
            raise _refused("supersedes", "not_an_entry_id", "supersedes takes an id as mem-3")
        at = request.valid_from or now_timestamp()
        if request.valid_to is not None and timestamp_key(request.valid_to) <= timestamp_key(at):
            raise _refused("valid_to", "not_after_valid_from", "valid_to is not after valid_from")
        try:
            closed, new = self.store.supersede(
                old,
                request.content,
                title=request.title,
                kind=request.kind,
                at=at,
                valid_to=request.valid_to,
            )
        except KeyError as exc:
            raise _refused("supersedes", "unknown_entry", str(exc)) from exc
        except TimestampError as exc:  # its window does not hold ``at``
            raise _refused("supersedes", "not_valid_then", str(exc)) from exc
        except ValueError as exc:
            raise _refused("supersedes", "already_superseded", str(exc)) from exc
        self._recount()
        return _remembered(new, closed)

    def _forget(self, request: ForgetRequest) -> ForgetResult:
        row = entry_id(request.id)
        if row is None:
            raise _refused("id", "not_an_entry_id", "id takes an entry id as mem-3")
        try:
            _, reopened = self.store.forget(row)
        except AlreadyForgotten as exc:  # a retry: what was asked holds, so it is no error
            # Said as the first reply said it: a host whose first reply was lost learns
            # what that forget made valid again.
            again = None if exc.reopened is None else f"mem-{exc.reopened}"
            return ForgetResult(forgotten=request.id, reopened=again, already=True)
        except KeyError as exc:  # an id it never gave out
            raise _refused("id", "unknown_entry", str(exc)) from exc
        again = reopened.frame_id if reopened is not None else None
        self._recount()
        return ForgetResult(forgotten=request.id, reopened=again)


def _refused(field: str, problem: str, message: str) -> ProviderRefusal:
    """A write refused for its input: the host shows ``field`` and ``problem``."""
    return ProviderRefusal(message, CgpErrorCode.BAD_REQUEST, field=field, problem=problem)


def _remembered(entry: Entry, closed: Entry | None = None) -> RememberResult:
    return RememberResult(
        id=entry.frame_id,
        recorded_at=entry.recorded_at,
        valid_from=entry.valid_from,
        valid_to=entry.valid_to,
        supersedes=closed.frame_id if closed is not None else None,
    )


#: A kind's plural, as the ready message counts entries.
_PLURALS = {"fact": "facts", "memory": "memories", "episode": "episodes"}


def _shown(path: Path) -> str:
    """``path`` made absolute, the home directory written ``~``."""
    path = path.absolute()
    try:
        return f"~/{path.relative_to(Path.home()).as_posix()}"
    except ValueError:
        return str(path)


def _holding(store: MemoryStore) -> str:
    """``95 entries: 40 facts, 5 memories, 50 episodes, in ~/….db``: every entry, closed
    ones too (as ``list --all`` shows them), each kind it holds counted."""
    counts = store.counts()
    total = sum(counts.values())
    kinds = ", ".join(
        f"{counts[kind]} {kind if counts[kind] == 1 else _PLURALS[kind]}"
        for kind in KINDS
        if counts.get(kind)
    )
    entries = "1 entry" if total == 1 else f"{total} entries"
    return (
        f"{entries}: {kinds}, in {_shown(store.path)}"
        if kinds
        else f"{entries} in {_shown(store.path)}"
    )


def _entry_text(entry: Entry) -> str:
    window = f"[{entry.valid_from}, {entry.valid_to or '…'})"
    flag = f" superseded by #{entry.superseded_by}" if entry.superseded_by else ""
    return f"#{entry.id} {entry.kind} {window}{flag}\n    {entry.title}: {entry.content}"


def _print_entry(entry: Entry, as_json: bool) -> bool:
    """Print one entry; False once stdout's reader has gone (``| head``: ``emit``)."""
    if as_json:
        return emit(orjson.dumps(entry.to_json()).decode())
    return emit(_entry_text(entry))


#: The members an ``import`` line must have.
_REQUIRED_KEYS = ("kind", "title", "content")


def _imported(lines: Iterable[str]) -> list[NewEntry]:
    """The entries of ``import``'s JSON lines, each checked as the store checks it; a
    ``ValueError`` naming the line (from 1, blank lines counted) of the first that is not one."""
    news = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ValueError(f"line {number}: not a JSON object") from None
        if not isinstance(raw, dict):
            raise ValueError(f"line {number}: not a JSON object")
        unknown = [key for key in raw if key not in NEW_ENTRY_KEYS]
        missing = [key for key in _REQUIRED_KEYS if key not in raw]
        if unknown or missing:
            said = "unknown key" if unknown else "missing key"
            keys = ", ".join(map(repr, unknown or missing))
            raise ValueError(
                f"line {number}: {said} {keys} (an entry has {', '.join(NEW_ENTRY_KEYS)})"
            )
        texts = [
            key for key, value in raw.items() if value is not None and not isinstance(value, str)
        ]
        if texts:
            raise ValueError(f"line {number}: {texts[0]} must be text")
        try:
            news.append(checked_entry(NewEntry(**raw)))
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return news


def _entry_arg(value: str) -> int:
    """An entry as a person copies it: ``12``, ``#12`` (its label) or ``mem-12`` (its
    frame id, as compositions and ``memory/remember`` name it)."""
    text = value.strip().removeprefix("#")
    row = entry_id(text) if text.startswith("mem-") else entry_id(f"mem-{text}")
    if row is None:
        raise argparse.ArgumentTypeError(f"not an entry id: give 12, #12 or mem-12 ({value!r})")
    return row


def _keep_forgotten_arg(value: str) -> int:
    """A ``--keep-forgotten`` value (``parse_keep_forgotten``), refused as argparse refuses."""
    try:
        return parse_keep_forgotten(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number, 0 or more: {value!r}") from None


def _db_path(value: str) -> Path:
    """A ``--db`` value: ``~`` is the home directory (``hostd init`` writes it so)."""
    return Path(value).expanduser()


def _parser(prog: str = "python -m providers.memory") -> argparse.ArgumentParser:
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument(
        "--db",
        type=_db_path,
        default=argparse.SUPPRESS,
        help=f"memory database (default: {default_db_path()})",
    )
    db.add_argument(
        "--keep-forgotten",
        metavar="N",
        type=_keep_forgotten_arg,
        default=argparse.SUPPRESS,
        help="how many of the newest forgets' records to keep, so a retried forget names "
        f"what it made valid again (default: {KEEP_FORGOTTEN}; 0: none)",
    )
    # The editing commands' choice: a project's memory is edited from inside the project.
    edit = argparse.ArgumentParser(add_help=False)
    edit.add_argument(
        "--db",
        type=_db_path,
        default=argparse.SUPPRESS,
        help="memory database (default: the database of the memory provider in the hostd "
        "config used here, as `hostd config path` shows it; with none, "
        f"{default_db_path()}); the one used is named on stderr",
    )
    edit.add_argument(
        "--config",
        metavar="PATH",
        type=_db_path,
        help="the hostd config whose memory provider's database to use, as `hostd --config` "
        "reads it (default: $HOSTD_CONFIG, else the nearest hostd.toml from here, the "
        "user's, the embedded default)",
    )
    edit.add_argument(
        "--provider",
        metavar="ID",
        help="the memory provider (by id) whose database to use, when the config has several",
    )
    edit.add_argument(
        "--keep-forgotten",
        metavar="N",
        type=_keep_forgotten_arg,
        default=argparse.SUPPRESS,
        help="how many of the newest forgets' records `forget` keeps (default: the "
        "--keep-forgotten of the memory provider in the config whose database it edits, "
        f"else {KEEP_FORGOTTEN})",
    )
    parser = argparse.ArgumentParser(
        prog=prog,
        description="CGP provider: durable, bitemporal agent memory in SQLite. With no "
        "command it serves on stdio (JSON-RPC binding), or over HTTPS with --http; the "
        "other commands edit the database: without --db, the one of the memory provider "
        "in the hostd config --config names, else $HOSTD_CONFIG, else the one found from "
        "the current directory (with none there, the global default: run inside the "
        "project, or give --config or --db). Timestamps: YYYY-MM-DD (midnight UTC), "
        "YYYY-MM-DDTHH:MM:SS(.f)Z, or the same with an offset such as +01:00 (kept as UTC).",
        parents=[db],
    )
    http_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("serve", parents=[db], help="serve on stdio (the default)")

    add = sub.add_parser("add", parents=[edit], help="add one entry")
    add.add_argument("--kind", choices=KINDS, default="fact")
    add.add_argument("--title", required=True)
    add.add_argument("--valid-from", help="when it became true (default: now)")
    add.add_argument("--valid-to", help="when it stopped being true (default: open)")
    add.add_argument("--json", action="store_true", help="print the entry as JSON")
    add.add_argument("content")

    imp = sub.add_parser(
        "import",
        parents=[edit],
        help="add JSON lines from stdin ({kind, title, content, valid_from?, valid_to?}) "
        "in one transaction",
    )
    imp.add_argument("--json", action="store_true", help="print the entries as JSON")

    sup = sub.add_parser(
        "supersede", parents=[edit], help="close an entry's window and open its successor"
    )
    sup.add_argument("id", type=_entry_arg, help="the entry: 12, #12 or mem-12")
    sup.add_argument("--title", help="title of the successor (default: the old title)")
    sup.add_argument("--at", help="when the old entry stopped being true (default: now)")
    sup.add_argument("--json", action="store_true", help="print both entries as JSON")
    sup.add_argument("content")

    lst = sub.add_parser("list", parents=[edit], help="entries valid now (or --as-of)")
    lst.add_argument("--as-of", help="list what was valid at this instant")
    lst.add_argument("--all", action="store_true", help="every entry, closed ones too")
    lst.add_argument("--json", action="store_true", help="one JSON object per line")

    fgt = sub.add_parser(
        "forget",
        parents=[edit],
        help="delete an entry; forgetting a correction makes the entry it superseded valid again",
    )
    fgt.add_argument("id", type=_entry_arg, help="the entry: 12, #12 or mem-12")
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m providers.memory") -> int:
    """The command line (``argv``: default ``sys.argv[1:]``); ``prog`` names it in its
    help and usage (``hostd memory`` runs it too)."""
    parser = _parser(prog)
    args = parser.parse_args(argv)
    try:
        return _run(parser, args)
    finally:
        finish()  # what stdout's reader no longer takes is dropped, not a traceback


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    given: Path | None = getattr(args, "db", None)
    keep: int | None = getattr(args, "keep_forgotten", None)
    command = args.command or "serve"
    try:
        if command == "serve":
            path = given or default_db_path()
        else:
            chosen = choose_database(given, args.provider, args.config)
            path = chosen.path
            # Named every time: a memory written to a database no provider reads is lost.
            hint = ""
            if chosen.why.startswith(GLOBAL_DEFAULT):
                hint = (
                    "; for a project's memory, run inside the project, or give "
                    "--config PATH (its hostd.toml) or --db PATH"
                )
            print(f"providers.memory: database {path} ({chosen.why}){hint}", file=sys.stderr)
            # A forget here prunes the records the serving provider keeps: as many as it.
            keep = chosen.keep_forgotten if keep is None else keep
        keep = KEEP_FORGOTTEN if keep is None else keep
        with MemoryStore(path, keep_forgotten=keep) as store:
            if command == "serve":
                print(f"providers.memory: {store.count()} entries in {path}", file=sys.stderr)
                serve(MemoryProvider(store), args, parser)
            elif command == "add":
                entry = store.add(
                    args.kind,
                    args.title,
                    args.content,
                    valid_from=args.valid_from,
                    valid_to=args.valid_to,
                )
                _print_entry(entry, args.json)
            elif command == "import":
                news = _imported(sys.stdin)
                for entry in store.add_many(news):
                    _print_entry(entry, args.json)
            elif command == "supersede":
                old, new = store.supersede(args.id, args.content, title=args.title, at=args.at)
                _print_entry(old, args.json)
                _print_entry(new, args.json)
            elif command == "list":
                # Printed as each page is read: a large store's first lines come at once,
                # and no more than a page is held.
                for entry in store.entries(as_of=args.as_of, include_all=args.all):
                    if not _print_entry(entry, args.json):
                        break  # its reader has gone: no more pages read for nobody
            elif command == "forget":
                try:
                    gone, reopened = store.forget(args.id)
                except AlreadyForgotten as exc:  # run twice: what was asked holds
                    then = "" if exc.reopened is None else f" (it made #{exc.reopened} valid again)"
                    emit(f"#{args.id} was already forgotten{then}")
                    return 0
                emit(f"forgot {_entry_text(gone)}")
                if reopened is not None:
                    emit(f"valid again (#{gone.id} had superseded it): {_entry_text(reopened)}")
    except KeyError as exc:  # no such entry: its message, not a KeyError's quoted repr
        print(f"providers.memory: {exc.args[0]}", file=sys.stderr)
        return 1
    except (DatabaseChoiceError, ValueError, TimestampError, TypeError) as exc:
        print(f"providers.memory: {exc}", file=sys.stderr)
        return 2
    return 0
