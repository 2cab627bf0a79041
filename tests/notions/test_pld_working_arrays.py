"""The PLD kernels' cache-friendly forms (issue 11) against the whole-array forms they replace.

* :func:`kernels._outer_logsumexp` forms the matrix of tilted CGF terms a few rows at a time: every
  row must be the row of ``_logsumexp_rows`` of the whole matrix, bit for bit (one block, several
  blocks, a block boundary inside the matrix, -inf masses, integer indices).
* :func:`kernels._tilted_moments` works in place in two arrays: the same mean and variance, bit for
  bit, as the plain expression it replaced.

Bit-equality is what keeps every epsilon the accountant prints unchanged (``benchmarks/
accountant.py --compare-values``): these kernels steer the Chernoff windows, the aliasing bounds
and the placement of the tilted passes.
"""

from __future__ import annotations

import numpy as np
import pytest

from lastiterate.notions.pld import kernels

from ._pld_exact import random_blocks


def _whole_matrix(scales: np.ndarray, idx: np.ndarray, logm: np.ndarray) -> np.ndarray:
    return kernels._logsumexp_rows(scales[:, None] * idx[None, :] + logm[None, :], True)


def _plain_moments(
    blocks: list[tuple[np.ndarray, np.ndarray]], powers: list[int], lam: float
) -> tuple[float, float]:
    """The whole-array expression of ``_tilted_moments`` before it worked in place."""
    mean = var = 0.0
    for (logm, c), k in zip(blocks, powers):
        lw = logm + lam * c
        w = np.exp(np.maximum(lw - np.max(lw), -700.0))
        w /= w.sum()
        m = float(np.sum(w * c))
        mean += k * m
        var += k * float(np.sum(w * (c - m) ** 2))
    return mean, var


@pytest.mark.parametrize("block", [kernels._OUTER_BLOCK_ELEMENTS, 1, 700, 10**9])
def test_outer_logsumexp_is_the_whole_matrix_bit_for_bit(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "_OUTER_BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(5)
    for n in (1, 2, 17, 300, 4096, 70_000):
        logm = np.log(rng.random(n) * rng.random(n) ** 6)
        logm[rng.random(n) < 0.05] = -np.inf  # empty blocks
        for idx in (np.arange(n, dtype=float), np.arange(n) * 3 + 1):  # float and int indices
            for scales in (kernels._THETAS, -kernels._LAMBDAS, np.geomspace(1e-6, 2.0, 14)):
                got = kernels._outer_logsumexp(scales, idx, logm)
                assert np.array_equal(got, _whole_matrix(scales, idx, logm))


def test_outer_logsumexp_of_an_all_empty_row_is_minus_infinity() -> None:
    logm = np.full(5, -np.inf)
    got = kernels._outer_logsumexp(np.array([0.5, -0.5]), np.arange(5.0), logm)
    assert np.array_equal(got, np.full(2, -np.inf))


def test_in_place_tilted_moments_are_the_plain_expression_bit_for_bit() -> None:
    rng = np.random.default_rng(13)
    for _ in range(200):
        blocks, powers = random_blocks(rng)
        lam = float(rng.random() * 10 ** rng.uniform(-7, 0))
        assert kernels._tilted_moments(blocks, powers, lam) == _plain_moments(blocks, powers, lam)
