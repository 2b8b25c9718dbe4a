"""What hostd tells a user about a provider still warming up (a name it does not know
is answered in ``hostd.errors``: ``did_you_mean``, ``unknown_provider``).

A provider still warming up: pure words over a ``context/compose`` reply (its
``providers[]`` entries), shared by the CLI's summary, ``hostd mcp``'s texts and the
framework adapters' warning (``hostd.integrations``). A
provider with an index to build answers its handshake at once and builds afterwards
(docs/providers.md); its leg is ``warming`` until it is done. Where that build goes
on decides the advice: a one-shot command stops its providers when it ends, so on a
large project a build never finishes within one run (``hostd warm`` builds it once,
and the bundled providers keep it on disk; a running ``hostd serve`` keeps building
between requests), while a daemon (``--connect``, ``hostd mcp``) goes on warming up in
the background. ``hostd warm`` keeps no model loaded, though: an in-process ``hostd
mcp`` (no ``--connect``) starts its providers anew, so each one loads its model once
per ``hostd mcp`` process (each session of its client) even over an index on disk;
only a running ``hostd serve`` behind ``hostd mcp --connect`` keeps it loaded across
sessions. Only hostd's own words and figures are used (the engine's report).

A provider in a crash loop (its restarts failed again before it answered a query) is
not warming up: its leg is ``crashed``, with code ``restarting`` (a daemon of an older
version said ``warming``, with that code). Asking again shortly does not help, so it
gets advice of its own (``restarting_advice``): it keeps failing, its last failure,
and where to look (``hostd providers``, its stderr in hostd's log).

A provider parked after its restart attempts: how to start it again at once once its
failure is fixed (``parked_restart``), in its legs' message, which ``hostd status``, the
compose summary and ``list_providers`` show.

A provider that never answered its handshake (``NO_HANDSHAKE``): the two usual causes
in words that fit a provider in any language, in a child's handshake timeout itself (so
its leg, its status and its log event say them), check-provider's row, and the compose
summary when a daemon of an older version left them out. A remote provider has no pipe
to flush: what to check instead (``NO_REMOTE_HANDSHAKE``) is in its transport's timeout
itself, likewise, and check-provider's row.

A provider that failed with its process: the last lines it wrote on its stderr (a
``stderr_tail``, in its health and its leg's error), a line each under its failure
(``stderr_tail_lines``), in the words ``hostd providers``, ``hostd status``, the compose
summary and ``hostd mcp``'s ``list_providers`` text share; its failure's own excerpt
of that stderr then names only what the lines under it do not (``said_once``). That
excerpt is worded as a cause (``stderr: …``) only for a start that failed; after a good
start it is ``its stderr's last lines: …``, which may be a ready line (``stderr_said``). A
provider that is down, in one line (``down_state``): what ``hostd status`` and
``list_providers`` say of it.

A provider that answered, yet whose frames were dropped for what it sent (an invalid
frame, a digest that is not its content's, a file outside the trusted roots): how many,
by the audit's reason (``dropped_words``), in the words the compose summary and ``hostd
mcp``'s texts share; ``refused_legs`` names the legs that lost every frame that way,
which give a composition nothing, as a failed one does (or, ``partly``, those that lost
only some: the rest of their evidence is there, less what was dropped).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from hostd._printable import printable

__all__ = [
    "NO_HANDSHAKE",
    "FLAGS",
    "NO_REMOTE_HANDSHAKE",
    "PROVIDER_FAULTS",
    "REFUSED_CODES",
    "RESTARTING",
    "absorbed_words",
    "budget_advice",
    "not_run_again",
    "one_shot_words",
    "down_state",
    "dropped_frames",
    "dropped_words",
    "duration",
    "failure_tail_lines",
    "key_named",
    "no_remote_handshake",
    "parked_restart",
    "refused_legs",
    "restarting_advice",
    "restarting_failures",
    "restarting_last",
    "said_once",
    "says_remote_handshake",
    "shown_stderr_tail",
    "stderr_said",
    "stderr_tail_lines",
    "warming_advice",
    "warming_doing",
    "warming_ids",
    "warming_phases",
    "warming_starts",
    "warming_state",
    "warming_step",
]

#: Why a provider's handshake reply most often never came, and what to do: its reply
#: waits in a stdout buffer never flushed (stdout is a pipe, which most runtimes buffer
#: whole), or its set-up runs before it answers. Within ``MAX_ERROR_CHARS`` whole, with
#: its "no handshake reply within N ms; " before it (``test_handshake_timeout``).
NO_HANDSHAKE = (
    "either its reply is still in its stdout buffer (stdout is a pipe, so most runtimes "
    "buffer it: end each reply line with a newline and flush it, e.g. flush() a Java "
    "PrintStream or BufferedWriter, fflush(stdout) in C, .flush() a Rust BufWriter per "
    "line, print(..., flush=True) in Python), or its set-up before the handshake is slow "
    '(answer the handshake first and set up after it: docs/providers.md, "Cold start and '
    'warm-up")'
)

#: The ``section`` of a remote provider whose options are given as command-line flags
#: (``hostd check-provider --url``), not in a config section: its keys are named as the
#: flags that give them (``key_named``: ``--ca-file``).
FLAGS = "--"


def key_named(section: str, key: str) -> str:
    """How a remote provider's option ``key`` is named to the user who set it: the
    config key after its ``section`` (``[[provider]] 'team-search' ca_file``,
    ``[reranker] ca_file``; ``""``: the bare key), or, with ``section`` ``FLAGS``, the
    command-line flag that gives it (``--ca-file``)."""
    if section == FLAGS:
        return "--" + key.replace("_", "-")
    return f"{section}{key}"


def no_remote_handshake(section: str = "") -> str:
    """What to check when a remote provider's handshake got no reply at all (a refused
    connection, a certificate or a 401 fails at once, in its own words): whether its
    url answers from here, the TLS set-up a server may wait on, the token, the deadline
    it had, for a server only slow to answer, and a proxy, which hostd never uses
    (``trust_env`` off: C8). Named by the keys of its own ``section`` (``key_named``: a
    config may hold several remote providers; flags for one given by them), never by a
    value.

    Short, for a health keeps ``MAX_ERROR_CHARS`` of an error and this comes after the
    stage that stalled (``hostd.transport``): the section is named once, on its url (the
    keys after it are ``its``), so a provider id of 64 characters fits whole; past that,
    a cut falls in the proxy's explanation, last, never in a key to set."""
    url = key_named(section, "url")
    if section == FLAGS:
        tls, start = "--ca-file; --client-cert and --client-key", "--start-timeout-s"
    else:
        tls, start = "ca_file; client_cert and client_key", "its start_timeout_s"
    return (
        f"check that {url} answers from here (curl's POST gets a reply at once, even a "
        f"401), its TLS ({tls} for mutual TLS) and the token; if it is only slow, raise "
        f"{start}; it must answer without a proxy ({_REMOTE_MARK})"
    )


