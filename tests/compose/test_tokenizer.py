"""Budgets in the model's tokens: ``compose_for_prompt(tokenizer=...)`` and the
canonical rule's stated error, on CJK and dense code, with MiniLM's tokenizer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hostd._tokenizer import HfTokenizer, load_tokenizer
from hostd.compose import check_floors, compose_for_prompt
from hostd.errors import ConfigError, FloorsExceedBudget
from hostd.protocol import ContextFrame

from ._helpers import frame
from ._token_fixtures import cjk_frames, dense_code_frames, minilm_tokenizer_path

API_MD = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
FIXTURES = {"CJK": cjk_frames, "dense code": dense_code_frames}
BUDGETS = (600, 1200, 2400)


@pytest.fixture(scope="module")
def minilm() -> HfTokenizer:
    return load_tokenizer(minilm_tokenizer_path())


def stated_bound(kind: str) -> float:
    """The most model tokens per canonical token docs/api.md states for ``kind``."""
    row = re.search(rf"^\| {re.escape(kind)} \|[^\n]*?up to ([0-9.]+)×", API_MD, re.MULTILINE)
    assert row is not None, f"docs/api.md states no bound for {kind}"
    return float(row.group(1))


@pytest.mark.parametrize("kind", sorted(FIXTURES))
@pytest.mark.parametrize("budget", BUDGETS)
def test_with_a_tokenizer_the_prompt_never_exceeds_the_budget_in_its_tokens(
    minilm: HfTokenizer, kind: str, budget: int
) -> None:
    frames = FIXTURES[kind]()
    result = compose_for_prompt(frames, budget, tokenizer=minilm)
    assert result.audit.included(), "the budget holds some evidence"
    counted = minilm(result.prompt)
    assert counted <= budget
    assert result.tokens_used == counted == result.model_tokens
    # each included entry's tokens are its block's count in the model's tokens
    assert result.audit.policy["tokenizer"] == minilm.name
    usage = result.prompt_usage()
    assert usage["tokens"] == counted and usage["tokenizer"] == minilm.name
    assert usage["bytes"] == len(result.prompt.encode())
    assert usage["canonical_tokens"] == (usage["bytes"] + 3) // 4
    # the canonical count of the same prompt is lower on this text: budgeting by it
    # would have let more in than the model's budget holds
    assert usage["canonical_tokens"] < counted


@pytest.mark.parametrize("kind", sorted(FIXTURES))
@pytest.mark.parametrize("budget", BUDGETS)
def test_without_a_tokenizer_the_stated_error_bound_holds(
    minilm: HfTokenizer, kind: str, budget: int
) -> None:
    result = compose_for_prompt(FIXTURES[kind](), budget)
    assert result.tokens_used <= budget
    assert minilm(result.prompt) <= stated_bound(kind) * budget
    usage = result.prompt_usage()
    assert usage == {"bytes": len(result.prompt.encode()), "canonical_tokens": result.tokens_used}


def test_any_callable_counts_and_a_whole_prompt_over_budget_drops_the_last_frame() -> None:
    # A counter that charges 50 tokens more for a whole prompt than for its parts:
    # fitted block by block, the prompt is then counted whole and trimmed to fit.
    def words(text: str) -> int:
        return len(text.split()) + (50 if text.count("<frame") > 1 else 0)

    frames = [("p", frame(f"f{n}", 0.9 - n / 10, " ".join(["w"] * 40))) for n in range(4)]
    result = compose_for_prompt(frames, 240, tokenizer=words)
    assert words(result.prompt) <= 240
    dropped = [e for e in result.audit.excluded() if e.detail.get("whole_prompt")]
    assert dropped and all(e.reason == "over_budget" for e in dropped)
    assert result.audit.policy["tokenizer"].endswith("<locals>.words")  # a callable's name


def test_floors_are_priced_in_the_tokenizers_tokens(minilm: HfTokenizer) -> None:
    floor = {"label": "pinned", "content": "漢字" * 200}
    floors = check_floors([floor], 1000, tokenizer=minilm)
    (record,) = floors.records
    assert record.tokens >= 400  # two tokens a pair of characters, not 1200 bytes / 4 = 300
    with pytest.raises(FloorsExceedBudget):
        check_floors([floor], 400, tokenizer=minilm)
    check_floors([floor], 400)  # canonically it fits: 1200 bytes are 300 tokens
    result = compose_for_prompt(cjk_frames(), 1000, floors=floors, tokenizer=minilm)
    assert minilm(result.prompt) <= 1000


def test_a_bad_tokenizer_file_or_count_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="host.tokenizer: .* is not a tokenizer.json") as exc:
        HfTokenizer(bad)
    # The library's own words about the file, not only its exception's class.
    assert "(Exception)" not in str(exc.value) and "line 1 column" in str(exc.value)
    tiktoken = tmp_path / "cl100k_base.tiktoken"
    tiktoken.write_text("IQ== 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="a .tiktoken file is not one"):
        HfTokenizer(tiktoken)
    # A model's other JSON files are not it either: said so, not as a syntax error.
    config = tmp_path / "tokenizer_config.json"
    config.write_text('{"model_max_length": 512, "tokenizer_class": "BertTokenizer"}')
    with pytest.raises(ConfigError) as other:
        HfTokenizer(config)
    assert 'JSON, but no "model" in it' in str(other.value)
    assert "ships its tokenizer.json beside files such as tokenizer_config.json" in str(other.value)
    frames: list[tuple[str, ContextFrame]] = [("p", frame("f", 0.5, "text"))]

    def broken(text: str) -> Any:
        return "many"

    with pytest.raises(ValueError, match="not a token count"):
        compose_for_prompt(frames, 100, tokenizer=broken)


def test_a_daemon_refusing_its_tokenizer_names_the_config_file(tmp_path: Path) -> None:
    from hostd.config import load_config
    from hostd.server import Daemon

    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nstate_dir = "{tmp_path}/state"\ntokenizer = "tokenizer.json"\n')
    with pytest.raises(ConfigError) as exc:
        Daemon(load_config(config))
    assert str(exc.value).startswith(f"{config}: host.tokenizer: ")
    assert exc.value.data["file"] == str(config)
