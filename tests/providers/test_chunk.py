"""The shared chunker: chunks fit the embedding model's window, tiny fragments merge,
no line is lost, code is cut before its definitions, and both search providers cut a
tree into the same regions."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import (
    DEFAULT_MIN_CHUNK_TOKENS,
    MODEL_TRAINED_LENGTH,
    MODEL_WINDOW,
    Sections,
    chunk_text,
    estimate_pieces,
    file_sections,
    piece_counter,
)
from hostd.chunking._chunk import _merge_small, _Span
from hostd.chunking._items import code_outline
from hostd.protocol import address_line_range, sha256_digest
from providers import Corpus, CorpusOptions, chunk_file, split_lines
from providers._cli import (
    FILES_CHUNKS,
    SEMANTIC_CHUNKS,
    ChunkBound,
    corpus_arguments,
    corpus_options,
)
from providers._corpus_cache import corpus_key

from ._stdio import StdioPeer

REPO = Path(__file__).resolve().parents[2]


def _pieces(text: str) -> int:
    return piece_counter()([text])[0]


@pytest.mark.slow
@pytest.mark.parametrize("limit", [None, MODEL_WINDOW], ids=["default", "window"])
def test_every_chunk_of_this_repository_fits_its_piece_budget(limit: int | None) -> None:
    extra: dict[str, Any] = {} if limit is None else {"chunk_tokens": limit}
    opts = CorpusOptions(root=REPO, include=("/docs/", "/hostd/", "/providers/"), **extra)
    corpus = Corpus(opts)
    corpus.refresh()
    assert corpus.chunks
    budget = MODEL_TRAINED_LENGTH if limit is None else limit
    for c in corpus.chunks:
        # The embedding input is the title line and the text; [CLS] and [SEP] take two.
        fits = _pieces(f"{c.index_title}\n{c.text}") + 2 <= budget
        assert fits or c.start == c.end, c.chunk_id  # only a single over-long line may not


@pytest.mark.parametrize(
    ("provider", "value"),
    [
        ("semantic", "300"),  # past what its model reads
        ("semantic", "31"),
        ("files", "1025"),  # past a small part of a prompt
        ("files", "31"),
        ("files", "many"),
    ],
)
def test_a_chunk_budget_past_the_providers_bound_is_refused(provider: str, value: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", f"providers.{provider}", "--root", str(REPO)]
        + ["--chunk-tokens", value],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2
    assert "--chunk-tokens" in run.stderr


@pytest.mark.anyio
async def test_files_cuts_chunks_past_the_models_window_when_asked(tmp_path: Path) -> None:
    """``files`` embeds nothing: its bound is its own, not the model's window, so a
    function of about 600 word pieces is one chunk at ``--chunk-tokens 1024``."""
    body = "".join(f"    total = total + weight_{i} * factor_{i}  # step {i}\n" for i in range(40))
    (tmp_path / "calc.py").write_text(f"def weighted_total(total):\n{body}    return total\n")
    assert _pieces((tmp_path / "calc.py").read_text()) > MODEL_WINDOW
    args = ["-m", "providers.files", "--root", str(tmp_path), "--no-cache"]
    args += ["--chunk-tokens", "1024", "--window-lines", "100"]
    async with StdioPeer(args) as peer:
        await peer.handshake()
        result = await peer.call(
            "context/query",
            {"query": {"goal": "weighted total", "max_frames": 5, "max_tokens": 5000}},
        )
    assert [f["citation_label"] for f in result["frames"]] == ["calc.py L1-42"]


def test_a_long_dense_file_is_cut_by_word_pieces_not_lines() -> None:
    # 20 lines of ~40 pieces each: a 40-line window would hold 800 pieces.
    line = "alpha_beta(gamma, delta) -> epsilon; " * 5 + "\n"
    data = (line * 20).encode()
    chunks = chunk_file(Path("/r/dense.py"), "dense.py", data, 40)
    assert len(chunks) > 1
    for c in chunks:
        assert _pieces(f"{c.title}\n{c.text}") + 2 <= MODEL_WINDOW
    assert [(c.start, c.end) for c in chunks] == sorted((c.start, c.end) for c in chunks)
    assert chunks[0].start == 1 and chunks[-1].end == 20


def test_tiny_sections_merge_into_their_neighbours() -> None:
    text = "".join(f"## Part {i}\n\nShort note {i}.\n\n" for i in range(12))
    data = text.encode()
    kept_apart = chunk_file(Path("/r/notes.md"), "notes.md", data, 40, min_tokens=0)
    merged = chunk_file(Path("/r/notes.md"), "notes.md", data, 40)
    assert len(kept_apart) == 12
    assert len(merged) < len(kept_apart)
    assert merged[0].heading == "Part 0"
    assert all(c.end - c.start + 1 <= 40 for c in merged)


@given(
    st.text(alphabet=st.sampled_from("ab _(#\n`é"), max_size=600),
    st.integers(1, 9),
    st.integers(8, 80),
    st.integers(0, 40),
)
def test_chunks_cover_every_line_with_text_and_digest_their_range(
    text: str, window: int, max_tokens: int, min_tokens: int
) -> None:
    data = text.encode("utf-8")
    lines = split_lines(data)
    for name in ("x.md", "x.py", "x.rst"):
        chunks = chunk_file(
            Path("/r") / name, name, data, window, max_tokens=max_tokens, min_tokens=min_tokens
        )
        covered: set[int] = set()
        for c in chunks:
            addressed = address_line_range(data, c.range)
            assert c.text.encode("utf-8") == addressed and c.digest == sha256_digest(addressed)
            assert c.end - c.start + 1 <= window
            covered |= set(range(c.start, c.end + 1))
            assert lines[c.end - 1].strip()  # it ends at its last line of text
        # Nothing lost: every line that carries text is in exactly one chunk.
        assert {i for i, ln in enumerate(lines, 1) if ln.strip()} <= covered
        assert sum(c.end - c.start + 1 for c in chunks) == len(covered)


@given(
    st.text(alphabet=st.sampled_from("ab _(#\n`é"), max_size=600),
    st.sampled_from(["none", "markdown", "rst", "paragraphs"]),
    st.integers(1, 9),
    st.integers(0, 40),
)
def test_text_chunks_cover_every_line_whatever_the_sections(
    text: str, sections: Sections, window: int, min_tokens: int
) -> None:
    data = text.encode("utf-8")
    lines = split_lines(data)
    chunks = chunk_text(data, "tool", window, sections=sections, min_tokens=min_tokens)
    covered: set[int] = set()
    for c in chunks:
        addressed = address_line_range(data, c.range)
        assert c.text.encode("utf-8") == addressed and c.digest == sha256_digest(addressed)
        assert c.end - c.start + 1 <= window
        covered |= set(range(c.start, c.end + 1))
    assert {i for i, ln in enumerate(lines, 1) if ln.strip()} <= covered
    assert sum(c.end - c.start + 1 for c in chunks) == len(covered)


def test_a_chunk_ends_at_its_last_line_of_text_not_the_blank_lines_after_it() -> None:
    # A citation's range names no empty line, and the prompt quotes none: the blank
    # lines between sections and paragraphs belong to no chunk.
    md = "".join(f"## Part {i}\n\nA note about part {i} of it.\n\n\n" for i in range(6))
    prose = "".join(f"Paragraph {i} says one thing about the build.\n\n" for i in range(40))
    for name, text in (("notes.md", md), ("notes.rst", prose)):
        data = text.encode()
        lines = split_lines(data)
        chunks = chunk_file(Path("/r") / name, name, data, 8, min_tokens=0)
        assert len(chunks) > 1, name
        for c in chunks:
            assert lines[c.end - 1].strip(), (name, c.range)
            assert not c.text.endswith("\n\n"), (name, c.range)
            assert c.text.encode() == address_line_range(data, c.range)


def test_paragraph_sections_cut_records_apart() -> None:
    # A ``git log`` layout: one block per commit, blank-line apart; each block is big
    # enough to stand alone, so each commit is its own chunk, header with the first.
    blocks = [
        f"Commit: {i:040x}\nAuthor: Dev <dev@example.com>\nDate: 2025-01-0{i + 1}\n"
        f"Message: change {i} to the cache eviction order and its retry backoff\n"
        for i in range(4)
    ]
    data = ("Commit history:\n" + "\n".join(blocks)).encode()
    chunks = chunk_text(data, "git_log", sections="paragraphs", min_tokens=16)
    assert [c.text.count("Commit: ") for c in chunks] == [1, 1, 1, 1]
    assert chunks[0].text.startswith("Commit history:\nCommit: ")
    whole = chunk_text(data, "git_log", sections="none", min_tokens=16)
    assert len(whole) < len(chunks)  # without sections, windows span commits


def test_a_file_is_cut_as_chunk_file_cuts_it() -> None:
    data = "".join(f"## Part {i}\n\nA note about part {i} of it.\n\n" for i in range(30))
    raw = data.encode()
    by_file = chunk_file(Path("/r/notes.md"), "notes.md", raw)
    by_text = chunk_text(raw, "notes.md", sections=file_sections("notes.md"))
    assert [(c.start, c.end, c.digest) for c in by_file] == [
        (c.start, c.end, c.digest) for c in by_text
    ]


@given(st.text(max_size=200))
def test_the_estimate_is_one_piece_per_punctuation_and_per_started_four_characters(
    text: str,
) -> None:
    words = re.findall(r"\w+|[^\w\s]", text)
    assert estimate_pieces([text]) == [sum(1 + (len(w) - 1) // 4 for w in words)]


def test_the_estimate_counts_punctuation_and_long_words() -> None:
    assert estimate_pieces(["a, b"]) == [3]
    assert estimate_pieces(["abcdefghi"]) == [3]  # one piece per started four characters
    assert estimate_pieces([""]) == [0]


@given(
    st.text(alphabet=st.sampled_from('ab .,{}"\n\té'), max_size=3000),
    st.sampled_from(["none", "paragraphs", "records"]),
    st.integers(8, 80),
)
def test_split_long_lines_keeps_every_chunk_within_the_bound_and_every_byte(
    text: str, sections: Sections, max_tokens: int
) -> None:
    data = text.encode("utf-8")
    chunks = chunk_text(
        data,
        "tool",
        sections=sections,
        max_tokens=max_tokens,
        counter=estimate_pieces,
        split_long_lines=True,
    )
    # The bound counts the title (name and range) and the model's two special pieces.
    room = max_tokens - 2 - estimate_pieces([f"tool L{len(split_lines(data))}-"])[0]
    parts: dict[int, list[str]] = {}
    for c in chunks:
        assert estimate_pieces([c.text])[0] <= max(room, 1)
        assert c.digest == sha256_digest(c.text.encode("utf-8"))
        if c.start == c.end:
            parts.setdefault(c.start, []).append(c.text)
    lines = split_lines(data)
    for line, texts in parts.items():  # the parts of a line join back into it, in order
        assert "".join(texts) == lines[line - 1].decode("utf-8")


def test_a_long_line_is_cut_between_words_at_sentence_ends_and_a_files_never() -> None:
    prose = " ".join(f"Rotate key {i} before the deploy, then check the cache." for i in range(60))
    data = (prose + "\n").encode()
    whole = chunk_text(data, "tool", counter=estimate_pieces)
    assert [c.text for c in whole] == [prose + "\n"]  # a file's line: addressed whole
    parts = chunk_text(data, "tool", counter=estimate_pieces, split_long_lines=True)
    assert len(parts) > 1 and {c.range for c in parts} == {"L1-1"}
    assert "".join(c.text for c in parts) == prose + "\n"
    assert all(c.text.endswith("cache. ") for c in parts[:-1])  # whole sentences
    assert all(estimate_pieces([c.text])[0] <= MODEL_TRAINED_LENGTH for c in parts)


def test_a_long_line_is_cut_after_a_sentence_end_even_early_in_its_part() -> None:
    """A sentence longer than half a part: the part ends after the sentence before it,
    so the next starts that sentence, not the middle of it."""
    long = "the evictor walks " + " ".join(f"entry{i}" for i in range(70)) + " in order."
    prose = " ".join(f"Pool {i} drains. {long}" for i in range(4))
    data = (prose + "\n").encode()
    parts = chunk_text(data, "tool", counter=estimate_pieces, split_long_lines=True)
    assert "".join(c.text for c in parts) == prose + "\n"
    starts = [c.text for c in parts if c.text.startswith("the evictor walks")]
    assert len(starts) == 4, [c.text[:24] for c in parts]


def test_a_long_line_of_json_is_cut_after_whole_records() -> None:
    import json

    records = [
        {"id": i, "desc": f"Deploys roll one node at a time, shard {i}.", "tags": ["a", "b"]}
        for i in range(80)
    ]
    line = json.dumps(records, separators=(",", ":"))
    data = (line + "\n").encode()
    parts = chunk_text(data, "tool", counter=estimate_pieces, split_long_lines=True)
    assert len(parts) > 1 and "".join(c.text for c in parts) == line + "\n"
    # Every part but the last ends where a record does: none starts inside a string.
    assert all(c.text.endswith("]},") for c in parts[:-1]), [c.text[-12:] for c in parts]
    assert all(c.text.startswith(('[{"id":', '{"id":')) for c in parts)
    assert all(estimate_pieces([c.text])[0] <= MODEL_TRAINED_LENGTH for c in parts)


#: Methods whose bodies hold blank lines, where a window's cut used to fall.
PYTHON_RUN = """\
class Store:
    \"\"\"Keeps entries on disk.\"\"\"

    def __init__(self, path):
        self.path = path

        self.items = {}

    @property
    def size(self):
        total = len(self.items)

        return total

    # Reads one entry, or fails.
    def get(self, key):
        found = self.items.get(key)

        if found is None:
            raise KeyError(key)
        return found

    def put(self, key, value):
        self.items[key] = value

        self.flush()

    def flush(self):
        with open(self.path, "w") as out:

            out.write(repr(self.items))
