"""The slot space of a plan and the decision makers that fill it.

Every slot belongs to one dimension and one decision maker (the seed's four agents): config
(block size, grid, elements per thread), memory (vector width, tiling, shared-memory caching),
compute (unroll, fast-math, TF32) and reduction (strategy, split, atomics, algorithm). Each
maker proposes values for its own slots from what it observes: the stage's sizes, the GPU's SM
count and shared memory, and the times of the candidates judged so far. The constraints of the
families (families.py, the same expressions kernels/tune.json declares) are enforced by
`SlotSpace.repair`: a combination that breaks one is never emitted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from agent.templates.families import (
    Dimension,
    family_of,
    prefixed,
    stage_constants,
    stage_constraints,
)
from agent.templates.plan import (
    ConvStage,
    EwiseStage,
    GemmStage,
    NormStage,
    Plan,
    PoolStage,
    ReduceStage,
    ScanStage,
    SoftmaxStage,
    Stage,
    numel,
)
from agent.tune.expr import Expr
from agent.tune.space import DeviceLimits

Config = dict[str, int]
DIMENSIONS: tuple[Dimension, ...] = ("config", "memory", "compute", "reduction")


@dataclass(frozen=True)
class Slot:
    name: str  # S0_BLOCK
    local: str  # BLOCK
    stage: str
    values: tuple[int, ...]
    dimension: Dimension


class SlotSpace:
    """All slots of a plan, their constraints, and the constants and device limits those read."""

    def __init__(self, plan: Plan, gpu: DeviceLimits | None = None, *, allow_tf32: bool = False) -> None:
        self.plan = plan
        self.gpu = gpu or DeviceLimits()
        self.slots: dict[str, Slot] = {}
        self.env: dict[str, int] = dict(self.gpu.names())
        self.checks: dict[str, list[tuple[str, Expr]]] = {}
        self._points: dict[str, list[Config]] = {}
        for stage in plan.stages:
            for decl in family_of(stage).slots:
                name = prefixed(stage, decl.name)
                self.slots[name] = Slot(name, decl.name, stage.name, decl.values, decl.dimension)
            texts, constants = stage_constraints(stage, allow_tf32=allow_tf32)
            self.env.update(constants)
            self.checks[stage.name] = [(t, Expr(t)) for t in texts]

    def stage_slots(self, stage: str) -> list[Slot]:
        return [s for s in self.slots.values() if s.stage == stage]

    def violations(self, config: Config) -> list[str]:
        names = {**self.env, **config}
        bad = [
            f"{n}={config.get(n)} is not one of {s.values}"
            for n, s in self.slots.items()
            if config.get(n) not in s.values
        ]
        if bad:
            return bad
        return [text for checks in self.checks.values() for text, expr in checks if not expr.evaluate(names)]

    def valid(self, config: Config) -> bool:
        return not self.violations(config)

    def repair(self, config: Config, pinned: frozenset[str] | set[str] = frozenset()) -> Config | None:
        """`config` if it is valid, else the valid point that changes the fewest of its slots, never
        a pinned one (each stage's constraints involve only its own slots, so stages are repaired
        one by one); None when no valid point keeps the pinned values."""
        fixed = dict(config)
        for stage in self.plan.stages:
            slots = self.stage_slots(stage.name)
            names = {**self.env, **fixed}
            if all(expr.evaluate(names) for _, expr in self.checks[stage.name]) and all(
                fixed.get(s.name) in s.values for s in slots
            ):
                continue
            choices = [(fixed[s.name],) if s.name in pinned else s.values for s in slots]
            best: tuple[int, int, Config] | None = None
            for point in itertools.product(*choices):
                trial = {s.name: v for s, v in zip(slots, point, strict=True)}
                if not all(expr.evaluate({**names, **trial}) for _, expr in self.checks[stage.name]):
                    continue
                changed = sum(trial[s.name] != fixed.get(s.name) for s in slots)
                distance = sum(
                    abs(s.values.index(trial[s.name]) - _position(s, fixed.get(s.name))) for s in slots
                )
                if best is None or (changed, distance) < best[:2]:
                    best = (changed, distance, trial)
            if best is None:
                return None
            fixed.update(best[2])
        return fixed

    def valid_points(self, stage: str) -> list[Config]:
        """Every valid combination of one stage's slots (a few thousand at most)."""
        if stage not in self._points:
            slots = self.stage_slots(stage)
            points = []
            for point in itertools.product(*(s.values for s in slots)):
                trial = {s.name: v for s, v in zip(slots, point, strict=True)}
                names = {**self.env, **trial}
                if all(expr.evaluate(names) for _, expr in self.checks[stage]):
                    points.append(trial)
            self._points[stage] = points
        return self._points[stage]

    def tunable(self, max_params: int = 12, max_points: int = 50_000) -> dict[str, list[int]]:
        """What kernels/tune.json declares: the slots with more than one feasible value, the
        heaviest stage's first, while the space stays small enough for the tuner."""
        declared: dict[str, list[int]] = {}
        size = 1
        for stage in sorted(self.plan.stages, key=lambda s: -stage_weight(s)):
            points = self.valid_points(stage.name)
            for slot in self.stage_slots(stage.name):
                feasible = sorted({p[slot.name] for p in points})
                if len(feasible) < 2 or len(declared) >= max_params or size * len(feasible) > max_points:
                    continue
                declared[slot.name] = feasible
                size *= len(feasible)
        return declared

    def key(self, config: Config) -> str:
        return ",".join(f"{k}={config[k]}" for k in sorted(config))


