"""The slot space: every combination the decision makers emit satisfies the families'
constraints, and kernels/tune.json declares the same space to the tuner."""

from __future__ import annotations

import json
import random

import pytest
import torch

from agent.templates import Plan
from agent.templates.instantiate import instantiate
from agent.templates.slots import Observation, SlotSpace, default_makers, initial_config
from agent.tune.space import DeviceLimits, Space, SpaceFile, shape_names


def _space(plan: Plan, **kwargs) -> tuple[SlotSpace, dict[str, int]]:
    space = SlotSpace(plan, **kwargs)
    return space, initial_config(space, default_makers(), Observation(plan=plan, gpu=DeviceLimits()))


@pytest.mark.slow
def test_first_guesses_are_valid_and_tune_json_declares_them(kernelbench_plans) -> None:
    plans = [p for p in kernelbench_plans.values() if isinstance(p, Plan)]
    assert len(plans) >= 80
    for plan in plans:
        space, config = _space(plan)
        assert space.valid(config), (plan.task, space.violations(config))
        files = instantiate(plan, config, tunable=space.tunable())
        tune = Space(
            SpaceFile.model_validate_json(files["kernels/tune.json"]),
            shapes=shape_names([i.model_dump() for i in plan.inputs]),
        )
        assert tuple(config[name] for name in tune.names) in tune.index, plan.task
        header = files["kernels/tune_config.h"]
        assert all(f"#define {name} {config[name]}" in header for name in tune.names)


@pytest.mark.slow
def test_repair_never_emits_an_invalid_combination(kernelbench_plans) -> None:
    rng = random.Random(7)
    names = ["level1/23_Softmax.py", "level1/47_Sum_reduction_over_a_dimension.py", "level1/94_MSELoss.py",
             "level1/40_LayerNorm.py", "level2/12_Gemm_Multiply_LeakyReLU.py", "level2/84_Gemm_BatchNorm_Scaling_Softmax.py"]  # fmt: skip
    for name in names:
        plan = kernelbench_plans[name]
        assert isinstance(plan, Plan)
        space, _ = _space(plan)
        for _ in range(25):
            wild = {s.name: rng.choice(s.values) for s in space.slots.values()}
            fixed = space.repair(wild)
            assert fixed is not None and space.valid(fixed), (name, space.violations(fixed or {}))


def test_constraints_between_slots(kernelbench_plans) -> None:
    column_sum = kernelbench_plans["level1/47_Sum_reduction_over_a_dimension.py"]  # INNER = 4095
    assert isinstance(column_sum, Plan)
    space, config = _space(column_sum)
    assert config["S0_VEC"] == 1
    assert not space.valid({**config, "S0_VEC": 4})
    assert space.repair({**config, "S0_VEC": 4}, pinned={"S0_VEC"}) is None
    assert not space.valid({**config, "S0_STRATEGY": 0, "S0_SPLIT": 16})  # SPLIT only with STRATEGY 2
    assert space.valid({**config, "S0_STRATEGY": 2, "S0_SPLIT": 16, "S0_ATOMIC": 1})

    mse = kernelbench_plans["level1/94_MSELoss.py"]  # one row of 2^30 elements
    assert isinstance(mse, Plan)
    space, config = _space(mse)
    assert config["S0_STRATEGY"] == 2 and config["S0_SPLIT"] > 1
    lse = kernelbench_plans["level2/64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU.py"]
    assert isinstance(lse, Plan)
    lse_space, lse_config = _space(lse)
    assert not lse_space.valid({**lse_config, "S1_ATOMIC": 1})  # atomics only for a plain sum or mean

    softmax = kernelbench_plans["level1/23_Softmax.py"]  # rows of 393216 floats: 1.5 MB
    assert isinstance(softmax, Plan)
    space, config = _space(softmax)
    # Past one block's shared memory, a cluster of 16 holds the row (96 KiB a block), cached.
    assert (config["S0_STRATEGY"], config["S0_CLUSTER"], config["S0_ALGO"]) == (2, 16, 2)
    assert space.valid({**config, "S0_CLUSTER": 8})  # 192 KiB a block still fits
    assert not space.valid({**config, "S0_CLUSTER": 4})  # 384 KiB does not
    assert not space.valid({**config, "S0_STRATEGY": 1})  # a cluster only with its strategy
    assert not space.valid({**config, "S0_STRATEGY": 1, "S0_CLUSTER": 1})  # a block cannot cache the row
    assert space.valid({**config, "S0_STRATEGY": 1, "S0_CLUSTER": 1, "S0_ALGO": 1})
    assert not space.valid({**config, "S0_ALGO": 1})  # the cluster caches its row
    before_hopper, _ = _space(softmax, gpu=DeviceLimits(compute_capability=80))
    assert not before_hopper.valid(config)  # clusters need sm_90
    instance = kernelbench_plans["level1/34_InstanceNorm.py"]  # groups of 512 x 512 floats: 1 MiB
    assert isinstance(instance, Plan)
    space, config = _space(instance)
    assert (config["S0_ALGO"], config["S0_CLUSTER"], config["S0_SPLIT"]) == (4, 16, 1)
    assert not space.valid({**config, "S0_SPLIT": 2}) and not space.valid({**config, "S0_CLUSTER": 2})

    layernorm = kernelbench_plans["level1/40_LayerNorm.py"]
    assert isinstance(layernorm, Plan)
    space, config = _space(layernorm)
    assert not space.valid({**config, "S0_ALGO": 0, "S0_SPLIT": 4})  # split needs one-pass statistics

    gemm = kernelbench_plans["level2/12_Gemm_Multiply_LeakyReLU.py"]
    assert isinstance(gemm, Plan)
    space, config = _space(gemm)
    assert config["S0_MATH"] == 0 and not space.valid({**config, "S0_MATH": 1})
    tf32, tf32_config = _space(gemm, allow_tf32=True)
    assert tf32.valid({**tf32_config, "S0_MATH": 1})