"""

GO_RUN = """\
package store

// Store keeps entries on disk.
type Store struct {
\tpath  string

\titems map[string]string
}

// Size counts the entries.
func (s *Store) Size() int {
\ttotal := len(s.items)

\treturn total
}

// Get reads one entry, or fails.
func (s *Store) Get(key string) (string, error) {
\tfound, ok := s.items[key]

\tif !ok {
\t\treturn "", ErrMissing
\t}
\treturn found, nil
}

// Put stores one entry and flushes.
func (s *Store) Put(key, value string) {
\ts.items[key] = value

\ts.flush()
}
"""


@pytest.mark.parametrize(
    ("name", "source", "window", "firsts"),
    [
        (
            "store.py",
            PYTHON_RUN,
            8,
            ["class Store:", "@property", "# Reads one entry, or fails.", "def put(", "def flush("],
        ),
        (
            "store.go",
            GO_RUN,
            10,
            ["package store", "// Size counts", "// Get reads", "// Put stores"],
        ),
    ],
    ids=["python", "go"],
)
def test_a_window_inside_a_run_of_definitions_ends_before_one(
    name: str, source: str, window: int, firsts: list[str]
) -> None:
    data = source.encode()
    suffix = Path(name).suffix
    cut = chunk_text(data, name, window, min_tokens=0, counter=estimate_pieces, code_suffix=suffix)
    # Each chunk starts where a definition does, its decorator or comment above included.
    assert all(c.text.lstrip().startswith(f) for c, f in zip(cut, firsts, strict=True)), [
        c.text.splitlines()[0] for c in cut
    ]
    outline = code_outline(suffix, split_lines(data))
    assert outline is not None
    assert {c.start for c in cut[1:]} <= set(outline.starts)
    # As text that is no code (a tool's answer), the same lines are cut inside bodies.
    as_text = chunk_text(data, name, window, min_tokens=0, counter=estimate_pieces)
    assert {c.start for c in as_text[1:]} - set(outline.starts)


def test_a_definitions_decorators_and_comments_start_it() -> None:
    source = (
        "import functools\n"
        "\n"
        "# Caches the answer.\n"
        "@functools.cache\n"
        "@register(\n"
        "    name='x',\n"
        ")\n"
        "def answer():\n"
        "    return 42\n"
        "x = [\n"
        "    1,\n"
        "]\n"
        "def bare():\n"
        "    pass\n"
    )
    outline = code_outline(".py", split_lines(source.encode()))
    assert outline is not None
    # ``bare`` starts at its own line, not above the list that ends at its indent; the
    # list, a value over several lines, is a definition of its own.
    assert outline.starts == (3, 10, 13)
    rust = "#[derive(Debug)]\n/// A unit.\npub struct Unit;\n\n// loose\n\nfn f() {}\n"
    found = code_outline(".rs", split_lines(rust.encode()))
    assert found is not None and found.starts == (1, 7)  # a blank line apart: not its
    assert code_outline(".rb", split_lines(b"def a\nend\n")) is None


def test_a_small_tail_is_not_glued_to_the_head_of_the_next_definition() -> None:
    small = DEFAULT_MIN_CHUNK_TOKENS - 1
    tail = [_Span(1, 10, None, 95, 100), _Span(11, 12, None, small, 100)]
    head = _Span(13, 20, None, 50, 100)  # a definition that goes on: not small
    joined = _merge_small([*tail, head], 40, DEFAULT_MIN_CHUNK_TOKENS)
    assert [(s.start, s.end) for s in joined] == [(1, 10), (11, 20)]
    kept = _merge_small([*tail, head], 40, DEFAULT_MIN_CHUNK_TOKENS, frozenset({1, 13}))
    assert [(s.start, s.end) for s in kept] == [(1, 10), (11, 12), (13, 20)]
    # A small definition still joins the tail before it, and a small definition (or the
    # text's start) the head after it.
    whole = _Span(13, 14, None, 10, 100)
    grown = _merge_small([*tail, whole], 40, DEFAULT_MIN_CHUNK_TOKENS, frozenset({1, 13}))
    assert [(s.start, s.end) for s in grown] == [(1, 10), (11, 14)]
    opened = [_Span(1, 2, None, small, 100), _Span(3, 9, None, 50, 100)]
    assert len(_merge_small(opened, 40, DEFAULT_MIN_CHUNK_TOKENS, frozenset({3}))) == 1
    defined = [_Span(4, 5, None, small, 100), _Span(6, 9, None, 50, 100)]
    assert len(_merge_small(defined, 40, DEFAULT_MIN_CHUNK_TOKENS, frozenset({4, 6}))) == 1


#: Lines code is made of: headers of several families, decorators, comments, bodies at
#: several indents, closing braces, blank lines.
_CODE_LINES = [
    "def f(a, b):",
    "    def inner():",
    "class K(Base):",
    "    @property",
    "@cache",
    "    # why",
    "// why",
    "/// docs",
    "#[derive(Debug)]",
    "fn run(x: u32) -> u32 {",
    "pub struct S {",
    "impl S {",
    "func (s *S) Get() int {",
    "type T struct {",
    "}",
    "    }",
    "",
    "",
    "    return a + b",
    "        x = [1, 2, 3]",
    "    let y = x * 2;",
    '    """doc"""',
    "    value = compute(alpha, beta, gamma, delta, epsilon) or fallback",
]


@given(
    st.lists(st.sampled_from(_CODE_LINES), max_size=120),
    st.sampled_from([".py", ".rs", ".go"]),
    st.integers(1, 30),
    st.integers(16, 128),
    st.integers(0, 60),
)
def test_code_cut_at_definitions_keeps_every_bound_and_byte(
    code: list[str], suffix: str, window: int, max_tokens: int, min_tokens: int
) -> None:
    data = "".join(f"{line}\n" for line in code).encode()
    name = f"src/x{suffix}"
    lines = split_lines(data)

    def cut() -> list[Any]:
        return chunk_file(
            Path("/r") / name,
            name,
            data,
            window,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
        )

    chunks = cut()
    assert chunks == cut()  # the same bytes cut the same
    covered: set[int] = set()
    for c in chunks:
        addressed = address_line_range(data, c.range)
        assert c.text.encode("utf-8") == addressed and c.digest == sha256_digest(addressed)
        assert c.end - c.start + 1 <= window
        fits = _pieces(f"{c.index_title}\n{c.text}") + 2 <= max_tokens
        assert fits or c.start == c.end, c.chunk_id
        assert not covered & set(range(c.start, c.end + 1))
        covered |= set(range(c.start, c.end + 1))
    assert {i for i, ln in enumerate(lines, 1) if ln.strip()} <= covered


#: A short Rust function whose doc comment fills most of a small bound (``regex-syntax``'s
#: ``is_meta_character``): a bound of 128 word pieces cuts it from its body.
_SMALL_RUST = (
    "pub fn escape(text: &str) -> String {\n"
    "    let mut quoted = String::new();\n"
    "    quoted\n"
    "}\n"
    "\n"
    "/// Returns true if the given character has significance in a regex.\n"
    "///\n"
    "/// These are the only characters that are allowed to be escaped, with one\n"
    "/// exception: an ASCII space character may be escaped when extended mode (with\n"
    "/// the `x` flag) is enabled. In particular, `is_meta_character(' ')` returns\n"
    "/// `false`.\n"
    "pub fn is_meta_character(c: char) -> bool {\n"
    "    match c {\n"
    "        '\\\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{'\n"
    "        | '}' | '^' | '$' | '#' | '&' | '-' | '~' => true,\n"
    "        _ => false,\n"
    "    }\n"
    "}\n"
    "\n"
    "/// Returns true if and only if the given character is a word character.\n"
    "pub fn is_word_character(c: char) -> bool {\n"
    "    c.is_alphanumeric() || c == '_'\n"
    "}\n"
)


def test_a_small_definition_whose_comment_fills_the_bound_is_one_chunk() -> None:
    data = _SMALL_RUST.encode()
    name = "src/lib.rs"

    def cut(definition_tokens: int | None) -> list[tuple[int, int]]:
        chunks = chunk_text(
            data,
            name,
            max_tokens=128,
            counter=estimate_pieces,
            code_suffix=".rs",
            definition_tokens=definition_tokens,
        )
        return [(c.start, c.end) for c in chunks]

    assert (6, 18) not in cut(None)  # the bound alone cuts it
    whole = cut(256)
    assert (6, 18) in whole  # its doc comment, header and body: one chunk
    assert whole == cut(256)  # the same text cuts the same
    # A bound it does not fit: cut as before.
    assert cut(200) == cut(None)


def test_a_definitions_end_is_its_closing_brace_or_the_line_before_what_follows() -> None:
    lines = split_lines(_SMALL_RUST.encode())
    outline = code_outline(".rs", lines)
    assert outline is not None
    assert [outline.end(lines, s, 40) for s in outline.starts] == [4, 18, 23]
    assert outline.end(lines, 6, 12) is None  # it does not end within 12 lines
    nested = "impl S {\n    fn a(&self)\n        -> u8\n    {\n        1\n    }\n}\n"
    rust = split_lines(nested.encode())
    found = code_outline(".rs", rust)
    assert found is not None and [found.end(rust, s, 40) for s in found.starts] == [7, 6]
    python = "@cache\ndef f(\n    a: int,\n) -> int:\n    return a\n\nx = f(1)\n"
    py = split_lines(python.encode())
    outlined = code_outline(".py", py)
    assert outlined is not None and [outlined.end(py, s, 40) for s in outlined.starts] == [5]


def test_a_whole_definition_bound_is_off_unless_asked_and_semantics_stays_in_its_window() -> None:
    def options(chunks: ChunkBound, *argv: str) -> CorpusOptions:
        parser = argparse.ArgumentParser()
        corpus_arguments(parser, chunks)
        return corpus_options(parser.parse_args(["--root", str(REPO), *argv]))

    assert options(FILES_CHUNKS).definition_tokens is None
    assert options(FILES_CHUNKS, "--definition-tokens", "512").definition_tokens == 512
    # Other chunks: another cache, never the old cuts.
    off, on = options(FILES_CHUNKS), options(FILES_CHUNKS, "--definition-tokens", "256")
    assert corpus_key(Corpus(off)) != corpus_key(Corpus(on))
    assert options(SEMANTIC_CHUNKS, "--definition-tokens", "256").definition_tokens == 256
    # ``semantic`` embeds its chunks: never past what the model reads.
    with pytest.raises(SystemExit):
        options(SEMANTIC_CHUNKS, "--definition-tokens", str(MODEL_WINDOW + 1))