def _position(slot: Slot, value: int | None) -> int:
    if value in slot.values:
        return slot.values.index(value)
    return 0 if value is None else min(range(len(slot.values)), key=lambda i: abs(slot.values[i] - value))


def _nearest(slot: Slot, wanted: float) -> int:
    return min(slot.values, key=lambda v: (abs(v - wanted), v))


@dataclass
class Observation:
    """What every decision maker sees: the plan's stages and sizes, the GPU, and the judged
    candidates (config key -> median ms, None for a failure)."""

    plan: Plan
    gpu: DeviceLimits
    times: dict[str, float | None] = field(default_factory=dict)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.plan.stages if s.name == name)


class DecisionMaker:
    """One dimension's agent: a first value for each of its slots, then one-slot perturbations."""

    dimension: Dimension = "config"

    def owns(self, slot: Slot) -> bool:
        return slot.dimension == self.dimension

    def initial(self, slot: Slot, obs: Observation) -> int:
        return slot.values[0]

    def alternatives(self, slot: Slot, value: int) -> Iterator[int]:
        """Neighbouring values, nearest first, alternating up and down."""
        i = slot.values.index(value) if value in slot.values else 0
        for step in range(1, len(slot.values)):
            for j in (i + step, i - step):
                if 0 <= j < len(slot.values):
                    yield slot.values[j]


# The direct tiled families' first tiles, most threads and reuse first: 64 x 4 threads at 2 x 2
# outputs each (a 3 x 3 window's patch is 1.27 reads per output), down to what a wide window's
# patch leaves room for in 48 KiB (level-1 problem 45: an 11 x 11 window, 64 x 1 threads).
TILE_SHAPES = ((64, 4, 2, 2), (64, 4, 1, 1), (128, 2, 1, 1), (64, 2, 1, 1), (128, 1, 1, 1), (64, 1, 1, 1))
# An output of height 1 (1D as 2D: level-1 problems 41 and 44) would leave all rows but one idle.
# 4 outputs a thread measured faster than 8 there (57% against 53% of the floor on an H200, 41).
ROW_TILE_SHAPES = ((128, 1, 4, 1), (128, 1, 2, 1), (128, 1, 1, 1), (64, 1, 1, 1))


def tile_shape(stage: Stage) -> dict[str, int]:
    """BLOCK_W, ROWS, OUT_W, OUT_H of the first tile the family's constraints allow (the patch
    fits) among those that cover the output best: a tile wider than the output leaves threads idle
    and loads a patch nobody reads (level-1 problem 43, 64 x 64 outputs a plane: 8 x 128 tiles
    would idle half the block)."""
    constants = stage_constants(stage)
    checks = [Expr(text) for text in family_of(stage).constraints]
    fitting = []
    for block_w, rows, out_w, out_h in ROW_TILE_SHAPES if constants["OH"] == 1 else TILE_SHAPES:
        shape = {"BLOCK_W": block_w, "ROWS": rows, "OUT_W": out_w, "OUT_H": out_h}
        if all(check.evaluate({**constants, **shape}) for check in checks):
            fitting.append(shape)
    if not fitting:
        return {"BLOCK_W": 32, "ROWS": 1, "OUT_W": 1, "OUT_H": 1}
    best = max(tile_coverage(constants, shape) for shape in fitting)
    return next(shape for shape in fitting if tile_coverage(constants, shape) >= TILE_COVERAGE_SLACK * best)


