"""A directory tree as a set of text chunks: walking, ignoring, refreshing, verifying.

Shared by the ``files`` (lexical) and ``semantic`` (embedding) providers. It
owns which files are read (``.gitignore`` at every level, include/exclude
globs, no binaries, no huge files, never a file that holds credentials, no
lockfile or generated file unless an include glob names it (nor an HTML or man page
rendered from a doc it reads), no tagged cache or hostd state directory,
no ``vendor/``, package metadata or SVG picture unless ``.hostdignore`` brings it
back), what it tells a user about
the files left out, and the verdict on a held chunk (V3, V4);
how a file becomes chunks is ``_chunk``'s, one chunker for both providers (a Jupyter
notebook its cells' text, ``chunk_notebook``). It knows nothing about ranking or
about the wire.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from hostd._state_tag import STATE_TAG, STATE_TAG_SIGNATURE
from hostd.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_MIN_CHUNK_TOKENS,
    DEFAULT_WINDOW_LINES,
    DOC_SUFFIXES,
    NOTEBOOK_SUFFIX,
    Chunk,
    chunk_file,
    chunk_frame,
    chunk_notebook,
    is_binary,
    parse_chunk_id,
    range_text,
    read_notebook,
    split_lines,
)
from hostd.protocol import (
    MAX_READY_MESSAGE,
    FrameIdentity,
    FrameVerdict,
    VerdictStatus,
    sha256_digest,
)
from hostd.provider import verify_file, verify_file_range

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MIN_CHUNK_TOKENS",
    "DEFAULT_WINDOW_LINES",
    "DOC_SUFFIXES",
    "IGNORE_FILE",
    "MAX_CHUNK_BYTES",
    "SKIP_BINARY",
    "SKIP_GENERATED",
    "SKIP_GENERATED_DIR",
    "SKIP_LOCKFILE",
    "SKIP_LONG_LINE",
    "SKIP_NOTEBOOK",
    "SKIP_NOT_UTF8",
    "SKIP_RENDERED",
    "SKIP_SECRET",
    "SKIP_SECRET_CONTENT",
    "SKIP_SECRET_DIR",
    "SKIP_TOO_LARGE",
    "Chunk",
    "Corpus",
    "CorpusOptions",
    "FileEntry",
    "chunk_file",
    "chunk_frame",
    "chunks_figure",
    "empty_note",
    "files_figure",
    "is_generated",
    "is_rendering",
    "is_secret_name",
    "largest_parts",
    "not_indexed",
    "report_build",
    "parse_chunk_id",
    "skipped_summary",
    "split_lines",
    "verify_chunk",
]

DEFAULT_MAX_FILE_BYTES = 1 << 20
#: A notebook is read up to this many times ``max_file_bytes``, and held to the limit by
#: its cells' text: its outputs, never indexed, are most of its size (a few plots
#: saved as base64 take megabytes), so its file size says little of what it would add.
NOTEBOOK_READ_FACTOR = 16
# Never indexed, whatever the ignore files say: VCS internals, tool caches, and what
# tools install: virtualenvs (tox's and nox's hold one per environment, as .venv is
# one), node_modules, and setuptools' .eggs/ (the build dependencies it downloaded).
_ALWAYS_SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        ".tox",
        ".nox",
        "node_modules",
        ".eggs",
        ".mypy_cache",
        ".ruff_cache",
    }
)
# Never entered, whatever the ignore files say or the directory is called: one that holds
# a tag file of this name beginning with these bytes. ``CACHEDIR.TAG`` is the cache
# directory tagging convention (https://bford.info/cachedir/: its first 43 bytes are this
# signature; Cargo's target/, pytest's and mypy's caches carry one); the other is hostd's
# own state directory (``hostd._state_tag``), which a user may keep inside the project.
_DIR_TAGS = {
    "CACHEDIR.TAG": b"Signature: 8a477f597d28d172789f06886806bc55",
    STATE_TAG: STATE_TAG_SIGNATURE,
}
# Entered, then left out whole and said (``SKIP_GENERATED_DIR``): a docs build, whose
# pages, verbatim source copies (Sphinx's ``_sources/*.md.txt``) and search index repeat
# the project's docs. Sphinx writes ``.buildinfo`` at the root of every HTML build.
_BUILD_TAGS = {".buildinfo": b"# Sphinx build info version"}
#: hostd's own ignore file (``.gitignore`` syntax, at any level): read by both bundled
#: providers whatever ``--no-gitignore`` says; it can also bring back (``!path``) what
#: a ``.gitignore`` keeps out, never what the built-in rules refuse.
IGNORE_FILE = ".hostdignore"

# Ignored as if every root ``.hostdignore`` began with these lines, so a ``!vendor/``
# line there brings them back, and counted as the built-in rules are (``SKIP_DEFAULT``,
# ``SKIP_DEFAULT_DIR``): third-party copies (Go's, Composer's, Bundler's vendor/), which
# are not the project's code and crowd it out of a ranking; a Python package's metadata
# that setuptools and pip write (``*.egg-info/``, ``*.dist-info/``: an sdist ships one),
# whose ``SOURCES.txt`` lists every file's name and so matches every goal that names
# one, and the ``PKG-INFO`` at an sdist's root (that metadata again, with a copy of the
# README, so a goal about the README was answered twice); SVG pictures, whose XML is
# path data, no evidence a model can use, their suffix in any case (``LOGO.SVG``, as a
# Windows-made tree names it). Not ``build/``: many projects keep their build scripts
# and packaging there (Chromium's, the Go project layout's), and a build's output is in
# the ``.gitignore`` already. The root ``.hostdignore`` is also read as beginning with
# ``IGNORE_FILE`` (not counted: the user wrote them): the ignore files themselves are
# hostd's settings (as ``hostd init`` keeps ``hostd.toml`` out), no evidence about the
# project, and a goal that shares a word with a directory they name would otherwise be
# answered with the line that hides it.
_DEFAULT_IGNORES = (
    "vendor/",
    "*.egg-info/",
    "*.dist-info/",
    "/PKG-INFO",
    "*." + "".join(f"[{c.lower()}{c.upper()}]" for c in "svg"),
)
_DEFAULT_SPEC = pathspec.GitIgnoreSpec.from_lines(_DEFAULT_IGNORES)

# Never indexed, whatever the ignore files, --include or --no-gitignore say: files that
# hold credentials by convention, so a project with no (or a thin) .gitignore never sends
# one to a model. Drawn from what filename-based secret scanners flag (gitrob, shhgit)
# and what GitHub's gitignore templates keep out of repositories (Node: .env and
# .env.*.local; Terraform: *.tfstate, *.tfvars "likely to contain sensitive data"). Kept
# short: each name is a credential store by design, not merely a place one might be.
# Matched on the file's own name, case-insensitively. There is no opt-out flag: no search
# needs a private key or a token in a model's prompt, and one sent cannot be taken back.
_SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg"})
_SECRET_NAMES = frozenset(
    {
        ".env",  # dotenv; its variants below
        ".git-credentials",  # git's credential store: tokens in clear
        ".htpasswd",
        ".netrc",  # machine/login/password lines (curl, git, pip)
        "_netrc",  # .netrc's Windows name
        ".npmrc",  # npm's _authToken
        ".pgpass",  # PostgreSQL passwords in clear
        ".pypirc",  # PyPI upload tokens
        "credentials.json",  # Google OAuth client / service-account downloads
        "id_dsa",  # SSH private keys (their .pub is public and stays)
        "id_ecdsa",
        "id_ecdsa_sk",
        "id_ed25519",
        "id_ed25519_sk",
        "id_rsa",
        "secrets.yaml",  # by name a store of secrets (Rails, Helm values, CI)
        "secrets.yml",
        "secrets.json",
        "secrets.toml",
        ".s3cfg",  # s3cmd's access key and secret in clear
        ".boto",  # boto's
        ".dockercfg",  # registry auth
        ".dockerconfigjson",
        "kubeconfig",  # a cluster's client keys and tokens
        "credentials",  # the AWS CLI's shared credentials file, outside .aws/ too
    }
)
_SECRET_SUFFIXES = (
    ".pem",  # PEM private keys (public certificates too: a price worth paying)
    ".key",
    # OpenSSL's CA serial number file, written beside ``ca.key``: no secret, but no
    # evidence either, only a hex number that a goal about TLS would be answered with.
    ".srl",
    ".p8",  # PKCS#8 keys (Apple's AuthKey_*.p8)
    ".ppk",  # PuTTY private keys
    ".p12",  # PKCS#12 bundles, key included
    ".pfx",
    ".jks",  # Java keystores
    ".keystore",
    ".tfstate",  # Terraform state holds every resource's secrets in clear
    ".tfstate.backup",
    ".tfvars",
    ".tfvars.json",
    ".env",  # prod.env, docker.env: dotenv files by another name
    ".token",  # a bearer token kept in a file (a [[provider]] token_file, say)
)
# ``.env.<name>`` is a secret unless its last part says it is the committed template.
_ENV_TEMPLATES = frozenset({"example", "sample", "template", "dist"})

# Skipped unless an --include glob names them: machine-written dependency pins, large
# and keyword-dense, so they crowd real code out of a lexical ranking.
_LOCKFILES = frozenset(
    {
        ".terraform.lock.hcl",
        "Cargo.lock",
        "Gemfile.lock",
        "Package.resolved",
        "Pipfile.lock",
        "Podfile.lock",
        "bun.lock",
        "bun.lockb",
        "composer.lock",
        "deno.lock",
        "flake.lock",
        "go.sum",
        "go.work.sum",
        "gradle.lockfile",
        "mix.lock",
        "npm-shrinkwrap.json",
        "package-lock.json",
        "packages.lock.json",
        "pdm.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "pubspec.lock",
        "uv.lock",
        "yarn.lock",
    }
)
# Skipped unless an --include glob names them: files a tool writes, not a person (the
# names their generators give them), which repeat the source they were made from (or a
# schema) and crowd it out of a ranking, and whose text is not where a change is made.
_GENERATED_SUFFIXES = (
    ".min.js",  # minified bundles
    ".min.css",
    ".js.map",  # source maps
    ".css.map",
    "_pb2.py",  # protocol buffers (protoc)
    "_pb2.pyi",
    "_pb2_grpc.py",
    ".pb.go",
    ".pb.cc",
    ".pb.h",
    ".g.dart",  # Dart's build_runner
    ".freezed.dart",
    ".designer.cs",  # Visual Studio designers
)
# Or a comment in their first lines says so: Go's "Code generated … DO NOT EDIT.", the
# "@generated" tag (Meta's tools, Cargo, Relay, many more), "generated … do not edit" in
# any case. Only a comment (or docstring) line counts: prose that tells people not to
# edit generated files is not such a file.
_COMMENT_LEADERS = (b"//", b"#", b"/*", b"*", b"--", b";", b"<!--", b'"""', b"'''", b"%", b"(*")
_GENERATED_HEAD = re.compile(
    rb"@generated\b|\bgenerated\b[^\n]*\bdo not edit\b|\bdo not edit\b[^\n]*\bgenerated\b",
    re.IGNORECASE,
)
#: Lines at the top of a file where a generated marker counts (a header, not a mention).
_GENERATED_HEAD_LINES = 5
# A man page's converter says so in a roff comment (``.\"``) at its top, in its own
# words: "Automatically generated by Pandoc" or "by Pod::Man", "generated by help2man",
# "Man page generated from reStructuredText", "Generator: DocBook XSL Stylesheets" or
# "Asciidoctor". Nobody writing roff by hand calls their page generated.
_ROFF_COMMENT = (b'.\\"', b"'\\\"")
_ROFF_GENERATED = re.compile(rb"\bgenerat(?:ed|or)\b", re.IGNORECASE)
# An HTML page a site or docs generator wrote names it in its head (Sphinx's Docutils,
# MkDocs, pdoc, Hugo, Jekyll, Doxygen, javadoc, pandoc all do): ``<meta name="generator"``.
_HTML_SUFFIXES = (".html", ".htm", ".xhtml")
_GENERATOR_META = re.compile(rb"<meta\b[^>]*?\bname\s*=\s*[\"']?generator\b", re.IGNORECASE)
# A copy rendered from a document the project holds: an HTML page or a man page whose
# name is a doc source's (``docs/output/npm-access.html`` and ``man/man1/npm-access.1``
# beside ``docs/content/npm-access.md``) and whose text repeats it. It says that text
# again in another format, so a goal about it would be answered two or three times over.
# A page named as every site names its entry pages is one only when its folder is the
# source's too (a web app's ``public/index.html`` is its own code, not a rendering of
# ``docs/index.md``).
_DOC_SOURCES = frozenset({*DOC_SUFFIXES, ".ronn", ".pod", ".scd", ".asciidoc", ".org"})
_MAN_PAGE = re.compile(r"(?P<stem>.+)\.[1-9][a-z]{0,8}")
_ENTRY_PAGES = frozenset({"index", "default", "home", "main", "app", "404", "500"})
# A name is not enough: Django's ``admin/base.html`` is a template, not a rendering of
# ``docs/ref/class-based-views/base.txt``. A page that holds a template's own tags,
# unrendered (Django's, Jinja's and Liquid's ``{% %}``, ``{{ }}``, ``{# #}``; ERB's, EJS's
# and JSP's ``<% %>``; PHP's ``<?php``), is what a site is rendered from: the project's
# source. A rendering holds one only where its doc quotes it (npm's ``npmrc.md`` shows
# ``"{{ version }}"``, and so do its HTML and man pages), so only a tag the doc lacks counts.
_TEMPLATE_TAGS = (b"{%", b"{{", b"{#", b"<%", b"<?php")
# A rendering repeats its doc's text, so the doc's most telling words are in it: of the
# 16 longest words (three letters or more, in any case) in the doc's first 4 KiB, at
# least half are in the page's text. npm's HTML and man pages hold 81-100% of theirs; a
# page that only shares a doc's name holds few. A few words of the doc's head, looked for
# in the page's bytes, keep the check cheap; a page is judged again only when it or its
# doc changed (``Corpus._judged``).
_RENDERED_WORDS = 16
_RENDERED_SHARE = 0.5
_DOC_HEAD = 4096
_WORD = re.compile(r"[^\W\d_]{3,}")

#: A sibling name no glob that names a lockfile would match (``Corpus._names``).
_PROBE_NAME = "_"

# One to three line ends inside a key block: real ones, or ones escaped in a string (a
# JSON key file, an ini value), with the indentation and string punctuation a key
# pasted into code has around its lines (``"...\n"`` then ``"MIIE..."``). Atomic, as
# the header values below are possessive: a file of long blank or header lines never
# makes the scan try every split of their spaces (it would take minutes, not a pass).
_KEY_BREAK = rb"(?>(?:[ \t\"'`+,]*(?:\r?\n|(?:\\r)?\\n)){1,3}[ \t\"'`+,]*)"
# A private key block with its body: the BEGIN line, optional header lines
# (``Proc-Type:``/``DEK-Info:`` of an encrypted PEM, ``Version:``/``Comment:`` of a PGP
# block) and a blank line, then a base64 run at least 40 long (a real key's lines are
# 64 characters, 70 for OpenSSH). A placeholder (``XXXX``, ``...``, ``<your key>``),
# as a tool's docs show one, has no such run and is indexed.
_PRIVATE_KEY = (
    rb"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----"
    rb"(?:"
    + _KEY_BREAK
    + rb"[A-Za-z][A-Za-z0-9-]*+:[^\r\n\\]*+){0,8}"
    + _KEY_BREAK
    + rb"[A-Za-z0-9+/=]{40}"
)
# A file whose bytes hold a credential that says what it is (whatever its name): a
# private key block, a cloud provider's key id, a service's token by its published
# prefix. Read, then never chunked; counted apart (``SKIP_SECRET_CONTENT``).
_SECRET_CONTENT = re.compile(
    _PRIVATE_KEY + rb"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key ids
    rb"|\bgh[pousr]_[A-Za-z0-9]{36}\b"  # GitHub tokens
    rb"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    rb"|\b[sr]k_live_[A-Za-z0-9]{20,}"  # Stripe live keys
)

#: Why a path was left out, as ``Corpus.skipped`` counts it.
SKIP_SECRET = "secret"
SKIP_SECRET_CONTENT = "secret_content"
#: A NUL byte in its first 8 KiB (``hostd.chunking.is_binary``), UTF-8 or not.
SKIP_BINARY = "binary"
SKIP_NOT_UTF8 = "not_utf8"
SKIP_LONG_LINE = "long_line"
#: A chunk larger than this is dropped (its file counted as ``SKIP_LONG_LINE``): one
#: line this long (a minified bundle, a data blob) is a chunk of its own, as lines are
#: never split, and costs more than a default budget (4,096 canonical tokens) holds.
MAX_CHUNK_BYTES = 16 * 1024
SKIP_SECRET_DIR = "secret_dir"
SKIP_LOCKFILE = "lockfile"
SKIP_GENERATED = "generated"
#: A ``.ipynb`` whose cells cannot be read (not JSON, not nbformat 4 or 3, two cells on one
#: line: ``hostd.chunking.read_notebook``). Its JSON is not indexed as text instead: a
#: chunk of it quotes escaped strings and base64 outputs, no evidence a model can use.
SKIP_NOTEBOOK = "notebook"
#: A directory a docs generator wrote (``_BUILD_TAGS``), counted once, unread.
SKIP_GENERATED_DIR = "generated_dir"
#: Left out by the lines every root ``.hostdignore`` is read as beginning with
#: (``_DEFAULT_IGNORES``) and by no ignore file or glob of the user's: a file
#: (``PKG-INFO``, ``logo.svg``), or a directory, unread (``vendor/``, ``*.egg-info/``).
SKIP_DEFAULT = "default"
SKIP_DEFAULT_DIR = "default_dir"
#: The reasons that name a directory, whose files are not read (nor counted as seen).
_DIRECTORIES = frozenset({SKIP_SECRET_DIR, SKIP_GENERATED_DIR, SKIP_DEFAULT_DIR})
#: An HTML or man page rendered from a doc the index holds (``_renderings``).
SKIP_RENDERED = "rendered"
SKIP_TOO_LARGE = "too_large"


def _git_excludes(root: Path) -> list[list[str]]:
    """The lines of ``root/.git/info/exclude`` and of git's global excludes file
    (``$XDG_CONFIG_HOME/git/ignore``, else ``~/.config/git/ignore``: git's default for
    ``core.excludesFile``), each that exists."""
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    found = []
    for path in (root / ".git" / "info" / "exclude", Path(config_home) / "git" / "ignore"):
        try:
            found.append(path.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            continue
    return found


def is_secret_name(name: str) -> bool:
    """Whether a file of this name holds credentials by convention (never indexed)."""
    lower = name.lower()
    if lower in _SECRET_NAMES or lower.endswith(_SECRET_SUFFIXES):
        return True
    return lower.startswith(".env.") and lower.rsplit(".", 1)[1] not in _ENV_TEMPLATES


#: Paths named per reason in a summary (``skipped_summary``), and the longest one shown.
_NAMED_PATHS = 3
_MAX_SHOWN_PATH = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _shown(rel: str) -> str:
    """A path as one line can hold it: controls and undecodable bytes (``os.fsdecode``'s
    surrogates, which no UTF-8 wire carries) as ``?``, a long one cut in its middle."""
    rel = _CONTROL.sub("?", rel)
    if len(rel) <= _MAX_SHOWN_PATH:
        return rel
    half = (_MAX_SHOWN_PATH - 1) // 2
    return f"{rel[:half]}…{rel[-half:]}"


def _named(paths: Sequence[str]) -> str:
    """``" (a.py, b.py, c.py and 2 more)"``: the first few of a reason's paths."""
    if not paths:
        return ""
    shown = ", ".join(_shown(p) for p in paths[:_NAMED_PATHS])
    more = len(paths) - _NAMED_PATHS
    return f" ({shown} and {more} more)" if more > 0 else f" ({shown})"


def skipped_summary(
    skipped: Mapping[str, int], paths: Mapping[str, Sequence[str]] | None = None
) -> str:
    """``"2 secret files, 1 lockfile"`` for a log line; ``""`` when nothing was skipped.
    With ``paths`` (``Corpus.skipped_paths``), each reason names its first few:
    ``"2 secret files (.env, id_rsa)"``."""
    return ", ".join(text for _n, text in _skipped_items(skipped, paths))


def _skipped_items(
    skipped: Mapping[str, int], paths: Mapping[str, Sequence[str]] | None
) -> list[tuple[int, str]]:
    """``skipped_summary``'s items: each reason's count and its words."""
    labels = {
        SKIP_SECRET: ("secret file", "secret files"),
        SKIP_SECRET_DIR: ("secret directory", "secret directories"),
        SKIP_SECRET_CONTENT: ("file holding a key or token", "files holding a key or token"),
        SKIP_BINARY: ("binary file", "binary files"),
        SKIP_NOT_UTF8: ("file not UTF-8", "files not UTF-8"),
        SKIP_LONG_LINE: (
            "file with a line too long to quote (minified, or data?)",
            "files with a line too long to quote (minified, or data?)",
        ),
        SKIP_NOTEBOOK: (
            "notebook not readable as nbformat 4 or 3 cells",
            "notebooks not readable as nbformat 4 or 3 cells",
        ),
        SKIP_LOCKFILE: ("lockfile", "lockfiles"),
        SKIP_GENERATED: ("generated file", "generated files"),
        SKIP_GENERATED_DIR: ("docs build (Sphinx)", "docs builds (Sphinx)"),
        SKIP_RENDERED: (
            "page rendered from a doc that is indexed",
            "pages rendered from docs that are indexed",
        ),
        SKIP_TOO_LARGE: ("file over --max-file-bytes", "files over --max-file-bytes"),
        SKIP_DEFAULT: ("file skipped by default", "files skipped by default"),
        SKIP_DEFAULT_DIR: ("directory skipped by default", "directories skipped by default"),
    }
    items = []
    for reason, (one, many) in labels.items():
        n = skipped.get(reason, 0)
        if n:
            named = _named(paths.get(reason, ())) if paths is not None else ""
            items.append((n, f"{n} {one if n == 1 else many}{named}"))
    return items


def not_indexed(corpus: Corpus, room: int | None = None) -> str:
    """For a ready message: ``"; not indexed: 1 binary file (logo.bin)"``, or ``""``.
    ``room``: the most characters it may take (what a ready message, ``MAX_READY_MESSAGE``,
    leaves after the rest): a reason that does not fit is left out whole, and the files
    of those left out counted (``…and 12 more files``), so no path is cut mid-name."""
    items = _skipped_items(corpus.skipped, corpus.skipped_paths)
    if not items:
        return ""
    for kept in range(len(items), 0, -1):
        said = "; not indexed: " + ", ".join(text for _n, text in items[:kept])
        rest = sum(n for n, _text in items[kept:])
        if rest:
            said += f", …and {rest} more {_files(rest)}"
        if room is None or len(said) <= room:
            return said
    total = sum(n for n, _text in items)  # not even one reason fits: how many, no names
    return f"; not indexed: {total} {_files(total)}"


def _files(n: int) -> str:
    return "file" if n == 1 else "files"


def chunks_figure(count: int) -> str:
    """For a ready message: ``"412 chunks"``, ``"1 chunk"``."""
    return f"{count} chunk" if count == 1 else f"{count} chunks"


def files_figure(corpus: Corpus) -> str:
    """For a ready message: ``"8 of 11 files"`` (indexed of seen), or ``"11 files"`` when
    every file seen was indexed."""
    indexed, seen = corpus.file_count, corpus.seen_count
    return (
        f"{indexed} of {seen} {_files(seen)}" if seen != indexed else f"{indexed} {_files(indexed)}"
    )


#: A ready message names the largest parts of an index of at least this many chunks
#: (``largest_parts``): a small tree's parts are seen at a glance, a large one's are not.
_PARTS_FROM_CHUNKS = 1000
_PARTS_NAMED = 3
#: A file that holds at least 1/this of a large index is named (``largest_parts``).
_LARGEST_FILE_SHARE = 10
#: How deep the parts named go (``largest_parts``): a directory holding most of the
#: index is looked into a few levels down at most.
_PARTS_MAX_DEPTH = 4


def largest_parts(corpus: Corpus) -> str:
    """For a ready message: ``"; most chunks: packages/ 62%, playground/ 21%, docs/ 14%"``,
    the directories (or files) that hold most of a large index (``_parts``), largest
    first (ties by name), so a user sees at once what it is made of: tests, fixtures,
    locale tables or a changelog that crowd a ranking are one ``.hostdignore`` line
    away. A single file that holds a tenth of it or more is named too (``; largest
    file: tests/fixtures/cases.json 40%``): one data file can fill every prompt, and a
    directory's share does not say which file it is. ``""`` for an index under
    ``_PARTS_FROM_CHUNKS`` chunks. At most ``_PARTS_NAMED`` parts, each path cut to
    ``_MAX_SHOWN_PATH``."""
    total = len(corpus.chunks)
    if total < _PARTS_FROM_CHUNKS:
        return ""
    files = Counter(c.rel for c in corpus.chunks)
    counts = _parts(files, total)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:_PARTS_NAMED]
    shares = (f"{_shown(part)} {_percent(n, total)}" for part, n in top)
    said = f"; most chunks: {', '.join(shares)}"
    rel, n = min(files.items(), key=lambda kv: (-kv[1], kv[0]))
    named = {part for part, _ in top}
    if n * _LARGEST_FILE_SHARE >= total and rel not in named:  # not said twice
        said += f"; largest file: {_shown(rel)} {_percent(n, total)}"
    return said


def _parts(files: Counter[str], total: int) -> Counter[str]:
    """The chunks of each part of the index: its top-level directories (and root
    files); while one directory holds more than half of them and its largest
    subdirectories (``_PARTS_NAMED`` of them) more than half of its own, that directory
    is replaced by its subdirectories and files, up to ``_PARTS_MAX_DEPTH`` levels.
    So a project with everything under ``src/`` is told by what is in it
    (``src/locales/ 38%, src/tests/ 21%``), while a ``packages/`` spread over many
    packages stays one part, its share whole."""
    counts: Counter[str] = Counter()
    for rel, n in files.items():
        counts[_part(rel, 1)] += n
    for depth in range(2, _PARTS_MAX_DEPTH + 1):
        part, held = max(counts.items(), key=lambda kv: kv[1])
        if not part.endswith("/") or 2 * held <= total:
            break
        inner: Counter[str] = Counter()
        for rel, n in files.items():
            if rel.startswith(part):
                inner[_part(rel, depth)] += n
        subdirs = sorted((n for p, n in inner.items() if p.endswith("/")), reverse=True)
        if 2 * sum(subdirs[:_PARTS_NAMED]) <= held:  # mostly its own files, or spread out
            break
        del counts[part]
        counts.update(inner)
    return counts


def _part(rel: str, depth: int) -> str:
    """``rel``'s directory ``depth`` levels down, with its ``/``; the file itself when it
    lies no deeper."""
    names = rel.split("/", depth)
    return rel if len(names) <= depth else "/".join(names[:depth]) + "/"


def _percent(n: int, total: int) -> str:
    share = round(100 * n / total)
    return f"{share}%" if share else "<1%"


def empty_note(corpus: Corpus) -> str:
    """For a ready message: ``""``, or, when no file was indexed, where it looked and
    what to check, so an index of nothing is not mistaken for a working one."""
    if corpus.file_count:
        return ""
    globs = " and the --include/--exclude globs" if corpus.options.include else ""
    return (
        f"; nothing to index under {corpus.root}: is that the project's directory? "
        f"(--root, the config's cwd{globs})"
    )


def report_build(provider: str, head: str, corpus: Corpus) -> str:
    """A build's summary: ``head`` (what the index holds), then what the built-in rules
    left out and, for an index of nothing, where it looked. Written whole to stderr as
    ``provider``'s line; returned as the ready message (``hostd status`` shows it), whose
    list of what was left out ends at a whole reason within ``MAX_READY_MESSAGE``."""
    empty = empty_note(corpus)
    print(f"{provider}: {head}{not_indexed(corpus)}{empty}", file=sys.stderr)
    room = MAX_READY_MESSAGE - len(head) - len(empty)
    return f"{head}{not_indexed(corpus, room)}{empty}"


@dataclass(slots=True, frozen=True)
class CorpusOptions:
    """What to read under ``root``. Globs use ``.gitignore`` syntax, relative to ``root``."""

    root: Path
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    window_lines: int = DEFAULT_WINDOW_LINES
    honour_gitignore: bool = True
    #: Word pieces a chunk's embedding input may take (``_chunk``): at most the model's
    #: window for ``semantic``, ``files``' own bound for it (``_cli.FILES_CHUNKS``).
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    #: Chunks under this many word pieces are merged with a neighbour (0: never).
    min_chunk_tokens: int = DEFAULT_MIN_CHUNK_TOKENS
    #: A definition of code that fits this many word pieces is one chunk (``chunk_text``);
    #: ``None`` or at most ``chunk_tokens``: cut as any run is.
    definition_tokens: int | None = None


@dataclass(slots=True)
class _Ignore:
    """One ``.gitignore`` and the directory (relative, POSIX, '' for root) it governs."""

    base: str
    spec: pathspec.GitIgnoreSpec
    #: The lines every root ``.hostdignore`` is read as beginning with (``_DEFAULT_SPEC``).
    implied: bool = False


def _by_default(rel: str, is_dir: bool, stack: Iterable[_Ignore]) -> bool:
    """Whether an ignored path is left out by the implied lines alone: the user's own
    ignore files would let it in (``SKIP_DEFAULT``)."""
    return not _ignored(rel, is_dir, [ig for ig in stack if not ig.implied])


def _ignored(rel: str, is_dir: bool, stack: Iterable[_Ignore]) -> bool:
    # Later (deeper) files override earlier ones, as git reads them.
    verdict = False
    for ig in stack:
        sub = rel[len(ig.base) + 1 :] if ig.base else rel
        if is_dir:
            sub += "/"
        result = ig.spec.check_file(sub)
        if result.include is not None:
            verdict = result.include
    return verdict


#: A file as a cache holds it (``Corpus.state``): ``(mtime_ns, size, chunks, refused)``.
FileEntry = tuple[int, int, list[Chunk], str | None]


@dataclass(slots=True)
class _FileState:
    mtime_ns: int
    size: int
    chunks: list[Chunk] = field(default_factory=list)
    #: Read, and left out for what it holds (``SKIP_SECRET_CONTENT``, ``SKIP_NOT_UTF8``).
    refused: str | None = None


class Corpus:
    """The chunks of every eligible file under ``options.root``, refreshed by mtime.

    ``refresh()`` re-walks the tree and re-reads only files whose ``(mtime_ns,
    size)`` changed (``mtime_ns``: the later of mtime and ctime, ``_stamp``); it
    returns whether anything changed so an index built on ``chunks`` knows when to
    rebuild.
    """

    def __init__(self, options: CorpusOptions) -> None:
        self.options = options
        self.root = options.root.resolve()
        self._include = (
            pathspec.GitIgnoreSpec.from_lines(options.include) if options.include else None
        )
        # Each include glob alone, to tell one that names a lockfile from one that only
        # matches everything in its directory (``_names``).
        self._include_each = [pathspec.GitIgnoreSpec.from_lines([g]) for g in options.include]
        self._exclude = pathspec.GitIgnoreSpec.from_lines(options.exclude)
        self._files: dict[str, _FileState] = {}
        self.chunks: list[Chunk] = []
        self._reads = 0
        #: What the last ``refresh`` changed: files it read, and those it dropped.
        self._last_read = 0
        self._last_gone = 0
        self._modified = False
        #: Each reason's paths, as the last walk and read left them out (``skipped``).
        self._skipped: dict[str, list[str]] = {}
        #: Each page whose name is a doc's, by the ``(rel, stamp, size)`` of it and of its
        #: docs when the last walk read them, and whether it is their rendering.
        self._judged: dict[str, tuple[tuple[tuple[str, int, int], ...], bool]] = {}

    def _names(self, rel: str) -> bool:
        """Whether an include glob names this file itself: it matches the file but not a
        sibling called ``_``, so ``package-lock.json`` or ``*.lock`` does, ``src/``, ``*``
        or ``**`` (which match everything in the file's directory) do not."""
        if self._include is None or not self._include.match_file(rel):
            return False
        head, _, _ = rel.rpartition("/")
        probe = f"{head}/{_PROBE_NAME}" if head else _PROBE_NAME
        return any(g.match_file(rel) and not g.match_file(probe) for g in self._include_each)

    def _refused(self, rel: str) -> str | None:
        """The built-in rule that keeps ``rel`` out (a ``SKIP_*`` reason), else ``None``."""
        *dirs, name = rel.split("/")
        if not _SECRET_DIRS.isdisjoint(dirs):
            return SKIP_SECRET_DIR
        if is_secret_name(name):
            return SKIP_SECRET
        if name in _LOCKFILES and not self._names(rel):
            return SKIP_LOCKFILE
        if name.lower().endswith(_GENERATED_SUFFIXES) and not self._names(rel):
            return SKIP_GENERATED
        return None

    def _refused_bytes(self, rel: str, data: bytes) -> str | None:
        """Why ``rel``'s bytes keep it out (``_refused_content``), or a generated header
        that no include glob naming the file overrides."""
        refused = _refused_content(data)
        if refused is None and self._generated(rel, data):
            return SKIP_GENERATED
        return refused

    def _generated(self, rel: str, head: bytes) -> bool:
        """Whether ``head`` (the file's first bytes) says a tool wrote ``rel`` (a header
        comment; an HTML page's ``<meta name="generator">``) and no include glob names
        the file."""
        said = is_generated(head) or (
            rel.lower().endswith(_HTML_SUFFIXES) and _GENERATOR_META.search(head[:4096]) is not None
        )
        return said and not self._names(rel)

    def _chunks(self, rel: str, path: Path, data: bytes) -> tuple[list[Chunk], str | None]:
        """A file's chunks (``chunk_file``), and ``SKIP_NOTEBOOK`` for a notebook whose
        cells cannot be read, else ``None``."""
        opts = self.options
        # A notebook by ``chunk_notebook`` itself: ``chunk_file`` gives one it cannot read
        # no chunk, and the user is told why it is missing.
        notebook = path.suffix.lower() == NOTEBOOK_SUFFIX
        cut = chunk_notebook if notebook else chunk_file
        chunks = cut(
            path,
            rel,
            data,
            opts.window_lines,
            max_tokens=opts.chunk_tokens,
            min_tokens=opts.min_chunk_tokens,
            definition_tokens=opts.definition_tokens,
        )
        if chunks is None:
            return [], SKIP_NOTEBOOK
        if notebook and sum(len(c.text.encode()) for c in chunks) > opts.max_file_bytes:
            return [], SKIP_TOO_LARGE  # by its cells' text (``NOTEBOOK_READ_FACTOR``)
        return chunks, None

    def _walk(self) -> list[tuple[str, Path, os.stat_result]]:
        opts = self.options
        stack: list[_Ignore] = []
        # Only what the built-in rules and the size limit left out, so a user can learn
        # why a file is missing; what the user's own ignore files and globs drop is not.
        skipped: defaultdict[str, list[str]] = defaultdict(list)

        if opts.honour_gitignore:
            # What git also keeps out beside .gitignore: the repository's own
            # info/exclude and the user's global excludes file, both at the root.
            for extra in _git_excludes(self.root):
                stack.append(_Ignore("", pathspec.GitIgnoreSpec.from_lines(extra)))

        def visit(dir_path: Path, dir_rel: str) -> Iterator[tuple[str, Path, os.stat_result]]:
            try:
                entries = sorted(os.scandir(dir_path), key=lambda e: e.name)
            except OSError:
                entries = []
            if dir_rel and _tagged(entries):
                return  # a cache or hostd's state: never the project's (the root is, always)
            if dir_rel and _tagged(entries, _BUILD_TAGS):
                skipped[SKIP_GENERATED_DIR].append(f"{dir_rel}/")
                return  # a docs build: copies of the project's docs, said as such
            pushed = 0
            # .gitignore (unless told not to), then hostd's own .hostdignore, which
            # both bundled providers read: what only hostd should skip, said once.
            names = (".gitignore", IGNORE_FILE) if opts.honour_gitignore else (IGNORE_FILE,)
            for name in names:
                try:
                    text = (dir_path / name).read_text(encoding="utf-8", errors="replace")
                    lines = text.splitlines()
                except OSError:
                    lines = None
                if not dir_rel and name == IGNORE_FILE:  # after the root's .gitignore
                    stack.append(_Ignore("", _DEFAULT_SPEC, implied=True))
                    pushed += 1
                    lines = [IGNORE_FILE, *(lines or ())]  # settings: not counted
                if lines is None:
                    continue
                stack.append(_Ignore(dir_rel, pathspec.GitIgnoreSpec.from_lines(lines)))
                pushed += 1
            for entry in entries:
                rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
                try:
                    if entry.is_symlink():
                        continue  # a link may leave the root; never follow one
                    if entry.is_dir():
                        if entry.name in _ALWAYS_SKIP_DIRS:
                            continue
                        if self._exclude.match_file(rel + "/"):
                            continue
                        if _ignored(rel, True, stack):
                            if _by_default(rel, True, stack):
                                skipped[SKIP_DEFAULT_DIR].append(rel + "/")
                            continue
                        if entry.name in _SECRET_DIRS:
                            skipped[SKIP_SECRET_DIR].append(rel + "/")
                            continue
                        yield from visit(Path(entry.path), rel)
                        continue
                    if not entry.is_file() or self._exclude.match_file(rel):
                        continue
                    if self._include is not None and not self._include.match_file(rel):
                        continue
                    if _ignored(rel, False, stack):
                        if _by_default(rel, False, stack):
                            skipped[SKIP_DEFAULT].append(rel)
                        continue
                    refused = self._refused(rel)  # a secret whatever --include says
                    if refused is not None:
                        skipped[refused].append(rel)
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                if st.st_size > opts.max_file_bytes and not (
                    rel.lower().endswith(NOTEBOOK_SUFFIX)
                    and st.st_size <= opts.max_file_bytes * NOTEBOOK_READ_FACTOR
                ):
                    skipped[SKIP_TOO_LARGE].append(rel)
                    continue
                if st.st_size == 0:
                    continue
                yield rel, Path(entry.path), st
            del stack[len(stack) - pushed :]

        found = list(visit(self.root, ""))
        rendered = self._renderings(found)
        for rel in sorted(rendered):
            skipped[SKIP_RENDERED].append(rel)
        self._skipped = dict(skipped)
        return [f for f in found if f[0] not in rendered]

    def _renderings(self, found: Sequence[tuple[str, Path, os.stat_result]]) -> set[str]:
        """Those of the walk's files that are copies rendered from a doc source among them
        (``_DOC_SOURCES``) and that no include glob names: an HTML page or a man page of
        the source's name (an entry page's only in a folder of the source's name) whose
        text is that source's (``is_rendering``). Only a page the names match is read,
        and read again only when it or its sources changed (``_judged``)."""
        sources: defaultdict[str, list[tuple[str, Path, os.stat_result]]] = defaultdict(list)
        for f in found:
            base, dot, suffix = f[0].lower().rpartition(".")
            if dot and f".{suffix}" in _DOC_SOURCES:
                for name in _names_of(base):
                    sources[name].append(f)
        judged: dict[str, tuple[tuple[tuple[str, int, int], ...], bool]] = {}
        for rel, path, st in found:
            stem = _rendered_stem(rel.lower())
            if stem is None or self._names(rel):
                continue
            name, in_folder = _names_of(stem)
            docs = sources.get(in_folder if name in _ENTRY_PAGES else name)
            if not docs:
                continue
            figures = tuple((r, _stamp(s), s.st_size) for r, _, s in [(rel, path, st), *docs])
            old = self._judged.get(rel)
            if old is not None and old[0] == figures:
                judged[rel] = old
            else:
                judged[rel] = (figures, _renders_any(path, [p for _, p, _ in docs]))
        self._judged = judged
        return {rel for rel, (_, verdict) in judged.items() if verdict}

    def refresh(self, progress: Callable[[int, int], None] | None = None) -> bool:
        """Bring the chunks up to date with the disk; ``True`` when anything changed.

        ``progress(done, total)`` is told of every file read (the walk comes first then,
        so the total is known)."""
        seen: dict[str, _FileState] = {}
        changed = False
        reads = self._reads
        walk: Iterable[tuple[str, Path, os.stat_result]] = self._walk()
        total = 0
        if progress is not None:
            walk = list(walk)
            total = len(walk)
            progress(0, total)
        for n, (rel, path, st) in enumerate(walk, 1):
            if progress is not None and (n % 50 == 0 or n == total):
                progress(n, total)
            old = self._files.get(rel)
            stamp = _stamp(st)
            if old is not None and old.mtime_ns == stamp and old.size == st.st_size:
                seen[rel] = old
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            refused = self._refused_bytes(rel, data)
            chunks: list[Chunk] = []
            if refused is None:
                chunks, refused = self._chunks(rel, path, data)
            if refused is None and any(len(c.text) > MAX_CHUNK_BYTES for c in chunks):
                chunks = [c for c in chunks if len(c.text) <= MAX_CHUNK_BYTES]
                refused = SKIP_LONG_LINE  # the rest of the file is kept
            seen[rel] = _FileState(stamp, st.st_size, chunks, refused)
            self._reads += 1
            changed = True
        for rel, state in seen.items():
            if state.refused is not None:
                self._skipped.setdefault(state.refused, []).append(rel)
        gone = len(self._files.keys() - seen.keys())
        if gone or len(seen) != len(self._files):
            changed = True  # a file went, or a cached one the rules now refuse was dropped
        self._last_read, self._last_gone = self._reads - reads, gone
        if changed:
            self._files = seen
            self.chunks = [c for rel in sorted(seen) for c in seen[rel].chunks]
            self._modified = True
        return changed

    def to_read(self) -> tuple[int, int]:
        """Files a build would read and their bytes: the walk alone (names and sizes, no
        file opened), so a large tree is known in about a second, before hours of
        embedding it. A file left out later for its bytes (binary, a key in it) is
        counted."""
        walked = self._walk()
        return len(walked), sum(st.st_size for _rel, _path, st in walked)

    @property
    def file_count(self) -> int:
        """Files indexed: those with a chunk (a file left out for its bytes has none)."""
        return sum(1 for f in self._files.values() if f.chunks)

    @property
    def seen_count(self) -> int:
        """Files the last walk found that the user's ignore files and globs let in: those
        indexed and those a built-in rule or the size limit left out (``skipped``; a
        secret directory, a docs build or a directory skipped by default is not read, so
        its files are not counted). An
        empty file, or one of blank lines, holds nothing to index and is neither."""
        left_out = {
            rel
            for reason, rels in self._skipped.items()
            if reason not in _DIRECTORIES
            for rel in rels
        }
        return len(left_out | {rel for rel, f in self._files.items() if f.chunks})

    @property
    def reads(self) -> int:
        """Files read (chunked) since this corpus was made: 0 after a warm restart."""
        return self._reads

    @property
    def last_read(self) -> int:
        """Files the last ``refresh`` read: a rebuild's own figure, where ``reads`` counts
        every refresh since the start."""
        return self._last_read

    @property
    def last_changed(self) -> int:
        """Files the last ``refresh`` found changed: read (new or modified) or gone."""
        return self._last_read + self._last_gone

    @property
    def modified(self) -> bool:
        """Whether the chunks differ from what was adopted (or, with nothing adopted,
        whether a refresh found any): a cache written before is out of date."""
        return self._modified

    @property
    def skipped(self) -> Mapping[str, int]:
        """Paths the last walk left out by a built-in rule or the size limit, counted by
        reason (``SKIP_SECRET``, ``SKIP_SECRET_DIR``, ``SKIP_LOCKFILE``,
        ``SKIP_GENERATED``, ``SKIP_DEFAULT``, ``SKIP_DEFAULT_DIR``, ``SKIP_TOO_LARGE``;
        absent when 0), and the files read but
        left out for their bytes (``SKIP_SECRET_CONTENT``, ``SKIP_BINARY``,
        ``SKIP_NOT_UTF8``, ``SKIP_NOTEBOOK``, ``SKIP_GENERATED`` by its header;
        ``SKIP_LONG_LINE``, the rest of its file kept). A secret directory counts once,
        unread."""
        return {reason: len(rels) for reason, rels in self._skipped.items()}

    @property
    def skipped_paths(self) -> Mapping[str, tuple[str, ...]]:
        """``skipped``'s paths (relative to the root, a directory's with a trailing ``/``),
        sorted, so a summary names the same few on every walk of one tree."""
        return {reason: tuple(sorted(rels)) for reason, rels in self._skipped.items()}

    def state(self) -> dict[str, FileEntry]:
        """Every file's ``(mtime_ns, size, chunks, refused)``, for a cache
        (``_corpus_cache``): ``refused`` is why its bytes kept it (or the rest of it)
        out, ``None`` for a file indexed whole or one with nothing to index."""
        return {rel: (f.mtime_ns, f.size, f.chunks, f.refused) for rel, f in self._files.items()}

    def adopt(self, state: Mapping[str, FileEntry], *, judged: bool = False) -> None:
        """Take a cached state; the next ``refresh`` re-reads only files whose
        ``(mtime_ns, size)`` differ from it.

        A file the built-in rules refuse is dropped here, not served until the walk: a
        cache written by an older version may hold a ``.env``. Dropping one marks the
        corpus ``modified``, so the cache is written again without it. ``judged``: the
        chunks' bytes passed these very rules when they were read (the cache says so,
        ``_corpus_cache``), so they are not searched for keys and tokens again; the
        names still are."""
        # A file with no chunk is kept as the cache says (left out for its bytes, or
        # blank): it serves nothing, and reading it again would only say the same. One
        # whose chunks hold a key or token, or a line too long to quote, cached by a
        # version that did not look, is read again. Its chunks are searched as one text:
        # a key's BEGIN line may end one chunk and its body begin the next. That search
        # is most of an adoption's time (seconds at 100k chunks), hence ``judged``.
        kept = {
            rel: entry
            for rel, entry in state.items()
            if self._refused(rel) is None
            and (
                not entry[2]
                or judged
                or (
                    not self._generated(rel, entry[2][0].text.encode())
                    and not any(len(c.text) > MAX_CHUNK_BYTES for c in entry[2])
                    and not _SECRET_CONTENT.search("".join(c.text for c in entry[2]).encode())
                )
            )
        }
        self._files = {rel: _FileState(*entry) for rel, entry in kept.items()}
        self.chunks = [c for rel in sorted(self._files) for c in self._files[rel].chunks]
        self._modified = len(kept) != len(state)


def _names_of(stem: str) -> tuple[str, str]:
    """A path without its suffix as ``_renderings`` matches it: its last part alone, and
    with its folder's name (``"guide/index"``; ``"/index"`` at the root)."""
    head, _, name = stem.rpartition("/")
    return name, f"{head.rpartition('/')[2]}/{name}"


def _rendered_stem(rel: str) -> str | None:
    """``rel`` less its suffix when it is an HTML page or a man page (less its section:
    ``man/man1/npm-access.1`` → ``man/man1/npm-access``), else ``None``."""
    if rel.endswith(_HTML_SUFFIXES):
        return rel.rpartition(".")[0]
    folder, _, name = rel.rpartition("/")
    man = _MAN_PAGE.fullmatch(name)
    if man is None:
        return None
    return f"{folder}/{man['stem']}" if folder else man["stem"]


def _stamp(st: os.stat_result) -> int:
    """When a file last changed, as far as the walk can tell: the later of its mtime and
    its ctime. ``cp -p``, ``rsync -a``, ``tar x`` and ``touch -r`` put an old mtime
    back (so a change of the same size would pass for none), but the ctime is the
    kernel's: no user sets it."""
    return max(st.st_mtime_ns, st.st_ctime_ns)


def is_generated(data: bytes) -> bool:
    """Whether a comment in a file's first lines says a tool wrote it (``_GENERATED_HEAD``;
    a man page's roff comment, ``_ROFF_GENERATED``)."""
    lines = data[:4096].split(b"\n", _GENERATED_HEAD_LINES)[:_GENERATED_HEAD_LINES]
    for line in lines:
        line = line.lstrip()
        if line.startswith(_ROFF_COMMENT):
            if _ROFF_GENERATED.search(line) is not None:
                return True
        elif line.startswith(_COMMENT_LEADERS) and _GENERATED_HEAD.search(line) is not None:
            return True
    return False


def is_rendering(page: bytes, doc: bytes) -> bool:
    """Whether ``page``, an HTML or man page of ``doc``'s name, is ``doc`` rendered: it
    holds no template tag the doc does not (``_TEMPLATE_TAGS``), and most of the doc's
    longest words (``_RENDERED_SHARE``). A doc with no word has nothing to repeat."""
    if any(tag in page and tag not in doc for tag in _TEMPLATE_TAGS):
        return False
    head = set(_WORD.findall(doc[:_DOC_HEAD].decode("utf-8", errors="replace").lower()))
    words = sorted(head, key=lambda w: (-len(w), w))[:_RENDERED_WORDS]
    text = page.lower()
    found = sum(w.encode() in text for w in words)
    return bool(words) and found >= _RENDERED_SHARE * len(words)


def _renders_any(page: Path, docs: Sequence[Path]) -> bool:
    """Whether the page at ``page`` is a rendering of one of ``docs`` (``is_rendering``);
    a file that cannot be read is no evidence, and the page is kept."""
    try:
        data = page.read_bytes()
    except OSError:
        return False
    for doc in docs:
        try:
            if is_rendering(data, doc.read_bytes()):
                return True
        except OSError:
            continue
    return False


def _tagged(entries: Iterable[os.DirEntry[str]], tags: Mapping[str, bytes] = _DIR_TAGS) -> bool:
    """Whether a directory's entries hold a tag (``_DIR_TAGS``, or ``tags``): a regular
    file of that name whose first bytes are its signature."""
    for entry in entries:
        signature = tags.get(entry.name)
        if signature is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            with open(entry.path, "rb") as tag:
                if tag.read(len(signature)) == signature:
                    return True
        except OSError:
            continue
    return False


def _refused_content(data: bytes) -> str | None:
    """Why a file's bytes keep it out (a key or token in them; binary, or not UTF-8,
    which the chunker cannot address), or ``None``."""
    if _SECRET_CONTENT.search(data):
        return SKIP_SECRET_CONTENT
    if is_binary(data):
        return SKIP_BINARY
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return SKIP_NOT_UTF8
    return None


def verify_chunk(root: Path, identity: FrameIdentity) -> FrameVerdict:
    """Re-read the file a chunk id names and judge the held digest (V3, V4).

    ``gone`` when the file or the addressed lines no longer exist; ``stale``
    (with the current digest) when the bytes changed; ``valid`` only when the
    held digest equals the digest of the bytes on disk now; ``unknown`` when
    the identity carries no digest or is not one of ours. A notebook's chunk is
    judged by the cell text its lines hold now (``_verify_notebook``).
    """
    parsed = parse_chunk_id(identity.frame_id)
    if parsed is None or identity.content_digest is None:
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    rel, range_ = parsed
    root = root.resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        return FrameVerdict(frame=identity, status=VerdictStatus.UNKNOWN.value)
    if path.suffix.lower() == NOTEBOOK_SUFFIX:
        return _verify_notebook(identity, path, range_)
    return verify_file_range(identity, path, range_)


def _verify_notebook(identity: FrameIdentity, path: Path, range_: str) -> FrameVerdict:
    """``verify_chunk`` of a notebook's chunk: its digest is of the cell text its lines
    hold (``range_text``), not of the JSON lines themselves. ``gone`` when the file is
    no notebook now or those lines hold no cell's text."""

    def cell_text(data: bytes) -> str | None:
        notebook = read_notebook(data)
        found = range_text(notebook, range_) if notebook is not None else None
        return None if found is None else sha256_digest(found.encode("utf-8"))

    return verify_file(identity, path, cell_text)
