"""What a one-shot command says when it did not get what was asked: failed provider
legs, an empty prompt, no daemon behind ``--connect``.

Plain functions of a ``context/compose`` reply (the wire dict), so the CLI's
words and exit status follow the reply and nothing else.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from hostd._discovery import find_config
from hostd._hints import (
    NO_HANDSHAKE,
    budget_advice,
    dropped_frames,
    dropped_words,
    restarting_advice,
    restarting_failures,
    said_once,
    says_remote_handshake,
    shown_stderr_tail,
    stderr_tail_lines,
    warming_advice,
    warming_ids,
    warming_starts,
    warming_state,
)
from hostd._printable import printable
from hostd._root_advice import cited_path, covering_roots, roots_toml
from hostd.errors import ConfigError, NoDaemon, did_you_mean

if TYPE_CHECKING:  # the models load with the config a command reads, not with --help
    from hostd.config import Config

__all__ = [
    "NoDaemon",
    "config_hint",
    "dropped_frames",
    "frames_cap_note",
    "interpreter_advice",
    "leg_failures",
    "no_evidence",
    "policy_fallback",
    "unloaded_no_daemon",
    "unloaded_start",
    "warming_lines",
]


def config_hint(cfg: Config) -> str:
    """`` --config FILE`` when the config is not the one ``hostd serve`` run here finds
    itself (discovery, ``hostd._discovery``)."""
    return config_option(cfg.source)


def config_option(source: str) -> str:
    """`` --config FILE`` for the config file ``source`` (``config_hint``): none for the
    one ``hostd serve`` run here finds itself, or for a config built in code."""
    if source == "<defaults>" or source == str(find_config().path):
        return ""
    return f" --config {source}"


def unloaded_no_daemon(socket: Path | str, why: str | None, error: str) -> str:
    """No daemon at ``socket`` (``why``: the OS's words), read raw from a config that
    does not load (``error``): the file may mean another socket, and `hostd serve` would
    refuse it, so its error is what to fix, named."""
    return (
        f"no daemon at {socket} ({why or 'none answers'}): the daemon cannot be found "
        f"while the config has an error: {error}"
    )


def unloaded_start(socket: Path | str, why: str, error: ConfigError) -> str:
    """No daemon at ``socket``, named on the command line, with a config that does not
    load (``error``): a daemon is started from that file, once its error is fixed, so the
    line names the file and the error; never the embedded default the command fell back
    on to reach the socket, whose daemon would have no provider of the user's."""
    file = error.data.get("file")
    option = config_option(file) if isinstance(file, str) else ""
    return (
        f"no daemon at {socket} ({why}); start one with `hostd serve --socket {socket}"
        f"{option}` once the config loads; fix its error first: {error.message}"
    )


#: Python's words, quoted (an import) or not (``python -m``); the name never ends in ".".
_NO_MODULE = re.compile(r"No module named '?([A-Za-z_](?:[\w.]*\w)?)'?")


def interpreter_advice(cfg: Config, failed: dict[str, str]) -> list[str]:
    """A line per provider whose failure (``failed``: id -> its message) is a module its
    interpreter could not import, when that interpreter is hostd's own: a misspelt
    module of a package hostd's interpreter has (``providers.tickkets``) is named with
    the closest one there; otherwise, a command's ``python`` is hostd's interpreter, not
    the one a virtualenv put on ``PATH``, so a provider's own dependencies are not there
    (docs/config.md)."""
    ours = {p.id for p in cfg.provider if p.command and p.command[0] == sys.executable}
    lines = []
    for pid, message in failed.items():
        found = _NO_MODULE.search(message)
        if pid not in ours or found is None:
            continue
        misspelt = _misspelt(found.group(1))
        if misspelt is not None:
            lines.append(f"  {pid}: {misspelt}")
            continue
        lines.append(
            f"  {pid}: `python` in its command is hostd's own interpreter ({sys.executable}), "
            f"which cannot import {found.group(1)}: check the module's name, then name the "
            "provider's interpreter by its path (/path/to/venv/bin/python) or install the "
            "module beside hostd"
        )
    return lines


def _misspelt(module: str) -> str | None:
    """``no module providers.tickkets in providers (did you mean providers.tickets?)``
    when ``module``'s package imports here but has no such module, else None."""
    import importlib.util
    import pkgutil

    parent, _, name = module.rpartition(".")
    if not parent:
        return None
    try:
        spec = importlib.util.find_spec(parent)
    except (ImportError, ValueError):  # its own parent is missing too
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    known = sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations))
    close = did_you_mean(name, [k for k in known if not k.startswith("_")])
    hint = f"did you mean {parent}.{close}?" if close else f"it has {', '.join(known[:8])}"
    return f"there is no module {module} in {parent} ({hint}): check the name in its command"


