"""Docs that cannot drift: docs/cli.md holds every command and flag the parsers have
(in its command's section) and no flag they lack, and names the MCP tools ``hostd mcp``
serves; docs/config.md holds every config key with its default, and no key the config
lacks; docs/mcp.md's stated defaults (the ``[provider.mcp]`` keys, the tools and their
arguments, how ``hostd mcp`` starts providers and logs) are the code's; docs/remote.md's
idle connection expiry is the pool's; every log event the code emits is in
docs/logging.md.

The flags come from walking the real argparse parsers (every subcommand); the keys and
defaults from the pydantic models; the events are collected statically, by AST, from
the structlog calls in ``hostd/`` and ``providers/`` (and the ``"event"`` of lines
written by hand, the audit's). Each failure names exactly what is missing or differs.
"""

from __future__ import annotations

import argparse
import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hostd.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
CLI_MD = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
CONFIG_MD = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
LOGGING_MD = (ROOT / "docs" / "logging.md").read_text(encoding="utf-8")
MCP_MD = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")

#: structlog's level methods (and ``msg``/``exception``): the first argument is the event.
LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "msg"})
EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


# -- CLI flags -----------------------------------------------------------------------------


def _flags(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, (*path, name))
        for option in action.option_strings:
            if option.startswith("--"):
                yield path, option


