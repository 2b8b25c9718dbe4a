"""A code chunk's item: the definitions its first line of text sits in, by a line scan
per language family, shown in its frame's title and nowhere that keys or embeds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.chunking import (
    chunk_frame,
    chunk_text,
    defined_names,
    estimate_pieces,
    item_name,
    split_lines,
)
from hostd.chunking._items import code_items, code_outline
from hostd.mcp import Document, cut
from providers import Corpus, CorpusOptions, chunk_file
from providers._corpus_cache import load_corpus, save_corpus
from providers.semantic._index import _embed_input


def _items(suffix: str, source: str, lines: int = 3) -> dict[int, str | None]:
    """``{first line: item}`` at the starts of ``source``'s chunks of ``lines`` lines as
    text that is no code cuts them (code is cut before its definitions, which would
    start each chunk at a header), by both ways of naming them."""
    data = source.encode()
    raw = split_lines(data)
    cut = chunk_text(data, f"src/x{suffix}", lines, min_tokens=0, counter=estimate_pieces)
    starts = [c.start for c in cut]
    items = code_items(suffix, raw, starts)
    outline = code_outline(suffix, raw)
    assert outline is None or [outline.item(raw, s) for s in starts] == items
    return dict(zip(starts, items, strict=True))


RUST = """\
use std::sync::Arc;

pub(crate) fn helper(
    a: u32,
) -> u32 {
    a + 1
}

impl<T> BuildValidator for DateTimeValidator<T>
where
    T: Clone,
{
    const EXPECTED: &str = "datetime";

    pub async fn build(
        schema: &Schema,
    ) -> Result<Self> {
        let x = 1;
        Ok(Self { x })
    }
}
struct Unit;
pub enum Op {
    Past,
    Future,
}
"""


def test_a_rust_chunk_names_the_impl_and_fn_it_starts_in() -> None:
    assert _items(".rs", RUST) == {
        1: None,
        4: "fn helper",  # a signature over several lines is its fn's
        7: "fn helper",  # the closing brace too
        10: "impl<T> BuildValidator for DateTimeValidator<T>",
        13: "impl<T> BuildValidator for DateTimeValidator<T>",
        16: "impl<T> BuildValidator for DateTimeValidator<T> › fn build",
        19: "impl<T> BuildValidator for DateTimeValidator<T> › fn build",
        22: None,  # after the impl: ``struct Unit;`` has no body
        25: "enum Op",
    }


PYTHON = '''\
import os


class Cache:
    """A cache.

def not_a_definition():
    """
    size = 3

    def get(self, key):
        value = self.data[key]
        return value

    async def put(
        self, key, value
    ) -> None:
        def inner():
            return key
        return inner()
    def one(self): return 1
    limit = 4


def top():
    x = 1
    return x
'''


def test_a_python_chunk_names_its_class_and_def() -> None:
    assert _items(".py", PYTHON) == {
        1: None,
        4: None,  # the chunk opens with the class: its text shows it
        7: "class Cache",  # inside the docstring: no definition there
        10: "class Cache",  # its first line of text opens ``get``
        13: "class Cache › def get",
        16: "class Cache › async def put",  # inside its signature
        19: "class Cache › def inner",  # the outermost and the innermost of three
        22: "class Cache",  # after a one-line def
        25: None,
    }


GO = """\
package cache

type ID int
const Max = 3
type Cache struct {
\tdata map[string]int
}

func (c *Cache) Get(
\tkey string,
) int {
\tif key == "" {
\t\treturn 0
\t}
\treturn c.data[key]
}
"""


def test_a_go_chunk_names_its_func_or_type() -> None:
    assert _items(".go", GO) == {
        1: None,
        4: None,  # ``type ID int`` has no body: the line after it is outside
        7: "type Cache",
        10: "func (c *Cache) Get",
        13: "func (c *Cache) Get",
        16: "func (c *Cache) Get",
    }


TYPESCRIPT = """\
import { x } from "y";

export class Store extends Base {
  private items: Item[] = [];

  async load(id: string): Promise<Item> {
    if (id) {
      return this.fetch(id);
    }
    return null;
  }
}

