"""Recognition over every KernelBench level 1 and 2 task: each is traced on meta tensors and is
either covered by a plan or named as not covered, with the operators it lacks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from agent.templates import NotCovered, OpGraph, Plan, recognize, trace_tasks
from agent.templates.plan import ConvStage, EwiseStage, GemmStage, ReduceStage
from tests.templates.conftest import TASKS


def test_every_task_traces_on_meta(kernelbench_graphs) -> None:
    assert len(kernelbench_graphs) == 200
    failed = {k: str(g) for k, g in kernelbench_graphs.items() if not isinstance(g, OpGraph)}
    assert not failed
    # No memory was allocated: the 6 GB inputs of level 1 were meta tensors.
    assert {g.device for g in kernelbench_graphs.values() if isinstance(g, OpGraph)} == {"meta"}
    softmax = kernelbench_graphs["level1/23_Softmax.py"]
    assert isinstance(softmax, OpGraph) and softmax.inputs[0].shape == [4096, 393216]


def test_every_task_is_covered_or_named(kernelbench_plans) -> None:
    assert len(kernelbench_plans) == 200
    for key, plan in kernelbench_plans.items():
        if isinstance(plan, NotCovered):
            assert plan.reason, key
        else:
            assert plan.stages and plan.ops and plan.family, key
    covered = Counter(k.split("/")[0] for k, p in kernelbench_plans.items() if isinstance(p, Plan))
    assert covered["level1"] >= 96, covered
    assert covered["level2"] >= 90, covered


def test_not_covered_reasons_name_the_operators(kernelbench_plans) -> None:
    exclusive = kernelbench_plans["level1/92_cumsum_exclusive.py"]
    assert isinstance(exclusive, NotCovered) and "cat" in exclusive.ops and "cat" in exclusive.reason
    dropout = kernelbench_plans["level2/66_Matmul_Dropout_Softmax.py"]
    assert isinstance(dropout, NotCovered) and "bernoulli_" in dropout.ops
    named = [
        p for p in kernelbench_plans.values()
        if isinstance(p, NotCovered) and p.reason.startswith("operators not covered")
    ]  # fmt: skip
    assert len(named) >= 3 and all(p.ops and all(op in p.reason for op in p.ops) for p in named)


def test_cumsum_cumprod_and_a_reverse_cumsum_are_scan_stages(kernelbench_plans) -> None:
    from agent.templates.plan import ScanStage

    for name, op, reverse in (
        ("89_cumsum", "sum", False),
        ("90_cumprod", "prod", False),
        ("91_cumsum_reverse", "sum", True),
    ):
        plan = kernelbench_plans[f"level1/{name}.py"]
        assert isinstance(plan, Plan) and plan.family == "scan" and len(plan.stages) == 1, name
        stage = plan.stages[0]
        assert isinstance(stage, ScanStage) and (stage.op, stage.rows, stage.d) == (op, 32768, 32768), name
        assert stage.reverse is reverse, name  # flip, cumsum, flip: one reverse scan, no copies
        assert plan.outputs[0].buf == stage.out and plan.outputs[0].is_contiguous(), name


@pytest.mark.slow
def test_a_scan_over_another_dimension_is_named_not_covered() -> None:
    from agent.templates import recognize
    from agent.templates.graph import OpGraph, trace_tasks
    from tests.templates.conftest import TASKS

    graph = trace_tasks([TASKS / "scans.py"])[0]
    assert isinstance(graph, OpGraph)
    assert isinstance(recognize(graph), Plan)
    for node in graph.nodes:  # the first cumsum, over dimension 1 of (4, 1000), asked over dimension 0
        if node.name == "cumsum":
            node.args[1] = node.args[1].model_copy(update={"value": 0})
            break
    plan = recognize(graph)
    assert isinstance(plan, NotCovered) and "only the last is covered" in plan.reason


def test_max_and_average_pooling_are_pool_stages(kernelbench_plans) -> None:
    from agent.templates.plan import PoolStage

    for number, name, op, spatial in (
        (41, "Max_Pooling_1D", "max", 2), (42, "Max_Pooling_2D", "max", 2), (43, "Max_Pooling_3D", "max", 3),
        (44, "Average_Pooling_1D", "avg", 2), (45, "Average_Pooling_2D", "avg", 2), (46, "Average_Pooling_3D", "avg", 3),
    ):  # fmt: skip
        plan = kernelbench_plans[f"level1/{number}_{name}.py"]
        assert isinstance(plan, Plan) and plan.family == "pooling", name
        stage = plan.stages[0]
        assert isinstance(stage, PoolStage) and (stage.op, stage.spatial) == (op, spatial), name
    one_d = kernelbench_plans["level1/41_Max_Pooling_1D.py"].stages[0]  # type: ignore[union-attr]
    assert one_d.kernel == [1, 8] and one_d.dilation == [1, 3] and one_d.padding == [0, 4]


def test_activation_chains_fuse_into_one_pass(kernelbench_plans) -> None:
    for name in ("19_ReLU", "20_LeakyReLU", "21_Sigmoid", "22_Tanh", "25_Swish", "26_GELU_", "27_SELU_",
                 "28_HardSigmoid", "29_Softplus", "30_Softsign", "31_ELU", "32_HardTanh", "88_MinGPTNewGelu"):  # fmt: skip
        plan = kernelbench_plans[f"level1/{name}.py"]
        assert isinstance(plan, Plan) and len(plan.stages) == 1, name
        assert isinstance(plan.stages[0], EwiseStage) and plan.family == "elementwise"


def test_gemm_epilogues_and_transposes(kernelbench_plans) -> None:
    plan = kernelbench_plans["level2/12_Gemm_Multiply_LeakyReLU.py"]
    assert isinstance(plan, Plan) and len(plan.stages) == 1
    gemm = plan.stages[0]
    assert isinstance(gemm, GemmStage) and gemm.epilogue is not None
    assert [i.fn for i in gemm.epilogue.instrs] == ["add", "mul", "leaky_relu"]
    transposed = kernelbench_plans["level1/18_Matmul_with_transposed_both.py"]
    assert isinstance(transposed, Plan)
    stage = transposed.stages[0]
    assert isinstance(stage, GemmStage) and stage.a.stride == [1, 2048] and stage.b.stride == [1, 8192]


def test_a_matrix_times_a_vector_is_one_row_reduction_and_a_short_k_gemm_goes_direct(
    kernelbench_plans,
) -> None:
    """Level 1's problem 4 (2048 x 1048576 times a vector) sums each row of A times the vector,
    fused, no GEMM; problem 9 (K of 32) goes to the direct kernel, the rest to cuBLAS."""
    from agent.templates.families import family_of

    gemv = kernelbench_plans["level1/4_Matrix_vector_multiplication_.py"]
    assert isinstance(gemv, Plan) and len(gemv.stages) == 1
    stage = gemv.stages[0]
    assert isinstance(stage, ReduceStage) and stage.op == "sum" and stage.src.fns == ["mul"]
    assert (stage.outer, stage.r, stage.inner) == (2048, 1048576, 1)
    vector = stage.src.operands[1].view
    assert vector.shape == [1048576] and vector.buf == "in1"  # B read in place, broadcast along rows
    direct = {
        key: [family_of(s).name for s in plan.stages]
        for key, plan in kernelbench_plans.items()
        if isinstance(plan, Plan) and any(isinstance(s, GemmStage) for s in plan.stages)
    }
    short = {key for key, families in direct.items() if "gemm_direct" in families}
    assert short == {
        "level1/9_Tall_skinny_matrix_multiplication_.py"
    }  # K 32; problem 7's K 64 stays on cuBLAS
    assert kernelbench_plans["level1/9_Tall_skinny_matrix_multiplication_.py"].family == "short-K gemm"


def test_losses_fuse_their_prologue_into_the_reduction(kernelbench_plans) -> None:
    mse = kernelbench_plans["level1/94_MSELoss.py"]
    assert isinstance(mse, Plan) and len(mse.stages) == 1
    stage = mse.stages[0]
    assert isinstance(stage, ReduceStage) and stage.op == "mean" and stage.src.fns == ["sub", "pow_scalar"]
    assert (stage.outer, stage.inner) == (1, 1)


def test_a_column_reduction_read_back_over_its_columns_fuses_into_one_column_apply(kernelbench_plans) -> None:
    """RMSNorm over channels (level-1 problem 36): the mean of x^2 over 64 channels and x / rms
    are one stage that reads x once; of levels 1 and 2, only that task has this shape."""
    rms = kernelbench_plans["level1/36_RMSNorm_.py"]
    assert isinstance(rms, Plan) and [s.kind for s in rms.stages] == ["reduce"]
    stage = rms.stages[0]
    assert isinstance(stage, ReduceStage) and (stage.r, stage.inner) == (64, 512 * 512)
    assert stage.apply is not None and stage.apply.fns == ["div"] and stage.apply.instrs[0].args == ["v", "w"]
    assert stage.epilogue is not None and stage.epilogue.fns == ["add", "sqrt"]
    assert stage.out == rms.outputs[0].buf and rms.buffers[stage.out].shape == [112, 64, 512, 512]
    fused = sorted(
        name
        for name, plan in kernelbench_plans.items()
        if isinstance(plan, Plan) and any(isinstance(s, ReduceStage) and s.apply for s in plan.stages)
    )
    assert fused == ["level1/36_RMSNorm_.py"]


@pytest.mark.slow
def test_a_column_apply_keeps_its_other_operands_and_refuses_what_it_cannot_hold(tmp_path: Path) -> None:
    """The colnorm test task: three column reductions read back, fused (an added tensor stays an
    operand); with 72 channels, more than a thread holds, each stays a reduction and a pass."""
    plan = recognize(trace_tasks([TASKS / "colnorm.py"])[0])  # type: ignore[arg-type]
    assert isinstance(plan, Plan) and [s.kind for s in plan.stages] == ["reduce"] * 3
    first = plan.stages[0]
    assert isinstance(first, ReduceStage) and first.apply is not None
    assert first.apply.fns == ["div", "add"] and [o.view.buf for o in first.apply.operands] == ["in1"]
    assert [s.op for s in plan.stages if isinstance(s, ReduceStage)] == ["mean", "sum", "max"]

    wide = tmp_path / "colnorm_wide.py"
    wide.write_text(
        (TASKS / "colnorm.py").read_text().replace("torch.randn(5, 48, 10, 30)", "torch.randn(5, 72, 10, 30)")
    )
    plan = recognize(trace_tasks([wide])[0])  # type: ignore[arg-type]
    assert isinstance(plan, Plan)
    assert not any(isinstance(s, ReduceStage) and s.apply for s in plan.stages)
    assert [s.kind for s in plan.stages].count("reduce") == 3 and len(plan.stages) > 3


def test_every_convolution_of_level_1_is_a_conv_stage_and_the_depthwise_ones_go_direct(
    kernelbench_plans,
) -> None:
    from agent.templates.families import family_of

    convs = {k: p for k, p in kernelbench_plans.items() if k.startswith("level1/") and "conv" in k.lower()}
    assert len(convs) == 35
    depthwise = {k for k in convs if "depthwise" in k}
    assert len(depthwise) == 5  # problems 82-86
    for key, plan in convs.items():
        assert isinstance(plan, Plan), key
        assert {s.kind for s in plan.stages} == {"conv"}, key  # depthwise-separable: two of them
        families = [family_of(s).name for s in plan.stages]
        if key in depthwise:  # the direct template; separable's pointwise half stays cuDNN's
            assert plan.family == "depthwise convolution" and families[0] == "dwconv", key
            assert families[1:] in ([], ["conv"]), key
        else:
            assert plan.family == "convolution" and set(families) == {"conv"}, key
    transposed = convs[
        "level1/79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__.py"
    ]
    stage = transposed.stages[0]
    assert isinstance(stage, ConvStage) and stage.transposed and stage.spatial == 1


def test_a_convolutions_bias_and_activation_fold_into_its_epilogue(kernelbench_plans) -> None:
    plan = kernelbench_plans["level2/1_Conv2D_ReLU_BiasAdd.py"]
    assert isinstance(plan, Plan) and len(plan.stages) == 1
    stage = plan.stages[0]
    assert isinstance(stage, ConvStage) and stage.epilogue is not None
    assert [i.fn for i in stage.epilogue.instrs] == ["add", "relu", "add"]
    bias = stage.epilogue.operands[0].view
    assert bias.stride[:2] == [0, 1] and set(bias.stride[2:]) == {0}  # the bias broadcast over channels
