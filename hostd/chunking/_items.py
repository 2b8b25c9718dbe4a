"""Which definitions a line of code sits in, by a line scan: a chunk's item, and where
definitions start, where code is preferably cut (``code_outline``).

A chunk of a long function starts wherever its word pieces ran out, inside it; its
item (``impl BuildValidator for DateTimeValidator › fn build``) tells a reader which
one, as a markdown chunk's heading does. No parser: a definition is a line that
matches its language family's pattern (``_FAMILIES``), and it holds the lines after
it that are indented deeper, up to and including a closing ``}`` at its own indent.
A value over several lines at column 0 (``extensions = [``, ``var (``) is an item too,
holding the lines of the bracket its header left open up to a closing bracket at its
indent, so a chunk of its items says whose they are.
A C++ ``namespace`` is no item: it holds its definitions, which are, up to a closing
``}`` at its own indent, whether its contents are indented or not. Blank lines and
comment lines decide nothing (a commented-out line at column 0 inside a body does not
end it): a comment is in what the next line of code is in, or, when
it is indented deeper than the innermost definition open, in that one. The lines
after a header that has not opened its body yet (a signature over several lines, a
``where`` clause, a brace on the next line) are its header's. What this cannot see (a
string at column 0 inside a body, code whose indentation lies) ends an item early or
names none, or moves a cut of code to a line that starts no definition
(``code_outline``): a label or a cut's place goes wrong, never a chunk's bounds or
bytes, which ``_chunk`` keeps whatever the scan found.

Protocol Buffers are a family of braces (``message``, ``enum``, ``service``, ``oneof``,
``extend``, ``rpc``). A YAML file's items are its top-level keys (``_yaml_outline``): a key
at column 0 holds the lines up to the next one, whatever their indent. An SQL file's items
are its ``CREATE`` and ``ALTER TABLE`` statements (``_sql_outline``), each up to the ``;``
that ends it.

reStructuredText is read as code here (``code_outline``, ``defined_names``): its
object directives (``.. confval:: html_sidebars``) are its definitions, found by
``_rst``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._rst import RST_SUFFIXES, directive_heads, rst_directives

#: The suffixes of YAML files, whose top-level keys are their items (``_yaml_outline``).
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
#: The suffix of SQL files, whose ``CREATE`` and ``ALTER TABLE`` statements are their
#: items (``_sql_outline``).
SQL_SUFFIXES = frozenset({".sql"})

__all__ = [
    "ITEM_SEPARATOR",
    "CodeOutline",
    "code_items",
    "code_outline",
    "defined_names",
    "item_name",
    "language_suffix",
]

#: Between an item's levels: ``impl Foo › fn build``.
ITEM_SEPARATOR = " › "
#: One level's header is cut to this many characters: a label, not evidence.
_MAX_HEADER = 60
#: At most this many lines after a header may still be its signature (a Python schema
#: builder takes twenty parameters, a line each); past them it had no body (a
#: declaration the scan misread, a bracket in a string), and the item is dropped.
_MAX_SIGNATURE_LINES = 40

# Each family: definitions anywhere (their ``head`` group is what the label shows),
# and members, recognised only directly inside a container (a class, an impl), where a
# method has no keyword of its own (``render() {``, ``public int size() {``).
_RUST = re.compile(
    r"(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|default|extern\s+\"[^\"]*\")\s+)*"
    r"(?P<head>(?:fn|struct|enum|trait|mod|union|const|static(?:\s+mut)?)\s+\w+"
    r"|macro_rules!\s*\w+|impl\b[^{;]*)"
)
_PYTHON = re.compile(r"(?P<head>(?:async\s+)?def\s+\w+|class\s+\w+)")
#: Python at column 0: a module-level assignment (``extensions = [``, ``X: Final = {``)
#: whose line leaves a bracket open (``_Family.assignment``).
_PYTHON_ASSIGNMENT = re.compile(r"(?P<head>[A-Za-z_]\w*)(?=[ \t]*(?::[^=]*)?=(?!=))")
_GO = re.compile(r"(?P<head>func\s+(?:\([^)]*\)\s*)?\w+|type\s+\w+)")
#: Go at column 0: a ``var``, ``const`` or ``type`` block (``var (``: no one name, shown as
#: ``var (…)``), or a ``var``/``const`` whose value spans lines (``var m = map[string]int{``).
_GO_ASSIGNMENT = re.compile(r"(?P<head>(?:var|const|type)\s*\(|(?:var|const)\s+\w+)")
#: Protocol Buffers: a message, enum, service, oneof or extend block (nested ones too) and
#: an rpc, whether it ends with ``;`` or opens a body of options.
_PROTO = re.compile(
    r"(?P<head>(?:message|enum|service|oneof|extend)\s+[\w.]+(?=\s*\{)|rpc\s+\w+(?=\s*\())"
)
_JS = re.compile(
    r"(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?"
    r"(?P<head>(?:async\s+)?function\s*\*?\s*[\w$]+|class\s+[\w$]+|interface\s+[\w$]+"
    r"|(?:const\s+)?enum\s+[\w$]+|namespace\s+[\w$.]+|module\s+(?:[\w$.]+|'[^']*'|\"[^\"]*\")"
    r"|(?:const|let|var)\s+[\w$]+(?=\s*=\s*(?:async\s+)?(?:function\b|\(|[\w$]+\s*=>)))"
)
#: TypeScript and JavaScript at column 0 only: a constant of any value (``export const
#: asyncScheduler = new AsyncScheduler(...)``, ``export declare const VERSION: string``)
#: and a type alias (``export type ObservableInput<T> =``). Indented, a ``const`` is a
#: function's local and a ``type`` one of its types: no definition a reader looks up.
_JS_TOP = re.compile(
    r"(?:export\s+)?(?:declare\s+)?"
    r"(?P<head>(?:const|let|var)\s+[\w$]+(?=\s*[:=])|type\s+[\w$]+(?=\s*[<=]))"
)
_JS_MEMBER = re.compile(
    r"(?:(?:public|private|protected|static|async|readonly|override|abstract|get|set)\s+)*"
    r"\*?(?P<head>#?[\w$]+)(?=\s*(?:<[^>]*>)?\s*\()"
)
_JVM_MODIFIERS = (
    r"(?:(?:public|private|protected|internal|static|final|abstract|sealed|open|data|inner|"
    r"enum|annotation|companion|partial|readonly|override|virtual|async|synchronized|"
    r"unsafe|extern|new|default|suspend|inline|operator|private\s+protected)\s+|@\w+\s+)*"
)
_JVM = re.compile(
    _JVM_MODIFIERS + r"(?P<head>(?:class|interface|enum|record|struct|object|namespace)\s+[\w.]+"
    r"|fun\s+(?:<[^>]*>\s*)?[\w.]+)"
)
_JVM_MEMBER = re.compile(
    _JVM_MODIFIERS + r"(?:[\w.<>\[\],?]+\s+)*(?P<head>\w+)(?=\s*(?:<[^>]*>)?\s*\()"
)
# C and C++: a type definition opens a body (``struct btd_adapter {``, a brace on the next
# line, a C++ base list); ``struct btd_adapter *btd_adapter_new(...)`` is a function.
_C = re.compile(
    r"(?:typedef\s+)?(?:template\s*<[^>]*>\s*)?"
    r"(?P<head>(?:struct|union|enum(?:\s+class)?|class|namespace)\s+[\w:]+)"
    r"(?=\s*(?:final\s*)?(?::[^;{(]*)?(?:\{|$))"
)
#: A C++ operator's name: ``operator==``, ``operator()``, ``operator[]``, ``operator new[]``,
#: ``operator""_km``, a conversion's (``operator bool``).
_OPERATOR = (
    r"operator\s*(?:\(\)|\[\]|->\*?|[-+*/%^&|~!=<>,]+|\"\"\s*\w+|(?:new|delete)\b(?:\s*\[\])?"
    r"|\s[\w:]+)"
)
# A function's name and its parameter list's start, after its return type (on the line,
# or on the line before, GNU's style: ``static gboolean`` then ``foo(int a)``); a C++
# operator's too (``bool operator==(const A&) const {``). Taken at column 0 or directly
# inside a class or namespace only, so no call in a body is one.
_C_FUNCTION = re.compile(
    r"(?:(?!operator\b)[\w*&:<>,]+\s+|[\w:<>]+\s*[*&]+\s*)*[*&]*"
    rf"(?P<head>(?:[\w:]*::)?(?:{_OPERATOR}|~?\w+))(?=\s*\()"
)
#: A macro definition, function-like or object-like: its item lasts while its lines end
#: with a backslash.
_C_DEFINE = re.compile(r"#\s*define\s+(?P<name>\w+)")
#: Words a member pattern would take for a method's name: statements, not definitions.
#: A line that is a comment, not code: Python's ``#``; the brace families' ``//``, ``/*``
#: and a block comment's ``*`` lines (`` * text``, `` */``; not ``*ptr = 1``).
_HASH_COMMENT = re.compile(r"#")
_SLASH_COMMENT = re.compile(r"//|/\*|\*(?:\s|/|$)")
#: C's comments, every preprocessor line but a ``#define`` and C++'s access labels: an
#: ``#ifdef`` at column 0 inside a function, or a ``public:`` at a class's own indent,
#: does not end it.
_C_COMMENT = re.compile(
    r"//|/\*|\*(?:\s|/|$)|#(?!\s*define\b)|(?:public|private|protected)\s*:(?!:)"
)
#: C's words a function pattern would take for a name: types, qualifiers, statements.
_C_WORDS = frozenset(
    "void char short int long float double signed unsigned bool const volatile static "
    "extern inline return sizeof typeof alignof defined __attribute__ decltype "
    "if for while switch case else do goto".split()
)
_NOT_MEMBERS = frozenset(
    "if for while switch catch return new else do try throw with function await yield "
    "typeof delete super this sizeof".split()
)


@dataclass(slots=True, frozen=True)
class _Family:
    definition: re.Pattern[str]
    member: re.Pattern[str] | None
    braces: bool  # a body is ``{…}`` (else: a ``:`` and indentation, Python)
    comment: re.Pattern[str]  # matches at the start of a comment line's text
    #: C and C++: members are also taken at column 0 (a function has no keyword), and a
    #: ``#define`` is an item of its own lines.
    c_like: bool = False
    #: Definitions taken at column 0 only (``_JS_TOP``); one whose line leaves a bracket
    #: open holds that bracket's lines (``_Open.bracketed``).
    top_level: re.Pattern[str] | None = None
    #: Assignments taken at column 0 only, and only when their line leaves a bracket
    #: open (``extensions = [``): a value over several lines is looked up as a function
    #: is, and holds its bracket's lines (``_Open.bracketed``). A one-line value is no item.
    assignment: re.Pattern[str] | None = None


_FAMILIES = {
    "python": _Family(
        _PYTHON, None, braces=False, comment=_HASH_COMMENT, assignment=_PYTHON_ASSIGNMENT
    ),
    "rust": _Family(_RUST, None, braces=True, comment=_SLASH_COMMENT),
    "go": _Family(_GO, None, braces=True, comment=_SLASH_COMMENT, assignment=_GO_ASSIGNMENT),
    "js": _Family(_JS, _JS_MEMBER, braces=True, comment=_SLASH_COMMENT, top_level=_JS_TOP),
    "jvm": _Family(_JVM, _JVM_MEMBER, braces=True, comment=_SLASH_COMMENT),
    "c": _Family(_C, _C_FUNCTION, braces=True, comment=_C_COMMENT, c_like=True),
    "proto": _Family(_PROTO, None, braces=True, comment=_SLASH_COMMENT),
}
#: reStructuredText's object directives, read as definitions (``_rst_outline``): only
#: whether a body is braces matters (``CodeOutline.end``: a directive's body is its
#: indented lines).
_RST_FAMILY = _Family(re.compile(r"\.\."), None, braces=False, comment=re.compile(r"\.\.\s"))
_SUFFIXES = {
    **dict.fromkeys((".py", ".pyi", ".pyw"), "python"),
    ".rs": "rust",
    ".go": "go",
    **dict.fromkeys((".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"), "js"),
    **dict.fromkeys((".java", ".kt", ".kts", ".cs"), "jvm"),
    **dict.fromkeys(
        (".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ino"), "c"
    ),
    ".proto": "proto",
}
#: A notebook's language (``Notebook.language``, lower-cased) as the suffix of a file of
#: its code, so a code cell is read as that file would be (the Jupyter kernels' names).
_LANGUAGES = {
    "python": ".py",
    "rust": ".rs",
    "go": ".go",
    "javascript": ".js",
    "typescript": ".ts",
    "java": ".java",
    "kotlin": ".kt",
    **dict.fromkeys(("c#", "csharp"), ".cs"),
    "c": ".c",
    **dict.fromkeys(("c++", "cpp"), ".cpp"),
}
#: Heads that hold members without a keyword of their own (``_Family.member``).
_CONTAINERS = (
    "class ",
    "interface ",
    "enum ",
    "record ",
    "struct ",
    "object ",
    "impl",
    "namespace ",
)
#: Python's triple quotes: the lines inside one are text, not code.
_TRIPLE_RE = re.compile(r"\"\"\"|'''")


#: A line that carries on a header at the header's own indent (``) -> T {``, ``where``, a
#: brace on its own line, ``extends``): any other line there starts something else.
_CONTINUES_RE = re.compile(r"[)\]{.:]|->|=>|where\b|extends\b|implements\b|throws\b")


@dataclass(slots=True)
class _Open:
    indent: int
    head: str
    container: bool
    #: Lines of signature read while its body has not opened yet; ``None``: opened.
    pending: int | None = 0
    depth: int = 0  # brackets its signature left open so far (Python)
    #: A C macro whose last line ended with a backslash: the next line is its too.
    continued: bool = False
    #: A C++ namespace: it holds definitions, which are the items (it is named in no
    #: label), and lasts to its closing brace, its contents indented or not.
    scope: bool = False
    #: A namespace's: the indent of its first line, where its definitions are taken.
    inner: int | None = None
    #: A value over several lines (``extensions = [``): its body is the lines of the
    #: bracket its header left open, up to a closing ``]``, ``)`` or ``}`` at its indent.
    bracketed: bool = False


def code_items(suffix: str, lines: Sequence[bytes], starts: Sequence[int]) -> list[str | None]:
    """The item at each of ``starts`` (1-indexed lines of ``lines``): the definitions
    that hold the first line of text from there on, outermost first, at most the
    outermost and the innermost, joined by ``ITEM_SEPARATOR``; ``None`` at top level,
    and for every line of a file whose ``suffix`` names no language family here. A
    definition that opens on that line is not its own item: the text shows it."""
    family = _FAMILIES.get(_SUFFIXES.get(suffix.lower(), ""))
    if family is None or not starts:
        return [None] * len(starts)
    firsts = [_first_text(lines, s) for s in starts]
    at, _ = _scan(family, lines, set(firsts))
    return [at.get(first) for first in firsts]


@dataclass(slots=True, frozen=True)
class CodeOutline:
    """What one scan of a code file found (``code_outline``): where its definitions
    start, and the item of each of its lines."""

    #: The lines where a definition starts, ascending: its header's, or the first of
    #: the decorators, attributes and comments just above it at its indent (``@cache``,
    #: ``#[derive(Debug)]``, ``/// Docs``), so a cut before it keeps them with it.
    starts: tuple[int, ...]
    _items: dict[int, str | None]
    #: Each start's header line (``starts``), the first one when two share a start.
    _heads: dict[int, int]
    _family: _Family
    #: Each start's last line, when the scan knows it (YAML: up to the next top-level
    #: key); ``None``: ``end`` reads it from the indents.
    _ends: dict[int, int] | None = None

    def item(self, lines: Sequence[bytes], start: int) -> str | None:
        """The item of a chunk starting at ``start``, as ``code_items`` names it."""
        return self._items.get(_first_text(lines, start))

    def header(self, start: int) -> int | None:
        """The header line of the definition that starts at ``start`` (one of ``starts``:
        below its comments and decorators), else ``None``."""
        return self._heads.get(start)

    def end(self, lines: Sequence[bytes], start: int, most: int) -> int | None:
        """The last line of the definition that starts at ``start`` (one of ``starts``),
        when it ends within ``most`` lines of it; else ``None``. The indents say where, as
        a reader sees it: at the first ``}`` at its header's indent (a body's closing
        brace), else just before the first line (blank lines aside) under that indent,
        or at it that neither closes a bracket (``) -> int:``) nor, in a language of
        braces, carries the header on (``where``, a ``{`` of its own)."""
        if self._ends is not None:
            stop = self._ends.get(start)
            return stop if stop is not None and stop < start + most else None
        head = self._heads.get(start)
        if head is None:
            return None
        indent = _indent(lines[head - 1].decode("utf-8", "replace"))
        braces = self._family.braces
        last = head
        for number in range(head + 1, min(start + most, len(lines) + 1)):
            line = lines[number - 1].decode("utf-8", "replace")
            text = line.strip()
            if not text:
                continue
            at = _indent(line)
            if at < indent:
                return last
            if at == indent:
                if braces and text.startswith("}"):
                    return number
                if not (_CLOSER_RE.match(text) or (braces and _CONTINUES_RE.match(text))):
                    return last
            last = number
        return last if start + most > len(lines) else None


def code_outline(suffix: str, lines: Sequence[bytes]) -> CodeOutline | None:
    """The definitions of a file of this ``suffix`` and the item of each line, in one
    scan; ``None`` when the suffix names no language family here. Every header the
    item scan opens is a start, at any nesting (a method, a nested function, a
    ``#define``), whether a body followed or not."""
    if suffix.lower() in RST_SUFFIXES:
        return _rst_outline(lines)
    if suffix.lower() in YAML_SUFFIXES:
        return _yaml_outline(lines)
    if suffix.lower() in SQL_SUFFIXES:
        return _sql_outline(lines)
    family = _FAMILIES.get(_SUFFIXES.get(suffix.lower(), ""))
    if family is None:
        return None
    at, heads = _scan(family, lines, None)
    found: dict[int, int] = {}
    for head in heads:
        found.setdefault(_lead_in(family, lines, head), head)
    # Sorted and once each whatever the lines above a header were (a decorator whose
    # arguments hold another header): a cut is looked up by bisection.
    return CodeOutline(tuple(sorted(found)), at, found, family)


def _rst_outline(lines: Sequence[bytes]) -> CodeOutline:
    """A reStructuredText file's object directives as definitions (``_rst``): each
    starts at its ``..`` line and holds the lines indented deeper, and a line's item
    is the directives that hold it (``confval html_sidebars``), as a function's is."""
    heads, held = rst_directives(lines)
    items = {number: _joined(found) for number, found in held.items()}
    return CodeOutline(tuple(sorted(heads)), items, heads, _RST_FAMILY)


#: A key at the start of a YAML line: a plain word (``grpc_target``, ``x-api.v2``) or a
#: quoted one, then ``:`` and a space or the line's end.
_YAML_KEY = re.compile(
    r"(?P<key>[A-Za-z0-9_$][\w.$/-]*|\"[^\"\n]*\"|'[^'\n]*')[ \t]*:(?:[ \t]|\r?$)"
)
#: A YAML document's start or end marker: no key's lines run past it.
_YAML_DOCUMENT = re.compile(r"(?:---|\.\.\.)(?:[ \t]|\r?$)")
_YAML_FAMILY = _Family(re.compile(r"[^\s\S]"), None, braces=False, comment=_HASH_COMMENT)


def _yaml_outline(lines: Sequence[bytes]) -> CodeOutline:
    """A YAML file's top-level keys as its items: a key at column 0 holds every line up
    to the next one (a list written flush under it, ``- a``, included) or a document
    marker (``---``); the comment lines right above a key start it, so a cut before the
    key keeps them with it, and a line's item is the key it is under (``ledger``)."""
    items: dict[int, str | None] = {}
    heads: dict[int, int] = {}
    ends: dict[int, int] = {}
    current: str | None = None
    opened: int | None = None  # the start of the top-level key open
    last = 0  # the last line of text of the key open
    comments: list[int] = []  # comment lines whose key the next line of text decides

    def close() -> None:
        if opened is not None:
            ends[opened] = last

    for number, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace")
        text = line.strip()
        if not text:
            continue
        indent = _indent(line)
        if text.startswith("#"):
            comments.append(number)
            continue
        key = _YAML_KEY.match(line) if indent == 0 else None
        if indent == 0 and (key is not None or _YAML_DOCUMENT.match(line)):
            close()
            # The comments right above a key (no blank line between) are its own.
            start = number
            while comments and comments[-1] == start - 1 and lines[start - 2].strip():
                start = comments.pop()
            items.update(dict.fromkeys([*comments, *range(start, number + 1)]))
            if key is None:  # a document marker: a top level of its own
                current, opened = None, None
            else:
                current, opened = _cut(key.group("key")), start
                heads[start] = number
            comments.clear()
            last = number
            continue
        items.update(dict.fromkeys([*comments, number], current))
        comments.clear()
        last = number
    items.update(dict.fromkeys(comments, current))
    close()
    return CodeOutline(tuple(sorted(heads)), items, heads, _YAML_FAMILY, ends)


#: An SQL object's name: plain, quoted (``"Refunds"``, a backquoted or bracketed one)
#: and schema-qualified (``billing.refunds``).
_SQL_NAME = r"(?:\"[^\"\n]+\"|`[^`\n]+`|\[[^\]\n]+\]|[A-Za-z_][\w$]*)"
#: A statement that defines an object (``CREATE [OR REPLACE] TABLE refunds (``), or
#: alters a table, at the start of a line: its kind and its name, any case. A
#: ``CREATE INDEX ON t`` names none and is no item.
_SQL_HEADER = re.compile(
    r"[ \t]*(?:(?P<create>create)\s+(?:or\s+replace\s+)?"
    r"(?:(?:global|local)\s+)?(?:(?:temp|temporary|unlogged|unique|recursive)\s+)?"
    r"(?P<kind>table|materialized\s+view|view|index|function|procedure|trigger|type|sequence)"
    r"|(?P<alter>alter\s+table))"
    r"\s+(?:concurrently\s+)?(?:if\s+(?:not\s+)?exists\s+)?(?:only\s+)?"
    rf"(?!on\b)(?P<name>{_SQL_NAME}(?:\s*\.\s*{_SQL_NAME})*)",
    re.IGNORECASE,
)
#: What a statement's end is read past: a string, a quoted name, a comment, a dollar-
#: quoted body (``$$ … $$``, ``$body$ … $body$``), and the words that open and close a
#: block (``BEGIN … END``, ``CASE … END``), in whose body a ``;`` ends no statement.
_SQL_TOKEN = re.compile(
    r"'(?:[^']|'')*'?|\"[^\"]*\"?|--.*|/\*|\$(?:[A-Za-z_]\w*)?\$|;"
    r"|\b(?:begin(?!\s*;|\s+(?:transaction|work|tran|deferred|immediate|exclusive)\b)|case|end(?:\s+(?:if|loop|while|case|repeat|for)\b)?)\b",
    re.IGNORECASE,
)
_SQL_FAMILY = _Family(re.compile(r"[^\s\S]"), None, braces=False, comment=re.compile(r"--|/\*"))


def _sql_head(found: re.Match[str]) -> str:
    """An SQL header's item: its kind, lower-cased, and its name (``table refunds``,
    ``alter table refunds``)."""
    kind = found.group("kind") or found.group("alter")
    name = re.sub(r"\s*\.\s*", ".", found.group("name"))
    return _cut(f"{' '.join(kind.lower().split())} {name}")


@dataclass(slots=True)
class _SqlState:
    """Where a scan of SQL is within a statement's text (``_sql_outline``)."""

    block_comment: bool = False
    dollar: str | None = None  # the tag of a dollar-quoted body open
    depth: int = 0  # ``BEGIN``/``CASE`` blocks open

    def ends(self, line: str) -> bool:
        """Read one line; whether a ``;`` ends the statement on it."""
        pos = 0
        while pos < len(line):
            if self.block_comment:
                close = line.find("*/", pos)
                if close < 0:
                    return False
                self.block_comment, pos = False, close + 2
                continue
            if self.dollar is not None:
                close = line.find(self.dollar, pos)
                if close < 0:
                    return False
                pos, self.dollar = close + len(self.dollar), None
                continue
            token = _SQL_TOKEN.search(line, pos)
            if token is None:
                return False
            text, pos = token.group(0), token.end()
            word = text.lower()
            if word == "/*":
                self.block_comment = True
            elif word.startswith("$"):
                self.dollar = text
            elif word == ";" and self.depth == 0:
                return True
            elif word in ("begin", "case"):
                self.depth += 1
            elif word == "end":
                self.depth = max(self.depth - 1, 0)
        return False


def _sql_outline(lines: Sequence[bytes]) -> CodeOutline:
    """An SQL file's statements that define an object or alter a table as its items
    (``_SQL_HEADER``): each holds its lines up to the one whose ``;`` ends it (one in a
    string, a comment, a dollar-quoted body or a ``BEGIN … END`` block ends nothing),
    or up to the next such statement when it has no ``;`` (T-SQL's ``GO``); the
    comment lines right above it start it, and a line's item is the statement it is in
    (``table refunds``). The lines between statements (an ``INSERT``, a ``BEGIN;``) are
    at top level."""
    items: dict[int, str | None] = {}
    heads: dict[int, int] = {}
    ends: dict[int, int] = {}
    current: str | None = None
    opened: int | None = None  # the start of the statement open
    state = _SqlState()
    last = 0  # the last line of text of the statement open
    comments: list[int] = []  # comment lines right above the next line of code

    for number, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace")
        text = line.strip()
        if not text:
            continue
        quiet = state.dollar is None and not state.block_comment
        if quiet and text.startswith("--"):
            if current is None:
                comments.append(number)
            else:
                items[number] = current
            continue
        header = _SQL_HEADER.match(line) if quiet and state.depth == 0 else None
        if header is not None:
            if opened is not None:  # the one before had no ``;``
                ends[opened] = last
            start = number
            while comments and comments[-1] == start - 1:
                start = comments.pop()
            items.update(dict.fromkeys([*comments, *range(start, number + 1)]))
            comments.clear()
            current, opened, state = _sql_head(header), start, _SqlState()
            heads[start] = number
            last = number
            if state.ends(line):  # a statement on one line
                ends[start], current, opened = number, None, None
            continue
        items.update(dict.fromkeys([*comments, number], current))
        comments.clear()
        if opened is not None:
            last = number
            if state.ends(line):
                ends[opened], current, opened = number, None, None
        elif text.upper() != "GO":
            state.ends(line)  # a string or a body over several lines is no header
    items.update(dict.fromkeys(comments, current))
    if opened is not None:
        ends[opened] = last
    return CodeOutline(tuple(sorted(heads)), items, heads, _SQL_FAMILY, ends)


def _joined(heads: Sequence[str]) -> str | None:
    """The outermost and the innermost of ``heads`` as one label, ``None`` for none."""
    shown = heads if len(heads) <= 2 else [heads[0], heads[-1]]
    return ITEM_SEPARATOR.join(shown) or None


#: Lines just above a definition that belong to it: a decorator or annotation
#: (``@``), a Rust attribute (``#[``, ``#![``).
_DECORATION_RE = re.compile(r"@|#!?\[")
#: A line inside a decorator's arguments over several lines closes at its indent.
_CLOSER_RE = re.compile(r"[)\]}]")


def _lead_in(family: _Family, lines: Sequence[bytes], head: int) -> int:
    """Where the definition whose header is line ``head`` starts: the first of the
    decorators, attributes and comment lines right above it (no blank line between) at
    its indent, a decorator's argument lines over several lines included."""
    indent = _indent(lines[head - 1].decode("utf-8", "replace"))
    start = head
    # Lines that may be a decorator's arguments: they are the definition's only when a
    # decorator above them is reached, and a comment above them is not one.
    arguments = False
    for number in range(head - 1, max(head - 1 - _MAX_SIGNATURE_LINES, 0), -1):
        line = lines[number - 1].decode("utf-8", "replace")
        text = line.strip()
        if not text:
            break
        at = _indent(line)
        if at == indent and _DECORATION_RE.match(text):
            start, arguments = number, False
        elif at == indent and not arguments and family.comment.match(text):
            start = number
        elif at > indent or (at == indent and _CLOSER_RE.match(text)):
            arguments = True
        else:
            break  # a line of what comes before it
    return start


def _scan(
    family: _Family, lines: Sequence[bytes], wanted: set[int] | None
) -> tuple[dict[int, str | None], list[int]]:
    """The item of each ``wanted`` line of text (``None``: of every line), and the
    header lines of the definitions found, in order."""
    heads: list[int] = []
    at: dict[int, str | None] = {}
    stack: list[_Open] = []
    in_string = False
    comments: list[int] = []  # wanted comment lines in what the next line of code is in
    # Wanted lines of a C signature over several lines: a definition's when a body opens,
    # a prototype's lines are in what holds it.
    undecided: list[int] = []

    def mark(number: int) -> None:  # a line of code's item, and the comments' before it
        if wanted is None or number in wanted or comments:
            label = _label(stack)
            at.update(dict.fromkeys([*comments, number], label))
            comments.clear()

    for number, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace")
        text = line.strip()
        comment = bool(text) and not in_string and family.comment.match(text) is not None
        if not family.braces and not comment and (in_string or '"""' in text or "'''" in text):
            # A triple-quoted string's lines are text: only the line opening one is code.
            was, in_string = in_string, in_string != (len(_TRIPLE_RE.findall(text)) % 2 == 1)
            if was:
                mark(number)
                continue
        if not text:
            continue
        indent = _indent(line)
        top = stack[-1] if stack else None
        if top is not None and top.continued:  # a C macro's line after a backslash
            mark(number)
            top.continued = text.endswith("\\")
            continue
        if top is not None and top.head.startswith("#define "):
            stack.pop()  # its last line ended without a backslash
            top = stack[-1] if stack else None
        if family.c_like and not comment and (define := _C_DEFINE.match(text)):
            if top is None or top.container:  # in a function body: decides nothing
                mark(number)
                heads.append(number)
                macro = _cut(f"#define {define.group('name')}")
                stack.append(_Open(indent, macro, False, None, continued=text.endswith("\\")))
            continue
        if comment:
            if (wanted is None or number in wanted) and top is not None and indent > top.indent:
                at[number] = _label(stack)
            elif wanted is None or number in wanted:
                comments.append(number)
            continue
        if top is not None and top.pending is not None:
            if not family.braces or indent > top.indent or _CONTINUES_RE.match(text):
                if family.c_like and (wanted is None or number in wanted):
                    undecided.append(number)  # a prototype's line is not in it
                else:
                    mark(number)
                _signature_line(stack, top, text, family.braces)
                if undecided and (top.pending is None or not stack or stack[-1] is not top):
                    at.update(dict.fromkeys(undecided, _label(stack)))  # a body, or none
                    undecided.clear()
                continue
            stack.pop()  # a header with no body (``type Id int``): this line is another
            at.update(dict.fromkeys(undecided, _label(stack)))
            undecided.clear()
        closes = family.braces and text.startswith("}")
        closer = text[:1] in _CLOSERS  # a bracketed value's last line, at its indent
        while stack and indent <= stack[-1].indent:
            last = closes or (closer and stack[-1].bracketed)
            if indent == stack[-1].indent and (last or stack[-1].scope):
                break  # its closing line is still its own; a namespace's lines are its
            stack.pop()
        mark(number)
        top = stack[-1] if stack else None
        if top is not None and indent == top.indent and (closes or (closer and top.bracketed)):
            stack.pop()
            continue
        if top is not None and top.scope:
            # Its definitions are at its first line's indent, as a file's are at column 0.
            top.inner = indent if top.inner is None else top.inner
            in_container = indent == top.inner
        else:
            in_container = top.container if top is not None else family.c_like and indent == 0
        found = _found(family, text, in_container, at_top=indent == 0)
        if found is not None:
            head, bracketed = found
            scope = family.c_like and head.startswith("namespace ")
            opened = _Open(indent, head, head.startswith(_CONTAINERS), scope=scope)
            stack.append(opened)
            heads.append(number)
            if bracketed:  # its body, the bracket's lines, is open
                opened.pending, opened.bracketed = None, True
            else:
                _signature_line(stack, opened, text, family.braces)
    if undecided:  # a signature the file ends in: no body
        at.update(dict.fromkeys(undecided, _label([o for o in stack if o.pending is None])))
    for number in comments:  # after the last line of code: in what holds their indent
        indent = _indent(lines[number - 1].decode("utf-8", "replace"))
        at[number] = _label([o for o in stack if o.indent < indent])
    return at, heads


#: A definition's name in its head: the last identifier (``fn build``: build,
#: ``struct btd_adapter``: btd_adapter, ``Foo::bar()``: bar) or C++ operator
#: (``A::operator==()``: operator==).
_NAME_RE = re.compile(rf"{_OPERATOR}|[A-Za-z_$][\w$]*")
#: How far past a function's header its body may open (a C signature over many lines).
_BODY_CHARS = 1000
#: The lines each family's patterns may take for a header, found in one pass over a
#: chunk's text (most lines of code are none, and reading each alone would cost seconds
#: over a large tree): a superset, ``_head`` decides.
_CANDIDATES = {
    "python": r"[ \t]*(?:async[ \t]+)?(?:def|class)\b|[A-Za-z_]\w*[ \t]*[:=]",
    "rust": r"[ \t]*(?:pub|async|unsafe|const|default|extern|fn|struct|enum|trait|mod|union"
    r"|static|macro_rules)\b",
    "go": r"[ \t]*(?:func|type|var|const)\b",
    # A member is a line that opens a body or a parameter list over several lines.
    "js": r"[^\n]*(?:\{|\([ \t]*$|\b(?:function|class|interface|enum|namespace|module|const|let|var"
    r"|type)\b)",
    "jvm": r"[^\n]*(?:\{|\([ \t]*$|\b(?:class|interface|enum|record|struct|object|namespace"
    r"|fun)\b)",
    # A function's header at column 0; a type anywhere; a macro.
    "c": r"(?:[ \t]*#[ \t]*define\b|[A-Za-z_~]|[ \t]*(?:typedef|template|struct|union|enum"
    r"|class|namespace)\b)",
    "proto": r"[ \t]*(?:message|enum|service|oneof|extend|rpc)\b",
}
_CANDIDATE_RES = {
    family: re.compile(f"^(?:{pattern})[^\n]*", re.MULTILINE)
    for family, pattern in _CANDIDATES.items()
}
_BODY_OR_END = re.compile(r"[{;]")


def defined_names(suffix: str, text: str) -> list[str]:
    """The names of the definitions that open on the lines of ``text`` (a chunk of a file
    with ``suffix``), in text order: each line read alone by its family's patterns, as
    ``code_items`` reads a header. Without the file around them a line's container is
    guessed by its indent (C: a function at column 0; JavaScript, Java: a method
    indented), and a function counts only when its body opens (``{`` before ``;``), so
    a prototype, a declaration or a call names none. In reStructuredText, the names
    its object directives describe (``.. confval:: html_sidebars``: html_sidebars); in
    SQL, the objects its ``CREATE`` statements make (``CREATE TABLE refunds``: refunds).
    Empty for a language not known."""
    if suffix.lower() in RST_SUFFIXES:
        return [name for head in directive_heads(text) if (name := item_name(head))]
    if suffix.lower() in SQL_SUFFIXES:
        return [
            name
            for found in _SQL_HEADER.finditer(text)
            if found.group("create") and (found.start() == 0 or text[found.start() - 1] == "\n")
            if (name := item_name(_sql_head(found)))
        ]
    language = _SUFFIXES.get(suffix.lower(), "")
    family = _FAMILIES.get(language)
    if family is None:
        return []
    names: list[str] = []
    for line in _CANDIDATE_RES[language].finditer(text):
        stripped = line.group(0).strip()
        if family.c_like and (define := _C_DEFINE.match(stripped)):
            names.append(define.group("name"))
            continue
        if family.comment.match(stripped):
            continue
        indented = line.group(0)[:1] in (" ", "\t")
        in_container = not indented if family.c_like else family.member is not None and indented
        head = _head(family, stripped, in_container, at_top=not indented)
        if head is None or head.startswith("impl") or head.endswith(("…", _BLOCK_MARK)):
            continue
        if head.endswith("()") and not _opens_body(text, line.start()):
            continue
        if name := item_name(head):
            names.append(name)
    return names


def _opens_body(text: str, start: int) -> bool:
    """Whether the function whose header starts at ``start`` opens a body: a ``{`` comes
    before any ``;`` after its parameter list's start (within ``_BODY_CHARS``)."""
    paren = text.find("(", start)
    found = _BODY_OR_END.search(text, paren, paren + _BODY_CHARS) if paren >= 0 else None
    return found is not None and found.group(0) == "{"


def item_name(item: str, suffix: str = "") -> str | None:
    """The name an item's innermost level defines (``impl Foo › fn build``: build);
    ``None`` for one that names nothing whole (an ``impl``, a head cut short), and for
    an item of a file of ``suffix`` whose items define nothing: a YAML key is
    configuration that many files repeat (``metadata``, ``spec``), not a definition a
    question looks up; nor does an SQL ``ALTER TABLE``, which changes a table defined
    elsewhere."""
    if suffix.lower() in YAML_SUFFIXES:
        return None
    if suffix.lower() in SQL_SUFFIXES and item.startswith("alter "):
        return None
    head = item.rsplit(ITEM_SEPARATOR, 1)[-1]
    if head.startswith("impl") or head.endswith(("…", _BLOCK_MARK)):
        return None
    found = _NAME_RE.findall(head.removesuffix("()"))
    return found[-1] if found else None


def language_suffix(language: str) -> str | None:
    """The suffix ``code_items`` reads code of this language by (a notebook's code
    cells: ``python`` is ``.py``); ``None`` when it knows no such language."""
    return _LANGUAGES.get(language.lower())


def _head(family: _Family, text: str, in_container: bool, at_top: bool = False) -> str | None:
    """What the definition opening on this line is called, if one does (``at_top``: the
    line is at column 0)."""
    found = _found(family, text, in_container, at_top)
    return None if found is None else found[0]


def _found(
    family: _Family, text: str, in_container: bool, at_top: bool = False
) -> tuple[str, bool] | None:
    """``_head``, and whether that definition is a value whose line leaves a bracket open
    (``_Open.bracketed``): an assignment, or a column-0 definition (``_JS_TOP``)."""
    found = family.definition.match(text)
    if found is None and at_top and (family.assignment or family.top_level) is not None:
        opens = _leaves_open(text, family.braces)
        if family.assignment is not None and opens:
            found = family.assignment.match(text)
        if found is None and family.top_level is not None:
            found = family.top_level.match(text)
        if found is not None:
            head = " ".join(found.group("head").split())
            if head.endswith("("):  # a Go block: no one name
                head = head.removesuffix("(").rstrip() + _BLOCK_MARK
            return _cut(head), opens
    method = False
    if found is None and family.member is not None and in_container:
        found = family.member.match(text)
        # A member has no keyword: only a line that opens a body or a parameter list
        # over several lines is taken for one (not ``RED("r"),`` in an enum).
        if found is None or found.group("head") in _NOT_MEMBERS:
            return None
        if family.c_like:
            # A definition has a body: a prototype's line ends with ``;``, a call's too; a
            # typedef of a function pointer (``typedef void (*cb_t)(int);``) is a type.
            before = text[: found.start("head")]  # not ``operator=``'s own ``=``
            code = text.split("//", 1)[0].rstrip()
            if code.endswith(";") or "=" in before or before.startswith("typedef"):
                return None
            if found.group("head") in _C_WORDS:
                return None
        elif "{" not in text and not text.rstrip().endswith("("):
            return None
        method = True
    if found is None:
        return None
    head = " ".join(found.group("head").split())
    return _cut(re.sub(r" where\b.*", "", head) + ("()" if method else "")), False


#: A line's first character that closes a bracket (``_Open.bracketed``).
_CLOSERS = frozenset(")]}")
#: What a block that names no one thing is shown with (``var (…)``): no name of its own.
_BLOCK_MARK = " (…)"


def _leaves_open(text: str, braces: bool) -> bool:
    """Whether a line of code opens more brackets than it closes (its comment aside)."""
    code = text.split("//" if braces else "#", 1)[0]
    return sum(map(code.count, "([{")) > sum(map(code.count, ")]}"))


def _cut(head: str) -> str:
    return head if len(head) <= _MAX_HEADER else head[: _MAX_HEADER - 1] + "…"


def _signature_line(stack: list[_Open], top: _Open, text: str, braces: bool) -> None:
    """Read one line of ``top``'s header: its body opens (a ``{`` left open; in Python,
    a ``:`` ending the line once its brackets are closed), or it has none (a ``;``, a
    body closed on the same line, a Python one-liner, too many lines), or its
    signature goes on."""
    assert top.pending is not None
    if braces:
        code = text.split("//", 1)[0].rstrip()
        opens, closes = code.count("{"), code.count("}")
        if opens > closes:
            top.pending = None
            return
        done = opens > 0 or code.endswith(";")
    else:
        code = text.split("#", 1)[0].rstrip()
        top.depth += sum(map(code.count, "([")) - sum(map(code.count, ")]"))
        if top.depth <= 0 and code.endswith(":"):
            top.pending = None
            return
        done = top.depth <= 0
    top.pending += 1
    if done or top.pending > _MAX_SIGNATURE_LINES:
        stack.pop()


def _indent(line: str) -> int:
    """A line's indent in columns (a tab to the next multiple of 8)."""
    return len(line[: len(line) - len(line.lstrip())].expandtabs(8))


def _first_text(lines: Sequence[bytes], start: int) -> int:
    """The first line from ``start`` on that is not blank (``start`` when none is)."""
    for number in range(start, len(lines) + 1):
        if lines[number - 1].strip():
            return number
    return start


def _label(stack: Sequence[_Open]) -> str | None:
    """The outermost and the innermost definition open (a line of a signature over
    several lines is in its definition too), a namespace none."""
    stack = [o for o in stack if not o.scope]
    if not stack:
        return None
    shown = stack if len(stack) <= 2 else [stack[0], stack[-1]]
    return ITEM_SEPARATOR.join(o.head for o in shown)
