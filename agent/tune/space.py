"""The tuning space a kernel declares in `kernels/tune.json`, and its valid points.

    {
      "mode": "runtime",                       # or "define" (one build per point)
      "params": {"BLOCK": [64, 128, 256, 512], "VEC": [1, 2, 4]},
      "constraints": ["in0_1 % VEC == 0"],     # all must hold
      "threads": "BLOCK",                      # threads per block, checked <= max_threads
      "shared_memory": "BLOCK * 4",            # bytes per block, checked <= max_shared
      "default": {"BLOCK": 256, "VEC": 4},     # the untuned start (runtime: TUNE in model_new.py wins)
      "constants": {"N": 4096}
    }

Expressions see the parameters, `constants`, the device limits (max_threads, max_shared,
max_shared_optin, warp_size, sm_count) and the task's input shapes (`in0_1` is dimension 1 of
input 0, `in0_numel` its element count). Every point is checked here, before it can cost any
GPU time: invalid points are never measured and never counted against a budget.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from agent.gpus import capability_number, compute_capability, first_device
from agent.tune.expr import Expr, ExprError
from sandbox.safe_files import SkippedEntry, read_regular

SPACE_FILE = "kernels/tune.json"
MAX_PARAMS = 12
MAX_VALUES = 64
MAX_POINTS = 200_000
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Config = dict[str, int]
Point = tuple[int, ...]


class SpaceError(ValueError):
    """The space file cannot be used; the message is written for the model to act on."""


class DeviceLimits(BaseModel):
    """What constraints may compare against; H100/H200 values unless a GPU says otherwise."""

    name: str = "unknown"
    max_threads: int = 1024
    max_shared: int = 48 * 1024
    max_shared_optin: int = 227 * 1024
    warp_size: int = 32
    sm_count: int = 132
    compute_capability: int = Field(
        default=90, description="major * 10 + minor: 90 for sm_90 (clusters need it)"
    )

    @classmethod
    def detect(cls) -> DeviceLimits:
        """The first visible GPU's limits, from torch (agent.gpus.first_device); the defaults without one."""
        try:
            props = first_device()
        except Exception:
            return cls()
        if props is None:
            return cls()
        return cls(
            name=props.name,
            max_threads=props.max_threads_per_block,
            max_shared_optin=props.shared_memory_per_block_optin or cls().max_shared_optin,
            warp_size=props.warp_size,
            sm_count=props.sm_count,
            compute_capability=props.major * 10 + props.minor,
        )

    @classmethod
    def visible(cls) -> DeviceLimits | None:
        """H100/H200 limits at the visible GPU's compute capability (nvidia-smi: no CUDA context);
        None without a GPU."""
        arch = compute_capability()
        return cls(compute_capability=capability_number(arch)) if arch else None

    def names(self) -> dict[str, int]:
        return self.model_dump(exclude={"name"})


class SpaceFile(BaseModel):
    mode: Literal["runtime", "define"] = "runtime"
    params: dict[str, list[int]] = Field(description="name -> ordered candidate values")
    constraints: list[str] = Field(default_factory=list)
    threads: str | None = None
    shared_memory: str | None = None
    default: dict[str, int] | None = None
    constants: dict[str, int] = Field(default_factory=dict)

    model_config = {"extra": "forbid"}

    @field_validator("params")
    @classmethod
    def _check_params(cls, params: dict[str, list[int]]) -> dict[str, list[int]]:
        if not params:
            raise ValueError("declare at least one parameter")
        if len(params) > MAX_PARAMS:
            raise ValueError(f"at most {MAX_PARAMS} parameters")
        for name, values in params.items():
            if not _IDENT.match(name):
                raise ValueError(f"parameter name {name!r} is not an identifier")
            if not values or len(values) > MAX_VALUES:
                raise ValueError(f"{name}: give 1 to {MAX_VALUES} values")
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: values repeat")
        return params


def shape_names(inputs: list[Any]) -> dict[str, int]:
    """`in{i}_{d}` and `in{i}_numel` for every tensor input of a task spec (ArgSpec or dict)."""
    names: dict[str, int] = {}
    for i, arg in enumerate(inputs):
        shape = arg.get("shape") if isinstance(arg, dict) else getattr(arg, "shape", None)
        if shape is None:
            continue
        numel = 1
        for d, size in enumerate(shape):
            names[f"in{i}_{d}"] = int(size)
            numel *= int(size)
        names[f"in{i}_numel"] = numel
    return names


