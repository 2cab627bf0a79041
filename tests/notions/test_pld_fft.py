"""The PLD kernels' FFTs run on ``numpy.fft`` (issue 11: ``scipy.fft`` is ~25 ms of start-up).

The claim the kernels rely on (notions/pld/kernels.py, ``next_fast_len_real``): the grid length is
the one ``scipy.fft.next_fast_len(n, real=True)`` gives, and NumPy's transforms return the same
bits as ``scipy.fft`` (both are pocketfft), so the composed PMFs, and the FFT error model with
radices 2, 3 and 5, are those of the scipy-based kernels.  A NumPy or SciPy upgrade that breaks
either half fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import fft as sp_fft

from lastiterate.notions.pld.kernels import next_fast_len_real


def test_next_fast_len_real_is_scipys() -> None:
    rng = np.random.default_rng(11)
    sizes = [*range(1, 5001), *rng.integers(5001, 2**31, size=300).tolist(), 2**30 + 1]
    ours = [next_fast_len_real(int(n)) for n in sizes]
    theirs = [sp_fft.next_fast_len(int(n), real=True) for n in sizes]
    assert ours == theirs


def test_next_fast_len_real_refuses_a_non_positive_length() -> None:
    with pytest.raises(ValueError, match="n=0"):
        next_fast_len_real(0)


@pytest.mark.parametrize("n_out", [1, 2, 7, 97, 1000, 4097, 30011, 121701, 198307])
def test_numpy_transforms_are_bit_identical_to_scipy_fft(n_out: int) -> None:
    """On grid lengths as the kernels choose them, with PMF-like inputs (non-negative, summing
    to 1, spread over many orders of magnitude) shorter than the transform (zero padding)."""
    n_fft = next_fast_len_real(n_out)
    rng = np.random.default_rng(n_out)
    x = np.exp(-rng.exponential(30.0, size=max(1, n_out // 2 + 1)))
    x /= x.sum()
    z_np, z_sp = np.fft.rfft(x, n_fft), sp_fft.rfft(x, n_fft)
    assert np.array_equal(z_np, z_sp)
    spec = z_np**3  # as a composition raises the spectrum to a power
    assert np.array_equal(np.fft.irfft(spec, n_fft), sp_fft.irfft(spec, n_fft))
