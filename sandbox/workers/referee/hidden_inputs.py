"""Hidden input distributions and parameter perturbations, drawn from a trial's secret seed.

A task's `get_inputs` usually draws `torch.rand` in [0, 1): a kernel that only works there (no
negative values, no large magnitudes, a skipped term that is ~0 on that range) passes every
trial. Here a trial's seed also picks a transform of its floating inputs: the task's own values,
x3, x0.01, shifted up or down, negated, all zeros, all ones, large magnitude, a mix of edge values (no
denormals), or centred (each tensor less its midrange: on centred operands a lower precision's rounding
no longer averages out, so the judge measures effective precision there). Integer, boolean and index tensors are never touched.

What is drawn depends on the seed through a keyed hash, never on the RNG streams the inputs come
from: without the seed, the candidate cannot tell which transform a trial uses. Both sides call
`hidden_inputs(values, seed, allowed)` on the inputs they rebuilt from the same seed and get the
same tensors, bit for bit.

Domain limits (log, sqrt, division) are the judge's to find: `safe_transforms` runs the reference
on each transform of a probe input and keeps those whose outputs stay finite. The allowed set is
part of the evaluation's spec (not secret: which transform a trial draws is).

`perturb_state` moves every floating parameter and buffer away from its value by a seeded scale
and offset (non-negative tensors, such as running variances, stay non-negative), applied to the
reference and the candidate alike.

torch and the standard library only; pure functions of their arguments.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

TRANSFORMS: tuple[str, ...] = (
    "task",
    "scale_x3",
    "scale_x0.01",
    "shift_up",
    "shift_down",
    "negate",
    "zeros",
    "ones",
    "large",
    "edge",
    "centre",
)
TRIAL_TRANSFORMS: tuple[str, ...] = TRANSFORMS
"""The transforms trials draw from (the domain probe keeps those the reference allows)."""
SCALED_TRANSFORMS = frozenset({"large", "edge", "centre"})
"""Transforms whose trials compare with the absolute tolerance scaled to the output's magnitude
(`output_scale`): inputs scaled to 1e4 scale an honest kernel's rounding error with them (a signed
GEMM's ~1e8-fold), so on the elements that cancel to near zero a fixed atol would fail a kernel
that merely sums in another order. Centred operands do the same at any K: a sum of signed terms
grows as sqrt(K) and so does its rounding error, and an honest BF16 GEMM under the `bf16` policy
failed the unscaled atol on 0.24% of its elements (H100, 2026-12-07). The norm-wise limit is
never scaled: it is what tells a TF32 GEMM from an FP32 one on this trial."""
PRECISION_TRIAL_TRANSFORM = "centre"
"""Trial 1 draws this where the domain allows it: the judge measures effective precision there."""
# Largest magnitude the "large" and "edge" transforms reach: big enough to overflow a kernel that
# squares in fp16 or skips the max subtraction, small enough for a sum of thousands to stay finite.
LARGE_MAGNITUDE = {torch.float16: 1e3, torch.bfloat16: 1e4, torch.float32: 1e4, torch.float64: 1e4}

# Magnitude of the shifts; their sign is the transform's (shift_up, shift_down), so the domain probe
# can try both ends of the range a trial may draw.
SHIFT_RANGE = (0.5, 2.0)

_DOMAIN = b"kernel-agent hidden inputs v1"


def _key(seed: int, purpose: bytes) -> int:
    digest = hashlib.sha256(_DOMAIN + purpose + seed.to_bytes(16, "little", signed=False)).digest()
    return int.from_bytes(digest[:8], "little")


@dataclass(frozen=True)
class HiddenDraw:
    """What a trial's seed picked: the transform and the constants it uses."""

    transform: str
    shift: float
    values_seed: int


def draw(seed: int, allowed: Sequence[str] = TRANSFORMS) -> HiddenDraw:
    """The transform and constants for the trial with this seed, among `allowed` (in any order)."""
    unknown = [name for name in allowed if name not in TRANSFORMS]
    if unknown:
        raise ValueError(f"unknown hidden transform {unknown[0]!r}; choose from: {', '.join(TRANSFORMS)}")
    choices = sorted(set(allowed), key=TRANSFORMS.index) if allowed else ["task"]
    rng = random.Random(_key(seed & (2**128 - 1), b"draw"))
    transform = rng.choice(choices)
    shift = rng.uniform(*SHIFT_RANGE)
    return HiddenDraw(transform=transform, shift=shift, values_seed=rng.getrandbits(63))


