"""Hidden inputs and parameters: drawn from the secret seed, reproducible from it, the same on both
sides of the referee, and never outside an op's domain."""

from __future__ import annotations

import collections
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sandbox.workers.referee import hidden_inputs as H
from sandbox.workers.referee.referee_common import seeded_call

REPO = Path(__file__).resolve().parents[2]


def _task_inputs() -> list[object]:
    return [
        torch.rand(64, 32),
        torch.randint(0, 32, (64,)),
        torch.rand(8) > 0.5,
        3,
        torch.rand(4, 4).double(),
    ]


def _digest(values: list[object]) -> str:
    h = hashlib.sha256()
    for v in values:
        h.update(
            v.contiguous().view(torch.uint8).numpy().tobytes()
            if isinstance(v, torch.Tensor)
            else repr(v).encode()
        )
    return h.hexdigest()


def test_every_transform_is_drawn_and_none_dominates() -> None:
    counts = collections.Counter(H.draw(seed).transform for seed in range(3000))
    assert set(counts) == set(H.TRANSFORMS)
    expected = 3000 / len(H.TRANSFORMS)
    assert all(0.7 * expected < n < 1.3 * expected for n in counts.values()), counts


def test_the_draw_depends_on_the_seed_not_on_the_inputs_rng() -> None:
    # A task whose inputs do not depend on the RNG at all still gets varied, unpredictable draws:
    # nothing the candidate can compute from the inputs tells which one.
    constant = [torch.linspace(0, 1, 100)]
    digests = {_digest(H.hidden_inputs(constant, seed)) for seed in range(200)}
    assert len(digests) >= len(H.TRANSFORMS)
    # Neighbouring seeds (as a candidate might guess from one it saw) are not correlated.
    same = sum(H.draw(seed).transform == H.draw(seed + 1).transform for seed in range(2000))
    assert same < 2000 * 2 / len(H.TRANSFORMS)


def test_reproducible_from_the_seed_bit_for_bit() -> None:
    for seed in (1, 2**62 + 5, 123456789):
        first = H.hidden_inputs(seeded_call(_task_inputs, seed, "cpu"), seed)
        second = H.hidden_inputs(seeded_call(_task_inputs, seed, "cpu"), seed)
        assert _digest(first) == _digest(second)