#: Words every ``no_remote_handshake`` says, whatever its keys are named after (and a
#: daemon of an older version's), last: a health's copy cut short may have lost them.
_REMOTE_MARK = "hostd ignores HTTPS_PROXY and the other proxy variables"

#: Words every ``no_remote_handshake`` says early, before any cut of a health's copy.
_REMOTE_EARLY_MARK = "answers from here (curl's POST gets a reply at once"

#: ``no_remote_handshake`` of a provider with no section to name (its keys bare).
NO_REMOTE_HANDSHAKE = no_remote_handshake()


def says_remote_handshake(text: str) -> bool:
    """Whether ``text`` already says what to check of a remote handshake never answered
    (``no_remote_handshake``, after any section, even cut short as a health keeps it; a
    daemon of an older version's too)."""
    return _REMOTE_MARK in text or _REMOTE_EARLY_MARK in text


#: The ``error.code`` of a ``crashed`` leg whose provider is in a crash loop, restarted
#: behind the request (the engine's ``restarts_behind``): not warming up, failing (and
#: the ``detail`` of its ``provider_failed`` degraded reason). A daemon of an older
#: version gave such a leg status ``warming``: read as the same.
RESTARTING = "restarting"

#: The statuses of a crash loop's leg (code ``RESTARTING``): ``crashed``, and the
#: ``warming`` a daemon of an older version gave it.
_LOOPING = ("crashed", "warming")

#: Where a crash loop leg's message names the last failure (the engine's words).
_LAST_FAILURE = "its last failure: "


#: How a provider whose command cannot be run says when it is run again
#: (``not_run_again``): until ``providers/restart``, or its cool-down.
_NOT_RUN_AGAIN = " (not run again until providers/restart"
#: What a one-shot command says instead (``one_shot_words``).
_ONE_SHOT_AGAIN = " (fix that, then run the command again: each run starts its providers anew)"


def not_run_again(when: str) -> str:
    """The end of a start failure's message in a daemon: when the provider is run again
    (``when``: ``", or in 60 s"``, or empty when only a restart runs it)."""
    return f"{_NOT_RUN_AGAIN}{when})"


