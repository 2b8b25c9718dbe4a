"""Docs that cannot drift: every CLI flag is in docs/cli.md (in its command's row), and
every log event the code emits is in docs/logging.md.

The flags come from walking the real argparse parsers (every subcommand); the events
are collected statically, by AST, from the structlog calls in ``hostd/`` and
``providers/`` (and the ``"event"`` of lines written by hand, the audit's).
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

from hostd.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
CLI_MD = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
LOGGING_MD = (ROOT / "docs" / "logging.md").read_text(encoding="utf-8")

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


def _rows(command: str) -> str:
    """The table rows of docs/cli.md that document ``hostd COMMAND``."""
    return "\n".join(line for line in CLI_MD.splitlines() if line.startswith(f"| `hostd {command}"))


def _prose() -> str:
    """Everything of docs/cli.md outside the command table: where global options are."""
    return "\n".join(line for line in CLI_MD.splitlines() if not line.startswith("|"))


def test_every_cli_flag_is_in_its_commands_row_of_docs_cli_md() -> None:
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


def test_every_command_has_a_row_in_docs_cli_md() -> None:
    parser = build_parser()
    commands = {path[0] for path, _ in _flags(parser) if path}
    assert sorted(c for c in commands if not _rows(c)) == []


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
        return head.value if isinstance(head, ast.Constant) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = node.left
        return left.value if isinstance(left, ast.Constant) else None
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


def test_the_collector_finds_events_of_every_kind() -> None:
    events = emitted_events()
    # A plain call, a logger passed in, a hand-written line, and names built at run time.
    for name in ("provider.start.failed", "provider.leg", "compose.audit", "request.done"):
        assert events.get(name, (True,))[0] is False, name
    assert events["verify."][0] and events["provider.process."][0]


def test_every_emitted_event_name_is_dotted() -> None:
    bad = {n: w for n, (p, w) in emitted_events().items() if not p and not EVENT_NAME.match(n)}
    assert bad == {}


def test_every_emitted_log_event_is_in_docs_logging_md() -> None:
    names, prefixes = _documented()
    missing = []
    for name, (is_prefix, where) in sorted(emitted_events().items()):
        covered = any(name.startswith(p) for p in prefixes)
        if not covered and (is_prefix or name not in names):
            missing.append(f"{name}{'*' if is_prefix else ''} ({where})")
    assert not missing, "not in docs/logging.md:\n" + "\n".join(missing)


# -- config keys ---------------------------------------------------------------------------


def test_every_config_key_is_in_docs_config_md_and_the_default_config_says_where() -> None:
    from hostd.config import Config, ProviderSettings

    config_md = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    keys = [
        f"{section}.{key}"
        for section, field in Config.model_fields.items()
        if section != "provider" and field.exclude is not True  # not source, searched
        for key in field.annotation.model_fields  # type: ignore[union-attr]  # a section model
    ]
    keys += list(ProviderSettings.model_fields)  # the [[provider]] rows name them bare
    missing = [
        k for k in keys if f"`{k}`" not in config_md and f"`[[provider]] {k}`" not in config_md
    ]
    assert missing == []
    for default in (ROOT / "config" / "hostd.toml", ROOT / "hostd" / "_data" / "default.toml"):
        header = default.read_text(encoding="utf-8").split("\n[", 1)[0]
        assert "docs/config.md" in header, default