def frames_cap_note(result: dict[str, Any], max_frames: int) -> str | None:
    """Why a prompt left budget unspent, when it is the per-provider frame cap: no frame
    was left out for the budget (``over_budget``) and a provider offered as many frames as
    it may (``max_frames``), so it may have had more. ``None`` otherwise."""
    entries = (result.get("audit") or {}).get("entries") or []
    if any(e.get("reason") == "over_budget" for e in entries):
        return None  # the budget was what bound it
    capped = [
        str(p.get("provider_id"))
        for p in result.get("providers") or []
        if p.get("status") == "ok" and (p.get("frames_offered") or 0) >= max_frames
    ]
    if not capped:
        return None
    audit = result.get("audit") or {}
    return (
        f"{audit.get('tokens_used')} of {audit.get('global_budget')} tokens used: "
        f"{', '.join(capped)} offered as many frames as a provider may ({max_frames}; "
        "--max-frames raises it)"
    )


#: Leg codes whose word its message leaves to the code (the engine says the code once:
#: ``not trusted (…)`` with code ``certificate``): a leg's line says it before the
#: message, as its health's ``last_failure`` does (``certificate: not trusted (…)``).
_CODE_SAID = frozenset({"certificate"})

#: What to fix, for each audit reason that drops a frame for what its provider sent
#: (``PROVIDER_FAULTS``; a test holds the two the same).
_PROVIDER_FAULTS = {
    "invalid_frame": "",  # the rules its frames broke say what (``violations``)
    "digest_mismatch": "content_digest is not the sha256 of the content (D4)",
    "source_mismatch": "a file provenance digest is not the sha256 of the cited lines as "
    "the file holds them (F5; `hostd check-provider` names the frame)",
    "untrusted_source": "the file is outside the trusted roots (host.untrusted)",
}

#: Trusted roots a line names at most (the rest are counted), and a path's characters.
_ROOTS_NAMED = 3
_PATH_CHARS = 120


def _short_path(path: str) -> str:
    """``path`` for a one-line message: ``~/…`` under the home directory, its middle
    cut when long (its end, the file's name, kept)."""
    path = printable(path)  # a provider's URI, decoded: no escape reaches the terminal
    home = str(Path.home())
    if path == home or path.startswith(home + "/"):
        path = "~" + path[len(home) :]
    if len(path) > _PATH_CHARS:
        keep = (_PATH_CHARS - 1) // 2
        path = path[:keep] + "…" + path[-keep:]
    return path


def _untrusted(
    result: dict[str, Any], pid: str, roots: Sequence[Path] | None, base: Path | None = None
) -> str:
    """Why ``pid``'s frames were dropped as ``untrusted_source``: the first file they
    cite and the trusted roots in force (``roots``; None when not known here, as for a
    provider this config does not have), so a root that covers nothing is seen; and a
    root that holds the files they cite, to add (``hostd._root_advice``: relative to the config's
    directory ``base`` when under it, else absolute)."""
    uris = [
        str((e.get("detail") or {}).get("uri") or "")
        for e in (result.get("audit") or {}).get("entries") or []
        if e.get("reason") == "untrusted_source"
        and (e.get("frame") or {}).get("provider_id") == pid
    ]
    uri = uris[0] if uris else ""
    parts = urlsplit(uri)
    cited = _short_path(unquote(parts.path)) if parts.scheme == "file" else "the file"
    if not roots:
        return f"{cited} is outside the trusted roots (host.untrusted)"
    named = ", ".join(_short_path(str(r)) for r in roots[:_ROOTS_NAMED])
    if len(roots) > _ROOTS_NAMED:
        named += f" and {len(roots) - _ROOTS_NAMED} more"
    paths = [path for uri in uris if (path := cited_path(uri)) is not None]
    add = (
        f"add {roots_toml(covering_roots(paths, base))[1:-1]} to its trusted_roots"
        if paths
        else "add a root that holds it to trusted_roots"
    )
    return (
        f"{cited} is outside its trusted roots ({named}): {add}, or set "
        'untrusted = "include" to keep such frames unverified'
    )


#: How many (rule, reason) groups a leg's line names, the frames' members each names,
#: and a reason's characters: a line stays short whatever a provider sent.
_GROUPS_SHOWN = 5
_FIELDS_SHOWN = 3
_REASON_CHARS = 60