class Space:
    """All valid points of a space file, enumerated once, in declaration order."""

    def __init__(
        self,
        file: SpaceFile,
        *,
        limits: DeviceLimits | None = None,
        shapes: Mapping[str, int] | None = None,
    ) -> None:
        self.file = file
        self.limits = limits or DeviceLimits()
        self.names: list[str] = list(file.params)
        self.values: list[list[int]] = [list(v) for v in file.params.values()]
        self.env: dict[str, int] = {**self.limits.names(), **dict(shapes or {}), **file.constants}
        clash = set(self.names) & set(self.env)
        if clash:
            raise SpaceError(f"parameter name(s) {sorted(clash)} clash with built-in names; rename them")
        self.total = 1
        for values in self.values:
            self.total *= len(values)
        if self.total > MAX_POINTS:
            raise SpaceError(
                f"the space has {self.total} points before constraints; keep it under {MAX_POINTS}"
            )
        self.checks = self._compile_checks()
        self.points: list[Point] = []
        self.rejected: Counter[str] = Counter()
        self._enumerate()
        if not self.points:
            top = ", ".join(f"{why} ({n})" for why, n in self.rejected.most_common(3))
            raise SpaceError(f"no point of the space satisfies the constraints; rejected by: {top}")
        self.index: dict[Point, int] = {p: i for i, p in enumerate(self.points)}
        self._positions = [{v: i for i, v in enumerate(values)} for values in self.values]

    # -- construction -------------------------------------------------------------------------
    def _compile_checks(self) -> list[tuple[str, Expr]]:
        checks: list[tuple[str, Expr]] = []
        try:
            for text in self.file.constraints:
                checks.append((text, Expr(text)))
            if self.file.threads:
                checks.append(
                    (
                        f"threads ({self.file.threads}) <= max_threads",
                        Expr(f"({self.file.threads}) <= max_threads"),
                    )
                )
            if self.file.shared_memory:
                smem = self.file.shared_memory
                checks.append((f"shared memory ({smem}) <= max_shared", Expr(f"({smem}) <= max_shared")))
        except ExprError as exc:
            raise SpaceError(str(exc)) from None
        known = set(self.names) | set(self.env)
        for text, expr in checks:
            unknown = expr.names - known
            if unknown:
                raise SpaceError(
                    f"constraint {text!r} uses unknown name(s) {sorted(unknown)}; known: parameters "
                    f"{self.names}, constants, device limits {sorted(self.limits.names())}, input shapes "
                    f"{sorted(k for k in self.env if k.startswith('in'))}"
                )
        return checks

    def _enumerate(self) -> None:
        # Each check runs as soon as its last parameter is bound, so whole subtrees are pruned.
        position = {name: i for i, name in enumerate(self.names)}
        by_level: list[list[tuple[str, Expr]]] = [[] for _ in self.names]
        for text, expr in self.checks:
            level = max((position[n] for n in expr.names if n in position), default=0)
            by_level[level].append((text, expr))
        pruned_below = [1] * (len(self.names) + 1)
        for level in range(len(self.names) - 1, -1, -1):
            pruned_below[level] = pruned_below[level + 1] * len(self.values[level])
        env = dict(self.env)
        chosen: list[int] = []

        def walk(level: int) -> None:
            if level == len(self.names):
                self.points.append(tuple(chosen))
                return
            name = self.names[level]
            for value in self.values[level]:
                env[name] = value
                reason = self._first_failure(by_level[level], env)
                if reason is not None:
                    self.rejected[reason] += pruned_below[level + 1]
                    continue
                chosen.append(value)
                walk(level + 1)
                chosen.pop()
            del env[name]

        walk(0)

    @staticmethod
    def _first_failure(checks: list[tuple[str, Expr]], env: Mapping[str, int]) -> str | None:
        for text, expr in checks:
            try:
                if not expr.evaluate(env):
                    return text
            except ExprError as exc:
                return f"{text}: {exc}"
        return None

    # -- queries --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[Point]:
        return iter(self.points)

    def config(self, point: Point) -> Config:
        return dict(zip(self.names, point, strict=True))

    def point(self, config: Mapping[str, int]) -> Point:
        return tuple(int(config[name]) for name in self.names)

    def key(self, point: Point) -> str:
        """Kernel Tuner's cache key: the values joined with commas, in parameter order."""
        return ",".join(str(v) for v in point)

    def describe(self, point: Point) -> str:
        return " ".join(f"{n}={v}" for n, v in zip(self.names, point, strict=True))

    def check(self, config: Mapping[str, Any]) -> str | None:
        """None when `config` is a valid point, else why not."""
        if set(config) != set(self.names):
            return f"parameters {sorted(config)} differ from the space's {self.names}"
        for name, values in zip(self.names, self.values, strict=True):
            if config[name] not in values:
                return f"{name}={config[name]} is not one of {values}"
        env = {**self.env, **{k: int(v) for k, v in config.items()}}
        return self._first_failure(self.checks, env)

    def is_valid(self, point: Point) -> bool:
        return point in self.index

    def coords(self, point: Point) -> list[float]:
        """Each value's position in its list, scaled to [0, 1] (power-of-two lists become log scale)."""
        return [
            pos[v] / (len(values) - 1) if len(values) > 1 else 0.0
            for v, pos, values in zip(point, self._positions, self.values, strict=True)
        ]

    def steps(self, point: Point) -> list[int]:
        return [pos[v] for v, pos in zip(point, self._positions, strict=True)]

    def neighbours(self, point: Point, radius: int = 1) -> list[Point]:
        """Valid points that differ in one parameter by at most `radius` positions in its list."""
        found: list[Point] = []
        steps = self.steps(point)
        for d, values in enumerate(self.values):
            for delta in range(-radius, radius + 1):
                j = steps[d] + delta
                if delta == 0 or not 0 <= j < len(values):
                    continue
                candidate = (*point[:d], values[j], *point[d + 1 :])
                if candidate in self.index:
                    found.append(candidate)
        return found

    def nearest(self, point_like: Mapping[str, int] | Point) -> Point:
        """The valid point closest (in list positions) to a possibly invalid or foreign point;
        a value missing from a list maps to the closest value by ratio."""
        raw = self.point(point_like) if isinstance(point_like, Mapping) else tuple(point_like)
        target = []
        for v, values in zip(raw, self.values, strict=True):
            best = min(
                range(len(values)), key=lambda i, v=v, values=values: (_ratio_distance(values[i], v), i)
            )
            target.append(best)
        snapped = tuple(values[i] for i, values in zip(target, self.values, strict=True))
        if snapped in self.index:
            return snapped
        return min(
            self.points,
            key=lambda p: (
                sum(abs(a - b) for a, b in zip(self.steps(p), target, strict=True)),
                self.index[p],
            ),
        )

    def signature(self) -> str:
        """Identity of the space (not of its default): same signature, same points and order."""
        body = self.file.model_dump(exclude={"default"})
        return hashlib.sha256(json.dumps([body, self.env], sort_keys=True).encode()).hexdigest()[:16]

    def rejection_summary(self, top: int = 3) -> str:
        if not self.rejected:
            return "no point rejected"
        parts = [f"{n} by {why!r}" for why, n in self.rejected.most_common(top)]
        return f"{self.total - len(self.points)} rejected: " + "; ".join(parts)


def _ratio_distance(a: int, b: int) -> float:
    if a > 0 and b > 0:
        return abs(a / b - 1) + abs(b / a - 1)
    return float(abs(a - b))


def parse_space_text(text: str, source: str = SPACE_FILE) -> SpaceFile:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpaceError(f"{source}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    try:
        return SpaceFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in exc.errors()
        )
        raise SpaceError(f"{source}: {problems}") from None


def load_space_file(root: Path) -> SpaceFile:
    skipped: list[SkippedEntry] = []
    data = read_regular(Path(root), SPACE_FILE, skipped)
    if data is None and skipped:
        raise SpaceError(f"{SPACE_FILE}: {skipped[0].reason}; write it as a regular file")
    if data is None:
        raise SpaceError(
            f"no {SPACE_FILE} in the workspace: declare the tunable parameters first (see skills/tuning/SKILL.md)"
        )
    return parse_space_text(data.decode("utf-8", errors="replace"))


def grid(params: Mapping[str, list[int]]) -> Iterator[Config]:
    """Every combination, constraints ignored (for tests and synthetic spaces)."""
    names = list(params)
    for values in itertools.product(*params.values()):
        yield dict(zip(names, values, strict=True))
