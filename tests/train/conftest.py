"""Training tests run single-threaded: the models are tiny, and torch's intra-op threads only add
synchronisation cost on a shared 2-core machine."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _single_thread():
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