def broken_rules(leg: dict[str, Any]) -> str:
    """The rules a leg's dropped frames broke, each with where and why in hostd's few
    words (``schema frames[0].title, frames[1].title: missing; F1 frames[2].score: …``),
    as check-provider says them, bounded; the reasons are hostd's own (``Violation``
    messages never quote what a provider sent)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for v in leg.get("violations") or []:
        if v.get("severity") != "error":
            continue
        reason = str(v.get("message") or "")
        if len(reason) > _REASON_CHARS:
            reason = reason[: _REASON_CHARS - 1] + "…"
        fields = groups.setdefault((str(v.get("rule")), reason), [])
        if v.get("field") not in fields:
            fields.append(str(v.get("field")))
    # The schema first (a frame of the wrong shape), then by rule id.
    ordered = sorted(groups.items(), key=lambda g: (g[0][0] != "schema", g[0][0]))
    parts = []
    for (rule, reason), fields in ordered[:_GROUPS_SHOWN]:
        where = ", ".join(fields[:_FIELDS_SHOWN])
        if len(fields) > _FIELDS_SHOWN:
            where += f", +{len(fields) - _FIELDS_SHOWN} more"
        parts.append(f"{rule} {where}" + (f": {reason}" if reason else ""))
    if len(ordered) > _GROUPS_SHOWN:
        parts.append(f"+{len(ordered) - _GROUPS_SHOWN} more")
    return "; ".join(parts)


def _dropped_line(
    result: dict[str, Any],
    p: dict[str, Any],
    reasons: dict[str, int],
    roots: Sequence[Path] | None,
    base: Path | None = None,
) -> str:
    """``ID: ok, but N frame(s) dropped: reason n (why), …`` (``dropped_words``, as
    ``hostd mcp``'s text names a leg that lost them all)."""
    why = dict(_PROVIDER_FAULTS)
    if "untrusted_source" in reasons:
        why["untrusted_source"] = _untrusted(result, str(p.get("provider_id")), roots, base)
    if "invalid_frame" in reasons:
        why["invalid_frame"] = broken_rules(p)
    return f"  {p.get('provider_id')}: ok, but {dropped_words(reasons, why)}"


def leg_failures(
    result: dict[str, Any],
    *,
    dropped: bool = True,
    roots: Mapping[str, Sequence[Path]] | None = None,
    base: Path | None = None,
) -> list[str]:
    """One line per provider leg that failed: its id, status and the error it gave (then
    what its process's stderr ended with, a line each, when it carries that, its lines
    then left out of the error's own excerpt: ``said_once``); per
    ``ok`` leg that gave nothing with a reason (its ``note``); and with ``dropped``, per
    ``ok`` leg whose frames were dropped for what it sent (an invalid frame, a wrong
    digest, …): how many, and why (``roots``: each provider's trusted roots, named when
    its sources were outside them, with one to add that holds them; ``base``: the
    config's directory, which such a root is written relative to when it holds it)."""
    lines = []
    faults = dropped_frames(result) if dropped else {}
    for p in result.get("providers") or []:
        status = p.get("status")
        if status == "ok" and p.get("note"):  # ok, but said: nothing fit, lost, an old index
            lines.append(f"  {p.get('provider_id')}: ok: {p['note']}")
        elif status == "ok" and str(p.get("provider_id")) in faults:
            pid = str(p.get("provider_id"))
            lines.append(_dropped_line(result, p, faults[pid], (roots or {}).get(pid), base))
        if status in ("ok", "skipped"):
            continue
        warming = warming_state(p)  # what it is doing, not the refusal it answered
        if warming is not None:
            lines.append(f"  {p.get('provider_id')}: warming: {warming}")
            continue
        error = p.get("error") or {}
        tail = shown_stderr_tail(error.get("stderr_tail"))
        # Its stderr's lines are shown under it: its message's excerpt says the others.
        how = said_once(str(error.get("message") or ""), tail) or ", ".join(
            f"{v.get('rule')} {v.get('field')}" for v in p.get("violations") or []
        )
        code = error.get("code")
        if code in _CODE_SAID and how:  # a daemon of an older version said it in the message
            how = f"{code}: {how.removeprefix(f'{code} ')}"
        if status == "timeout" and 'binding = "cgp"' not in how:  # when it is only slow
            starting = error.get("code") == "handshake_timeout"  # its start, not a call
            key = "start_timeout_s" if starting else "timeout_ms"
            # A pipe's reply never flushed, or set-up before the handshake: said by the
            # timeout itself (a remote provider's says what it checks instead, having no
            # pipe), here only when a daemon of an older version left it out.
            if starting and NO_HANDSHAKE not in how and not says_remote_handshake(how):
                how += f"; {NO_HANDSHAKE}"
            if not says_remote_handshake(how):  # which names its own start deadline
                how += f"; if it is only slow, raise its [[provider]] {key}"
        lines.append(f"  {p.get('provider_id')}: {status}" + (f": {how}" if how else ""))
        said = stderr_tail_lines(str(p.get("provider_id")), error.get("stderr_tail"))
        lines += [f"  {line}" for line in said]  # under it, as `hostd providers` shows them
    return lines


def no_evidence(
    result: dict[str, Any],
    roots: Mapping[str, Sequence[Path]] | None = None,
    base: Path | None = None,
) -> list[str] | None:
    """Why the prompt is empty, a line per leg; ``None`` when it holds evidence
    (``roots``, ``base``: as ``leg_failures``)."""
    if (result.get("prompt") or "").strip():
        return None
    offered: dict[str, int] = {}
    reasons: dict[str, int] = {}
    each: dict[str, dict[str, int]] = {}  # per provider: reason -> frames
    for e in (result.get("audit") or {}).get("entries") or []:
        pid = str((e.get("frame") or {}).get("provider_id", "?"))
        offered[pid] = offered.get(pid, 0) + 1
        reason = str(e.get("reason") or e.get("disposition") or "?")
        reasons[reason] = reasons.get(reason, 0) + 1
        mine = each.setdefault(pid, {})
        mine[reason] = mine.get(reason, 0) + 1
    advice = budget_advice(result)
    if not offered:
        lines = ["empty prompt: no provider produced evidence"]
        if advice:  # they had frames, each over what it was asked for
            lines = ["empty prompt: no frame fit the budget", f"  {advice}: raise --budget"]
    else:  # evidence came, and the audit says why none of it is in the prompt
        why = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items(), key=lambda i: -i[1]))
        lines = [f"empty prompt: {sum(offered.values())} frame(s) offered, none included ({why})"]
        if "over_budget" in reasons:
            lines.append(
                f"  {advice}: raise --budget"
                if advice
                else "  no frame fit what the budget left after the preamble: raise --budget"
            )
    for p in result.get("providers") or []:
        if p.get("status") == "ok" and not p.get("note"):  # a note: leg_failures says it
            pid = str(p.get("provider_id"))
            n = offered.get(pid, 0)
            how = f"{n} frame(s) offered, none included" if n else "no frames"
            if n:  # why, in the audit's reasons, and the rules of frames dropped as invalid
                why = ", ".join(f"{r} {k}" for r, k in sorted(each.get(pid, {}).items()))
                rules = broken_rules(p)
                how += f" ({why}" + (f": {rules}" if rules else "") + ")"
                if "untrusted_source" in each.get(pid, {}):
                    how += f"; {_untrusted(result, pid, (roots or {}).get(pid), base)}"
            lines.append(f"  {pid}: ok, {how}")
    return lines + leg_failures(result, dropped=False)  # its ok lines say why


