"""Budgets of one solve run: turns, input and output tokens, dollars, wall clock and GPU-seconds.

Budgets are checked between steps: a tool call in flight finishes, then the run ends cleanly with
status `budget_exhausted:<kind>`. The wall budget also bounds a model call in flight (`wall_left`):
a provider that does not answer cannot hold the run past it. Output tokens never overshoot: each model
call is asked for at most the output tokens left. Input tokens count the whole prompt of every
call (cached tokens included), since that is what grows with the conversation.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent.messages import ModelResponse
from agent.stops import RunStatus, RunStop

BudgetKind = Literal["turns", "in_tokens", "out_tokens", "usd", "wall", "gpu"]
BUDGET_KINDS: tuple[BudgetKind, ...] = get_args(BudgetKind)
BUDGET_FLAG_HELP = (
    "comma-separated KIND=VALUE: turns=40, in_tokens=2M, out_tokens=200k, usd=5, wall=30m, gpu=10m "
    "(durations: 90s, 30m, 1h30m, plain seconds; counts: 200k, 2M; 'none' removes a limit)"
)


class BudgetSpecError(ValueError):
    """A `--budget` value that cannot be parsed; the message names the flag and the accepted forms."""


class BudgetExhausted(RunStop):
    """One budget ran out: the run ends with status `budget_exhausted:<kind>`."""

    def __init__(self, kind: BudgetKind, detail: str = "") -> None:
        super().__init__(detail or f"the {kind} budget is used up")
        self.kind = kind

    @property
    def status(self) -> RunStatus:  # type: ignore[override]
        return cast(RunStatus, f"budget_exhausted:{self.kind}")


class BudgetLimits(BaseModel):
    """What a run may spend; None means no limit of that kind. Durations are seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turns: int | None = Field(default=40, ge=1, description="model calls")
    in_tokens: int | None = Field(default=None, ge=1, description="prompt tokens over all calls")
    out_tokens: int | None = Field(default=None, ge=1)
    usd: float | None = Field(default=10.0, gt=0)
    wall: float | None = Field(default=3600.0, gt=0, description="seconds since the run started")
    gpu: float | None = Field(default=900.0, gt=0, description="seconds of verify/profile/submit")

    def with_spec(self, spec: str | None) -> BudgetLimits:
        """These limits with the kinds named in a `--budget` spec replaced."""
        return self.model_copy(update=parse_budget_spec(spec)) if spec else self


class BudgetUsage(BaseModel):
    turns: int = 0
    in_tokens: int = 0
    out_tokens: int = 0
    usd: float = 0.0
    usd_unknown: bool = Field(default=False, description="some call had no known price")
    wall: float = 0.0
    gpu: float = 0.0


