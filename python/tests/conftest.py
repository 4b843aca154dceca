"""Shared test helpers: devices to run on, fresh random inputs (a new seed per test, printed so a
failure can be replayed with SAMEBITS_TEST_SEED), and the CUDA skip."""
import os

import pytest
import torch

import samebits

HAS_CUDA = torch.cuda.is_available() and samebits.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device (or samebits built without "
                                "CUDA)")


@pytest.fixture
def gen():
    """A torch.Generator with a fresh seed (SAMEBITS_TEST_SEED replays one)."""
    seed = int(os.environ.get("SAMEBITS_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    print(f"seed {seed} (SAMEBITS_TEST_SEED={seed} replays it)")
    g = torch.Generator()
    g.manual_seed(seed)
    return g


@pytest.fixture(autouse=True)
def _restore_mode():
    """Every test starts and ends at the default mode."""
    samebits.set_determinism("run_to_run")
    yield
    samebits.set_determinism("run_to_run")


def grid_sample_grads(x, grid, go, **kwargs):
    """(x's gradient, grid's gradient) of grid_sample(x, grid, **kwargs) for the output gradient
    go, on fresh leaves: what the grid_sampler_2d_backward tests compare."""
    x, grid = x.detach().requires_grad_(), grid.detach().requires_grad_()
    torch.nn.functional.grid_sample(x, grid, **kwargs).backward(go)
    return x.grad, grid.grad