def one_shot_words(message: str) -> str:
    """``message`` as a one-shot command (``hostd compose`` without ``--connect``) says
    it: its providers end with it and the next run starts them anew, so a daemon's
    ``(not run again until providers/restart, or in 60 s)`` means nothing there and
    becomes what to do instead. Any other message is returned as it is."""
    head, found, tail = message.partition(_NOT_RUN_AGAIN)
    if not found or ")" not in tail:
        return message
    return head + _ONE_SHOT_AGAIN + tail.split(")", 1)[1]


def parked_restart(pid: str) -> str:
    """How a parked provider (its restart attempts spent) is started again at once, once
    its failure is fixed: its retry after a cool-down may be minutes away, and a fixed
    binary alone does not end the wait. ``hostd providers restart`` clears its failures
    (``providers/restart``); a reload that changed its ``[[provider]]`` section gives it
    a fresh start too (the engine's ``reconfigure``)."""
    return (
        f"once its failure is fixed, `hostd providers restart {pid}` (with --connect: a "
        f"daemon's) starts it at once, as `hostd reload` does after a change to its "
        f"[[provider]] section"
    )


def warming_doing(phase: Any) -> str:
    """What a warming provider is doing, by the phase it last reported (``error.phase``
    of its leg): ``load`` is loading what an earlier run saved (the bundled ``files``
    provider's cached index, which takes a fraction of a build), ``load model`` a model;
    any other phase, or none, builds its index."""
    if phase == "load model":
        return "loading its model"
    if isinstance(phase, str) and phase.split(maxsplit=1)[:1] == ["load"]:
        return "loading its saved index"
    return "building its index"


#: What a step of an index build is doing, by the phase the bundled providers report
#: (``files``: ``read files`` then ``index``; ``semantic``: ``read files`` then
#: ``embed``), so ``338/338`` files then ``0/13430`` chunks reads as the next step,
#: not a restart. Only these: a provider's own phase names are not quoted.
_STEPS = {"read files": "reading files", "index": "indexing chunks", "embed": "embedding chunks"}
#: The phases that use a model (``semantic``'s ``load model`` and ``embed``): only a
#: provider warming in one of these, or in none known yet, is a model to keep loaded.
_MODEL_FREE = frozenset({"read files", "index", "load"})
#: What a provider still starting, with no phase reported, is doing (``warming_starts``).
_STARTING = "starting its process and handshake"


def warming_step(phase: Any) -> str:
    """``building its index: indexing chunks``: ``warming_doing`` and, for a known build
    step (``_STEPS``), which one."""
    doing = warming_doing(phase)
    step = _STEPS.get(phase) if isinstance(phase, str) else None
    return f"{doing}: {step}" if step else doing


def warming_state(report: Mapping[str, Any]) -> str | None:
    """``still building its index (…)`` for a ``warming`` leg (``still loading its saved
    index (…)`` while it loads one: ``warming_doing``), the engine's message in
    parentheses; ``still starting (…)`` for one not handshaken yet; None for any other
    status. A crash loop's leg as a daemon of an older version gave it (``warming``, code
    ``restarting``) is ``keeps failing, restarting (…)``: it does not warm up."""
    if report.get("status") != "warming":
        return None
    error = report.get("error") or {}
    if error.get("code") == RESTARTING:
        detail = error.get("message")
        return f"keeps failing, restarting ({detail})" if detail else "keeps failing, restarting"
    starting = error.get("code") == "starting"
    what = "still starting" if starting else f"still {warming_doing(error.get('phase'))}"
    detail = error.get("message")
    return f"{what} ({detail})" if detail else what


def warming_ids(result: Mapping[str, Any]) -> list[str]:
    """The ids of the providers whose leg was ``warming``, in the reply's order; a crash
    loop's (code ``restarting``: ``restarting_failures``) is not warming up."""
    reports: Sequence[Mapping[str, Any]] = result.get("providers") or []
    return [
        str(p.get("provider_id"))
        for p in reports
        if p.get("status") == "warming" and (p.get("error") or {}).get("code") != RESTARTING
    ]


def warming_phases(result: Mapping[str, Any]) -> dict[str, str | None]:
    """The phase each warming provider (``warming_ids``) last reported (``error.phase``),
    ``None`` before it reported one, in the reply's order."""
    reports: Sequence[Mapping[str, Any]] = result.get("providers") or []
    ids = set(warming_ids(result))
    out: dict[str, str | None] = {}
    for p in reports:
        if str(p.get("provider_id")) in ids:
            phase = (p.get("error") or {}).get("phase")
            out[str(p.get("provider_id"))] = phase if isinstance(phase, str) else None
    return out


