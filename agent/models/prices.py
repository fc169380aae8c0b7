"""Prices per model (USD per million tokens) and the cost of one call. Unknown models cost None."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.messages import Usage

DEFAULT_PRICES_FILE = Path(__file__).with_name("prices.toml")

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


class ModelPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost_usd(self, usage: Usage) -> float:
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        per_million = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
        )
        return per_million / 1_000_000


class PriceTable(BaseModel):
    model_config = ConfigDict(frozen=True)

    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Keyed "provider:model"."""

    def price_of(self, provider: str, model: str) -> ModelPrice | None:
        for name in (model, _DATE_SUFFIX.sub("", model)):
            price = self.prices.get(f"{provider}:{name}")
            if price is not None:
                return price
        return None

    def cost_usd(self, provider: str, model: str, usage: Usage) -> float | None:
        price = self.price_of(provider, model)
        return None if price is None else price.cost_usd(usage)


class PricesFileError(ValueError):
    pass


def _read_prices_file(path: Path) -> dict[str, ModelPrice]:
    if path.is_dir():
        raise PricesFileError(f"cannot read prices file {path}: it is a folder; give a TOML file")
    if not path.exists():
        raise PricesFileError(f"cannot read prices file {path}: no such file")
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise PricesFileError(f"cannot read prices file {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PricesFileError(f"cannot read prices file {path}: not TOML ({exc})") from exc
    for key, entry in data.items():
        try:
            ModelPrice.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in (key, *first["loc"]))
            raise PricesFileError(
                f'bad entry in prices file {path}: {where}: {first["msg"]}; each ["provider:model"] table '
                f"takes input, output and optionally cache_read, cache_write (USD per million tokens)"
            ) from exc
    return {key: ModelPrice.model_validate(entry) for key, entry in data.items()}


def load_prices(path: Path | None = None) -> PriceTable:
    """The bundled price table, with the entries of `path` (same TOML format) added or replacing."""
    prices = _read_prices_file(DEFAULT_PRICES_FILE)
    if path is not None:
        prices |= _read_prices_file(path)
    return PriceTable(prices=prices)
