"""The corpus walker never serves a file that holds credentials, and leaves lockfiles out
unless an ``--include`` glob names one: the rules themselves, then the real ``files``
provider as a child process (default, ``--include``, a cache written before the rules,
its stderr summary), and the ``semantic`` one, which walks with the same code."""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from providers._cli import corpus_arguments, corpus_options
from providers._corpus import (
    MAX_CHUNK_BYTES,
    SKIP_LOCKFILE,
    SKIP_LONG_LINE,
    SKIP_NOT_UTF8,
    SKIP_SECRET,
    SKIP_SECRET_CONTENT,
    SKIP_SECRET_DIR,
    SKIP_TOO_LARGE,
    Corpus,
    CorpusOptions,
    FileEntry,
    chunk_file,
    is_secret_name,
    skipped_summary,
)
from providers._corpus_cache import corpus_key
from providers.semantic import semantic_unavailable

from ._stdio import REPO, StdioPeer

#: Every file of the project says this word, so one query reaches all of them.
WORD = "zebracorn"
#: Text that appears only in files that must never be served.
SECRET_MARKS = ("sk-live-", "PRIVATE KEY", "lockfileVersion")


def _project(root: Path) -> Path:
    """A new user's JavaScript project with no .gitignore."""
    root.mkdir(parents=True, exist_ok=True)
    (root / ".env").write_text(f"# {WORD} settings\nAPI_TOKEN=sk-live-4f9a8b7c6d5e\n")
    (root / ".env.example").write_text(f"# {WORD} settings\nAPI_TOKEN=changeme\n")
    (root / "id_rsa").write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{WORD}b3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    (root / "id_rsa.pub").write_text(f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 {WORD}@laptop\n")
    (root / "config").mkdir()
    (root / "config" / "secrets.pem").write_text(
        f"-----BEGIN PRIVATE KEY-----\n{WORD}MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
        "-----END PRIVATE KEY-----\n"
    )
    (root / "package-lock.json").write_text(
        f'{{\n  "name": "{WORD}",\n  "lockfileVersion": 3,\n  "requires": true\n}}\n'
    )
    (root / "src").mkdir()
    (root / "src" / "app.ts").write_text(
        f"// {WORD}: rate limiting\nexport function limit(n: number): number {{\n"
        "  return Math.min(n, 10);\n}\n"
    )
    return root


SERVED_BY_DEFAULT = {".env.example", "id_rsa.pub", "src/app.ts"}
#: What the providers' ready line says the project's other files are.
NOT_INDEXED = (
    "; not indexed: 3 secret files (.env, config/secrets.pem, id_rsa), "
    "1 lockfile (package-lock.json)"
)


def _rels(corpus: Corpus) -> set[str]:
    corpus.refresh()
    return {c.rel for c in corpus.chunks}


# --- the rules -------------------------------------------------------------------------


def test_a_file_whose_bytes_hold_a_key_or_token_is_read_but_never_chunked(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "settings.py").write_text(f"# {WORD}\nAWS_KEY = 'AKIAABCDEFGHIJKLMNOP'\n")
    (root / "deploy.md").write_text(f"# {WORD}\nUse ghp_{'a' * 36} to push.\n")
    (root / "legacy.py").write_bytes(f"# {WORD}\nsaid = 'Don\x92t'\n".encode("latin-1"))
    (root / "ok.py").write_text(f"# {WORD}\nx = 1\n")
    corpus = Corpus(CorpusOptions(root=root))
    assert _rels(corpus) == {"ok.py"}
    assert corpus.skipped == {SKIP_SECRET_CONTENT: 2, SKIP_NOT_UTF8: 1}
    assert skipped_summary(corpus.skipped) == "2 files holding a key or token, 1 file not UTF-8"
    # Counted again on the next walk, though nothing is read again.
    assert _rels(corpus) == {"ok.py"} and corpus.skipped[SKIP_SECRET_CONTENT] == 2
    # A cache written by a version that chunked such a file does not bring it back.
    old = Corpus(CorpusOptions(root=root))
    leaked = chunk_file(root / "settings.py", "settings.py", (root / "settings.py").read_bytes())
    old.adopt({"settings.py": (1, 1, leaked, None)})
    assert old.chunks == []


def _real_keys() -> dict[str, str]:
    """Private keys as tools write them: freshly generated, each in its own format."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    enc = serialization.Encoding.PEM
    traditional = serialization.PrivateFormat.TraditionalOpenSSL
    pkcs8 = serialization.PrivateFormat.PKCS8
    plain = serialization.NoEncryption()
    locked = serialization.BestAvailableEncryption(b"hunter2")
    pem_rsa = rsa_key.private_bytes(enc, traditional, plain).decode()
    # An armored PGP secret key: a Version header, a blank line, 64-column base64.
    armored = base64.b64encode(os.urandom(600)).decode()
    pgp = "\n".join(
        [
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
            "Version: GnuPG v2",
            "",
            *(armored[i : i + 64] for i in range(0, len(armored), 64)),
            "=" + base64.b64encode(os.urandom(3)).decode(),
            "-----END PGP PRIVATE KEY BLOCK-----",
        ]
    )
    return {
        "rsa.txt": pem_rsa,
        "ec.txt": ec_key.private_bytes(enc, traditional, plain).decode(),
        "pkcs8.txt": rsa_key.private_bytes(enc, pkcs8, plain).decode(),
        "pkcs8_locked.txt": rsa_key.private_bytes(enc, pkcs8, locked).decode(),
        "rsa_locked.txt": rsa_key.private_bytes(enc, traditional, locked).decode(),
        "openssh.txt": ed25519.Ed25519PrivateKey.generate()
        .private_bytes(enc, serialization.PrivateFormat.OpenSSH, plain)
        .decode(),
        "pgp.txt": pgp,
        # A service account's JSON key: its newlines escaped inside a string.
        "service.json": orjson.dumps({"private_key": pem_rsa}).decode(),
        # A key pasted into code, a quoted string a line.
        "fixture.py": "KEY = (\n"
        + "".join(f'    "{line}\\n"\n' for line in pem_rsa.splitlines())
        + ")\n",
    }


def test_a_private_key_in_any_format_keeps_its_file_out(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    keys = _real_keys()
    assert "Proc-Type: 4,ENCRYPTED" in keys["rsa_locked.txt"]  # the headers are there
    for name, key in keys.items():
        (root / name).write_text(f"{WORD} notes\n\n{key}\n")
    (root / "ok.md").write_text(f"# {WORD}\n")
    corpus = Corpus(CorpusOptions(root=root))
    assert _rels(corpus) == {"ok.md"}
    assert corpus.skipped == {SKIP_SECRET_CONTENT: len(keys)}


def test_a_key_header_of_long_lines_without_a_body_is_scanned_in_one_pass(
    tmp_path: Path,
) -> None:
    """Header-shaped lines ending in spaces, then no body: a scan that tried every split
    of those spaces would not end (the per-test timeout is the hang guard)."""
    root = tmp_path / "p"
    root.mkdir()
    headers = "".join(f"Note-{i}: see below{' ' * 40}\n" for i in range(8))
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{headers}{' ' * 40}\n(elided)\n"
    (root / "howto.md").write_text(f"# {WORD}\n\n{block * 20}")
    assert _rels(Corpus(CorpusOptions(root=root))) == {"howto.md"}


def test_a_cached_key_whose_begin_line_ends_a_chunk_is_dropped(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    head, body = f"# {WORD}\n-----BEGIN PRIVATE KEY-----\n", _real_keys()["pkcs8.txt"]
    body = body.partition("\n")[2]
    (root / "notes.md").write_text(head + body)
    corpus = Corpus(CorpusOptions(root=root))
    # Cached by a version that chunked it, the BEGIN line in one chunk, the body in another.
    split = chunk_file(root / "h", "notes.md", head.encode()) + chunk_file(
        root / "b", "notes.md", body.encode()
    )
    corpus.adopt({"notes.md": (1, 1, split, None)})
    assert corpus.chunks == []


@pytest.mark.parametrize(
    "example",
    [
        # npm's docs/content/using-npm/config.md: an ini value, newlines escaped.
        'key="-----BEGIN PRIVATE KEY-----\\nXXXX\\nXXXX\\n-----END PRIVATE KEY-----"',
        "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n<your key here>\n-----END OPENSSH PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\nXXXX\nXXXX\n-----END PRIVATE KEY-----",
        "Paste the block that starts `-----BEGIN PRIVATE KEY-----` into the form.",
    ],
)
def test_a_placeholder_key_in_a_tool_s_docs_is_indexed(tmp_path: Path, example: str) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "config.md").write_text(f"# {WORD}\n\nA client key, for example:\n\n{example}\n")
    corpus = Corpus(CorpusOptions(root=root))
    assert _rels(corpus) == {"config.md"}
    assert corpus.skipped == {}


def test_a_line_too_long_to_quote_is_left_out_and_the_rest_of_its_file_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    (root / "dist").mkdir(parents=True)
    (root / "dist" / "app.bundle.js").write_text(f"var {WORD}=1;" + "a=1;" * 100_000 + "\n")
    blob = "word " * (MAX_CHUNK_BYTES // 5 + 1)  # one line, many word pieces
    (root / "data.md").write_text(f"# {WORD} data\n\nKept.\n\n{blob}\n\n# After\n\nKept too.\n")
    corpus = Corpus(CorpusOptions(root=root))
    corpus.refresh()
    assert all(len(c.text) <= MAX_CHUNK_BYTES for c in corpus.chunks)
    assert {c.rel for c in corpus.chunks} == {"data.md"}
    assert "Kept too." in "".join(c.text for c in corpus.chunks)
    assert corpus.skipped == {SKIP_LONG_LINE: 2}
    assert (
        skipped_summary(corpus.skipped)
        == "2 files with a line too long to quote (minified, or data?)"
    )


def test_git_s_own_excludes_are_honoured_as_gitignore_is(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("scratch/\n")
    (root / "scratch").mkdir()
    (root / "scratch" / "notes.txt").write_text(f"{WORD} private notes\n")
    (root / "kept.md").write_text(f"{WORD} kept\n")
    assert _rels(Corpus(CorpusOptions(root=root))) == {"kept.md"}
    assert "scratch/notes.txt" in _rels(Corpus(CorpusOptions(root=root, honour_gitignore=False)))


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        ".env.local",
        ".env.production",
        ".env.development.local",
        "id_rsa",
        "id_ed25519",
        "server.key",
        "CERT.PEM",
        "ca.srl",
        "bundle.p12",
        "store.pfx",
        "release.keystore",
        "app.jks",
        ".npmrc",
        ".pypirc",
        ".netrc",
        ".git-credentials",
        ".htpasswd",
        "credentials.json",
        "terraform.tfstate",
        "terraform.tfstate.backup",
        "prod.tfvars",
        "team-search.token",  # docs/remote.md's token_file example
        "secrets.yaml",
        "config/secrets.yml",
        "prod.env",
        ".s3cfg",
        "kubeconfig",
        "credentials",
    ],
)
def test_a_credential_file_is_named_secret(name: str) -> None:
    assert is_secret_name(name.rpartition("/")[2])


@pytest.mark.parametrize(
    "name",
    [
        ".env.example",
        ".env.sample",
        ".env.template",
        ".env.dist",
        ".env.local.example",
        ".envrc",
        "id_rsa.pub",
        "id_ed25519.pub",
        "env.py",
        "keys.py",
        "credentials.py",
        "package-lock.json",
        "README.md",
    ],
)
def test_a_template_public_key_or_source_file_is_not_named_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_the_walk_leaves_out_secrets_and_lockfiles_and_counts_each_reason(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p")
    (root / ".aws").mkdir()
    (root / ".aws" / "credentials").write_text(f"[default]\n{WORD} = AKIA0000\n")
    (root / "big.txt").write_text(f"{WORD}\n" * 100)
    corpus = Corpus(CorpusOptions(root=root, max_file_bytes=500))
    assert _rels(corpus) == SERVED_BY_DEFAULT
    assert corpus.skipped == {
        SKIP_SECRET: 3,  # .env, id_rsa, config/secrets.pem
        SKIP_SECRET_DIR: 1,  # .aws
        SKIP_LOCKFILE: 1,
        SKIP_TOO_LARGE: 1,
    }
    assert skipped_summary(corpus.skipped) == (
        "3 secret files, 1 secret directory, 1 lockfile, 1 file over --max-file-bytes"
    )


def test_a_ca_s_serial_file_is_left_out_and_named_with_its_key_files(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "tls").mkdir(parents=True)
    (root / "tls" / "README.md").write_text(f"{WORD}: how the CA signs the server cert\n")
    (root / "tls" / "ca.key").write_text(f"{WORD} key\n")
    (root / "tls" / "ca.pem").write_text(f"{WORD} certificate\n")
    (root / "tls" / "ca.srl").write_text("3B1F0C9E2D7A44E1A0C5F1B2D3E4F5A6B7C8D9E0\n")
    corpus = Corpus(CorpusOptions(root=root))
    assert _rels(corpus) == {"tls/README.md"}
    assert corpus.skipped == {SKIP_SECRET: 3}
    assert skipped_summary(corpus.skipped, corpus.skipped_paths) == (
        "3 secret files (tls/ca.key, tls/ca.pem, tls/ca.srl)"
    )


def test_neither_no_gitignore_nor_a_negated_gitignore_line_brings_a_secret_back(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p")
    (root / ".gitignore").write_text("!.env\n!id_rsa\n")
    for honour in (True, False):
        corpus = Corpus(CorpusOptions(root=root, honour_gitignore=honour))
        rels = _rels(corpus)
        assert not rels & {".env", "id_rsa", "config/secrets.pem"}, honour
        assert ".env.example" in rels


def test_only_an_include_glob_that_names_a_lockfile_brings_it_back(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "web").mkdir()
    (root / "web" / "yarn.lock").write_text(f"# {WORD}\nleft-pad@^1.3.0:\n")
    (root / "web" / "index.ts").write_text(f"// {WORD}\n")
    named = {
        ("package-lock.json",): {"package-lock.json"},
        ("/package-lock.json", "src/"): {"package-lock.json", "src/app.ts"},
        ("*.lock",): {"web/yarn.lock"},
        ("**/yarn.lock", "*.ts"): {"web/yarn.lock", "web/index.ts", "src/app.ts"},
        ("*.json",): {"package-lock.json"},
    }
    for globs, want in named.items():
        assert _rels(Corpus(CorpusOptions(root=root, include=globs))) == want, globs
    # A glob that matches everything in a directory does not name the lockfile in it.
    for globs in (("web/",), ("web/**",), ("*",), ("**",)):
        rels = _rels(Corpus(CorpusOptions(root=root, include=globs)))
        assert not rels & {"package-lock.json", "web/yarn.lock"}, globs
        assert "web/index.ts" in rels, globs
    # What the user's own globs leave out is not counted as the rules' doing.
    only_web = Corpus(CorpusOptions(root=root, include=("web/",)))
    only_web.refresh()
    assert only_web.skipped == {SKIP_LOCKFILE: 1}


def test_an_adopted_cache_entry_for_a_secret_is_dropped_and_marks_the_corpus_modified(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p")
    state: dict[str, FileEntry] = {}
    for rel in (".env", "src/app.ts"):
        path = root / rel
        st = path.stat()
        state[rel] = (st.st_mtime_ns, st.st_size, chunk_file(path, rel, path.read_bytes()), None)
    corpus = Corpus(CorpusOptions(root=root))
    corpus.adopt(state)
    assert {c.rel for c in corpus.chunks} == {"src/app.ts"}  # before any walk
    assert corpus.modified
    clean = Corpus(CorpusOptions(root=root))
    clean.adopt({"src/app.ts": state["src/app.ts"]})
    assert not clean.modified


# --- the files provider, a real child process -------------------------------------------


class _Peer(StdioPeer):
    """A ``StdioPeer`` that also reads the provider's stderr."""

    async def __aenter__(self) -> _Peer:
        self.proc = await anyio.open_process(
            self.args, cwd=REPO, env=self.env, stderr=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        self._reader = BufferedByteReceiveStream(self.proc.stdout)
        return self

    async def stderr_line(self, prefix: bytes) -> str:
        """The first stderr line starting with ``prefix`` (the child writes it before it
        says ready, and stderr is line-buffered)."""
        assert self.proc is not None and self.proc.stderr is not None
        err = BufferedByteReceiveStream(self.proc.stderr)
        with anyio.fail_after(30):  # a hang guard
            while True:
                line = await err.receive_until(b"\n", 1 << 20)
                if line.startswith(prefix):
                    return line.decode()


async def _served(peer: StdioPeer, goal: str) -> dict[str, str]:
    """``{file: content}`` of every frame a query for ``goal`` gets."""
    result = await peer.call(
        "context/query", {"query": {"goal": goal, "max_frames": 50, "max_tokens": 100_000}}
    )
    out: dict[str, str] = {}
    for frame in result["frames"]:
        rel = frame["citation_label"].rsplit(" ", 1)[0]
        out[rel] = out.get(rel, "") + frame["content"]
    return out


def _files_args(root: Path, *extra: str) -> list[str]:
    return ["-m", "providers.files", "--root", str(root), "--no-cache", *extra]


def _no_secret_in(served: dict[str, str]) -> None:
    for rel, content in served.items():
        for mark in SECRET_MARKS:
            assert mark not in content, (rel, mark)


@pytest.mark.anyio
async def test_the_files_provider_serves_no_secret_and_no_lockfile_and_says_so(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    async with _Peer(_files_args(root), env) as peer:
        await peer.handshake()
        served = await _served(peer, WORD)
        assert set(served) == SERVED_BY_DEFAULT
        _no_secret_in(served)
        asked = await _served(peer, "API_TOKEN sk live private key lockfileVersion")
        assert set(asked) <= SERVED_BY_DEFAULT
        _no_secret_in(asked)
        line = await peer.stderr_line(b"providers.files:")
        assert " chunks from 3 of 7 files under " in line, line
        assert line.rstrip().endswith(NOT_INDEXED), line


@pytest.mark.anyio
async def test_an_include_naming_a_lockfile_brings_it_back_and_a_wildcard_does_not(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    async with _Peer(
        _files_args(root, "--include", "package-lock.json", "--include", "src/"), env
    ) as peer:
        await peer.handshake()
        served = await _served(peer, WORD)
        assert set(served) == {"package-lock.json", "src/app.ts"}
        assert "lockfileVersion" in served["package-lock.json"]
    async with _Peer(_files_args(root, "--include", "*"), env) as peer:
        await peer.handshake()
        assert set(await _served(peer, WORD)) == SERVED_BY_DEFAULT


@pytest.mark.anyio
async def test_an_include_naming_a_secret_file_does_not_bring_it_back(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    globs = ["--include", ".env", "--include", "id_rsa", "--include", "*.pem", "--include", "src/"]
    async with _Peer(_files_args(root, *globs), env) as peer:
        await peer.handshake()
        served = await _served(peer, WORD)
        assert set(served) == {"src/app.ts"}
        _no_secret_in(served)


def _key_for(root: Path) -> str:
    """The cache key the provider computes for ``--root root`` and default options."""
    parser = argparse.ArgumentParser()
    corpus_arguments(parser)
    return corpus_key(Corpus(corpus_options(parser.parse_args(["--root", str(root)]))))


def _cache_before_the_rules(root: Path, path: Path, rels: list[str]) -> None:
    """The cache a version without the rules wrote: ``.env`` included, with the figures it
    has on disk now, so nothing tells the provider to re-read it."""
    files: dict[str, Any] = {}
    for rel in rels:
        file = root / rel
        st = file.stat()
        rows = [
            [c.start, c.end, c.text, c.digest, c.heading, c.kind]
            for c in chunk_file(file, rel, file.read_bytes())
        ]
        files[rel] = [st.st_mtime_ns, st.st_size, rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps({"version": 1, "root": str(root.resolve()), "files": files}))


@pytest.mark.anyio
async def test_a_cache_written_before_the_rules_never_serves_its_secret_and_is_rewritten(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    (root / "src").mkdir(parents=True)
    (root / ".env").write_text(f"# {WORD}\nAPI_TOKEN=sk-live-4f9a8b7c6d5e\n")
    (root / "src" / "app.ts").write_text(f"// {WORD}: rate limiting\n")
    cache_dir = tmp_path / "cache"
    cache_file = cache_dir / f"{_key_for(root)}.json"
    _cache_before_the_rules(root, cache_file, [".env", "src/app.ts"])
    assert b"sk-live-" in cache_file.read_bytes()

    args = ["-m", "providers.files", "--root", str(root), "--cache", str(cache_dir)]
    async with _Peer(args, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}) as peer:
        await peer.handshake()
        line = await peer.stderr_line(b"providers.files:")
        # The cache was adopted (nothing re-read), and still .env is not served.
        assert "(from cache), 0 read" in line, line
        served = await _served(peer, f"{WORD} API_TOKEN sk live")
        assert set(served) == {"src/app.ts"}
        _no_secret_in(served)
    # Written again without it: the secret no longer sits in the cache directory.
    body = cache_file.read_bytes()
    assert set(orjson.loads(body)["files"]) == {"src/app.ts"}
    assert b"sk-live-" not in body


# --- the semantic provider shares the walker ---------------------------------------------


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(semantic_unavailable() is not None, reason="semantic extra not installed")
async def test_the_semantic_provider_serves_no_secret_not_even_from_its_cache(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p")
    vectors = tmp_path / "sem" / "vectors.db"
    chunks = vectors.parent / f"corpus-{_key_for(root)}.json"  # beside it, as it keeps them
    # Every file it serves is cached too, so nothing is read: the cache must be written
    # again because .env was dropped, not because something changed.
    _cache_before_the_rules(root, chunks, [".env", *sorted(SERVED_BY_DEFAULT)])
    # --min-score -1: every chunk it holds is a hit, so a secret it held would show.
    args = ["-m", "providers.semantic", "--root", str(root), "--cache", str(vectors)]
    async with _Peer([*args, "--min-score", "-1"]) as peer:
        await peer.handshake()
        line = await peer.stderr_line(b"providers.semantic:")
        assert " chunks from 3 of 7 files (" in line, line
        assert line.rstrip().endswith(NOT_INDEXED), line
        served = await _served(peer, "API token for the rate limiter")
        assert set(served) == SERVED_BY_DEFAULT
        _no_secret_in(served)
    body = chunks.read_bytes()
    assert ".env" not in orjson.loads(body)["files"]
    assert b"sk-live-" not in body
