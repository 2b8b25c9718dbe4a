"""``[host] tokenizer`` through a real daemon: the budget counts the model's tokens.

Real provider children answer; the daemon loads MiniLM's ``tokenizer.json`` (the
stand-in model tokenizer the ``semantic`` extra ships), counts the composition in a
worker thread and reports the prompt's size both ways in ``usage.prompt``.
"""

from __future__ import annotations

from typing import Any

import pytest

from hostd._tokenizer import load_tokenizer
from hostd.client import connect
from tests.compose._token_fixtures import minilm_tokenizer_path

pytestmark = pytest.mark.anyio

PROVIDERS: dict[str, dict[str, Any]] = {
    "alpha": {"frames": 8, "size": 400},
    "beta": {"frames": 8, "size": 400},
}


@pytest.mark.parametrize("strategy", ["score", "mmr"])
async def test_the_prompt_fits_the_budget_in_the_tokenizers_tokens(
    start_daemon: Any, strategy: str
) -> None:
    path = minilm_tokenizer_path()
    tokenizer = load_tokenizer(path)
    daemon = await start_daemon(providers=PROVIDERS, tokenizer=str(path))
    async with connect(daemon.socket) as client:
        result = await client.compose("why", budget=600, strategy=strategy)
        plain = await client.query("why", budget=600)
    assert result.usage is not None and result.usage.prompt is not None
    usage = result.usage.prompt
    counted = tokenizer(result.prompt)
    assert result.prompt and counted <= 600
    assert usage.tokens == counted == result.audit.tokens_used
    assert usage.tokenizer == tokenizer.name == result.audit.policy["tokenizer"]
    assert usage.bytes == len(result.prompt.encode())
    assert usage.canonical_tokens == (usage.bytes + 3) // 4
    # the providers were asked in canonical tokens, one per model token the floors left
    assert sum(r.max_tokens or 0 for r in result.providers) >= 600
    assert "prompt" not in plain["usage"]  # context/query composes nothing
    assert await daemon.stop() == 0