TILE_COVERAGE_SLACK = 0.9  # within 10% of the best coverage, the earlier (more reuse) tile wins


def tile_coverage(constants: dict[str, int], shape: dict[str, int]) -> float:
    """The share of a tiling's outputs that are real: 1.0 when the tiles divide the output."""
    tile_h, tile_w = shape["ROWS"] * shape["OUT_H"], shape["BLOCK_W"] * shape["OUT_W"]
    oh, ow = constants["OH"], constants["OW"]
    return (oh / (-(-oh // tile_h) * tile_h)) * (ow / (-(-ow // tile_w) * tile_w))


class ConfigAgent(DecisionMaker):
    dimension = "config"

    def initial(self, slot: Slot, obs: Observation) -> int:
        stage = obs.stage(slot.stage)
        if slot.local == "GRID_PER_SM":
            return 1024
        if slot.local == "EPI_BLOCK":
            return 256
        if slot.local in ("BLOCK_W", "ROWS"):
            return tile_shape(obs.stage(slot.stage))[slot.local]
        if slot.local in ("BLOCK_M", "BLOCK_N"):
            return _nearest(slot, 128)  # with 8 x 8 a thread: 256 threads, each B value read by 16
        if isinstance(stage, ReduceStage) and stage.inner == 1:
            return _nearest(slot, 128 if stage.r <= 256 else 256 if stage.r <= 4096 else 512)
        if isinstance(stage, SoftmaxStage | ScanStage):
            return _nearest(slot, 128 if stage.d <= 1024 else 512 if stage.d >= 8192 else 256)
        if isinstance(stage, NormStage):
            count = stage.outer * stage.inner
            return _nearest(slot, 128 if count < 1024 else 512 if count >= 65536 else 256)
        return _nearest(slot, 256)


class MemoryAgent(DecisionMaker):
    dimension = "memory"

    def initial(self, slot: Slot, obs: Observation) -> int:
        if slot.local == "ITEMS":  # a scan's elements per thread: two float4 loads in flight
            return _nearest(slot, 8)
        if slot.local == "KT":  # a short K in one or two steps: fewer barriers
            return _nearest(slot, 32)
        # The widest vector the operands allow; repair() lowers it when a size does not divide.
        can = stage_constants(obs.stage(slot.stage)).get("CAN_VEC", 1)
        return _nearest(slot, can)


# A column reduction's thread loads UNROLL rows of VEC floats before it adds any: at 2 x 1 floats
# (level-1 problems 47-53, 4095 columns: no vectors) an H200 read 83% of the bandwidth floor;
# 8 floats a thread keeps about 64 KiB a SM in flight, what its memory latency asks for.
COLUMN_FLOATS_IN_FLIGHT = 8


def column_vec(stage: ReduceStage) -> int:
    """The vector width a column reduction gets: the widest its operands allow that divides INNER."""
    can = stage_constants(stage).get("CAN_VEC", 1)
    return max(v for v in (1, 2, 4) if v <= can and stage.inner % v == 0)


class ComputeAgent(DecisionMaker):
    dimension = "compute"

    def initial(self, slot: Slot, obs: Observation) -> int:
        if slot.local == "UNROLL":
            stage = obs.stage(slot.stage)
            if isinstance(stage, ReduceStage) and stage.inner > 1:
                return _nearest(slot, COLUMN_FLOATS_IN_FLIGHT // column_vec(stage))
            return 2 if isinstance(stage, EwiseStage | ReduceStage) else 1
        if slot.local in ("OUT_W", "OUT_H"):
            return tile_shape(obs.stage(slot.stage))[slot.local]
        if slot.local in ("TM", "TN"):
            return _nearest(slot, 8)  # 64 FMAs for every 8 + 2 shared-memory reads
        # FAST and MATH start exact: the referee's reference is full FP32 under every precision policy
        # (docs/precision.md), and the policy and tolerance decide whether they may go on
        return 0


class ReductionAgent(DecisionMaker):
    dimension = "reduction"

    def initial(self, slot: Slot, obs: Observation) -> int:
        stage = obs.stage(slot.stage)
        sms = obs.gpu.sm_count
        if isinstance(stage, ReduceStage):
            return self._reduce(slot, stage, sms)
        if isinstance(stage, SoftmaxStage):
            rows_per_block = 4 if stage.d <= 1024 else 1
            fits = rows_per_block * stage.d * 4 <= obs.gpu.max_shared_optin - 4096
            cluster = 1 if fits else cluster_size(stage.d, obs.gpu)
            if slot.local == "CLUSTER":
                return cluster
            if slot.local == "STRATEGY":
                return 0 if stage.d <= 1024 else 2 if cluster > 1 else 1
            return 2 if fits or cluster > 1 else 1
        if isinstance(stage, NormStage):
            count = stage.outer * stage.inner
            # Past one block's shared memory, a cluster holds the group on chip (one read).
            cluster = 1 if count * 4 <= obs.gpu.max_shared_optin - 4096 else cluster_size(count, obs.gpu)
            split = 1 if stage.groups >= 2 * sms or cluster > 1 else -(-2 * sms // stage.groups)
            if slot.local == "SPLIT":
                return _nearest(slot, min(split, max(1, count // 4096)))
            if slot.local == "CLUSTER":
                return cluster
            # Welford (2) measured faster than the shared-memory cache (3) on an H200 even when the
            # group fits (LayerNorm over 4096: 0.26 vs 0.36 ms); the cache stays for exploration.
            return 4 if cluster > 1 else 2
        return slot.values[0]

    def _reduce(self, slot: Slot, stage: ReduceStage, sms: int) -> int:
        outputs = stage.outer * stage.inner
        if stage.inner == 1:
            few_rows = stage.outer < 2 * sms and stage.r >= 16384
            strategy = 2 if few_rows else (0 if stage.r <= 512 else 1)
            split = -(-4 * sms // stage.outer) if few_rows else 1
        else:
            few_columns = outputs < sms * 256 and stage.r >= 64
            strategy = 2 if few_columns and stage.r >= 4096 else (1 if few_columns else 0)
            split = -(-sms * 512 // outputs) if strategy == 2 else 1
        if slot.local == "STRATEGY":
            return strategy
        if slot.local == "SPLIT":
            return _nearest(slot, min(split, stage.r))
        return 0


# A cluster block's part of a row: at most about 100 KiB, so two blocks share a SM and one loads
# while the other computes or stores.
CLUSTER_PART_BYTES = 100 * 1024
CLUSTER_SIZES = (2, 4, 8, 16)


def cluster_size(count: int, gpu: DeviceLimits) -> int:
    """The smallest thread-block cluster whose blocks hold `count` floats on chip (parts of at most
    CLUSTER_PART_BYTES, else of what a block may have); 1 when there is none or no sm_90."""
    if gpu.compute_capability < 90:
        return 1
    for limit in (CLUSTER_PART_BYTES, gpu.max_shared_optin - 4096):
        for size in CLUSTER_SIZES:
            if -(-count // size) * 4 <= limit:
                return size
    return 1


def default_makers() -> list[DecisionMaker]:
    return [ConfigAgent(), MemoryAgent(), ComputeAgent(), ReductionAgent()]


def initial_config(space: SlotSpace, makers: list[DecisionMaker], obs: Observation) -> Config:
    """Each maker's first values for its own slots, repaired into a valid combination."""
    config: Config = {}
    for slot in space.slots.values():
        owner = next(m for m in makers if m.owns(slot))
        config[slot.name] = owner.initial(slot, obs)
    repaired = space.repair(config)
    if repaired is None:
        raise ValueError(f"{obs.plan.task}: no valid slot values (a family's constraints are contradictory)")
    return repaired


def stage_weight(stage: Stage) -> int:
    """How much a stage matters to the time: GEMMs first, then by elements read."""
    if isinstance(stage, GemmStage | ConvStage):
        return 1 << 62
    if isinstance(stage, EwiseStage):
        return numel(stage.program.shape)
    if isinstance(stage, PoolStage):
        return numel(stage.x.shape)
    return numel(stage.src.shape)