def warming_starts(result: Mapping[str, Any]) -> set[str]:
    """The warming providers still starting (its leg's code ``starting``: its process
    spawned, its handshake not answered yet) that reported no phase: all they are doing
    is starting. An MCP server has no model nor index to speak of."""
    reports: Sequence[Mapping[str, Any]] = result.get("providers") or []
    ids = set(warming_ids(result))
    return {
        str(p.get("provider_id"))
        for p in reports
        if str(p.get("provider_id")) in ids
        and (p.get("error") or {}).get("code") == "starting"
        and not isinstance((p.get("error") or {}).get("phase"), str)
    }


def restarting_failures(result: Mapping[str, Any]) -> dict[str, str | None]:
    """The providers whose leg was a crash loop's (``crashed``, code ``restarting``; an
    older daemon's ``warming``), in the reply's order, each with its last failure as its
    leg names it (``None``: not named)."""
    reports: Sequence[Mapping[str, Any]] = result.get("providers") or []
    out: dict[str, str | None] = {}
    for p in reports:
        error = p.get("error") or {}
        if p.get("status") in _LOOPING and error.get("code") == RESTARTING:
            out[str(p.get("provider_id"))] = restarting_last(error.get("message"))
    return out


def restarting_last(message: Any) -> str | None:
    """The last failure a crash loop's ``message`` names (its leg's, or the state
    ``providers/warm`` gives it after ``restarting: ``); ``None``: not named (an older
    daemon's message)."""
    _, _, last = str(message or "").partition(_LAST_FAILURE)
    return last.strip() or None


def restarting_advice(
    failures: Mapping[str, str | None], *, where: str, config: str = ""
) -> str | None:
    """One line about the providers in a crash loop (``restarting_failures``: each id with
    its last failure, or ``None`` where it is not to be quoted): they keep failing, so
    asking again shortly does not help; where to look. None for none. ``where`` and
    ``config`` as for ``warming_advice``: a daemon's providers are listed with
    ``--connect``."""
    if not failures:
        return None
    who = ", ".join(
        f"{pid} (last failure: {last})" if last else pid for pid, last in failures.items()
    )
    connect = " --connect" if where in ("daemon", "mcp_connect", "adapter") else ""
    return (
        f"keeps failing: {who}. Its restarts fail again before it answers any query, so "
        f"asking again will not help until its failure is fixed: `hostd "
        f"providers{config}{connect}` shows its state and last failure, and hostd's log "
        f"has its stderr (`provider.stderr` events)"
    )


