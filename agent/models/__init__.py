"""Model adapters behind one seam: `Model.query(messages, tools) -> ModelResponse`."""

from agent.models.base import Model, ModelError, RetryPolicy
from agent.models.prices import PriceTable, load_prices
from agent.models.registry import (
    DEFAULT_MODEL,
    TEMPLATES_MODEL,
    ModelSpecError,
    check_credentials,
    parse_model_spec,
    resolve_model,
)

__all__ = [
    "DEFAULT_MODEL",
    "TEMPLATES_MODEL",
    "Model",
    "ModelError",
    "ModelSpecError",
    "PriceTable",
    "RetryPolicy",
    "check_credentials",
    "load_prices",
    "parse_model_spec",
    "resolve_model",
]
