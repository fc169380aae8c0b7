"""The effective-precision classifier on CPU tensors: eager's ladder and candidates are computed
with emulated TF32/FP16/BF16 rounding, the reference in float64."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from sandbox.workers.referee import precision as P


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _matmul_case() -> tuple[Callable[..., torch.Tensor], list[torch.Tensor]]:
    g = _gen(1)
    return (lambda a, b: a @ b), [torch.randn(128, 1024, generator=g), torch.randn(1024, 96, generator=g)]


def _conv_case() -> tuple[Callable[..., torch.Tensor], list[torch.Tensor]]:
    g = _gen(2)
    x = torch.rand(4, 32, 24, 24, generator=g)
    w = torch.randn(48, 32, 3, 3, generator=g) * 0.1
    return (lambda x, w: F.conv2d(x, w, padding=1)), [x, w]


def _sum_case() -> tuple[Callable[..., torch.Tensor], list[torch.Tensor]]:
    return (lambda x: x.sum(dim=1)), [torch.rand(64, 4096, generator=_gen(3))]


def _softmax_case() -> tuple[Callable[..., torch.Tensor], list[torch.Tensor]]:
    return (lambda x: torch.softmax(x, dim=-1)), [torch.randn(64, 2048, generator=_gen(4)) * 4]


CASES = {"matmul": _matmul_case, "conv2d": _conv_case, "row_sum": _sum_case, "softmax": _softmax_case}


def _ladder(
    fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor]
) -> tuple[dict[str, float], torch.Tensor]:
    reference = fn(*[t.double() for t in inputs])
    errors = {p: P.relative_error(P.emulated_output(fn, inputs, p), reference) for p in P.PRECISIONS}
    return errors, reference


def _half_accumulated_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A kernel that keeps its running sum in FP16 (the "float accumulation to half" fault)."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)
    for k in range(0, a.shape[1], 16):
        acc = (acc.float() + a[:, k : k + 16].half().float() @ b[k : k + 16].half().float()).half()
    return acc.float()


@pytest.mark.parametrize("case", sorted(CASES))
def test_honest_fp32_passes_the_strict_policy(case: str) -> None:
    fn, inputs = CASES[case]()
    errors, reference = _ladder(fn, inputs)
    # An honest kernel sums in another order than eager: same precision, a different error.
    honest = fn(*[t.flip(0).flip(0) for t in inputs])
    if case == "row_sum":
        honest = inputs[0].view(64, 64, 64).sum(dim=2).sum(dim=1)
    reading = P.classify(P.relative_error(honest, reference), errors)
    assert reading.measured == "fp32"
    assert P.check_policy(reading, "fp32").ok


@pytest.mark.parametrize("case", ["matmul", "conv2d"])
def test_tf32_gemm_and_conv_are_rejected_under_fp32_and_pass_under_tf32(case: str) -> None:
    fn, inputs = CASES[case]()
    errors, reference = _ladder(fn, inputs)
    # A TF32 kernel with its own accumulation order: inputs rounded, fp32 sums.
    candidate = fn(*[P.round_mantissa(t, 10) for t in inputs])
    reading = P.classify(P.relative_error(candidate, reference), errors)
    assert reading.measured == "tf32"
    strict = P.check_policy(reading, "fp32")
    assert not strict.ok
    assert "error consistent with TF32" in strict.line and "allowed: FP32" in strict.line
    assert P.check_policy(reading, "tf32").ok


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_candidates_are_classified_and_rejected_above_their_precision(
    case: str, precision: str
) -> None:
    fn, inputs = CASES[case]()
    errors, reference = _ladder(fn, inputs)
    candidate = P.emulated_output(fn, inputs, precision)
    reading = P.classify(P.relative_error(candidate, reference), errors)
    assert precision in next(r.precisions for r in reading.rungs if r.name == reading.measured)
    assert not P.check_policy(reading, "fp32").ok
    assert P.check_policy(reading, precision).ok
    matched = P.check_policy(reading, "match")
    assert matched.ok and matched.baseline_precision == reading.measured


def test_half_accumulation_is_rejected_under_every_policy_down_to_fp16() -> None:
    fn, inputs = CASES["matmul"]()
    errors, reference = _ladder(fn, inputs)
    reading = P.classify(P.relative_error(_half_accumulated_matmul(*inputs), reference), errors)
    assert reading.measured in ("bf16", P.BELOW_ALL)
    for allowed in ("fp32", "tf32", "fp16"):
        assert not P.check_policy(reading, allowed).ok


def test_errors_far_past_bf16_are_below_every_precision_and_fail_match() -> None:
    fn, inputs = CASES["matmul"]()
    errors, reference = _ladder(fn, inputs)
    coarse = fn(*[P.round_mantissa(t, 3) for t in inputs])
    reading = P.classify(P.relative_error(coarse, reference), errors)
    assert reading.measured == P.BELOW_ALL
    assert not P.check_policy(reading, "match").ok


def test_fast_math_exp_stays_fp32_but_a_tf32_exp_does_not() -> None:
    fn, inputs = CASES["softmax"]()
    errors, reference = _ladder(fn, inputs)
    x = inputs[0]
    # exp2 of a rounded product is how __expf computes: a few fp32 ulps, not a lower precision.
    fast = torch.exp2((x - x.amax(-1, keepdim=True)) * 1.4426950408889634)
    fast = fast / fast.sum(-1, keepdim=True)
    assert P.classify(P.relative_error(fast, reference), errors).measured == "fp32"
    rounded = torch.softmax(P.round_mantissa(x, 10), dim=-1)
    assert P.classify(P.relative_error(rounded, reference), errors).measured != "fp32"


def test_exact_ops_have_a_floor_so_an_honest_rounding_is_not_called_lower_precision() -> None:
    x = torch.randn(1 << 16, generator=_gen(5))
    reference = torch.relu(x.double())
    errors = {p: P.relative_error(P.emulated_output(torch.relu, [x], p), reference) for p in P.PRECISIONS}
    assert errors["fp32"] == 0.0
    one_ulp = torch.relu(x).nextafter(torch.tensor(float("inf")))
    assert P.classify(P.relative_error(one_ulp, reference), errors).measured == "fp32"
    assert (
        P.classify(P.relative_error(torch.relu(x.bfloat16()).float(), reference), errors).measured == "bf16"
    )


def test_round_mantissa_rounds_to_nearest_even_and_keeps_specials() -> None:
    ulp = 2.0**-10
    x = torch.tensor([1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + ulp / 2), 1 + ulp / 4, float("inf"), float("nan")])
    got = P.round_mantissa(x, 10)
    assert got[:4].tolist() == [1.0, 1 + 2 * ulp, -1.0, 1.0]
    assert got[4] == float("inf") and bool(torch.isnan(got[5]))


def test_the_worst_output_decides_and_sampled_errors_match_full_ones() -> None:
    fn, inputs = CASES["matmul"]()
    errors, reference = _ladder(fn, inputs)
    fp32_out = fn(*inputs)
    tf32_out = fn(*[P.round_mantissa(t, 10) for t in inputs])
    readings = [P.classify(P.relative_error(o, reference), errors) for o in (fp32_out, tf32_out)]
    assert P.worst(readings).measured == "tf32"
    picks = P.sample_indices(reference.numel(), 4096, seed=7)
    assert picks.numel() == 4096 and picks.unique().numel() == 4096
    sampled = P.sampled_error(tf32_out, reference.flatten()[picks], picks)
    assert P.classify(sampled, errors).measured == "tf32"


@pytest.mark.parametrize("numel", [5000, 20000, 10**12])
def test_sampled_indices_are_distinct_sorted_spread_and_reproducible(numel: int) -> None:
    """A sample of an output too large to enumerate (10**12 elements: a permutation of every index
    would need 8 TB) is drawn as fast as one of a small output."""
    picks = P.sample_indices(numel, 4096, seed=7)
    assert picks.numel() == 4096 and picks.unique().numel() == 4096
    assert bool((picks[1:] > picks[:-1]).all()) and int(picks[0]) >= 0 and int(picks[-1]) < numel
    assert int(picks[-1]) > numel * 0.9 and int(picks[0]) < numel * 0.1  # over the whole output
    assert torch.equal(picks, P.sample_indices(numel, 4096, seed=7))
    assert not torch.equal(picks, P.sample_indices(numel, 4096, seed=8))
    for small in (1, 3, 10):  # a small sample of a just-large-enough output is still full
        assert all(
            P.sample_indices(4 * small + 1 + k, small, s).numel() == small
            for k in range(40)
            for s in range(5)
        )


def test_unknown_policy_and_a_ladder_without_fp32_are_refused() -> None:
    reading = P.classify(1e-7, {"fp32": 1e-7, "tf32": 1e-4})
    with pytest.raises(ValueError, match="unknown precision policy 'fp8'"):
        P.check_policy(reading, "fp8")
    with pytest.raises(ValueError, match="needs eager's fp32 error"):
        P.classify(1e-4, {"tf32": 1e-4})


@pytest.mark.parametrize("k", [1024, 16384, 65536])
def test_an_honest_serial_fp32_dot_product_is_never_called_a_lower_precision(k: int) -> None:
    """Eager's FP32 error is cuBLAS's blocked order; a kernel that accumulates serially is several
    times less accurate on positive operands, where TF32's rounding averages out to nearly FP32's.
    It stays FP32, while a TF32 kernel is still caught where the inputs tell the two apart."""
    gen = torch.Generator().manual_seed(k)
    for centred in (False, True):
        a, b = torch.rand(8, k, generator=gen), torch.rand(k, 1, generator=gen)
        if centred:
            a, b = a - 0.5, b - 0.5
        reference = (a.double() @ b.double()).squeeze(1)
        errors = {
            "fp32": P.relative_error((a @ b).squeeze(1), reference),
            "tf32": P.relative_error((P.round_to(a, "tf32") @ P.round_to(b, "tf32")).squeeze(1), reference),
            "bf16": P.relative_error((a.bfloat16().float() @ b.bfloat16().float()).squeeze(1), reference),
        }
        serial = torch.zeros(8)
        for column in (a * b.T).unbind(1):
            serial = serial + column
        reading = P.classify(P.relative_error(serial, reference), errors)
        assert reading.measured == "fp32" and P.check_policy(reading, "fp32").ok, (k, centred, errors)
        if centred:
            tf32 = P.classify(errors["tf32"], errors)
            assert tf32.measured == "tf32" and not P.check_policy(tf32, "fp32").ok


def test_the_centred_trial_passes_an_honest_bf16_gemm_and_still_fails_tf32_under_fp32() -> None:
    """Centred operands make a GEMM's outputs and its rounding error both grow as sqrt(K): the
    precision trial scales atol by the output's rms (hidden_inputs.SCALED_TRANSFORMS), so BF16
    operands with FP32 accumulation pass the `bf16` policy, while the unscaled norm-wise limit
    still fails a TF32 GEMM under `fp32`."""
    from agent.referee.policy import PRECISION_TOLERANCES
    from sandbox.workers.referee import hidden_inputs as H
    from sandbox.workers.referee.compare import compare_tensors

    gen = torch.Generator().manual_seed(7)
    a = torch.rand(256, 4096, generator=gen) - 0.5
    b = torch.rand(4096, 256, generator=gen) - 0.5
    expected = (a.double() @ b.double()).float()
    scale = H.output_scale(expected)
    assert "centre" in H.SCALED_TRANSFORMS and scale > 3

    def verdict(precision: str, policy: str, scaled: bool) -> bool:
        atol, rtol, norm_rtol = PRECISION_TOLERANCES[policy].per_dtype["default"].as_list()
        got = P.emulated_output(torch.matmul, [a, b], precision)
        record = compare_tensors(
            expected, got, atol=atol * (scale if scaled else 1.0), rtol=rtol, norm_rtol=norm_rtol
        )
        return bool(record["passed"])

    assert verdict("bf16", "bf16", scaled=True)
    assert not verdict("bf16", "bf16", scaled=False)  # the H100 failure this scaling removes
    assert verdict("fp32", "fp32", scaled=True)
    assert not verdict("tf32", "fp32", scaled=True)
