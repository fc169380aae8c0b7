"""Recognition over every KernelBench level 1 and 2 task: each is traced on meta tensors and is
either covered by a plan or named as not covered, with the operators it lacks."""

from __future__ import annotations

from collections import Counter

from agent.templates import NotCovered, OpGraph, Plan
from agent.templates.plan import EwiseStage, GemmStage, ReduceStage


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
    assert covered["level1"] >= 50, covered
    assert covered["level2"] >= 30, covered


def test_not_covered_reasons_name_the_operators(kernelbench_plans) -> None:
    conv = kernelbench_plans["level1/50_conv_standard_2D__square_input__square_kernel.py"]
    assert isinstance(conv, NotCovered) and conv.ops == ["convolution"]
    pool = kernelbench_plans["level1/42_Max_Pooling_2D.py"]
    assert isinstance(pool, NotCovered) and "max_pool2d_with_indices" in pool.reason
    dropout = kernelbench_plans["level2/66_Matmul_Dropout_Softmax.py"]
    assert isinstance(dropout, NotCovered) and "bernoulli_" in dropout.ops
    named = [p for p in kernelbench_plans.values() if isinstance(p, NotCovered) and p.ops]
    assert len(named) >= 100


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


def test_losses_fuse_their_prologue_into_the_reduction(kernelbench_plans) -> None:
    mse = kernelbench_plans["level1/94_MSELoss.py"]
    assert isinstance(mse, Plan) and len(mse.stages) == 1
    stage = mse.stages[0]
    assert isinstance(stage, ReduceStage) and stage.op == "mean" and stage.src.fns == ["sub", "pow_scalar"]
    assert (stage.outer, stage.inner) == (1, 1)
    rms = kernelbench_plans["level1/36_RMSNorm_.py"]
    assert isinstance(rms, Plan) and [s.kind for s in rms.stages] == ["reduce", "ewise"]