def warming_advice(
    ids: Sequence[str],
    *,
    where: str,
    config: str = "",
    phases: Mapping[str, str | None] | None = None,
    starting: Collection[str] = (),
) -> str | None:
    """One line saying what to do about the warming providers ``ids`` (None for none).

    ``where``: ``one_shot`` (a command that starts its providers and stops them when
    it ends), ``daemon`` (a running ``hostd serve`` behind ``--connect``), ``mcp``
    (an in-process ``hostd mcp``, which keeps its providers while it runs and starts
    them anew in the next), ``mcp_connect`` (``hostd mcp --connect``: the daemon's
    providers) or ``adapter`` (a framework retriever: its daemon's providers).
    ``config``: the ``--config FILE`` option to repeat in the commands named, or nothing.
    ``phases``: each one's last phase (``warming_phases``), for a reader with no other
    line about them (a model under ``hostd mcp``): each that reported one is named with
    what it is doing (``warming_step``), and the models are spoken of only when one may
    be loading or using one (a phase that is not model-free, or none known yet).
    ``starting``: of those, the ones still starting their process and handshake
    (``warming_starts``): named so, and neither models nor ``hostd warm`` (which
    builds an index) are spoken of for them; when they are all that is warming, the
    hint says that each ``hostd mcp`` (or one-shot command) starts them anew, and how a
    daemon keeps them running.
    """
    if not ids:
        return None
    warming = [pid for pid in ids if pid not in starting]
    if phases is None:
        who = ", ".join(f"{pid} ({_STARTING})" if pid in starting else pid for pid in ids)
        models = True
    else:
        # Before its first step's report it may still be starting: only its name.
        who = ", ".join(
            f"{pid} ({warming_step(phases[pid])})"
            if phases.get(pid)
            else f"{pid} ({_STARTING})"
            if pid in starting
            else pid
            for pid in ids
        )
        models = any(phases.get(pid) not in _MODEL_FREE for pid in warming)
        if not warming and where == "mcp":
            return (
                f"still warming: {who}. hostd goes on starting {'it' if len(ids) == 1 else 'them'} "
                f"in the background: call compose_context again shortly. Each `hostd mcp` "
                f"process (a client's session) starts its providers anew; keep `hostd "
                f"serve{config}` running and give the client `hostd mcp{config} --connect` to "
                f"keep them running across sessions"
            )
    if where == "one_shot" and not warming:
        # Only starting: no index to build, so `hostd warm` cannot help; a daemon keeps
        # them running (as the daemon's and hostd mcp's hints say).
        return (
            f"still warming: {who}. This command starts its providers anew and stops them "
            f"when it ends, so each run waits for {'its' if len(ids) == 1 else 'their'} "
            f"start again: keep `hostd serve{config}` running and compose with --connect "
            f"to keep {'it' if len(ids) == 1 else 'them'} running across commands"
        )
    if where == "one_shot":
        return (
            f"still warming: {who}. This command stops its providers when it ends, so a "
            f"large index takes many runs to build: run `hostd warm{config}` once to build "
            f"it (the bundled providers keep it on disk), or keep `hostd serve{config}` "
            f"running and compose with --connect"
        )
    if where == "daemon":
        return (
            f"still warming: {who}. The daemon's providers go on warming up in the "
            f"background: ask again shortly (`hostd providers{config} --connect` shows each "
            f"one's state)"
        )
    if where == "adapter":
        return (
            f"still warming: {who}. The daemon's providers go on warming up in the "
            f"background: call the retriever again shortly"
        )
    if where == "mcp_connect":
        return (
            f"still warming: {who}. The daemon's providers go on warming up in the "
            f"background: call compose_context again shortly"
        )
    if not models:
        return (
            f"still warming: {who}. hostd goes on warming up in the background: call "
            f"compose_context again shortly. `hostd warm{config}` builds an index ahead of "
            f"time, and the bundled providers keep it on disk for the next sessions"
        )
    return (
        f"still warming: {who}. hostd goes on warming up in the background: call "
        f"compose_context again shortly. Each `hostd mcp` process (a client's session) "
        f"starts its providers anew and loads their models once (`hostd warm{config}` "
        f"builds an index ahead of time but keeps no model loaded); keep `hostd "
        f"serve{config}` running and give the client `hostd mcp{config} --connect` to keep "
        f"them loaded across sessions"
    )


#: Reasons that drop a frame because another's block holds its lines (span merging).
_ABSORBED = ("contained_in", "merged_into")
#: The groups (absorbed provider → keeping provider's block) named per reason, at most,
#: and the characters of a block's label shown: the one-line summary stays one line
#: however many frames a composition folds.
_ABSORBED_SHOWN = 2
_ABSORBED_LABEL_CHARS = 48


def absorbed_words(result: Mapping[str, Any], provider: str | None = None) -> dict[str, str]:
    """By reason (``contained_in``, ``merged_into``): whose frames another provider's
    block took in, and which block, as the audit summaries say it after the count
    (``scripts 2 in files package.json L23-34``): the block by the label the prompt
    cites it by (its ``citations``), else its frame id. Only frames folded into
    *another* provider's block: those are the ones a provider's ``ok(0 of 2)`` does not
    explain (a provider's own chunks merged together are routine). At most
    ``_ABSORBED_SHOWN`` groups a reason, the largest first, then how many more frames;
    none: no key. With ``provider``, only its frames, each group without its name and
    count (``in files package.json L23-34``)."""
    entries = (result.get("audit") or {}).get("entries") or []
    labels: dict[tuple[Any, Any], str] = {}
    for c in result.get("citations") or []:
        frame = c.get("frame") or {}
        labels.setdefault((frame.get("provider_id"), frame.get("frame_id")), str(c.get("label")))
    groups: dict[str, dict[tuple[str, str, str], int]] = {}
    for e in entries:
        reason = e.get("reason")
        if reason not in _ABSORBED or e.get("disposition") == "included":
            continue
        kept = (e.get("detail") or {}).get("kept") or {}
        pid = str((e.get("frame") or {}).get("provider_id", e.get("provider")))
        kept_pid = kept.get("provider_id")
        if kept_pid is None or kept_pid == pid or provider not in (None, pid):
            continue
        # A provider's own words: no control character reaches the terminal.
        label = printable(labels.get((kept_pid, kept.get("frame_id"))) or str(kept.get("frame_id")))
        if len(label) > _ABSORBED_LABEL_CHARS:
            label = label[: _ABSORBED_LABEL_CHARS - 1] + "…"
        key = (pid, str(kept_pid), label)
        by_reason = groups.setdefault(str(reason), {})
        by_reason[key] = by_reason.get(key, 0) + 1
    out = {}
    for reason, counted in groups.items():
        # The largest groups first, then by name: the same audit, the same words.
        ranked = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))
        said = [
            f"in {kept} {label}" if provider else f"{pid} {n} in {kept} {label}"
            for (pid, kept, label), n in ranked
        ]
        rest = sum(n for _, n in ranked[_ABSORBED_SHOWN:])
        out[reason] = ", ".join(said[:_ABSORBED_SHOWN]) + (f", {rest} more" if rest else "")
    return out