def test_a_convolution_starts_in_full_fp32_whatever_torch_s_cudnn_flag(
    kernelbench_plans, monkeypatch
) -> None:
    """The referee's reference runs full FP32 under every precision policy (TF32 off for cuDNN too,
    docs/precision.md), so a convolution's first candidate does, as a matmul's; TF32 only when the
    run allows it."""
    conv = kernelbench_plans["level2/57_Conv2d_ReLU_HardSwish.py"]
    assert isinstance(conv, Plan)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    space, config = _space(conv)
    assert config["S0_MATH"] == 0 and not space.valid({**config, "S0_MATH": 1})
    tf32, tf32_config = _space(conv, allow_tf32=True)
    assert tf32_config["S0_MATH"] == 0 and tf32.valid({**tf32_config, "S0_MATH": 1})


@pytest.mark.slow
def test_each_slot_belongs_to_one_decision_maker(mixed_plan) -> None:
    space = SlotSpace(mixed_plan)
    makers = default_makers()
    for slot in space.slots.values():
        assert sum(m.owns(slot) for m in makers) == 1, slot
    dims = {s.dimension for s in space.slots.values()}
    assert dims == {"config", "memory", "compute", "reduction"}
    tune = json.loads(instantiate(mixed_plan, _space(mixed_plan)[1])["kernels/tune.json"])
    assert 0 < len(tune["params"]) <= 12


@pytest.mark.slow
def test_tiles_start_as_wide_as_the_window_lets_them_and_flat_for_1d() -> None:
    """The direct tiled families start from the most threads and reuse whose input patch fits in
    48 KiB among the tiles that cover the output about as well as any; an output of height 1 (1D
    pooling as 2D) gets one row of threads, not four idle ones."""
    from agent.templates import recognize, trace_tasks
    from agent.templates.families import stage_constants
    from agent.templates.slots import TILE_SHAPES, tile_coverage, tile_shape
    from tests.templates.conftest import TASKS

    def shape(block_w: int, rows: int, out_w: int, out_h: int) -> dict[str, int]:
        return {"BLOCK_W": block_w, "ROWS": rows, "OUT_W": out_w, "OUT_H": out_h}

    # Level-1 problem 43's 62 x 62 outputs a plane: 8 x 128 tiles would leave half the block idle.
    assert tile_coverage({"OH": 62, "OW": 62}, shape(64, 4, 2, 2)) < 0.5
    assert tile_coverage({"OH": 62, "OW": 62}, shape(64, 4, 1, 1)) > 0.9
    assert tile_coverage({"OH": 512, "OW": 512}, shape(64, 4, 2, 2)) == 1.0

    plan = recognize(trace_tasks([TASKS / "pools.py"])[0])
    assert isinstance(plan, Plan)
    shapes = [tile_shape(s) for s in plan.stages]
    first = stage_constants(plan.stages[0])  # 2D max, 3 x 2 window, 7 x 66 outputs
    coverages = [tile_coverage(first, shape(*t)) for t in TILE_SHAPES]
    assert tile_coverage(first, shapes[0]) >= 0.9 * max(coverages)
    earlier = TILE_SHAPES[: TILE_SHAPES.index(tuple(shapes[0].values()))]
    assert all(tile_coverage(first, shape(*t)) < 0.9 * max(coverages) for t in earlier)
    assert shapes[2]["ROWS"] == 1 and shapes[2]["OUT_H"] == 1  # max_pool1d: output height 1
    space = SlotSpace(plan)
    config = initial_config(space, default_makers(), Observation(plan=plan, gpu=DeviceLimits()))
    assert space.valid(config) and config["S2_ROWS"] == 1


def test_a_column_reduction_keeps_eight_floats_a_thread_in_flight(kernelbench_plans) -> None:
    """Columns that allow no vectors (level-1 problem 47: 4095 of them) start at 8 rows per load
    batch; columns read as float4 start at 2, so each thread still has 8 floats in flight."""
    from agent.templates.plan import ReduceStage
    from agent.templates.slots import column_vec

    plan = kernelbench_plans["level1/47_Sum_reduction_over_a_dimension.py"]
    assert isinstance(plan, Plan)
    stage = next(s for s in plan.stages if isinstance(s, ReduceStage))
    assert stage.inner == 4095 and column_vec(stage) == 1
    _, config = _space(plan)
    prefix = next(name[: -len("UNROLL")] for name in config if name.endswith("UNROLL"))
    assert config[prefix + "VEC"] == 1 and config[prefix + "UNROLL"] == 8

    wide = stage.model_copy(update={"inner": 4096})
    assert column_vec(wide) == 4
    wide_plan = plan.model_copy(update={"stages": [wide if s is stage else s for s in plan.stages]})
    _, config = _space(wide_plan)
    assert config[prefix + "VEC"] * config[prefix + "UNROLL"] == 8
