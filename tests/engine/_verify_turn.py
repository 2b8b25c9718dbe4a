"""A verify turn driven through the stage's production steps, without a fan-out.

The fan-out (``hostd.engine._run``) sends each planned ``context/verify`` with
``ask_one`` in its task group, then runs ``VerifyStage.check`` (the one I/O step),
``merge`` and ``record``; these helpers call the same functions in the same order
with an in-process ``send_verify``, so the stage's decisions can be tested on their
own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import anyio

from hostd.engine.verify import (
    SendVerify,
    StageResult,
    VerifyPlan,
    VerifyReply,
    VerifyStage,
    ask_one,
)
from hostd.protocol import ContextFrame, FrameId

__all__ = ["ask_all", "finish", "turn"]


async def ask_all(
    stage: VerifyStage,
    plan: VerifyPlan,
    send_verify: SendVerify,
    *,
    limits_ms: Mapping[str, float] | None = None,
    limit_ms: float = 60_000,
) -> dict[str, VerifyReply]:
    """Every planned verify, concurrently, each by ``ask_one`` under its own deadline
    (``limits_ms``, else ``limit_ms``: the fan-out's is the provider's leg deadline)."""
    replies: dict[str, VerifyReply] = {}
    start = anyio.current_time()

    async def one(pid: str) -> None:
        limit = (limits_ms or {}).get(pid, limit_ms)
        replies[pid] = await ask_one(
            pid, plan.asks[pid], send_verify, deadline=start + limit / 1000, limit_ms=limit
        )

    async with anyio.create_task_group() as tg:
        for pid in plan.asks:
            tg.start_soon(one, pid)
    return replies


async def finish(
    stage: VerifyStage,
    fresh: Iterable[tuple[str, ContextFrame]],
    *,
    plan: VerifyPlan,
    replies: Mapping[str, VerifyReply] | None = None,
    upstream_excluded: Iterable[FrameId] = (),
    distrusted: Mapping[str, str] | Iterable[str] = (),
) -> StageResult:
    """``check`` → ``merge`` → ``record``, as the fan-out ends a turn."""
    checked = await stage.check(
        plan,
        replies or {},
        fresh,
        upstream_excluded=upstream_excluded,
        distrusted=distrusted,
    )
    result = stage.merge(checked)
    stage.record(result)
    return result


async def turn(
    stage: VerifyStage,
    fresh: Iterable[tuple[str, ContextFrame]],
    *,
    session: str | None = None,
    can_verify: Callable[[str], bool] | Mapping[str, bool] | None = None,
    send_verify: SendVerify | None = None,
    limit_ms: float = 60_000,
) -> StageResult:
    """One whole turn; without ``send_verify`` (or ``can_verify``) nothing is revalidated."""
    if send_verify is None or can_verify is None:
        plan = stage.plan(session, can_verify=lambda _pid: False)
        return await finish(stage, fresh, plan=plan)
    plan = stage.plan(session, can_verify=can_verify)
    replies = await ask_all(stage, plan, send_verify, limit_ms=limit_ms)
    return await finish(stage, fresh, plan=plan, replies=replies)