def test_candidate_and_judge_processes_rebuild_identical_inputs() -> None:
    seeds = [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert {H.draw(s).transform for s in seeds} - {"task"}, "the seeds must cover real transforms"
    script = (
        "import hashlib,sys,torch\n"
        "sys.path.insert(0, 'sandbox/workers')\nimport siblings\n"
        "import hidden_inputs as H\n"
        "from referee_common import seeded_call\n"
        "def get_inputs():\n"
        "    return [torch.rand(64, 32), torch.randint(0, 32, (64,)), torch.rand(8) > 0.5, 3, torch.rand(4, 4).double()]\n"
        f"for seed in {seeds}:\n"
        "    h = hashlib.sha256()\n"
        "    for v in H.hidden_inputs(seeded_call(get_inputs, seed, 'cpu'), seed):\n"
        "        h.update(v.contiguous().view(torch.uint8).numpy().tobytes() if isinstance(v, torch.Tensor) else repr(v).encode())\n"
        "    print(h.hexdigest())\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    here = [_digest(H.hidden_inputs(seeded_call(_task_inputs, s, "cpu"), s)) for s in seeds]
    assert other.stdout.split() == here


@pytest.mark.parametrize("transform", H.TRANSFORMS)
def test_only_floating_tensors_change(transform: str) -> None:
    values = _task_inputs()
    chosen = H.HiddenDraw(transform=transform, shift=1.5, values_seed=3)
    out = H.apply(values, chosen)
    assert torch.equal(out[1], values[1]) and torch.equal(out[2], values[2]) and out[3] == 3
    assert out[0].dtype == values[0].dtype and out[0].shape == values[0].shape
    assert out[4].dtype == torch.float64
    assert bool(torch.isfinite(out[0]).all())
    if transform != "task":
        assert not torch.equal(out[0], values[0])


def test_edge_values_are_drawn_chunk_by_chunk_reproducibly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full-size input's edge values are drawn in chunks on its own device: every chunk draws
    afresh (no repeating pattern), and the same seed gives the same tensor."""
    monkeypatch.setattr(H, "EDGE_CHUNK", 1000)
    x = torch.rand(7, 1001)
    chosen = H.HiddenDraw("edge", 1.0, 11)
    edge = H.apply([x], chosen)[0]
    assert edge.shape == x.shape and edge.dtype == x.dtype
    assert torch.equal(edge, H.apply([x.clone()], chosen)[0])
    flat = edge.reshape(-1)
    assert not torch.equal(flat[:1000], flat[1000:2000])
    assert set(flat.unique().tolist()) <= set(H._edge_values(x).float().tolist())
    assert not torch.equal(edge, H.apply([x], H.HiddenDraw("edge", 1.0, 12))[0])


def test_edge_values_hold_no_denormals_and_large_reaches_its_magnitude() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.rand(4096).to(dtype)
        edge = H.apply([x], H.HiddenDraw("edge", 1.0, 11))[0].float()
        nonzero = edge[edge != 0].abs()
        assert float(nonzero.min()) >= torch.finfo(dtype).tiny
        assert (edge < 0).any() and (edge == 0).any()
        large = H.apply([x], H.HiddenDraw("large", 1.0, 11))[0].float()
        assert float(large.abs().max()) == pytest.approx(H.LARGE_MAGNITUDE[dtype], rel=1e-2)


def test_safe_transforms_respect_the_ops_domain() -> None:
    probe = [torch.rand(32, 32) + 0.1]
    for op, banned in (
        (torch.log, {"negate", "zeros", "edge", "shift_down"}),
        (torch.sqrt, {"negate", "edge", "shift_down"}),
        (lambda x: 1.0 / x, {"zeros", "edge"}),
        (torch.exp, {"large", "edge"}),
    ):
        allowed = H.safe_transforms(op, probe, probe_seed=5)
        assert "task" in allowed and not banned & set(allowed), (op, allowed)
        for seed in range(50):
            assert bool(torch.isfinite(op(*H.hidden_inputs(probe, seed, allowed))).all())
    assert H.safe_transforms(torch.relu, probe, probe_seed=5) == list(H.TRANSFORMS)


def test_a_reference_already_infinite_somewhere_keeps_transforms_that_add_no_new_infinity() -> None:
    probe = [torch.cat([torch.zeros(1), torch.rand(63) + 0.1])]  # 1/x is inf at element 0 already
    allowed = H.safe_transforms(lambda x: 1.0 / x, probe, probe_seed=5)
    assert {"task", "scale_x3", "negate", "shift_up"} <= set(allowed)
    assert not {"zeros", "edge"} & set(allowed)


def test_index_inputs_stay_valid_under_every_transform() -> None:
    table, index = torch.rand(16, 8), torch.randint(0, 16, (32,))
    gather = lambda t, i: t[i]  # noqa: E731
    assert H.safe_transforms(gather, [table, index], probe_seed=1) == list(H.TRANSFORMS)
    for seed in range(20):
        t, i = H.hidden_inputs([table, index], seed)
        assert torch.equal(i, index)
        gather(t, i)


def test_a_draw_outside_the_allowed_set_never_happens_and_unknown_names_are_refused() -> None:
    assert {H.draw(s, ["task", "negate"]).transform for s in range(200)} == {"task", "negate"}
    with pytest.raises(ValueError, match="unknown hidden transform 'square'"):
        H.draw(1, ["task", "square"])


def test_perturbed_state_leaves_init_values_and_is_the_same_for_both_models() -> None:
    def build() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.BatchNorm1d(8))

    reference, candidate = build(), build()
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    moved = H.perturb_state(reference, seed=99)
    assert H.perturb_state(candidate, seed=99) == moved
    for name, value in reference.state_dict().items():
        assert torch.equal(value, candidate.state_dict()[name])
        if value.is_floating_point():
            assert name in moved and not torch.equal(value, before[name]), name
        else:
            assert torch.equal(value, before[name])
    # LayerNorm's gamma (all ones) and beta (all zeros) are no longer constants a kernel can skip.
    assert not torch.all(reference[1].weight == reference[1].weight[0])
    assert not torch.all(reference[1].bias == 0)
    assert bool((reference[2].running_var >= 0).all())
    other = build()
    H.perturb_state(other, seed=100)
    assert not torch.equal(other[0].weight, reference[0].weight)


def test_scaled_trials_scale_atol_by_the_outputs_rms_never_below_one() -> None:
    assert H.output_scale(torch.full((100,), 1e4)) == pytest.approx(1e4)
    assert H.output_scale(torch.full((100,), 0.01)) == 1.0
    assert H.output_scale(torch.tensor([3.0, -4.0, float("inf")])) == pytest.approx(12.5**0.5)
    assert H.output_scale(torch.empty(0)) == 1.0
    assert {"large", "edge"} <= set(H.TRIAL_TRANSFORMS) and {"large", "edge", "centre"} == H.SCALED_TRANSFORMS
