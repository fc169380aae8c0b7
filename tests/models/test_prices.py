from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import Usage
from agent.models.prices import ModelPrice, PricesFileError, load_prices

MILLION = Usage(
    input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000
)


def test_cost_counts_each_kind_of_token_at_its_own_price() -> None:
    price = ModelPrice(input=2.0, output=10.0, cache_read=0.2, cache_write=2.5)

    assert price.cost_usd(Usage(input_tokens=500_000, output_tokens=100_000)) == pytest.approx(2.0)
    assert price.cost_usd(MILLION) == pytest.approx(2.0 + 10.0 + 0.2 + 2.5)


def test_missing_cache_prices_charge_the_input_price() -> None:
    assert ModelPrice(input=3.0, output=0.0).cost_usd(MILLION) == pytest.approx(9.0)


def test_dated_snapshots_use_their_undated_entry_and_unknown_models_cost_none() -> None:
    prices = load_prices()

    assert prices.price_of("anthropic", "claude-haiku-4-5-20251001") == prices.price_of(
        "anthropic", "claude-haiku-4-5"
    )
    assert prices.price_of("openai", "gpt-4o-2024-08-06") == prices.price_of("openai", "gpt-4o")
    assert prices.price_of("openai", "gpt-4o") is not None
    assert prices.cost_usd("openai", "my-finetune", MILLION) is None
    assert prices.cost_usd("anthropic", "gpt-4o", MILLION) is None


def test_user_file_overrides_and_extends_the_bundled_table(tmp_path: Path) -> None:
    prices_file = tmp_path / "prices.toml"
    prices_file.write_text(
        '["openai:gpt-4o"]\ninput = 1.0\noutput = 2.0\n\n["openai:Qwen/Qwen3-Coder-30B"]\ninput = 0.0\noutput = 0.0\n'
    )

    prices = load_prices(prices_file)

    assert prices.price_of("openai", "gpt-4o") == ModelPrice(input=1.0, output=2.0)
    assert prices.cost_usd("openai", "Qwen/Qwen3-Coder-30B", MILLION) == 0.0
    assert prices.price_of("anthropic", "claude-opus-5-5") is not None


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ('["openai:x"]\ninput = 1.0\n', "bad entry"),
        ('["openai:x"]\ninput = 1.0\noutput = 1.0\ncahce_read = 0.1\n', "bad entry"),
        ('["openai:x"]\ninput = -1.0\noutput = 1.0\n', "bad entry"),
        ("not toml [", "cannot read"),
    ],
)
def test_bad_prices_file_is_a_clear_error(tmp_path: Path, content: str, complaint: str) -> None:
    prices_file = tmp_path / "prices.toml"
    prices_file.write_text(content)

    with pytest.raises(PricesFileError, match=complaint):
        load_prices(prices_file)


def test_missing_prices_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PricesFileError, match="cannot read"):
        load_prices(tmp_path / "nope.toml")