def policy_fallback(result: dict[str, Any]) -> str | None:
    """``rerank`` or ``calibrated`` that could not rank as asked: the policy it fell back
    to and why (``audit.policy.strategy_params``), else ``None``."""
    params = ((result.get("audit") or {}).get("policy") or {}).get("strategy_params")
    if not isinstance(params, dict) or len(params) != 1:
        return None
    ((name, body),) = params.items()
    if not isinstance(body, dict) or not body.get("fallback"):
        return None
    why = str(body.get("reason") or "no reason given")
    if body.get("detail"):
        why += f": {body['detail']}"
    return f"{name} fell back to {body['fallback']} ({why})"


def warming_lines(
    result: dict[str, Any], *, connected: bool = False, config: str = ""
) -> list[str]:
    """What to do about the providers still warming up: one line, or none. A one-shot
    command stops them when it ends (``hostd warm`` or a running ``hostd serve``
    helps); a daemon behind ``--connect`` goes on warming up (``hostd._hints``)."""
    where = "daemon" if connected else "one_shot"
    # One still starting (no step reported) is named so, and `hostd warm` (which builds
    # an index) is not its cure, as the daemon's and hostd mcp's hints say.
    starting = warming_starts(result)
    advice = warming_advice(warming_ids(result), where=where, config=config, starting=starting)
    # A crash loop's leg (not warming up: asking again will not help) has its own line.
    looping = restarting_advice(restarting_failures(result), where=where, config=config)
    return [line for line in (advice, looping) if line is not None]