def _mentions(text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def _sections() -> list[tuple[str, str]]:
    """(heading, body) of each ``## `` section of docs/cli.md, its ``###`` ones included."""
    parts = re.split(r"^## (.*)$", CLI_MD, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def _rows(command: str) -> str:
    """The sections of docs/cli.md that document ``hostd COMMAND`` (``## `hostd COMMAND…`)."""
    heading = re.compile(rf"`hostd {re.escape(command)}[ `]")
    return "\n".join(body for title, body in _sections() if heading.match(title))


def _prose() -> str:
    """Everything of docs/cli.md outside the commands' sections: where global options are."""
    head = CLI_MD.split("\n## ", 1)[0]
    rest = [body for title, body in _sections() if not title.startswith("`hostd ")]
    return "\n".join([head, *rest])


def test_every_cli_flag_is_in_its_commands_section_of_docs_cli_md() -> None:
    parser = build_parser()
    top = {flag for path, flag in _flags(parser) if not path}
    missing = []
    for path, flag in _flags(parser):
        if flag in top:
            if not _mentions(_prose(), flag):
                missing.append(f"hostd {flag} (global options)")
        elif not _mentions(_rows(path[0]), flag):
            missing.append(f"hostd {' '.join(path)} {flag}")
    assert not missing, "not in docs/cli.md:\n" + "\n".join(sorted(set(missing)))


def test_every_command_has_a_section_in_docs_cli_md() -> None:
    parser = build_parser()
    commands = {path[0] for path, _ in _flags(parser) if path}
    assert sorted(c for c in commands if not _rows(c)) == []


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_flag_in_a_section_of_docs_cli_md_is_one_its_command_has() -> None:
    parser = build_parser()
    top = {flag for path, flag in _flags(parser) if not path}
    stale = []
    for command, sub in _subcommands(parser).items():
        have = top | {flag for _, flag in _flags(sub)}
        for flag in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", _rows(command)))):
            if flag not in have:
                stale.append(f"hostd {command} {flag}")
    assert stale == [], "in docs/cli.md but not in --help:\n" + "\n".join(stale)


_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def test_docs_cli_md_and_mcp_help_name_every_mcp_tool_and_how_many() -> None:
    from hostd.mcp._server import TOOLS

    row = _rows("mcp")
    missing = [t.name for t in TOOLS if f"`{t.name}`" not in row]
    assert missing == [], f"docs/cli.md's hostd mcp section does not name: {missing}"
    assert f"{_NUMBERS[len(TOOLS)]} tools" in row, f"say {_NUMBERS[len(TOOLS)]} tools"
    described = " ".join((_subcommands(build_parser())["mcp"].description or "").split())
    missing = [t.name for t in TOOLS if t.name not in described]
    assert missing == [], f"hostd mcp --help does not name: {missing}"
    assert f"{_NUMBERS[len(TOOLS)]} tools" in described


# -- log events ----------------------------------------------------------------------------


def _logger_names(tree: ast.Module) -> set[str]:
    """Names bound to a structlog logger (``structlog.get_logger``, ``hostd.logs.get_logger``)
    and parameters called ``logger``; stdlib ``logging`` messages are not events."""
    names = {"logger"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = ast.unparse(node.value.func)
            if func in ("structlog.get_logger", "get_logger", "structlog.stdlib.get_logger"):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _prefix(node: ast.expr) -> str | None:
    """The constant head of a name built at run time (f-string, ``+``), else ``None``."""
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        value = head.value if isinstance(head, ast.Constant) else None
        return value if isinstance(value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = node.left
        value = left.value if isinstance(left, ast.Constant) else None
        return value if isinstance(value, str) else None
    return None


def _events_in(tree: ast.Module) -> Iterator[tuple[str, bool, int]]:
    """(name or prefix, is_prefix, line) of every event this module emits."""
    loggers = _logger_names(tree)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        local = {
            t.id: n.value
            for n in ast.walk(scope)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in loggers
                and node.args
            ):
                arg = node.args[0]
                if isinstance(arg, ast.Name) and arg.id in local:
                    arg = local[arg.id]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value, False, node.lineno
                else:
                    head = _prefix(arg)
                    assert head, f"line {node.lineno}: an event name with no constant head"
                    yield head, True, node.lineno
            # Lines written by hand (the audit's): ``line["event"] = "compose.audit"``.
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and any(
                    isinstance(t, ast.Subscript)
                    and isinstance(t.slice, ast.Constant)
                    and t.slice.value == "event"
                    for t in node.targets
                )
            ):
                yield node.value.value, False, node.lineno


def emitted_events() -> dict[str, tuple[bool, str]]:
    """Event name (or prefix) → (is_prefix, where), over ``hostd/`` and ``providers/``."""
    found: dict[str, tuple[bool, str]] = {}
    for package in ("hostd", "providers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, is_prefix, line in _events_in(tree):
                found.setdefault(name, (is_prefix, f"{path.relative_to(ROOT)}:{line}"))
    return found


def _documented() -> tuple[set[str], set[str]]:
    """Event names in backticks in docs/logging.md, and the prefixes of ``a.b.*`` ones."""
    tokens = set(re.findall(r"`([a-z][a-z0-9_.]*(?:\.\*)?)`", LOGGING_MD))
    return {t for t in tokens if not t.endswith(".*")}, {t[:-1] for t in tokens if t.endswith("*")}


@pytest.fixture(scope="module")
def events() -> dict[str, tuple[bool, str]]:
    """The events the code emits, collected once for the tests below (a walk of every
    module's syntax tree, seconds of CPU): none of them changes what it is given."""
    return emitted_events()


def test_the_collector_finds_events_of_every_kind(events: dict[str, tuple[bool, str]]) -> None:
    # A plain call, a logger passed in, a hand-written line, and names built at run time.
    for name in ("provider.start.failed", "provider.leg", "compose.audit", "request.done"):
        assert events.get(name, (True,))[0] is False, name
    assert events["verify."][0] and events["provider.process."][0]


def test_every_emitted_event_name_is_dotted(events: dict[str, tuple[bool, str]]) -> None:
    bad = {n: w for n, (p, w) in events.items() if not p and not EVENT_NAME.match(n)}
    assert bad == {}


def test_every_emitted_log_event_is_in_docs_logging_md(events: dict[str, tuple[bool, str]]) -> None:
    # A documented ``a.b.*`` covers only names built at run time: an event with a name
    # of its own is named in full, with its fields (``provider.process.started`` is in
    # every log, so a reader looks it up).
    names, prefixes = _documented()
    missing = []
    for name, (is_prefix, where) in sorted(events.items()):
        covered = is_prefix and any(name.startswith(p) for p in prefixes)
        if not covered and name not in names:
            missing.append(f"{name}{'*' if is_prefix else ''} ({where})")
    assert not missing, "not in docs/logging.md:\n" + "\n".join(missing)


# -- config keys and defaults ------------------------------------------------------------


def _table(text: str) -> dict[str, str]:
    """``key → default cell`` of every ``| `key` | default | meaning |`` row; a row of
    several keys (`` `a`, `b` ``) pairs them with as many backticked defaults, or with
    its one prose default (``—``, ``stderr``)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`") or cells[0] == "---":
            continue
        keys = re.findall(r"`(?:\[\[provider\]\] )?([a-z_.]+)`", cells[0])
        defaults = re.findall(r"`([^`]+)`", cells[1])
        if len(keys) > 1 and len(defaults) == len(keys):
            rows.update(zip(keys, (f"`{d}`" for d in defaults), strict=True))
        else:
            rows.update(dict.fromkeys(keys, cells[1]))
    return rows


_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _literal(cell: str, keys: set[str]) -> tuple[bool, Any]:
    """(True, value) for a default cell holding one TOML literal (`` `64 MiB` `` too);
    (False, None) for prose or another key's name (the key inherits: the model's is None)."""
    found = re.fullmatch(r"`([^`]+)`", cell.strip())
    if found is None or found.group(1) in keys:
        return False, None
    text = found.group(1)
    sized = re.fullmatch(r"(\d+) ([KMG]iB)", text)
    if sized:
        return True, int(sized.group(1)) * _UNITS[sized.group(2)]
    try:
        return True, tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return False, None


def _model_defaults(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    out = {}
    for name, field in model.model_fields.items():
        if field.exclude is True:  # not a key of the file (source, searched)
            continue
        out[prefix + name] = field.get_default(call_default_factory=True)
    return out


def _config_keys() -> dict[str, Any]:
    from hostd.config import Config, ProviderSettings

    keys: dict[str, Any] = {}
    for section, field in Config.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.update(_model_defaults(annotation, f"{section}."))
    # The [[provider]] rows name them bare; a key the file leaves unset (None) takes the
    # engine's default (``ProviderSpec``), which is the one the docs state.
    from dataclasses import MISSING, fields

    from hostd.engine import ProviderSpec

    engine = {f.name: f.default for f in fields(ProviderSpec) if f.default is not MISSING}
    for key, default in _model_defaults(ProviderSettings).items():
        keys[key] = engine.get(key) if default is None else default
    return keys


def _drift(documented: dict[str, str], code: dict[str, Any], where: str) -> list[str]:
    problems = [f"`{k}` is not in {where}" for k in code if k not in documented]
    problems += [
        f"{where} documents `{k}`, which the code has not" for k in documented if k not in code
    ]
    for key, cell in documented.items():
        if key not in code:
            continue
        literal, value = _literal(cell, set(code) | set(documented))
        default = code[key]
        if literal and (value != default or isinstance(value, bool) != isinstance(default, bool)):
            problems.append(f"{where} says `{key}` defaults to {cell}; the code: {default!r}")
        elif not literal and default not in (None, [], {}) and cell.strip() != "—":
            problems.append(
                f"{where} gives `{key}` no literal default ({cell}); the code: {default!r}"
            )
    return problems


def test_docs_config_md_holds_every_key_and_its_default() -> None:
    problems = _drift(_table(CONFIG_MD), _config_keys(), "docs/config.md")
    assert problems == [], "\n".join(problems)


def test_every_default_config_points_at_docs_config_md() -> None:
    for default in (ROOT / "config" / "hostd.toml", ROOT / "hostd" / "_data" / "default.toml"):
        header = default.read_text(encoding="utf-8").split("\n[", 1)[0]
        assert "docs/config.md" in header, default


# -- docs/mcp.md's stated defaults ----------------------------------------------------------


def _section(text: str, heading: str) -> str:
    body = text.split(heading + "\n", 1)[1]
    return re.split(r"\n#{2,4} ", body, maxsplit=1)[0]


def test_docs_mcp_md_holds_every_provider_mcp_key_and_its_default() -> None:
    from hostd.config import McpSettings

    documented = _table(_section(MCP_MD, "### Keys: `[provider.mcp]` (or `mcp = {…}` inline)"))
    problems = _drift(documented, _model_defaults(McpSettings), "docs/mcp.md")
    assert problems == [], "\n".join(problems)


def test_docs_mcp_md_names_the_tools_in_order_and_their_arguments() -> None:
    from hostd.mcp._server import TOOLS

    tools = _section(MCP_MD, "### Tools")
    count = _NUMBERS[len(TOOLS)]
    assert f"the same {count} tools in this order" in tools, f"say: the same {count} tools"
    named = re.findall(r"^\*\*`([a-z_]+)`\*\* — ", MCP_MD, re.M)  # each tool's paragraph
    assert named == [t.name for t in TOOLS], named
    compose = next(t for t in TOOLS if t.name == "compose_context")
    table = _section(tools, "**`compose_context`** — arguments (`additionalProperties: false`):")
    documented = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert documented == list(compose.input_schema["properties"]), documented
    for name in compose.input_schema.get("required", []):
        assert re.search(rf"^\| `{name}` \| [^|]*required", table, re.M), name


def test_docs_mcp_md_says_how_hostd_mcp_starts_providers_and_logs() -> None:
    from hostd.cli._main import _default_level
    from hostd.config import HostSettings

    start = re.search(r"`host\.start_providers` says\s+\(`\"?(\w+)\"?` by default", MCP_MD)
    assert start, "docs/mcp.md: say which host.start_providers hostd mcp starts with"
    assert start.group(1) == HostSettings().start_providers
    level = re.search(r"at `(\w+)` unless\s+`--log-level`", MCP_MD)
    assert level and level.group(1) == _default_level("mcp", "info")


def test_docs_remote_md_says_how_long_an_idle_remote_connection_is_kept() -> None:
    from hostd.transport.remote._httpx import KEEPALIVE_EXPIRY_S

    remote_md = " ".join((ROOT / "docs" / "remote.md").read_text(encoding="utf-8").split())
    said = f"A connection left idle for {KEEPALIVE_EXPIRY_S:g} seconds is closed"
    assert said in remote_md, f"docs/remote.md: say {said!r}"


def test_docs_memory_md_says_how_many_forgets_the_memory_provider_records() -> None:
    from providers.memory._store import KEEP_FORGOTTEN

    memory_md = " ".join((ROOT / "docs" / "memory.md").read_text(encoding="utf-8").split())
    said = f"for its newest {KEEP_FORGOTTEN:,} forgets"
    assert said in memory_md, f"docs/memory.md: say {said!r}"


def test_docs_state_a_rerank_servers_own_deadline_and_the_knobs_for_a_cpu() -> None:
    from hostd.config import RERANK_SERVER_TIMEOUT_MS, RerankerSettings

    process = RerankerSettings.model_fields["timeout_ms"].default
    (row,) = [r for r in CONFIG_MD.splitlines() if r.startswith("| `reranker.timeout_ms` |")]
    assert f"With a `url` and no `timeout_ms`: `{RERANK_SERVER_TIMEOUT_MS}`" in row, row
    eval_md = " ".join((ROOT / "docs" / "eval.md").read_text(encoding="utf-8").split())
    said = (
        f"A `url` reranker's `timeout_ms` is `{RERANK_SERVER_TIMEOUT_MS}` unless you set it "
        f"(a process's is `{process}`)"
    )
    assert said in eval_md, f"docs/eval.md: say {said!r}"
    assert "On a CPU, a cross-encoder takes seconds per ask" in eval_md
    assert "`max_candidates` (`100`" in eval_md


def test_docs_install_from_a_checkout_or_a_wheel_not_a_registry() -> None:
    # hostd is on no package index: `pip install "hostd[mcp]"` would fetch someone else's.
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        bad = re.findall(r"pip install [\"']?hostd\[", text)
        assert bad == [], f"{path.relative_to(ROOT)}: {bad}"


# -- tables a terminal can read ----------------------------------------------------------

#: Tables of one item a row whose long words live in a section of the item's own, linked
#: from its row: (file under docs/, the table's header line).
SHORT_TABLES = [
    ("providers.md", "| provider | what it serves |"),
    ("api.md", "| `reason` | `provider` | `detail` | when |"),
    ("api.md", "| code | `data.reason` | when |"),
]
#: The most characters a cell of those tables holds: more belongs in the item's section.
CELL_CHARS = 160


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped (backticks,
    colons, a minus sign), spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _rows_under(text: str, header: str) -> list[str]:
    """The rows of the table whose header line is ``header``."""
    assert f"\n{header}\n" in text, f"no table headed {header!r}"
    rows = text.split(f"\n{header}\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [row for row in rows[1:] if row.startswith("|")]  # past the --- line


def test_item_tables_keep_short_cells_linking_to_each_items_section() -> None:
    problems = []
    for name, header in SHORT_TABLES:
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        anchors = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}
        for row in _rows_under(text, header):
            cells = re.split(r"(?<!\\)\|", row)[1:-1]
            problems += [
                f"{name}: a cell of {len(c.strip())} characters: {c.strip()[:60]}…"
                for c in cells
                if len(c.strip()) > CELL_CHARS
            ]
            problems += [
                f"{name}: no section for #{a}"
                for a in re.findall(r"\]\(#([^)]+)\)", row)
                if a not in anchors
            ]
    assert problems == [], "\n".join(problems)