def budget_advice(result: Mapping[str, Any]) -> str | None:
    """For a composition that included nothing because the budget was too small (its
    ``audit.budget_hint``): what the prompt's own lines take, what did not fit, and the
    least budget at which it could, by the split the providers are asked under. ``None``
    otherwise: an empty prompt for other reasons says nothing of the budget.

    The budget named holds the prompt's own lines and the frame named, and asks that
    frame's provider for at least its cost; at another budget the providers may offer
    other frames, so it is "at least", never a promise."""
    audit = result.get("audit") or {}
    hint = audit.get("budget_hint")
    budget = audit.get("global_budget")
    if not isinstance(hint, Mapping) or not isinstance(budget, int):
        return None
    need, pid, asked = hint.get("budget"), hint.get("provider"), hint.get("asked")
    own = f"the prompt's own lines take {hint.get('fixed')}"
    if isinstance(hint.get("cost"), int):
        return (
            f"the budget of {budget} tokens is too small for any frame offered: {own} and "
            f"the cheapest frame, from {pid}, costs {hint['cost']}; a budget of at least "
            f"{need} holds both and asks {pid} for {asked} tokens (a provider may offer other "
            f"frames at another budget)"
        )
    return (
        f"the budget of {budget} tokens is too small for any frame: {own} and {pid} had "
        f"none within the {hint.get('had')} tokens it was asked for; a budget of at least "
        f"{need} is the least at which one could fit (it asks {pid} for {asked} tokens)"
    )


#: The most of a ``stderr_tail`` shown: what a failure keeps of it
#: (``hostd.errors.MAX_STDERR_TAIL_CHARS`` characters, 20 lines), so a reply from a
#: daemon of another version never floods a terminal or a model's context.
_TAIL_SHOWN_CHARS = 1000
_TAIL_SHOWN_LINES = 20
#: How a ``stderr_tail`` joins its lines, and marks the ones left out.
_TAIL_JOIN = " | "
_LEFT_OUT = "…"


def shown_stderr_tail(tail: Any) -> list[str]:
    """The lines of a ``stderr_tail`` (one line, joined by `` | ``) as hostd shows them:
    at most ``_TAIL_SHOWN_LINES`` lines and ``_TAIL_SHOWN_CHARS`` characters, the
    earliest left out (its end is the provider's last words) and marked ``…``, no
    control character (a daemon of another version may send any text). None when it
    wrote none."""
    if not isinstance(tail, str) or not tail.strip():
        return []
    text = printable(tail)
    if len(text) > _TAIL_SHOWN_CHARS:
        text = _LEFT_OUT + text[-(_TAIL_SHOWN_CHARS - 1) :]
    said = text.split(_TAIL_JOIN)
    if len(said) > _TAIL_SHOWN_LINES:
        said = [_LEFT_OUT, *said[-(_TAIL_SHOWN_LINES - 1) :]]
    return said


def stderr_tail_lines(pid: str, tail: Any) -> list[str]:
    """Under ``pid``'s failure: the last lines its process wrote on its stderr (a
    ``stderr_tail``, as ``shown_stderr_tail`` bounds it), a header naming it, then one
    line each, indented. None when it wrote none."""
    said = shown_stderr_tail(tail)
    if not said:
        return []
    return [f"{pid}: its stderr ended with:", *(f"    {line}" for line in said)]


#: How a failure's message quotes its process's stderr (``stderr_said``). At a start
#: that failed, what it wrote is most often why (an ImportError, a missing index): its
#: ``stderr``. After a start that went well it is only what it wrote last, maybe its ready
#: line or a line of its log ("index loaded"): never worded as the cause of a kill.
_STDERR_AT_START = "stderr"
_STDERR_AFTER_START = "its stderr's last lines"
#: Where a crash's message quotes its stderr (the last part of its failure report).
_STDERR_SAID = tuple(f"; {label}: " for label in (_STDERR_AT_START, _STDERR_AFTER_START))