export const handler = async (req) => {
  return req;
};
"""


def test_a_typescript_chunk_names_its_class_and_method() -> None:
    assert _items(".ts", TYPESCRIPT) == {
        1: None,
        4: "class Store",
        7: "class Store › load()",  # not ``if``: a statement is no method
        10: "class Store › load()",
        13: None,
        16: "const handler",  # its closing line
    }


JAVA = """\
package a;

public final class Greeter {
    private final String name;

    public Greeter(String name) {
        this.name = name;
    }
    @Override
    public String greet(String who) {
        return name + who;
    }
}
"""


def test_a_java_chunk_names_its_class_and_method() -> None:
    assert _items(".java", JAVA, lines=2) == {
        1: None,
        3: None,
        5: "class Greeter",
        7: "class Greeter › Greeter()",  # a constructor too
        9: "class Greeter",
        11: "class Greeter › greet()",
        13: "class Greeter",  # its closing line
    }


def test_text_that_is_no_code_of_a_known_language_has_no_item() -> None:
    assert set(_items(".txt", RUST).values()) == {None}
    assert set(_items(".rb", "class A\n  def b\n    1\n  end\nend\n", lines=2).values()) == {None}
    # Without a suffix (a tool's text), Python is not read as code either.
    chunks = chunk_text(PYTHON.encode(), "x", 3, min_tokens=0, counter=estimate_pieces)
    assert {c.item for c in chunks} == {None}


def test_an_item_changes_no_id_label_digest_or_embedding_input(tmp_path: Path) -> None:
    path = tmp_path / "src" / "lib.rs"
    path.parent.mkdir()
    path.write_text(RUST * 8)
    data = path.read_bytes()
    chunks = chunk_file(path, "src/lib.rs", data, 6)
    as_text = chunk_text(data, "src/lib.rs", 6, code_suffix=".rs")  # the text's own cut
    assert [(c.start, c.end, c.digest, c.item) for c in chunks] == [
        (c.start, c.end, c.digest, c.item) for c in as_text
    ]
    inside = [c for c in chunks if c.item]
    assert inside
    for c in chunks:
        frame = chunk_frame(c, 0.5)
        assert frame.id == f"src/lib.rs#L{c.start}-{c.end}"
        assert frame.citation_label == f"src/lib.rs L{c.start}-{c.end}"
        # The input embedded (and cached) before items were shown, unchanged.
        assert _embed_input(c) == f"src/lib.rs L{c.start}-{c.end}\n{c.text}"
        suffix = f" · in {c.item}" if c.item else ""
        assert frame.title == f"src/lib.rs L{c.start}-{c.end}{suffix}"


def test_a_tree_cut_twice_and_through_its_cache_names_the_same_items(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "src").mkdir(parents=True)
    (root / "src" / "lib.rs").write_text(RUST * 8)
    (root / "app.py").write_text(PYTHON * 4)

    def cut_tree() -> Corpus:
        corpus = Corpus(CorpusOptions(root=root, window_lines=6))
        corpus.refresh()
        return corpus

    first, second = cut_tree(), cut_tree()
    titles = [c.title for c in first.chunks]
    assert any(" · in " in t for t in titles)
    assert [c.title for c in second.chunks] == titles
    saved = tmp_path / "corpus.json"
    save_corpus(first, saved)
    restarted = Corpus(CorpusOptions(root=root, window_lines=6))
    assert load_corpus(restarted, saved)
    assert restarted.chunks == first.chunks


@pytest.mark.parametrize(
    ("uri", "expect_item"), [("file:///p/src/lib.rs", True), (None, False)], ids=["file", "tool"]
)
def test_an_mcp_file_resource_names_items_and_a_tool_text_does_not(
    uri: str | None, expect_item: bool
) -> None:
    method = "resources/read" if uri else "tools/call:grep"
    pieces = list(cut(Document(method=method, text=RUST * 8, uri=uri)))
    assert pieces
    assert any(p.item for p in pieces) is expect_item
    for p in pieces:
        assert p.title == (f"{p.label} · in {p.item}" if p.item else p.label)


def test_a_long_python_signature_is_its_defs() -> None:
    params = "".join(f"    p{i}: int = {i},\n" for i in range(24))
    lines = split_lines(f"def schema(\n{params}) -> dict:\n    return {{}}\n".encode())
    assert code_items(".py", lines, [20, len(lines) - 1]) == ["def schema", "def schema"]


COMMENTED = '''\
class Store:
    def load(self, key):
        value = self.data[key]
# old = self.cache[key]
        if value:
            return value
    # a note on save, at the class's own indent

    def save(self, key):
        # use """ for docstrings: a comment quotes no string
        self.data[key] = 1
        return key