def _edge_values(like: torch.Tensor) -> torch.Tensor:
    info = torch.finfo(like.dtype)
    big = LARGE_MAGNITUDE.get(like.dtype, 1e4)
    # tiny * 16 is a normal number: denormals flush to zero on fast paths and would be a false alarm
    magnitudes = [0.0, 1.0, 0.5, 1.0 - info.eps, 1.0 + info.eps, info.tiny * 16, big, math.pi]
    values = magnitudes + [-m for m in magnitudes[1:]]
    return torch.tensor(values, dtype=torch.float64)


def _transform_tensor(tensor: torch.Tensor, chosen: HiddenDraw, index: int) -> torch.Tensor:
    name = chosen.transform
    if name == "task":
        return tensor
    if name == "scale_x3":
        return tensor * 3
    if name == "scale_x0.01":
        return tensor * 0.01
    if name == "shift_up":
        return tensor + chosen.shift
    if name == "shift_down":
        return tensor - chosen.shift
    if name == "negate":
        return -tensor
    if name == "zeros":
        return torch.zeros_like(tensor)
    if name == "ones":
        return torch.ones_like(tensor)
    if name == "centre":
        # the midrange, not the mean: max and min are exact whatever the reduction order, so the
        # candidate's process (other thread counts, another summation order) gets the same bits
        return tensor - (tensor.max() + tensor.min()) / 2 if tensor.numel() else tensor
    if name == "large":
        peak = float(tensor.detach().abs().max()) if tensor.numel() else 0.0
        target = LARGE_MAGNITUDE.get(tensor.dtype, 1e4)
        return tensor * (target / peak) if peak > 0 else torch.full_like(tensor, target)
    if name == "edge":
        return _edge_tensor(tensor, (chosen.values_seed + index) & (2**63 - 1))
    raise ValueError(f"unknown hidden transform {name!r}")


EDGE_CHUNK = 1 << 24
"""Elements drawn at a time for the edge transform, each chunk by a generator of its own."""


def _edge_tensor(like: torch.Tensor, seed: int) -> torch.Tensor:
    """Edge values in `like`'s shape, drawn on its device (on the CPU, a full-size input's 1.6e9
    draws and their int64 indices took tens of seconds and 13 GB, on each side, for every probe),
    chunk by chunk so that the indices stay small; the same seed gives the same tensor on a device."""
    pool = _edge_values(like).to(dtype=like.dtype, device=like.device)
    out = torch.empty(like.numel(), dtype=like.dtype, device=like.device)
    for number, start in enumerate(range(0, like.numel(), EDGE_CHUNK)):
        gen = torch.Generator(device=like.device).manual_seed(
            (seed + number * 0x9E3779B97F4A7C15) & (2**63 - 1)
        )
        size = min(EDGE_CHUNK, like.numel() - start)
        picks = torch.randint(len(pool), (size,), generator=gen, device=like.device)
        out[start : start + size] = pool[picks]
    return out.reshape(like.shape)


def output_scale(expected: torch.Tensor) -> float:
    """The factor a scaled trial multiplies the absolute tolerance by: the root mean square of the
    expected output's finite values, at least 1 (never looser than the unscaled comparison)."""
    if expected.numel() == 0 or not expected.is_floating_point():
        return 1.0
    values = expected.detach().float()
    finite = torch.isfinite(values)
    count = int(finite.sum())
    if count == 0:
        return 1.0
    rms = float(torch.where(finite, values, 0.0).norm()) / math.sqrt(count)
    return max(1.0, rms) if math.isfinite(rms) else 1.0


def apply(values: Sequence[Any], chosen: HiddenDraw) -> list[Any]:
    """`values` with every floating tensor transformed (nested lists and tuples too); the k-th
    floating tensor met depth-first uses stream k, so two sides walking the same inputs agree."""
    counter = [0]

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if not value.is_floating_point():
                return value
            counter[0] += 1
            with torch.no_grad():
                return _transform_tensor(value, chosen, counter[0] - 1)
        if isinstance(value, (list, tuple)):
            return type(value)(walk(v) for v in value)
        return value

    return [walk(v) for v in values]