def stderr_said(excerpt: str, *, started: bool) -> str:
    """The part of a failed process's report that quotes ``excerpt`` of its stderr
    (``ChildProcess.failure_report``): ``stderr: …`` for a start that failed, ``its
    stderr's last lines: …`` once it ``started`` (its handshake answered); ``""`` for
    no excerpt."""
    if not excerpt:
        return ""
    return f"{_STDERR_AFTER_START if started else _STDERR_AT_START}: {excerpt}"


def said_once(message: str, shown: Sequence[str]) -> str:
    """A failure's ``message`` to print above ``shown`` (its stderr's last lines,
    ``shown_stderr_tail``): its own excerpt of that stderr (``; stderr: …`` or ``; its
    stderr's last lines: …``, the last thing its process's failure report adds:
    ``stderr_said``) less the lines ``shown`` holds, so each line is read once; an
    excerpt line they do not hold (an error line written earlier, a frame locating it)
    stays. ``message`` as it is when nothing is shown."""
    lines = [line for line in shown if line != _LEFT_OUT]
    at = [(i, said) for said in _STDERR_SAID if (i := message.find(said)) >= 0]
    if not at or not lines:
        return message
    start, said = min(at)  # the report's own words come before anything it quotes
    head, excerpt = message[:start], message[start + len(said) :]
    kept = [
        part
        for part in excerpt.split(_TAIL_JOIN)
        if part != _LEFT_OUT and not any(_same_line(part, line) for line in lines)
    ]
    return f"{head}{said}{_TAIL_JOIN.join(kept)}" if kept else head


def _same_line(part: str, line: str) -> bool:
    """``part`` of an excerpt is ``line``, either of them cut at its start or ``part`` at
    its end (an excerpt or a tail bounded in characters marks the cut with ``…``)."""
    cut = len(_LEFT_OUT)
    if part == line:
        return True
    if part.startswith(_LEFT_OUT) and len(part) > cut and line.endswith(part[cut:]):
        return True
    if part.endswith(_LEFT_OUT) and len(part) > cut and line.startswith(part[:-cut]):
        return True
    return line.startswith(_LEFT_OUT) and len(line) > cut and part.endswith(line[cut:])