# a comment before the next top-level definition
def top():
    return 1
# the last line, at column 0
'''


def test_a_comment_at_column_0_inside_a_body_does_not_end_its_item() -> None:
    lines = split_lines(COMMENTED.encode())
    assert code_items(".py", lines, [4, 5, 7, 11, 13, 15, 16]) == [
        "class Store › def load",  # the commented-out line is still in ``load``
        "class Store › def load",  # and so is the code after it
        "class Store",  # in what the next line of code is in
        "class Store › def save",
        None,  # before ``def top``, at top level
        "def top",  # a ``"""`` in a comment opened no string
        None,
    ]


def test_a_rust_line_comment_at_column_0_inside_a_fn_does_not_end_it() -> None:
    source = "fn f() {\n    let x = 1;\n// let y = 2;\n    x\n}\n"
    lines = split_lines(source.encode())
    assert code_items(".rs", lines, [3, 4, 5]) == ["fn f", "fn f", "fn f"]


def test_rust_statics_consts_and_macros_are_items() -> None:
    source = """\
static TABLE: [u8; 3] = [
    1,
    2,
];
pub static mut COUNT: Counter = Counter {
    n: 0,
};
const LIMITS: Limits = Limits {
    max: 3,
};
macro_rules! square {
    ($x:expr) => {
        $x * $x
    };
}
unsafe impl<T: Send> Send for Handle<T> {
    fn f() {}
}
"""
    lines = split_lines(source.encode())
    assert code_items(".rs", lines, [2, 6, 9, 12, 13, 17]) == [
        "static TABLE",
        "static mut COUNT",
        "const LIMITS",
        "macro_rules! square",
        "macro_rules! square",
        "impl<T: Send> Send for Handle<T>",
    ]


C = """\
#include <stdlib.h>

#define MAX_ADAPTERS 16
#define new0(type, count)			\\
	(type *) (__extension__ ({		\\
		void *__p = calloc(count, sizeof(type));	\\
		__p;				\\
	}))

struct btd_adapter {
	int dev_id;
	char *name;
};

typedef void (*adapter_cb_t)(struct btd_adapter *adapter,
					void *user_data);

struct btd_adapter *btd_adapter_find(int id,
					const char *name);

static struct btd_adapter *btd_adapter_new(int index,
					const char *name)
{
	struct btd_adapter *adapter = new0(struct btd_adapter, 1);
#ifdef DEBUG
	adapter->dev_id = index;
#endif
	if (adapter)
		return adapter;
	return NULL;
}

static gboolean
adapter_free(void *data)
{
	free(data);
}
"""


def test_c_functions_macros_and_structs_are_items_and_prototypes_are_not() -> None:
    lines = split_lines(C.encode())
    at = [3, 5, 7, 11, 13, 16, 19, 22, 24, 25, 26, 28, 31, 35, 36]
    assert code_items(".c", lines, at) == [
        None,  # an object-like macro: one line
        "#define new0",  # a function-like one: its lines up to the last backslash
        "#define new0",
        "struct btd_adapter",
        "struct btd_adapter",  # its closing line
        None,  # a typedef of a function pointer is no function
        None,  # a prototype's line is not in it: it has no body
        "btd_adapter_new()",  # a definition's signature line is
        "btd_adapter_new()",
        "btd_adapter_new()",  # an ``#ifdef`` at column 0 does not end it
        "btd_adapter_new()",
        "btd_adapter_new()",  # not ``if``: a statement is no function
        "btd_adapter_new()",  # its closing line
        "adapter_free()",  # its return type on the line before
        "adapter_free()",
    ]
    assert code_items(".h", lines, [5, 24]) == code_items(".c", lines, [5, 24])


CPP = """\
namespace net {

class Socket : public Stream {
public:
    int send(const char *data) {
        return write(data);
    }
    void close();
};

}

int Socket::recv(char *into) const
{
    return read(into);
}
"""


def test_cpp_classes_and_methods_are_items() -> None:
    lines = split_lines(CPP.encode())
    assert code_items(".cpp", lines, [4, 6, 8, 14]) == [
        "class Socket",
        "class Socket › send()",
        "class Socket",  # a method declared, not defined
        "Socket::recv()",
    ]


CPP_NAMESPACES = """\
namespace net {

struct Point {
    int x;
    bool operator==(const Point& o) const {
        return x == o.x;
    }
    Point& operator=(const Point& o) {
        x = o.x;
        return *this;
    }
    int operator()(int y) const {
        return x + y;
    }
    explicit operator bool() const {
        return x != 0;
    }
};

bool operator<(const Point& a, const Point& b)
{
    return a.x < b.x;
}

}  // namespace net

namespace util {
    class Socket {
    public:
        int send(const char *data) {
            return write(data);
        }
    };

    static const Entry table[] = {
        ENTRY("a",
              1),
    };
}
"""


def test_cpp_operator_overloads_are_items() -> None:
    lines = split_lines(CPP_NAMESPACES.encode())
    assert code_items(".cpp", lines, [6, 9, 13, 16, 22, 23]) == [
        "struct Point › operator==()",
        "struct Point › operator=()",
        "struct Point › operator()()",
        "struct Point › operator bool()",
        "operator<()",
        "operator<()",
    ]
    assert defined_names(".cpp", CPP_NAMESPACES).count("operator<") == 1
    assert item_name("struct Point › operator()()") == "operator()"
    assert item_name("Point::operator==()") == "operator=="
    assert item_name("Foo::~Foo()") == "Foo"


def test_a_cpp_namespace_is_no_item_and_holds_its_definitions_indented_or_not() -> None:
    lines = split_lines(CPP_NAMESPACES.encode())
    assert code_items(".cpp", lines, [4, 20, 25, 29, 32, 36, 38]) == [
        "struct Point",  # a namespace's contents at its own indent are in it
        None,
        None,  # its closing line
        "class Socket",  # indented: a class's method shows its class, not the namespace
        "class Socket › send()",
        None,
        None,  # an initializer's entry is no function, though the namespace holds it
    ]


def test_the_names_a_chunk_defines_are_its_definition_lines_not_prototypes_nor_calls() -> None:
    source = (
        "#define new0(type, count) \\\n"
        "\t(type *) calloc(count, sizeof(type))\n"
        "struct btd_adapter *btd_adapter_find(const bdaddr_t *sba,\n"
        "\t\t\t\tuint8_t type);\n"
        "struct btd_adapter {\n"
        "\tint ref;\n"
        "};\n"
        "static gboolean\n"
        "adapter_ready(struct btd_adapter *adapter)\n"
        "{\n"
        "\treturn adapter_ready_now(adapter);\n"
        "}\n"
    )
    assert defined_names(".h", source) == ["new0", "btd_adapter", "adapter_ready"]
    python = "class Foo:\n    def bar(self):\n        return baz(1)\n"
    assert defined_names(".py", python) == ["Foo", "bar"]
    java = "public class Foo {\n    public int size() {\n        return count(1);\n    }\n"
    assert defined_names(".java", java) == ["Foo", "size"]
    assert defined_names(".txt", python) == []


def test_a_typescript_constant_of_any_value_and_a_type_alias_are_definitions() -> None:
    source = (
        "export const asyncScheduler = new AsyncScheduler(AsyncAction);\n"
        "export const config: GlobalConfig = {\n"
        "  onUnhandledError: null,\n"
        "};\n"
        "export let EMPTY = new Observable<never>((subscriber) => subscriber.complete());\n"
        "var legacy = { a: 1 };\n"
        "export type OperatorFunction<T, R> = UnaryFunction<Observable<T>, Observable<R>>;\n"
        "type Local =\n"
        "  | string\n"
        "  | number;\n"
        "export declare const VERSION: string;\n"
        "export abstract class Scheduler {}\n"
        "export const enum Kind { A }\n"
        "declare module 'rxjs' {\n"
        "}\n"
        "export type { Observer } from './types';\n"
        "function run() {\n"
        "  const total = count(1);\n"
        "  type Row = [number];\n"
        "}\n"
    )
    assert defined_names(".ts", source) == [
        "asyncScheduler",
        "config",
        "EMPTY",
        "legacy",
        "OperatorFunction",
        "Local",
        "VERSION",
        "Scheduler",
        "Kind",
        "rxjs",
        "run",  # not ``total`` nor ``Row``: a function's own, indented
    ]
    assert defined_names(".js", "export const handlers = {\n  a: 1,\n};\n") == ["handlers"]
    lines = split_lines(source.encode())
    # A constant's object and a type alias over several lines are their items.
    assert code_items(".ts", lines, [3, 9, 18]) == ["const config", "type Local", "function run"]


def test_an_item_names_its_innermost_definition_and_an_impl_names_none() -> None:
    assert item_name("impl Foo › fn build") == "build"
    assert item_name("btd_adapter_new()") == "btd_adapter_new"
    assert item_name("#define new0") == "new0"
    assert item_name("impl Display for Foo") is None


CONF_PY = """\
# Build configuration file
import os

os.environ['RELOAD'] = '1'

# The extensions this build enables.
extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.doctest',
    'sphinx.ext.todo',
    'sphinx.ext.extlinks',
]
project = 'Sphinx'
html_sidebars: dict[str, list[str]] = {
    'index': ['search.html'],
    '**': ['localtoc.html'],
}
exclude_patterns = ['_build']
latex_elements = dict(
    fontpkg='times',
    papersize='a4',
)
"""


def test_a_python_value_over_several_lines_is_an_item() -> None:
    assert _items(".py", CONF_PY) == {
        1: None,
        4: None,
        7: None,  # the assignment opens on the chunk's first line of text: the text shows it
        10: "extensions",
        13: None,
        16: "html_sidebars",
        19: None,
        22: "latex_elements",
    }
    outline = code_outline(".py", split_lines(CONF_PY.encode()))
    assert outline is not None
    lines = split_lines(CONF_PY.encode())
    # Each starts at the comment above it and ends at its closing bracket.
    assert outline.starts == (6, 14, 19)
    assert [outline.end(lines, s, 40) for s in outline.starts] == [12, 17, 22]
    # A value on one line is none (``project``, ``exclude_patterns``).
    assert defined_names(".py", CONF_PY) == ["extensions", "html_sidebars", "latex_elements"]
    assert item_name("extensions") == "extensions"


def test_a_long_python_value_names_every_chunk_inside_it() -> None:
    source = "extensions = [\n" + "".join(f"    'ext.n{i}',\n" for i in range(80)) + "]\nx = 1\n"
    raw = split_lines(source.encode())
    assert code_items(".py", raw, [2, 41, 60, 82, 83]) == [
        "extensions",
        "extensions",
        "extensions",
        "extensions",  # its closing bracket
        None,
    ]


def test_a_long_typescript_array_is_one_item_past_a_signatures_lines() -> None:
    source = "export const LIST = [\n" + "".join(f"  {i},\n" for i in range(60)) + "];\nlet y;\n"
    raw = split_lines(source.encode())
    assert code_items(".ts", raw, [2, 55, 62, 63]) == [
        "const LIST",
        "const LIST",
        "const LIST",
        None,
    ]


GO_BLOCKS = """\
package cache

var (
\tErrMiss = errors.New("miss")
\tErrFull = errors.New("full")
)

const (
\tSize = 1
)

var defaults = map[string]int{
\t"a": 1,
}
"""


def test_go_var_and_const_blocks_are_items_that_name_no_one_thing() -> None:
    raw = split_lines(GO_BLOCKS.encode())
    assert code_items(".go", raw, [4, 6, 9, 13, 14]) == [
        "var (…)",
        "var (…)",
        "const (…)",
        "var defaults",
        "var defaults",
    ]
    assert item_name("var (…)") is None and item_name("const (…)") is None
    assert defined_names(".go", GO_BLOCKS) == ["defaults"]
