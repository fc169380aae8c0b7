"""Operator policies (the dispatch mode runs on CPU tensors too) and tolerance policies."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from agent.referee.policy import TOLERANCES, TolerancePolicy, check_policy_name, tolerance_policy
from sandbox.workers.referee.op_policy import (
    FORWARD_LABEL,
    forbidden,
    is_allowed,
    make_recorder,
    op_key,
    ops_under,
    unseen_by,
)


def record(fn) -> dict[str, int]:
    recorder = make_recorder()
    with torch.no_grad(), recorder:
        fn()
    return dict(recorder.counts)


def test_op_names_from_the_mode_and_the_profiler_agree() -> None:
    assert op_key("aten.relu.default") == op_key("aten::relu") == ("aten", "relu")
    assert op_key("aten::add.Tensor") == ("aten", "add")
    assert op_key("my_ext::fused.default") == ("my_ext", "fused")


def test_allocation_views_and_layout_copies_are_allowed_under_strict() -> None:
    x = torch.randn(4, 6)

    def glue() -> None:
        y = torch.empty_like(x)
        z = torch.zeros(3, 3)
        x.t().contiguous().view(6, 4).reshape(24)[2:5]
        x.unsqueeze(0).expand(2, 4, 6).permute(2, 0, 1)
        y.copy_(x)
        z.fill_(1.0)
        x.clone()
        x.size(0), x.shape, x.stride()

    counts = record(glue)
    assert counts, "the mode saw nothing"
    assert forbidden("strict", counts) == {}


@pytest.mark.parametrize(
    ("name", "fn", "op"),
    [
        ("relu", lambda x, w: torch.relu(x), "aten.relu.default"),
        ("matmul", lambda x, w: x @ w, "aten.mm.default"),
        ("add", lambda x, w: x + 1, "aten.add.Tensor"),
        ("dtype conversion", lambda x, w: x.to(torch.float16), "aten._to_copy.default"),
        ("aten directly", lambda x, w: torch.ops.aten.mm.default(x, w), "aten.mm.default"),
        ("functional", lambda x, w: torch.nn.functional.gelu(x), "aten.gelu.default"),
    ],
)
def test_compute_is_forbidden_under_strict_and_allowed_under_kernelbench(name: str, fn, op: str) -> None:
    x, w = torch.randn(4, 6), torch.randn(6, 5)
    counts = record(lambda: fn(x, w))
    assert op in forbidden("strict", counts), name
    assert forbidden("kernelbench", counts) == {}


def test_a_copy_between_devices_is_host_offload_under_strict() -> None:
    host = torch.randn(3)
    counts = record(lambda: torch.empty(3, device="meta").copy_(host))
    assert forbidden("strict", counts) == {"aten.copy_.default[cross-device]": 1}
    assert forbidden("strict", record(lambda: torch.empty(3).copy_(host))) == {}


def test_ops_called_from_cpp_reach_the_mode() -> None:
    # layer_norm's composite implementation calls native_layer_norm from C++.
    counts = record(lambda: torch.nn.functional.layer_norm(torch.randn(4, 8), (8,)))
    assert "aten.native_layer_norm.default" in counts


def test_a_candidate_registered_operator_is_its_own_and_allowed() -> None:
    assert is_allowed("strict", "kernel_agent_test.fused.default")
    assert not is_allowed("strict", "torchvision::nms")
    assert not is_allowed("strict", "prims.add.default")


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        is_allowed("lenient", "aten.relu.default")
    with pytest.raises(ValueError, match="unknown policy"):
        check_policy_name("lenient")


def test_the_profiler_sees_torch_inside_a_custom_operator_the_mode_does_not() -> None:
    @torch.library.custom_op("kernel_agent_test::policy_hidden_relu", mutates_args=())
    def hidden(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

    x = torch.randn(8)
    recorder = make_recorder()
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function(FORWARD_LABEL), recorder:
            hidden(x)
        torch.relu(x)  # outside the label: not the candidate's
    mode_counts = dict(recorder.counts)
    assert not any(op_key(n) == ("aten", "relu") for n in mode_counts)
    nested = ops_under(prof.events(), FORWARD_LABEL)
    assert nested.get("aten::relu") == 1  # once, though clamp_min runs inside it
    assert "aten::clamp_min" not in nested
    assert "aten::relu" in forbidden("strict", unseen_by(mode_counts, nested))


def test_uninitialized_allocations_read_nan_under_the_poisoning_recorder() -> None:

    import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)
    from sandbox.workers.referee.candidate_trials import poison_tensor

    recorder = make_recorder(on_uninitialized=poison_tensor)
    x = torch.randn(5, 7)
    floats = (torch.float16, torch.bfloat16, torch.float64)
    with (
        torch.no_grad(),
        profile(activities=[ProfilerActivity.CPU]) as prof,
        record_function(FORWARD_LABEL),
        recorder,
    ):
        fresh = [torch.empty(3, 4, dtype=dtype) for dtype in floats]
        like = torch.empty_like(x)
        strided = torch.empty_strided((3, 4), (8, 1))  # storage beyond the view's elements
        new = x.new_empty(6)
        ints = torch.empty(4, dtype=torch.int32)
    for tensor in (*fresh, like, strided, new):
        assert torch.isnan(tensor).all(), tensor
    assert ints.tolist() == [-1, -1, -1, -1]
    counts = dict(recorder.counts)
    assert (
        "aten.fill_.Scalar" not in counts and "aten.set_.source_Storage" not in counts
    )  # not the candidate's
    assert ops_under(prof.events(), FORWARD_LABEL) == {
        "aten::empty": 4,
        "aten::empty_like": 1,
        "aten::empty_strided": 1,
        "aten::new_empty": 1,
    }


def test_tolerance_lookup_by_dtype() -> None:
    default = TOLERANCES["default"]
    assert default.for_dtype("float32").as_list() == [1e-2, 1e-2, 1e-2]
    assert default.for_dtype("bfloat16").norm_rtol == 2e-2
    assert default.for_dtype("int64").atol == 0 and default.for_dtype("bool").rtol == 0
    assert TOLERANCES["tight"].for_dtype("float32").atol < default.for_dtype("float32").atol
    assert tolerance_policy("tight") is TOLERANCES["tight"]
    with pytest.raises(ValueError, match="unknown tolerance"):
        tolerance_policy("loose")
    custom = TolerancePolicy(name="x", per_dtype={"float32": default.for_dtype("float32")})
    with pytest.raises(ValueError, match="'default'"):
        tolerance_policy(custom)


def test_torch_compute_captured_into_a_cuda_graph_while_the_model_is_built_is_a_violation() -> None:
    from agent.referee.assemble import policy_report

    captured = {"setup_captured_ops": {"aten.mm.default": 1, "aten.empty.memory_format": 2}}
    strict = policy_report("strict", captured)  # type: ignore[arg-type]
    assert strict.forbidden == {"aten.mm.default": 1}
    assert any("captured into a CUDA graph" in v and "aten.mm.default x1" in v for v in strict.violations)
    assert policy_report("kernelbench", captured).ok  # type: ignore[arg-type]


def test_own_kernels_replayed_from_a_cuda_graph_are_allowed_and_noted() -> None:
    from agent.referee.assemble import policy_report

    own = {"setup_captured_ops": {"aten.empty_like.default": 1}, "graph_launches": 1.0}
    report = policy_report("strict", own)  # type: ignore[arg-type]
    assert report.ok
    assert "the forward launches 1 CUDA graph(s) a call" in report.notes


def test_the_recorder_counts_nothing_as_captured_outside_a_capture() -> None:
    recorder = make_recorder()
    with recorder:
        torch.ones(3) + 1
    assert recorder.counts and not recorder.captured
