"""A memory write: one request to one provider, over its live connection.

``memory/remember`` and ``memory/forget`` (hostd's extension of the provider wire,
``hostd.protocol``'s ``_memory``) go to one provider, never fanned out. Its start is a
query leg's: on demand, waited for up to its start deadline. Then, as for a query,
the consent gate (C1, C2, C6) before anything is sent, and the capability: a provider
whose handshake declares no ``capabilities.remember`` is ``NotSupported`` (so is a
binding that carries no write: the codec says so before a byte is written). The
reply is the provider's commit: a write is answered only once it holds.

Which provider, when the request names none, is ``choose_writer``'s decision (pure):
the one provider that declares the capability, after every provider never handshaken
has been started to learn it. What a provider's refusal says is
``refusal_words`` (pure): its field and problem tokens in hostd's words, never its
message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import TypeVar

import anyio

from hostd._log import get_logger
from hostd.errors import (
    HostdError,
    InvalidParam,
    MethodNotFound,
    NoConsent,
    NotSupported,
    ProtocolFault,
    ProviderCrashed,
    ProviderError,
    ProviderTimeout,
    WriteRefused,
)
from hostd.protocol import CgpErrorCode
from hostd.transport import ProviderLink

from ._clock import now
from ._gate import ConsentGate, destination_of, missing_consent
from ._pool import ProviderPool, Slot
from ._run import no_consent_message

__all__ = [
    "WRITE_TIMEOUT_MS",
    "choose_writer",
    "refusal_words",
    "retired_refusal",
    "write_one",
]

log = get_logger("hostd.engine")

R = TypeVar("R")

#: The least a write waits for its reply when the request names no ``timeout_ms``: a
#: commit waits for the disk (``synchronous=FULL``), and a write given up may still
#: have been stored, so it is not bounded as tightly as a query (``timeout_ms``).
WRITE_TIMEOUT_MS = 10_000

#: A refusal's ``problem`` in hostd's words; another token is shown as it is.
_PROBLEMS = {
    "unknown_entry": "no such entry",
    "already_superseded": "that entry was already superseded",
    "not_valid_then": "that entry's window does not hold the new entry's valid_from",
    "not_a_timestamp": "not a UTC time YYYY-MM-DDTHH:MM:SS(.f+)?Z (F4)",
    "not_after_valid_from": "valid_to is not after valid_from",
    "unknown_kind": "a kind it does not store",
    "blank": "must not be blank",
    "not_an_entry_id": "not one of its entry ids (as mem-3)",
}


def choose_writer(declared: Mapping[str, bool | None]) -> str:
    """The provider a write goes to when the request names none: the one that declares
    ``capabilities.remember`` (``declared``: provider id -> whether its handshake does;
    ``None``: unknown, it could not be started). None or several: ``InvalidParam``
    naming them."""
    stores = sorted(pid for pid, yes in declared.items() if yes)
    if len(stores) == 1:
        return stores[0]
    if stores:
        return _refuse(
            f"several providers store memories ({', '.join(stores)}): name one in provider",
            stores,
        )
    unknown = sorted(pid for pid, yes in declared.items() if yes is None)
    others = sorted(pid for pid, yes in declared.items() if yes is False)
    said = f"none of {', '.join(others)} declares capabilities.remember" if others else ""
    if unknown:
        said += ("; " if said else "") + f"could not be started to ask: {', '.join(unknown)}"
    return _refuse(
        f"no configured provider stores memories ({said or 'none is configured'}); add one "
        "that does (python -m providers.memory) or name it in provider",
        [*others, *unknown],
    )


def _refuse(message: str, named: list[str]) -> str:
    raise InvalidParam(f"invalid params: provider: {message}", field="provider", providers=named)


def refusal_words(provider_id: str, exc: ProviderError) -> WriteRefused:
    """A provider's ``bad_request`` answer to a write, in hostd's words: the field and
    problem tokens it named (``refusal_tokens``), never its message."""
    field = exc.data.get("field")
    problem = exc.data.get("problem")
    why = _PROBLEMS.get(problem, problem) if isinstance(problem, str) else "no reason given"
    at = f"{field}: " if isinstance(field, str) else ""
    data = {k: v for k, v in (("field", field), ("problem", problem)) if v is not None}
    return WriteRefused(
        f"invalid params: {at}provider {provider_id!r} refused the write: {why}",
        provider=provider_id,
        **data,
    )


def retired_refusal(slot: Slot) -> ProviderCrashed | None:
    """What a write to ``slot`` is answered when a config reload took its provider out
    before the write was sent (``Slot.retired``, in the words its query legs get), and
    so nothing was written; None while it serves."""
    if slot.retired is None:
        return None
    why = slot.retired.message.removeprefix("provider ")
    return ProviderCrashed(
        f"provider {slot.spec.id!r} {why}; nothing was written", provider=slot.spec.id
    )


async def declared_writers(pool: ProviderPool) -> dict[str, bool | None]:
    """Whether each configured provider declares ``capabilities.remember``: from its
    last handshake, else started now (as a query leg starts it) to learn it; ``None``
    for one that could not be started within its start deadline."""
    unknown = [slot for slot in pool.slots.values() if slot.last_ack is None]

    async def learn(slot: Slot) -> None:
        with anyio.move_on_after(pool.start_timeout(slot)), suppress(HostdError):
            await pool.ready(slot)

    if unknown:
        async with anyio.create_task_group() as tg:
            for slot in unknown:
                tg.start_soon(learn, slot)
    return {
        pid: None if slot.last_ack is None else slot.last_ack.capabilities.remember is not None
        for pid, slot in pool.slots.items()
    }


async def write_one(
    pool: ProviderPool,
    consent: ConsentGate | None,
    slot: Slot,
    method: str,
    send: Callable[[ProviderLink, float], Awaitable[R]],
    *,
    kind: str | None = None,
    timeout_ms: float | None = None,
) -> R:
    """``send`` (one write on the connection, by the deadline it is given) to ``slot``'s
    provider: started if need be, its capability and consent checked first; its reply,
    once committed. ``kind``: the entry's kind, checked against the kinds it declares."""
    pid = slot.spec.id
    limit = pool.start_timeout(slot) + pool.settings.grace_period_s
    conn: ProviderLink | None = None
    with anyio.move_on_after(limit):
        conn = await pool.ready(slot)
    if conn is None:
        raise ProviderTimeout(f"provider {pid!r} not started within {limit * 1000:.0f} ms")
    reloaded = retired_refusal(slot)
    if reloaded is not None:  # a reload took it out while this write waited: unsent
        raise reloaded
    caps, info = conn.capabilities, conn.info
    assert caps is not None and info is not None  # a live connection has been handshaken
    if caps.remember is None:
        raise NotSupported(
            f"provider {pid!r} does not store memories: its handshake declares no "
            "capabilities.remember",
            provider=pid,
        )
    kinds = caps.remember.kinds
    if kind is not None and kinds and kind not in kinds:
        raise InvalidParam(
            f"invalid params: kind: provider {pid!r} stores {', '.join(kinds)}, not {kind!r}",
            field="kind",
            provider=pid,
        )
    missing = missing_consent(consent, pid, info)
    if missing:  # nothing is sent without it (C1, C2, C6)
        where = destination_of(consent, pid)
        raise NoConsent(
            no_consent_message(pid, missing, where), provider=pid, missing_scopes=missing
        )
    bound = timeout_ms if timeout_ms is not None else max(slot.spec.timeout_ms, WRITE_TIMEOUT_MS)
    deadline = now() + bound / 1000
    try:
        # Sent: a reload that retires the provider now waits for its answer (no await
        # since the check above, so none retired it in between unseen).
        with pool.writing(slot):
            return await send(conn, deadline)
    except TimeoutError:
        log.warning("provider.write.timeout", provider=pid, method=method, limit_ms=bound)
        raise ProviderTimeout(
            f"provider {pid!r} did not answer {method} within {bound:.0f} ms; the write may "
            "still have been stored",
            provider=pid,
        ) from None
    except MethodNotFound:
        raise NotSupported(
            f"provider {pid!r} declares capabilities.remember but has no {method} method",
            provider=pid,
        ) from None
    except ProviderError as exc:
        if exc.cgp_code is CgpErrorCode.BAD_REQUEST:
            raise refusal_words(pid, exc) from None
        data = {k: v for k, v in exc.data.items() if k != "cgp_code"}
        raise type(exc)(f"provider {pid!r}: {exc.message}", cgp_code=exc.cgp_code, **data) from None
    except HostdError as exc:
        exc = await conn.explain(exc, now() + limit)
        if isinstance(exc, ProviderCrashed) or (
            isinstance(exc, ProtocolFault) and exc.breaks_connection
        ):
            pool.broken(slot, conn, exc)
        raise exc from None
