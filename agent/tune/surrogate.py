"""A small Gaussian-process surrogate over a space's normalized coordinates (torch, CPU, float64).

Targets are log-times, standardized. The Matérn-5/2 kernel is anisotropic: one length scale per
parameter, chosen with the noise level by maximizing the log marginal likelihood over a few
candidates that scale the dimensions by how much the measurements seem to depend on them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch

_LENGTHS = (0.15, 0.3, 0.6, 1.2)
_NOISES = (1e-3, 3e-2)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    # The matrices are tiny: intra-op threads only add spin-waits (100x slower on a busy machine).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _matern52(a: torch.Tensor, b: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    r = torch.cdist(a / scales, b / scales)
    s5r = math.sqrt(5.0) * r
    return (1.0 + s5r + 5.0 / 3.0 * r * r) * torch.exp(-s5r)


class GaussianProcess:
    def __init__(self) -> None:
        self._x: torch.Tensor | None = None
        self._alpha: torch.Tensor | None = None
        self._chol: torch.Tensor | None = None
        self._scales: torch.Tensor | None = None
        self._mean = 0.0
        self._std = 1.0
        self.hyper: tuple[float, float] | None = None

    def fit(self, x: list[list[float]], y: list[float], *, hyper: tuple[float, float] | None = None) -> None:
        with _one_thread():
            self._fit(x, y, hyper)

    def _fit(self, x: list[list[float]], y: list[float], hyper: tuple[float, float] | None) -> None:
        xt = torch.tensor(x, dtype=torch.float64)
        yt = torch.tensor(y, dtype=torch.float64)
        self._mean = float(yt.mean())
        self._std = float(yt.std()) if len(y) > 1 and float(yt.std()) > 1e-12 else 1.0
        ys = (yt - self._mean) / self._std
        relevance = self._relevance(xt, ys)
        choices = [hyper] if hyper is not None else [(ell, n) for ell in _LENGTHS for n in _NOISES]
        best: tuple[float, tuple[float, float], torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        for ell, noise in choices:
            scales = ell * relevance
            k = _matern52(xt, xt, scales) + noise * torch.eye(len(y), dtype=torch.float64)
            chol, info = torch.linalg.cholesky_ex(k)
            if int(info) != 0:
                continue
            alpha = torch.cholesky_solve(ys.unsqueeze(1), chol)
            lml = float(-0.5 * (ys.unsqueeze(1) * alpha).sum() - torch.log(torch.diagonal(chol)).sum())
            if best is None or lml > best[0]:
                best = (lml, (ell, noise), chol, alpha, scales)
        if best is None:  # numerically hopeless: fall back to a very smooth, noisy model
            scales = torch.full((xt.shape[1],), 2.0, dtype=torch.float64)
            k = _matern52(xt, xt, scales) + 0.5 * torch.eye(len(y), dtype=torch.float64)
            chol = torch.linalg.cholesky(k)
            best = (0.0, (2.0, 0.5), chol, torch.cholesky_solve(ys.unsqueeze(1), chol), scales)
        _, self.hyper, self._chol, self._alpha, self._scales = best
        self._x = xt

    @staticmethod
    def _relevance(x: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """Per-dimension length-scale factors in [0.5, 2]: a dimension along which the targets
        vary strongly (variance of per-value means) gets a shorter length scale."""
        dims = x.shape[1]
        spread = torch.ones(dims, dtype=torch.float64)
        if len(ys) < 4:
            return spread
        for d in range(dims):
            values = torch.unique(x[:, d])
            if len(values) < 2:
                spread[d] = 0.0
                continue
            means = torch.stack([ys[x[:, d] == v].mean() for v in values])
            spread[d] = means.var(unbiased=False)
        total = float(spread.mean())
        if total <= 1e-12:
            return torch.ones(dims, dtype=torch.float64)
        return torch.clamp(torch.sqrt(total / torch.clamp(spread, min=1e-12)), 0.5, 2.0)

    def predict(self, x: list[list[float]]) -> tuple[list[float], list[float]]:
        """(mean, standard deviation) of the log-time at each point."""
        with _one_thread():
            return self._predict(x)

    def _predict(self, x: list[list[float]]) -> tuple[list[float], list[float]]:
        assert self._x is not None and self._alpha is not None and self._chol is not None
        assert self._scales is not None
        xt = torch.tensor(x, dtype=torch.float64)
        ks = _matern52(xt, self._x, self._scales)
        mean = (ks @ self._alpha).squeeze(1)
        v = torch.cholesky_solve(ks.T.contiguous(), self._chol)
        var = torch.clamp(1.0 - (ks * v.T).sum(dim=1), min=1e-12)
        return (mean * self._std + self._mean).tolist(), (torch.sqrt(var) * self._std).tolist()


def expected_improvement(best: float, mean: float, std: float, xi: float = 0.0) -> float:
    """EI of a minimization at one point (all in log-time units)."""
    gain = best - mean - xi
    if std <= 1e-12:
        return max(gain, 0.0)
    z = gain / std
    cdf = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    pdf = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return gain * cdf + std * pdf