class Budget:
    """Counts what the run spent against its limits. `clock` is injectable for tests."""

    def __init__(self, limits: BudgetLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._started = clock()
        self._usage = BudgetUsage()

    def usage(self) -> BudgetUsage:
        return self._usage.model_copy(update={"wall": round(self._clock() - self._started, 3)})

    def charge_model_call(self, response: ModelResponse) -> None:
        used = self._usage
        used.turns += 1
        used.in_tokens += response.usage.prompt_tokens
        used.out_tokens += response.usage.output_tokens
        if response.cost_usd is None:
            used.usd_unknown = True
        else:
            used.usd += response.cost_usd

    def charge_gpu(self, seconds: float) -> None:
        self._usage.gpu += max(0.0, seconds)

    def exhausted(self) -> BudgetKind | None:
        used = self.usage().model_dump()
        for kind in BUDGET_KINDS:
            limit = getattr(self.limits, kind)
            if limit is not None and used[kind] >= limit:
                return kind
        return None

    def check(self) -> None:
        kind = self.exhausted()
        if kind is not None:
            raise BudgetExhausted(kind, f"the {kind} budget is used up ({self._describe(kind)})")

    def wall_left(self) -> float | None:
        """Seconds left of the wall budget (0 when used up), or None without a wall limit."""
        if self.limits.wall is None:
            return None
        return max(0.0, self.limits.wall - (self._clock() - self._started))

    def check_gpu(self) -> None:
        """Before starting GPU work: refuse it once the GPU budget is gone."""
        if self.limits.gpu is not None and self._usage.gpu >= self.limits.gpu:
            raise BudgetExhausted("gpu", f"the gpu budget is used up ({self._describe('gpu')})")

    def max_output_tokens(self, preferred: int | None) -> int | None:
        """What to ask the model for: `preferred`, capped by the output tokens left."""
        if self.limits.out_tokens is None:
            return preferred
        left = max(1, self.limits.out_tokens - self._usage.out_tokens)
        return left if preferred is None else min(preferred, left)

    def remaining_line(self) -> str:
        """One short line for the model: what is left of each limited budget."""
        parts = [self._describe(k, left=True) for k in BUDGET_KINDS if getattr(self.limits, k) is not None]
        return "[budget left: " + " · ".join(parts) + "]" if parts else "[budget: unlimited]"

    def _describe(self, kind: BudgetKind, *, left: bool = False) -> str:
        used = getattr(self.usage(), kind)
        limit = getattr(self.limits, kind)
        if limit is None:
            return f"{kind} {format_amount(kind, used)} used"
        amount = max(0.0, limit - used) if left else used
        unknown = " (+unpriced calls)" if kind == "usd" and self._usage.usd_unknown else ""
        return f"{kind} {format_amount(kind, amount)}/{format_amount(kind, limit)}{unknown}"


def format_amount(kind: BudgetKind, value: float) -> str:
    if kind in ("wall", "gpu"):
        return format_duration(value)
    if kind == "usd":
        return f"${value:.2f}"
    if kind in ("in_tokens", "out_tokens"):
        return format_count(value)
    return str(int(value))


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_count(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1_000:
        return f"{value / 1_000:.3g}k"
    return str(int(value))


_COUNT = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[kmg]?)$")
_COUNT_UNITS = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
_NO_LIMIT = ("none", "inf", "unlimited", "off")


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)?", re.I)
_DURATION_SCALE = {"ms": 1e-3, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> float:
    """The one duration parser: '90', '90s', '2m', '2min', '1.5h', '1h30m', '500ms' -> seconds (> 0).

    A bare number is seconds; parts add up ('1h30m' is 5400). ValueError names the accepted forms.
    """
    raw = text.strip().lower().replace(" ", "")
    seconds, end = 0.0, 0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != end:
            break
        unit = (match.group(2) or "s").lower()
        scale = 1e-3 if unit == "ms" else _DURATION_SCALE[unit[0]]
        seconds += float(match.group(1)) * scale
        end = match.end()
    if not raw or end != len(raw):
        raise ValueError(f"cannot read {text!r} as a duration; write e.g. 90, 90s, 2m, 2min or 1h30m")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be greater than 0")
    return seconds


def parse_budget_spec(spec: str) -> dict[str, float | int | None]:
    """`turns=40,usd=5,wall=30m,gpu=10m,in_tokens=2M,out_tokens=200k` -> {kind: limit}."""
    limits: dict[str, float | int | None] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or not raw:
            raise BudgetSpecError(f"--budget {spec!r}: {item!r} is not KIND=VALUE; {BUDGET_FLAG_HELP}")
        if key not in BUDGET_KINDS:
            raise BudgetSpecError(
                f"--budget {spec!r}: unknown budget {key!r}; choose from {', '.join(BUDGET_KINDS)}"
            )
        limits[key] = _parse_limit(key, raw.lower(), spec)
    return limits


def _parse_limit(kind: str, raw: str, spec: str) -> float | int | None:
    if raw in _NO_LIMIT:
        return None
    value: float | None = None
    if kind in ("wall", "gpu"):
        try:
            value = parse_duration(raw)
        except ValueError:
            value = None
        expected = "a duration like 90s, 30m or 1h30m"
    elif kind == "usd":
        try:
            value = float(raw.removeprefix("$"))
        except ValueError:
            value = None
        expected = "dollars like 5 or 2.50"
    else:
        match = _COUNT.match(raw.replace("_", ""))
        if match:
            value = float(match["n"]) * _COUNT_UNITS[match["unit"]]
        expected = "a count like 40, 200k or 2M"
    if value is None or not math.isfinite(value) or value <= 0:
        raise BudgetSpecError(f"--budget {spec!r}: {kind}={raw!r} is not {expected} (greater than 0)")
    return int(value) if kind in ("turns", "in_tokens", "out_tokens") else value