def duration(seconds: float) -> str:
    """``12 s``, ``3 min 4 s``, ``2 h 5 min``: a span for a reader."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


#: The codes a remote provider's refused credential is parked with (a 401/403, or a
#: token that could not be read: ``hostd.errors``' ``ProviderUnauthorized`` and
#: ``CredentialUnavailable`` reasons; a test holds them the same), which begin its
#: health's ``last_failure``. Its next request reads the credential again and asks at
#: once when it changed (``RemoteEndpoint.credential_changed``), cool-down or not.
REFUSED_CODES = ("unauthorized", "credential")


def _refused(row: Mapping[str, Any], failure: str) -> bool:
    """Whether ``row`` is a remote provider parked for its refused credential."""
    codes = tuple(f"{code}: " for code in REFUSED_CODES)
    return (
        row.get("remote") is not None and row.get("state") == "failed" and failure.startswith(codes)
    )


def down_state(row: Mapping[str, Any], *, restart: bool = True) -> str | None:
    """What ``hostd status`` says of a provider that is down (a ``providers/list``
    ``row``), after its id: ``failed 12 s ago: …; next try in 48 s`` (crashed or failed:
    how long ago its last failure was, what it was, its stderr excerpt less the lines
    ``failure_tail_lines`` show under it, and when it is tried again: ``next check in
    2 s`` for a remote provider whose server was not reached; for one whose credential
    was refused, that the next request asks again once it changes, before its
    cool-down), or its failed
    warm-up. ``restart``: name the command that starts it again (``hostd providers
    restart ID --connect``: a daemon's provider) for a parked one (``failed``), beside
    its retry when one is due. None for a
    provider that is not down, or whose failure is not said."""
    state = str(row.get("state"))
    health = row.get("health") or {}
    progress = health.get("progress")
    pid = row.get("id")
    if state == "failed" and health.get("readiness") == "failed" and isinstance(progress, Mapping):
        # Running, its warm-up failed: every query is refused until it is restarted.
        why = " ".join(str(progress.get("message") or "no reason given").split())
        until = f"`hostd providers restart {pid}`" if restart else "it is restarted"
        return f"failed: its warm-up failed: {why}; it refuses every query until {until}"
    failure = health.get("last_failure")
    if state not in ("crashed", "failed") or not failure:
        return None
    ago = health.get("last_failure_s_ago")
    when = f" {duration(float(ago))} ago" if ago is not None else ""
    retry = health.get("retry_in_s")
    check = health.get("next_check_in_s")  # a remote server not reached: checked again
    # Parked (``failed``): its retry may be a cool-down away, so the command that starts
    # it at once is named beside it (a fixed provider is not tried again sooner).
    now = f"`hostd providers restart {pid} --connect` starts it now"
    if _refused(row, str(failure)):
        # Not only its cool-down: the next request asks again once the token changes.
        nxt = "; the next request asks again once its credential changes"
        nxt += "" if retry is None else f", else next try in {duration(float(retry))}"
        nxt += f", or {now}" if restart else ""
    elif retry is not None and state == "failed" and restart:
        nxt = f"; next try in {duration(float(retry))}, or {now}"
    elif retry is not None:
        nxt = f"; next try in {duration(float(retry))}"
    elif check is not None:
        soon = float(check) < 1  # 0.5 s after the failure: not "0 s"
        nxt = f"; next check in {'under 1 s' if soon else duration(float(check))}"
    elif state == "failed" and restart:
        nxt = f"; {now}"
    else:
        nxt = ""
    said = " ".join(str(failure).split())
    said = said.removeprefix(f"{state}: ")  # the failure's own kind, when it is the state's
    said = said_once(said, shown_stderr_tail(health.get("stderr_tail")))
    return f"{state}{when}: {said}{nxt}"


def failure_tail_lines(row: Mapping[str, Any]) -> list[str]:
    """``stderr_tail_lines`` of a ``providers/list`` row whose last failure is what is
    said of it: one not ready, with a last failure, that is not a failed warm-up (its
    warm-up's message is said instead). None otherwise."""
    health = row.get("health") or {}
    if row.get("state") == "ready" or not health.get("last_failure"):
        return []
    if health.get("readiness") == "failed" and isinstance(health.get("progress"), Mapping):
        return []
    return stderr_tail_lines(str(row.get("id")), health.get("stderr_tail"))


#: The audit reasons that drop a frame for what its provider sent (or where its source
#: lies), not for how it ranked: an invalid frame (F1–F5, D1, schema …), an inline digest
#: or a file provenance digest that is not what hostd computes (D4, F5), a file outside
#: the trusted roots.
PROVIDER_FAULTS = ("invalid_frame", "digest_mismatch", "source_mismatch", "untrusted_source")


def dropped_frames(result: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Per provider: the frames dropped for what it sent (``PROVIDER_FAULTS``), by
    reason, from a ``context/compose`` reply's audit entries."""
    out: dict[str, dict[str, int]] = {}
    for e in (result.get("audit") or {}).get("entries") or []:
        reason = e.get("reason")
        if reason in PROVIDER_FAULTS:
            mine = out.setdefault(str((e.get("frame") or {}).get("provider_id")), {})
            mine[reason] = mine.get(reason, 0) + 1
    return out


def dropped_words(reasons: Mapping[str, int], why: Mapping[str, str] | None = None) -> str:
    """``N frame(s) dropped: invalid_frame n (why); digest_mismatch m``: how many of a
    leg's frames were dropped, by reason (``dropped_frames``), each with its ``why``
    when one is given (hostd's words only)."""
    parts = []
    for reason, n in sorted(reasons.items()):
        said = (why or {}).get(reason)
        parts.append(f"{reason} {n}" + (f" ({said})" if said else ""))
    return f"{sum(reasons.values())} frame(s) dropped: {'; '.join(parts)}"


def refused_legs(
    result: Mapping[str, Any], *, partly: bool = False
) -> list[tuple[Mapping[str, Any], dict[str, int]]]:
    """The ``ok`` legs that offered frames and lost every one for what they sent
    (``dropped_frames``: each of its ``frames_offered`` has such an audit entry), with
    their drops by reason, in the order of ``providers``: to whoever reads the prompt,
    such a source is as missing as one whose leg failed. ``partly``: instead, those
    that lost some of them, not all (the rest were ranked as any other frame): the
    prompt holds less of such a source than it offered."""
    faults = dropped_frames(result)
    out = []
    for p in result.get("providers") or []:
        offered = p.get("frames_offered")
        mine = faults.get(str(p.get("provider_id")))
        if p.get("status") != "ok" or not mine or not offered:
            continue
        if (sum(mine.values()) < offered) == partly:
            out.append((p, mine))
    return out
