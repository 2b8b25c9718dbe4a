"""``hostd check-provider --binding mcp``: an MCP server checked the way the host uses it.

Self-contained: one entry point, ``check_mcp_provider``, over the host's own path,
never a second client: the transport starts the server (scrubbed environment plus
the provider's ``env``, own process group, the teardown ladder) and the ``mcp``
binding (``hostd.mcp``, the SDK's ``ClientSession``) initialises it, reads its
resources, calls the configured tools, cuts and scores what they serve, held to the
daemon's deadlines (``Deadlines``: the start's for the spawn and ``initialize``, a
call's for each query), so a server that passes is one the daemon starts. Each reply
is judged by the daemon's leg audit, as ``_checks`` judges the other bindings (the
query's row by the same ``reply_fault``: its frames, the reply as a whole, each
inline digest; a reply with no frame, or only with JSON that holds nothing, is a
warning; the frames named by title best score first, each with its size; asked again
with an unrelated goal, the same frames are a warning naming where the goal reaches
the server, ``{query}`` or ``{goal}`` in a tool's arguments, unless neither answer was
cut: ``same_answer``), so a server that passes is served by the daemon the same way.
The checks: the handshake (MCP ``initialize``, the tools named exist; H1–H3, C5 on the
handshake it answers the engine with), the tools it offers with their required arguments
(listed for the user: the engine asks for none but the configured ones), a query whose
frames are valid (F1–F5, D1, D4) and not quarantined (B1–B4), budget honesty at a tight
budget (B1, B3, B4), the kinds filter (Q1), the ``file://`` sources it serves against
the files on disk (F5, F17: what the host's re-read would find) and shutdown (the server
exits when its stdin closes, as MCP's stdio transport says). Malformed input and verify
are not asked of an MCP server: the host never sends either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio

from hostd.config import McpSettings
from hostd.engine import LegAudit, audit_leg
from hostd.errors import HostdError, ProviderCrashed, ProviderTimeout
from hostd.protocol import (
    PROTOCOL_VERSION,
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    UnverifiableRange,
    address_line_range,
    check_handshake,
    sha256_digest,
)
from hostd.transport import (
    EmptyResult,
    PartialResult,
    ProviderConnection,
    Redactor,
    secret_env_values,
)

from ._checks import (
    _GATES,
    CheckResult,
    Deadline,
    Deadlines,
    _errors,
    _fmt,
    _rules,
    frame_title,
    goal_probe_failed,
    no_frame_result,
    other_goal,
    provider_name,
    reply_fault,
    same_answer,
)

__all__ = ["check_mcp_provider"]

#: The checks that judge a query's answer, after the query check, in their order: ``not
#: run`` when the query check's query got none.
_AFTER_QUERY = ("budget honesty", "kinds filter", "file sources")
#: The checks after the handshake, before shutdown: ``not run`` when it failed, as the
#: other bindings' are (``_checks``), so nothing unjudged reads as missing.
_AFTER_HANDSHAKE = ("tools", "query", *_AFTER_QUERY)


def _not_run(results: list[CheckResult], names: Sequence[str], why: str) -> None:
    results.extend(CheckResult(name, False, f"not run: {why}", not_run=True) for name in names)


async def check_mcp_provider(
    command: Sequence[str],
    *,
    options: Mapping[str, Any] | None = None,
    goal: str = "how is the configuration loaded",
    budget: int = 400,
    deadlines: Deadlines | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    provider_id: str | None = None,
) -> list[CheckResult]:
    """Every check against a fresh server running ``command``, configured as
    ``[provider.mcp]`` would (``options``); never raises for a bad server.
    ``deadlines``: the daemon's (default: its defaults): the start's holds the spawn
    and ``initialize``, a call's each query, as the daemon holds them; ``env``: the
    provider's own variables (``[[provider]] env``), on top of the daemon's allow-list,
    their secret-named values scrubbed from what it says; ``provider_id``: its
    configured id (default: its command's name)."""
    settings = McpSettings.model_validate(dict(options or {})).model_dump()
    deadlines = deadlines or Deadlines.of()
    results: list[CheckResult] = []
    pid = provider_id or provider_name(command)
    async with anyio.create_task_group() as tg:
        try:
            conn = await ProviderConnection.open(
                pid,
                list(command),
                task_group=tg,
                binding="mcp",
                env=env,
                cwd=cwd,
                handshake_timeout=deadlines.start.seconds,
                options=settings,  # the binding registry's mcp row builds its client
                redactor=Redactor(secret_env_values(env or {})),  # the daemon's (``Launcher``)
            )
        except HostdError as exc:
            detail = f"{exc.reason}: {exc.message}"
            if isinstance(exc, ProviderTimeout):  # which bound it missed, and how to allow more
                bound = deadlines.start.why.split(";")[0]
                # Beside the time it names, before the causes the timeout goes on to give.
                missed, sep, causes = exc.message.partition("; ")
                detail = (
                    f"{exc.reason}: {missed} ({bound}; start_timeout_s in its [[provider]], "
                    f"or --start-timeout-s){sep}{causes}"
                )
            results.append(CheckResult("handshake", False, detail))
            # The start failed: the server is gone, its shutdown unjudged too.
            _not_run(results, (*_AFTER_HANDSHAKE, "shutdown"), _GATES["handshake"])
            tg.cancel_scope.cancel()
            return results
        try:
            await _run(conn, pid, results, settings, goal, budget, deadlines.call)
        finally:
            with anyio.CancelScope(shield=True):
                code = await conn.aclose()
            _shutdown(results, code)
        tg.cancel_scope.cancel()
    return results


def _shutdown(results: list[CheckResult], code: int | None) -> None:
    if code is not None and code >= 0:
        results.append(CheckResult("shutdown", True, f"exited with {code} when stdin closed"))
    else:
        how = f"signal {-code}" if code is not None else "an unknown way"
        detail = f"did not exit when its stdin closed (ended by {how})"
        results.append(CheckResult("shutdown", False, detail))


async def _run(
    conn: ProviderConnection,
    pid: str,
    results: list[CheckResult],
    settings: Mapping[str, Any],
    goal: str,
    budget: int,
    call: Deadline,
) -> None:
    ack = conn.ack
    assert ack is not None and conn.capabilities is not None
    bad = _errors(check_handshake(PROTOCOL_VERSION, ack))
    if bad:
        results.append(CheckResult("handshake", False, _fmt(bad), rules=tuple(_rules(bad))))
        _not_run(results, _AFTER_HANDSHAKE, _GATES["handshake"])
        return
    tools = [t["name"] for t in settings["tools"]] + (
        [settings["tool"]] if settings["tool"] else []
    )
    who = f"{ack.provider.name} {_version(conn)}"
    offers = f"tools {', '.join(sorted(tools))}" if tools else "resources"
    results.append(CheckResult("handshake", True, f"{who}; reads {offers}"))
    results.append(await _tools(conn))
    kinds = list(conn.capabilities.query.kinds)

    async def ask(query: ContextQuery) -> tuple[Any, str | None, str]:
        """The result, or none with the row's words for why, and the words each later
        check's ``not run`` row says when this was the query check's (the codec
        bindings' words, ``_checks``: each of their queries would end the same way)."""
        try:
            with anyio.fail_after(call.seconds):
                result = await conn.query(query)
        except TimeoutError:
            cause = "the query check missed its deadline, as each of this check's would"
            return None, call.missed(), cause
        except ProviderCrashed as exc:
            return None, f"{exc.reason}: {exc.message}", "the provider had already exited"
        except HostdError as exc:
            cause = (
                f"the query check's well-formed query was answered {exc.reason}, "
                "as each of this check's would be"
            )
            return None, f"{exc.reason}: {exc.message}", cause
        return result, None, ""

    query = ContextQuery(goal=goal, max_frames=8, max_tokens=budget)
    result, error, cause = await ask(query)
    if result is None:
        results.append(CheckResult("query", False, f"query failed: {error}"))
        # Each check that judges a query's answer is listed, so none reads as passed.
        _not_run(results, _AFTER_QUERY, cause)
        return
    audit = audit_leg(pid, query, result.frames, declared_kinds=kinds)
    fault = reply_fault(audit)  # as the pipe's query row: the frames, the reply, each digest
    if fault is not None:
        results.append(CheckResult("query", False, fault[0], rules=fault[1]))
    elif audit.offered == 0:
        if result.truncated:
            hint = "nothing fit max_tokens: truncated"
        elif isinstance(result, EmptyResult):
            # Why, in the words of the leg's note that `hostd compose` and `hostd status`
            # show: what it read or called, and that none of it matched.
            hint = result.why + ("; check the arguments its tools are given" if tools else "")
        elif tools:
            # The binding offers no empty answer, nor a part that matches none of the goal's
            # words beside one that does (docs/mcp.md): an answer may have come all the same.
            hint = "an empty answer is never offered: check the arguments its tools are given"
        else:
            hint = "it was asked for its resources: name a --tool?"
        instead = ""
        if not tools and isinstance(result, EmptyResult) and result.why == _NO_RESOURCES:
            # No goal helps: what it serves comes from tools, called only when named.
            instead = (
                "no goal helps a server that lists no resources, as its tools are called "
                "only when named: pass --tool NAME (the tools row lists them) with "
                "--arguments, or --provider ID to check it as its [[provider]] calls it"
            )
        results.append(no_frame_result(goal, hint=hint, ask=instead))
    else:
        detail = f"{audit.offered} valid frame(s), best first: {_ranked(audit.accepted)}"
        results.append(CheckResult("query", True, detail))
    row = results[-1]
    if isinstance(result, PartialResult):
        # A tool or read that gave nothing: the daemon serves the rest, degraded
        # (``provider_partial``), and its note says what was lost, in the same words.
        row.detail = f"{row.detail}; it lost part of its answer: {result.lost}"
        row.warning = row.warning or row.passed

    tight = ContextQuery(goal=goal, max_frames=1, max_tokens=8)
    small, error, _ = await ask(tight)
    held = audit_leg(pid, tight, small.frames if small else [], declared_kinds=kinds).quarantine
    breaches = [v for v in held if v.rule.startswith("B")]
    if error is not None or breaches:
        detail = error or f"the daemon would quarantine it: {_fmt(breaches)}"
        results.append(CheckResult("budget honesty", False, detail, rules=tuple(_rules(breaches))))
    else:
        detail = f"costs exact; max_tokens=8 answered with {len(small.frames)} frame(s)"
        results.append(CheckResult("budget honesty", True, detail))

    other = ContextQuery(goal=goal, kinds=["x-no-such-kind"], max_frames=8, max_tokens=budget)
    none, error, _ = await ask(other)
    q1 = list(audit_leg(pid, other, none.frames if none else []).quarantine)
    if error is not None or q1 or (none is not None and none.frames):
        detail = error or "frames of a kind the query did not ask for"
        results.append(CheckResult("kinds filter", False, detail, rules=("Q1",)))
    else:
        results.append(CheckResult("kinds filter", True, "kinds=[x-no-such-kind] → 0 frame(s)"))

    # Does the answer depend on the goal? Asked after every other query, as the other
    # bindings ask it (``_checks``), and said on the query row in the same words: a tool
    # whose arguments carry no {query} or {goal} is asked the same whatever the goal.
    if row.passed and audit.offered:
        same = await _same_whatever_asked(conn, pid, query, audit, result, kinds, call, settings)
        if same is not None:
            row.detail, row.warning = f"{row.detail}; {same[0]}", row.warning or same[1]

    results.append(_sources(audit.accepted))


async def _same_whatever_asked(
    conn: ProviderConnection,
    pid: str,
    query: ContextQuery,
    audit: LegAudit,
    result: ContextQueryResult,
    kinds: Sequence[str],
    call: Deadline,
    settings: Mapping[str, Any],
) -> tuple[str, bool] | None:
    """Asks ``query`` again with a goal unlike it and judges the two answers as the other
    bindings' check does (``same_answer``); a second query that missed its deadline or
    ended the server is a warning, one answered an error told the goals apart."""
    other = other_goal(query)
    try:
        with anyio.fail_after(call.seconds):
            again = await conn.query(other)
    except TimeoutError:
        return goal_probe_failed(f": {call.missed()}"), True
    except ProviderCrashed as exc:
        return goal_probe_failed(f", failed: {exc.reason}: {exc.message}"), True
    except HostdError:
        return None
    cut = result.truncated or again.truncated
    judged = audit_leg(pid, other, again.frames, declared_kinds=kinds)
    return same_answer(query, audit, judged, truncated=cut, where=goal_where(settings))


def goal_where(settings: Mapping[str, Any]) -> str:
    """Where the goal reaches an MCP server, as the query row's warning says it: only
    as ``{query}`` or ``{goal}`` in a string value of a tool's arguments (docs/mcp.md),
    naming the configured arguments that hold one, or saying that none does."""
    tools = [(t["name"], t["arguments"]) for t in settings["tools"]]
    if settings["tool"]:
        tools.insert(0, (settings["tool"], settings["arguments"]))
    held = [f"{name}.{path}" for name, arguments in tools for path in _holding(arguments)]
    how = (
        "the goal reaches an MCP server only as {query} or {goal} in a string value of a "
        f"tool's arguments ({_MCP_DOC})"
    )
    if not tools:
        return f"{how}; it was asked for its resources alone, which hostd scores"
    if not held:
        return (
            f"{how}, and none of its tools' arguments holds one: each tool is asked the "
            "same whatever the goal (put {query} in the argument a tool searches by)"
        )
    shown = ", ".join(held[:_SHOWN_ARGUMENTS])
    more = len(held) - _SHOWN_ARGUMENTS
    held_it = "it" if len(held) == 1 else "they"
    return (
        f"{how}: here {shown}{f' and {more} more' if more > 0 else ''}, yet the answer was "
        f"the same whatever {held_it} held"
    )


#: The leg's note for a server that lists no resources (the binding's ``_why_empty``).
_NO_RESOURCES = "it lists no resources"
#: Where the arguments that carry the goal are described.
_MCP_DOC = 'docs/mcp.md, "Keys: [provider.mcp]"'
#: Configured arguments a warning names, at most.
_SHOWN_ARGUMENTS = 3


def _holding(value: Any, path: str = "") -> list[str]:
    """The paths (``a.b``, ``a[0]``) of the string values in a tool's ``arguments`` that
    ``{query}`` or ``{goal}`` is filled into (``render_arguments``' rule)."""
    if isinstance(value, str):
        return [path] if "{query}" in value or "{goal}" in value else []
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _holding(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _holding(v, f"{path}[{i}]")]
    return []


def _version(conn: ProviderConnection) -> str:
    """The version the server gave, or that it gave none: the ack's stand-in
    (``unknown``, as a handshake needs one) read like a fault of the server's."""
    from hostd.mcp import McpBindingClient

    client = conn.client
    assert isinstance(client, McpBindingClient)  # the binding registry's mcp row
    return client.server_version or "(no version given)"


async def _tools(conn: ProviderConnection) -> CheckResult:
    """The tools the server offers and each one's required arguments: what a
    ``[provider.mcp] tools`` entry (or ``--tool``, ``--arguments``) names. Listed for the
    user; the daemon never asks, so a listing that fails is a warning."""
    from hostd.mcp import McpBindingClient, describe_tools

    client = conn.client
    assert isinstance(client, McpBindingClient)  # the binding registry's mcp row
    try:
        offered = await client.offered_tools()
    except HostdError as exc:
        return CheckResult("tools", True, f"not listed: {exc.reason}: {exc.message}", warning=True)
    return CheckResult("tools", True, describe_tools(offered))


#: Frames a query row names, at most, best first.
_SHOWN_FRAMES = 5


def _ranked(frames: Sequence[ContextFrame]) -> str:
    """The frames in the order a composition considers them (score descending, the frame
    id on ties), each by its title as the other bindings' query row shows titles
    (``frame_title``) and with its size in tokens: which of them a budget keeps."""
    ranked = sorted(frames, key=lambda f: (-f.score, f.id))
    shown = [
        f"{frame_title(f)} ({f.token_cost} tokens, score {f.score:.2f})"
        for f in ranked[:_SHOWN_FRAMES]
    ]
    more = len(ranked) - _SHOWN_FRAMES
    return ", ".join(shown) + (f", …and {more} more" if more > 0 else "")


def _sources(frames: Sequence[Any]) -> CheckResult:
    """F5, F17: each ``file://`` range it served, against the file on disk now."""
    checked = mismatched = 0
    for frame in frames:
        for prov in frame.provenance:
            if prov.type != "file" or not prov.uri or not prov.uri.startswith("file:"):
                continue
            path = Path(unquote(urlsplit(prov.uri).path))
            checked += 1
            data = b""
            with contextlib.suppress(OSError):
                data = path.read_bytes()
            try:
                addressed = address_line_range(data, prov.range) if prov.range else data
            except UnverifiableRange:
                mismatched += 1
                continue
            if sha256_digest(addressed) != prov.digest:
                mismatched += 1
    if not checked:
        return CheckResult("file sources", True, "no file:// evidence served", skipped=True)
    if mismatched:
        detail = f"{mismatched} of {checked} file range(s) differ from the file on disk"
        return CheckResult("file sources", False, detail, rules=("F5",))
    return CheckResult("file sources", True, f"{checked} file range(s) match the files on disk")