def hidden_inputs(values: Sequence[Any], seed: int, allowed: Sequence[str] = TRANSFORMS) -> list[Any]:
    """The trial's inputs: the task's values for `seed`, transformed as `seed` draws."""
    return apply(values, draw(seed, allowed))


def _finite_mask(output: Any) -> list[torch.Tensor | None]:
    """Each floating output's finite elements, None where every one is. Kept where the output is:
    a full-size output's mask is gigabytes, and the CPU took seconds a probe to copy and test it."""
    leaves = output if isinstance(output, (list, tuple)) else [output]
    masks: list[torch.Tensor | None] = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
            finite = torch.isfinite(leaf.detach())
            masks.append(None if bool(finite.all()) else finite)
    return masks


def safe_transforms(
    reference: Callable[..., Any],
    probe_inputs: Sequence[Any],
    probe_seed: int,
    candidates: Sequence[str] = TRANSFORMS,
) -> list[str]:
    """The transforms (of `candidates`) under which the reference stays as finite as it is on the
    task's own inputs (a transform that raises, or makes an output non-finite where it was finite,
    is dropped). Shifts are probed at both ends of their range, which covers domains bounded on one
    side (log, sqrt); the other transforms do not use the shift and are probed once."""
    with torch.no_grad():
        base = _finite_mask(reference(*probe_inputs))
    values_seed = draw(probe_seed).values_seed
    kept = ["task"]
    for name in TRANSFORMS[1:]:
        if name not in candidates:
            continue
        shifts = SHIFT_RANGE if name.startswith("shift") else SHIFT_RANGE[:1]
        probes = [HiddenDraw(name, shift, values_seed) for shift in shifts]
        if all(_as_finite(reference, probe_inputs, chosen, base) for chosen in probes):
            kept.append(name)
    return kept


def _as_finite(
    reference: Callable[..., Any], inputs: Sequence[Any], chosen: HiddenDraw, base: list[torch.Tensor | None]
) -> bool:
    try:
        with torch.no_grad():
            masks = _finite_mask(reference(*apply(inputs, chosen)))
    except Exception:  # the op's own domain check refused the values: not a valid input for it
        return False
    return len(masks) == len(base) and all(_no_new_nonfinite(m, b) for m, b in zip(masks, base, strict=True))


def _no_new_nonfinite(now: torch.Tensor | None, base: torch.Tensor | None) -> bool:
    """Finite wherever the task's own inputs gave finite values (None: finite everywhere)."""
    if now is None:
        return True
    if base is None:
        return False
    return bool((now | ~base).all())


def perturb_state(model: torch.nn.Module, seed: int) -> list[str]:
    """Scale every floating parameter and buffer by a seeded factor in [0.5, 2], add a seeded offset
    of about a tenth of its spread (its magnitude where it is constant) and per-element noise of a
    twentieth; returns the names moved."""
    rng = random.Random(_key(seed & (2**128 - 1), b"state"))
    moved: list[str] = []
    with torch.no_grad():
        for name, tensor in sorted(model.state_dict(keep_vars=True).items()):
            if not tensor.is_floating_point() or tensor.numel() == 0:
                continue
            factor = math.exp(rng.uniform(math.log(0.5), math.log(2.0)))
            values = tensor.detach().double()
            spread = float(values.std()) if values.numel() > 1 else 0.0
            scale = spread if spread > 1e-12 else max(float(values.abs().max()), 1.0)
            offset = rng.choice((-1.0, 1.0)) * rng.uniform(0.05, 0.15) * scale
            gen = torch.Generator(device=values.device).manual_seed(rng.getrandbits(63))
            # per-element noise: a constant tensor (LayerNorm's gamma) must not stay constant; drawn
            # where the state is (a level-3 model's 1e8 parameters took seconds on one CPU core)
            noise = torch.randn(tuple(values.shape), generator=gen, dtype=torch.float64, device=values.device)
            fresh = values * factor + offset + 0.05 * scale * noise
            if bool((values >= 0).all()):
                fresh = fresh.abs()
            tensor.copy_(fresh.to(tensor.dtype))
            moved.append(name)
    return moved
